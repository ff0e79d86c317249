"""What one bootstrap reads: which tables, at which TSO, and the region ranges of each.

The ranges are the raw record ranges of the regions PD reports at planning time. They only
shape the work (one Spark task per range); each range is read by SnapshotReader.scan, which
follows splits, merges and leader moves that happen after planning (docs/metadata.md#the-scan-loop-of-a-snapshot-reader).
Owner: bootstrap.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidelake.codec.keys import table_record_span
from tidelake.codec.memcomparable_bytes import decode_bytes, encode_bytes
from tidelake.codec.schema import DBInfo, TableInfo
from tidelake.errors import InputError
from tidelake.upstream.pd_client import PDClient
from tidelake.upstream.schema_snapshot import SchemaSnapshot

_SCAN_PAGE = 1024


@dataclass(frozen=True)
class KeyRange:
    """A raw record range [start, end) of one physical table."""

    physical_id: int
    start: bytes
    end: bytes


@dataclass(frozen=True)
class TableRead:
    db: DBInfo
    info: TableInfo
    physical_ids: tuple[int, ...]
    ts: int  # the snapshot ts this table is read at (its replica's first checkpoint)

    @property
    def name(self) -> str:
        return f"{self.db.name}.{self.info.name}"


def tables_to_bootstrap(snapshot: SchemaSnapshot, names: list[str] | None) -> list[tuple[DBInfo, TableInfo]]:
    """Tables with rows that the filter kept, narrowed to `names` ('db.table', case-insensitive
    like TiDB identifiers); a name that matches nothing is an InputError."""
    tables = snapshot.tables_with_rows()
    if not names:
        return tables
    by_name = {f"{db.name}.{t.name}".lower(): (db, t) for db, t in tables}
    chosen = []
    for name in names:
        if name.count(".") != 1 or not all(name.split(".")):
            raise InputError(f"--table {name!r}: expected db.table")
        found = by_name.get(name.lower())
        if found is None:
            raise InputError(
                f"--table {name!r}: no such table with rows at ts {snapshot.ts} among the tables the "
                "changefeed's [filter] selects"
            )
        if found not in chosen:
            chosen.append(found)
    return chosen


def region_ranges(pd: PDClient, physical_id: int) -> list[KeyRange]:
    """The physical table's record span cut at the region boundaries PD knows now."""
    start, end = table_record_span(physical_id)
    enc_start, enc_end = encode_bytes(start), encode_bytes(end)
    cuts: list[bytes] = []
    cursor = enc_start
    while True:
        regions = pd.scan_regions(cursor, enc_end, _SCAN_PAGE)
        if not regions:
            break
        for info in regions:
            region_end = info.region.end_key
            if region_end and enc_start < region_end < enc_end:
                cuts.append(_raw(region_end, physical_id))
        last_end = regions[-1].region.end_key
        if not last_end or last_end >= enc_end or len(regions) < _SCAN_PAGE:
            break
        cursor = last_end
    bounds = [start, *sorted(set(cuts)), end]
    return [KeyRange(physical_id, lo, hi) for lo, hi in zip(bounds, bounds[1:]) if lo < hi]


def _raw(encoded: bytes, physical_id: int) -> bytes:
    """Region bounds are EncodeBytes of raw keys (docs/metadata.md#tikv-read-semantics)."""
    try:
        raw, used = decode_bytes(encoded)
    except InputError as exc:
        raise InputError(f"region boundary {encoded.hex()} in table {physical_id} is not an encoded key: {exc}") from None
    if used != len(encoded):
        raise InputError(f"region boundary {encoded.hex()} in table {physical_id} has trailing bytes")
    return raw
