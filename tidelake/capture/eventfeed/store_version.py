"""TiKV store version gate, as TiCDC's `CheckStoreVersion` (docs/wire.md#version-checks).

A store outside the range TiCDC accepts may speak a CDC protocol we were not written against;
refusing to start with a clear message beats replicating subtly wrong data.
Owner: the EventFeed client, before it uses a store.
"""

from __future__ import annotations

import re

from tidelake.capture.puller_errors import IncompatibleClusterError
from tidelake.kvproto import metapb_pb2

# docs/wire.md#version-checks: [7.1.0-alpha, 10.0.0)
MIN_TIKV_VERSION = "7.1.0-alpha"
MAX_TIKV_VERSION_EXCLUSIVE = "10.0.0"
# What we send as Header.ticdc_version: inside TiKV's supported range and >= 5.3.0 so TiKV
# validates our cluster id and batches resolved ts (docs/wire.md#connection-setup).
TICDC_VERSION = "8.5.0"

_SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


def parse_version(text: str) -> tuple[tuple[int, int, int], tuple[tuple[int, int | str], ...] | None]:
    """(major, minor, patch), pre-release identifiers (None for a release), semver-ordered."""
    match = _SEMVER.match(text.strip())
    if match is None:
        raise ValueError(f"not a semantic version: {text!r}")
    core = (int(match[1]), int(match[2]), int(match[3]))
    if match[4] is None:
        return core, None
    # semver docs/wire.md#key-encodings: numeric identifiers sort before alphanumeric ones and compare as numbers
    return core, tuple((0, int(p)) if p.isdigit() else (1, p) for p in match[4].split("."))


def version_key(text: str) -> tuple:
    core, pre = parse_version(text)
    return core, (1,) if pre is None else (0, pre)


def is_tiflash(store: metapb_pb2.Store) -> bool:
    return any(label.key == "engine" and label.value == "tiflash" for label in store.labels)


def check_store_version(store: metapb_pb2.Store) -> None:
    """Raise IncompatibleClusterError unless a TiKV store's version is in the accepted range."""
    if is_tiflash(store) or store.state == metapb_pb2.Tombstone:
        return
    try:
        key = version_key(store.version)
    except ValueError:
        raise IncompatibleClusterError(
            f"TiKV store {store.id} at {store.address} reports version {store.version!r}, "
            f"not a semantic version; tidelake needs TiKV in [{MIN_TIKV_VERSION}, {MAX_TIKV_VERSION_EXCLUSIVE})"
        ) from None
    if not version_key(MIN_TIKV_VERSION) <= key < version_key(MAX_TIKV_VERSION_EXCLUSIVE):
        raise IncompatibleClusterError(
            f"TiKV store {store.id} at {store.address} runs version {store.version}; "
            f"tidelake needs TiKV in [{MIN_TIKV_VERSION}, {MAX_TIKV_VERSION_EXCLUSIVE})"
        )
