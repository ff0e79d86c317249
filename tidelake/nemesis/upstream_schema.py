"""The upstream's tables at a ts, read from the simulator's MVCC meta keys with json, without
tidelake.codec.

TiDB keeps a database as hash `DBs`, field `DB:<id>` -> DBInfo JSON, and a table as hash
`DB:<db id>`, field `Table:<id>` -> TableInfo JSON (docs/encoding.md#meta-keys-schema-storage, docs/encoding.md#schema-json; pingcap/tidb
pkg/meta/meta.go). A hash field's key is `'m' + EncodeBytes(hash) + EncodeUint('h') +
EncodeBytes(field)` (pingcap/tidb pkg/structure/type.go encodeHashDataKey), EncodeBytes being the
memcomparable groups of 8 bytes, each followed by 0xFF minus its zero padding
(pkg/util/codec/bytes.go; docs/encoding.md#comparable-bytes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

STATE_PUBLIC = 5  # docs/encoding.md#schema-json SchemaState


def memcomparable(data: bytes) -> bytes:
    out = bytearray()
    for at in range(0, len(data) + 1, 8):
        group = data[at:at + 8]
        pad = 8 - len(group)
        out += group + b"\0" * pad + bytes([0xFF - pad])
    return bytes(out)


def hash_prefix(name: bytes) -> bytes:
    return b"m" + memcomparable(name) + ord("h").to_bytes(8, "big")


def hash_span(name: bytes) -> tuple[bytes, bytes]:
    prefix = hash_prefix(name)
    return prefix, prefix[:-1] + bytes([prefix[-1] + 1])


def table_info_key(db_id: int, table_id: int) -> bytes:
    return hash_prefix(b"DB:%d" % db_id) + memcomparable(b"Table:%d" % table_id)


@dataclass(frozen=True)
class UpstreamTable:
    db_id: int
    db: str
    info: dict  # TableInfo JSON

    @property
    def id(self) -> int:
        return self.info["id"]

    @property
    def name(self) -> str:
        return self.info["name"]["O"]

    @property
    def physical_ids(self) -> tuple[int, ...]:
        partition = self.info.get("partition")
        if partition and partition.get("definitions"):
            return tuple(d["id"] for d in partition["definitions"])
        return (self.id,)

    @property
    def partitioned(self) -> bool:
        return bool((self.info.get("partition") or {}).get("definitions"))

    @property
    def columns(self) -> list[dict]:
        """Public columns, in table order."""
        return sorted((c for c in self.info["cols"] if c.get("state", STATE_PUBLIC) == STATE_PUBLIC),
                      key=lambda c: c["offset"])

    @property
    def handle(self) -> str:
        """'int' (the PK is the handle), 'common' (clustered common handle) or 'rowid'."""
        if self.info.get("pk_is_handle"):
            return "int"
        return "common" if self.info.get("is_common_handle") else "rowid"

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The columns a row key names: the int PK, the clustered PK's columns in index order, or
        `_tidb_rowid`."""
        if self.handle == "int":
            return tuple(c["name"]["O"] for c in self.columns if c["type"].get("Flag", 0) & 2)  # PriKeyFlag
        if self.handle == "common":
            primary = next(i for i in self.info["index_info"] if i.get("is_primary"))
            return tuple(c["name"]["O"] for c in primary["idx_cols"])
        return ("_tidb_rowid",)


class UpstreamSchema:
    """The tables at a ts as their last finished DDL left them. A DDL job writes its TableInfo at
    every schema state it passes (pingcap/tidb pkg/ddl: ADD COLUMN through delete-only, write-only
    and write-reorg; DROP PARTITION through `dropping_definitions`) and is done, the replica's
    barrier (docs/design.md invariant 4), at its last write. The writes in between have a part
    that is not public; they are skipped, so the upstream at c is the schema TiCDC's schema
    storage and the merge hold at c. Read once the run is over (the history is cached)."""

    def __init__(self, mvcc: Any) -> None:
        self.mvcc = mvcc
        self._hashes: dict[bytes, dict[bytes, list[tuple[int, dict | None]]]] = {}

    def tables_at(self, ts: int) -> dict[int, UpstreamTable]:
        """Every table of every database at `ts`, by table id."""
        tables = {}
        for db in self._live(b"DBs", ts):
            for info in self._live(b"DB:%d" % db["id"], ts):
                tables[info["id"]] = UpstreamTable(db["id"], db["db_name"]["O"], info)
        return tables

    def changes(self, db_id: int, table_id: int) -> list[int]:
        """Commit ts of the finished DDLs that wrote or removed the table's TableInfo, ascending."""
        return [ts for ts, _ in self._history(b"DB:%d" % db_id).get(table_info_key(db_id, table_id), [])]

    def _live(self, name: bytes, ts: int) -> list[dict]:
        out = []
        for versions in self._history(name).values():
            last = None
            for commit_ts, value in versions:
                if commit_ts > ts:
                    break
                last = value
            if last is not None:
                out.append(last)
        return out

    def _history(self, name: bytes) -> dict[bytes, list[tuple[int, dict | None]]]:
        """Per key of hash `name`: (commit ts, JSON or None for a delete) of each finished write, ascending."""
        if name not in self._hashes:
            history: dict[bytes, list[tuple[int, dict | None]]] = {}
            for entry in self.mvcc.snapshot_delta(*hash_span(name), 0):
                if not entry.commit_ts:
                    continue  # a lock
                value = json.loads(entry.value) if entry.op == "put" else None
                if value is not None and not (isinstance(value, dict) and _finished(value)):
                    continue  # a `TID:` counter, or a DDL's intermediate state
                history.setdefault(entry.key, []).append((entry.commit_ts, value))
            self._hashes[name] = {key: sorted(versions, key=lambda v: v[0]) for key, versions in history.items()}
        return self._hashes[name]


def _finished(info: dict) -> bool:
    """A DBInfo or TableInfo every part of which is public (docs/encoding.md#schema-json SchemaState)."""
    if info.get("state", STATE_PUBLIC) != STATE_PUBLIC:
        return False
    parts = [*(info.get("cols") or []), *(info.get("index_info") or [])]
    if any(p.get("state", STATE_PUBLIC) != STATE_PUBLIC for p in parts):
        return False
    partition = info.get("partition") or {}
    return not partition.get("adding_definitions") and not partition.get("dropping_definitions")
