"""The key range one CDC subscription observes, kept in region (memcomparable) space.

TiKV treats the request's start/end keys as encoded keys, clips them to the region and filters
rows by re-encoding each row's raw key (docs/wire.md#register, docs/encoding.md#raw-keys-and-encoded-keys-pd-regions-cdc). When either
key does not decode (a raw key, an empty key, TiCDC's short `HackSpan` end), TiKV observes the
whole region instead (`requested` below; docs/wire.md#register).
Comparing in encoded space keeps that exact even for bounds that are not a valid encoding
(TiCDC's `HackSpan` end `FF FF FF FF FF`); the MVCC store is keyed by raw key, so scans use
the raw bounds below, which are exact for valid encodings and a superset otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidelake.codec.memcomparable_bytes import decode_bytes, encode_bytes
from tidelake.errors import InputError

_GROUP = 9  # 8 data bytes + marker, docs/encoding.md#comparable-bytes


@dataclass(frozen=True)
class ObservedRange:
    """[start, end) in region space; b'' end = +inf."""

    start: bytes
    end: bytes

    @classmethod
    def clip(cls, req_start: bytes, req_end: bytes, region_start: bytes, region_end: bytes) -> ObservedRange:
        """Request range ∩ region range (`ObservedRange::update_region_key_range`, docs/wire.md#register)."""
        start = max(req_start, region_start)
        if not req_end:
            end = region_end
        elif not region_end:
            end = req_end
        else:
            end = min(req_end, region_end)
        return cls(start, end)

    @classmethod
    def requested(cls, req_start: bytes, req_end: bytes, region_start: bytes, region_end: bytes) -> ObservedRange:
        """What a register observes: tikv components/cdc/src/service.rs `handle_register` builds
        `ObservedRange::new(start_key, end_key)`, which decodes both keys (`Key::into_raw`), and on a
        decode error falls back to `ObservedRange::default()`, i.e. the whole region."""
        if _decodes(req_start) and _decodes(req_end):
            return cls.clip(req_start, req_end, region_start, region_end)
        return cls(region_start, region_end)

    def is_empty(self) -> bool:
        return bool(self.end) and self.start >= self.end

    def contains_encoded(self, encoded_key: bytes) -> bool:
        return self.start <= encoded_key and (not self.end or encoded_key < self.end)

    def contains_raw(self, raw_key: bytes) -> bool:
        return self.contains_encoded(encode_bytes(raw_key))

    def raw_bounds(self) -> tuple[bytes, bytes | None]:
        """Raw [lo, hi) covering every raw key inside the range (hi None = +inf)."""
        return raw_lower_bound(self.start), raw_upper_bound(self.end)


def _decodes(encoded: bytes) -> bool:
    """TiKV `Key::into_raw` succeeds: a leading run of valid groups; trailing bytes are not checked."""
    try:
        decode_bytes(encoded)
    except InputError:
        return False
    return True


def _exact_raw(encoded: bytes) -> bytes | None:
    try:
        raw, end = decode_bytes(encoded)
    except InputError:
        return None
    return raw if end == len(encoded) else None


def _full_group_prefix(encoded: bytes) -> tuple[bytes, int]:
    """Raw bytes of the leading full (marker 0xFF) groups and where they stop."""
    raw = bytearray()
    pos = 0
    while pos + _GROUP <= len(encoded) and encoded[pos + _GROUP - 1] == 0xFF:
        raw += encoded[pos : pos + _GROUP - 1]
        pos += _GROUP
    return bytes(raw), pos


def raw_lower_bound(encoded: bytes) -> bytes:
    """A raw key lo with: EncodeBytes(k) >= encoded implies k >= lo."""
    if not encoded:
        return b""
    exact = _exact_raw(encoded)
    if exact is not None:
        return exact
    return _full_group_prefix(encoded)[0]


def raw_upper_bound(encoded: bytes) -> bytes | None:
    """A raw key hi with: EncodeBytes(k) < encoded implies k < hi (None = unbounded)."""
    if not encoded:
        return None
    exact = _exact_raw(encoded)
    if exact is not None:
        return exact
    prefix, pos = _full_group_prefix(encoded)
    return _prefix_successor(prefix + encoded[pos : pos + _GROUP - 1])


def _prefix_successor(prefix: bytes) -> bytes | None:
    """Smallest key greater than every key starting with `prefix`; None when there is none."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])
