"""The TiDB schema at one TSO, read from TiDB's meta keys the way TiCDC builds its snapshot.

docs/metadata.md#how-ticdc-builds-its-initial-schema-snapshot: scan the `DBs` hash, then each wanted `DB:<id>` hash, keep the
`Table*` fields, all at the same ts as the data snapshot, so schema and rows agree. DDL jobs
after that ts then arrive through the DDL puller (docs/metadata.md#schema-and-ddl-handoff).
Owner: the schema tracker, bootstrap and `tidelake verify`, each at its own TSO.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Protocol

from tidelake.codec import meta_keys
from tidelake.codec.schema import STATE_PUBLIC, DBInfo, TableInfo
from tidelake.errors import InputError
from tidelake.table_filter import TableFilter, is_system_schema
from tidelake.upstream.upstream_errors import UpstreamError

# docs/metadata.md#reserved-ids: ids above this are reserved system objects, never user data.
MAX_USER_GLOBAL_ID = 0xFFFFFFFFFFFF - 1000

_STATE_NAMES = {
    0: "none",
    1: "delete only",
    2: "write only",
    3: "write reorganization",
    4: "delete reorganization",
    5: "public",
}


class SnapshotSource(Protocol):
    def scan(self, start: bytes, end: bytes, ts: int): ...

    def get(self, key: bytes, ts: int) -> bytes | None: ...


@dataclass
class SchemaSnapshot:
    ts: int
    schema_version: int
    dbs: list[DBInfo]
    tables: dict[int, list[TableInfo]]  # db id -> tables (views and sequences included)
    in_flight: list[str] = field(default_factory=list)  # objects not public at ts (a DDL was running)

    def db(self, db_id: int) -> DBInfo:
        return next(d for d in self.dbs if d.id == db_id)

    def tables_with_rows(self) -> list[tuple[DBInfo, TableInfo]]:
        """Tables whose rows live in TiKV: no views, sequences or temporary tables (docs/metadata.md#other-things-a-row-replicator-skips-or-treats-specially)."""
        return [
            (db, table)
            for db in self.dbs
            for table in self.tables.get(db.id, [])
            if has_rows(table)
        ]

    def physical_ids(self, table: TableInfo) -> list[int]:
        """Row-key table ids: partition ids for a partitioned table (docs/metadata.md#tidelakes-schema-and-data-snapshot-procedure step 4)."""
        return [pid for pid in table.physical_ids() if pid <= MAX_USER_GLOBAL_ID]


def has_rows(table: TableInfo) -> bool:
    raw = table.raw
    return raw.get("view") is None and raw.get("sequence") is None and not raw.get("temp_table_type")


def load_schema(reader: SnapshotSource, ts: int, table_filter: TableFilter | None = None) -> SchemaSnapshot:
    """Databases and tables visible at `ts`; system schemas are always skipped (docs/metadata.md#system-schemas-that-are-never-replicated), and with a
    filter only the schemas and tables it selects are kept (TiCDC ShouldIgnoreSchema/Table)."""
    dbs: list[DBInfo] = []
    tables: dict[int, list[TableInfo]] = {}
    in_flight: list[str] = []
    start, end = meta_keys.hash_span(meta_keys.DBS)
    for key, value in reader.scan(start, end, ts):
        field_name = _hash_field(key)
        if meta_keys.parse_db_key(field_name) is None:
            continue
        db = _parse(DBInfo.from_json, value, f"DBs/{field_name.decode()}")
        if is_system_schema(db.name):
            continue
        if table_filter is not None and not table_filter.should_replicate_schema(db.name):
            continue
        dbs.append(db)
        if db.state != STATE_PUBLIC:
            in_flight.append(f"database {db.name!r} is {_STATE_NAMES.get(db.state, db.state)}")
        tables[db.id] = _load_tables(reader, ts, db, table_filter, in_flight)
    return SchemaSnapshot(ts, _schema_version(reader, ts), dbs, tables, in_flight)


def _load_tables(reader: SnapshotSource, ts: int, db: DBInfo, table_filter: TableFilter | None,
                 in_flight: list[str]) -> list[TableInfo]:
    start, end = meta_keys.hash_span(meta_keys.db_key(db.id))
    found = []
    for key, value in reader.scan(start, end, ts):
        field_name = _hash_field(key)
        # TiCDC keeps fields starting with "Table"; TID:/IID:/TARID:/SID: are allocators (docs/metadata.md#meta-keys-and-values).
        if not field_name.startswith(meta_keys.TABLE_FIELD_PREFIX):
            continue
        where = f"DB:{db.id}/{field_name.decode(errors='replace')}"
        obj = _parse(json.loads, value, where)
        name = (obj.get("name") or {}).get("O", "") if isinstance(obj, dict) else ""
        if table_filter is not None and not table_filter.should_replicate_table(db.name, name):
            continue
        table = _parse(TableInfo.from_json, obj, where)
        found.append(table)
        if table.state != STATE_PUBLIC:
            in_flight.append(f"table {db.name}.{table.name} is {_STATE_NAMES.get(table.state, table.state)}")
        in_flight += [
            f"column {db.name}.{table.name}.{c.name} is {_STATE_NAMES.get(c.state, c.state)}"
            for c in table.columns
            if c.state != STATE_PUBLIC
        ]
        in_flight += [
            f"index {db.name}.{table.name}.{i.name} is {_STATE_NAMES.get(i.state, i.state)}"
            for i in table.indices
            if i.state != STATE_PUBLIC
        ]
    return found


def _hash_field(key: bytes) -> bytes:
    decoded = meta_keys.decode_meta_key(key)
    if decoded.field is None:
        raise UpstreamError(f"meta key {key.hex()} inside a hash range is not a hash field")
    return decoded.field


def _parse(fn, value, where: str):
    try:
        return fn(value)
    except (InputError, ValueError) as exc:
        raise UpstreamError(f"schema snapshot: cannot parse {where}: {exc}") from None


def _schema_version(reader: SnapshotSource, ts: int) -> int:
    value = reader.get(meta_keys.string_key(meta_keys.SCHEMA_VERSION_KEY), ts)
    if value is None:
        return 0
    try:
        return int(value)  # decimal ASCII (docs/metadata.md#key-shapes)
    except ValueError:
        raise UpstreamError(f"schema snapshot: SchemaVersionKey holds {value!r}, not a decimal integer") from None
