"""The simulated TiDB's schema: an in-memory mirror of the meta keys plus the writes that keep them.

Every change goes to TiKV as the meta-key mutations TiDB's `meta.Mutator` makes
(docs/metadata.md#meta-keys-and-values): DBInfo in hash `DBs`, TableInfo in hash `DB:<id>`, decimal-ASCII
counters `NextGlobalID` and `SchemaVersionKey`, and a `Diff:<ver>` SchemaDiff per version.
The mirror only saves re-reading them; `Catalog.load` rebuilds it from the keys themselves.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from tidelake.codec import meta_keys as mk
from tidelake.codec.schema import DBInfo, TableInfo
from tidelake.errors import InputError
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb import system_tables as st
from tidelake.sim.tidb.kvtxn import KvTxn, snapshot_get, snapshot_scan


def _json_bytes(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@dataclass
class Catalog:
    """Databases and tables by lower-case name, the global id counter and the schema version."""

    dbs: dict[str, DBInfo] = field(default_factory=dict)
    tables: dict[int, dict[str, TableInfo]] = field(default_factory=dict)  # db id -> name -> info
    next_global_id: int = 0  # "max id used so far", as TiDB's NextGlobalID holds it
    schema_version: int = 0
    rowid_bases: dict[int, int] = field(default_factory=dict)  # table id -> TID:<id> value

    # ---- lookups ---------------------------------------------------------------------------

    def db(self, name: str) -> DBInfo:
        info = self.dbs.get(name.lower())
        if info is None:
            raise er.bad_db(name)
        return info

    def table(self, db: str, name: str) -> TableInfo:
        info = self.tables.get(self.db(db).id, {}).get(name.lower())
        if info is None:
            raise er.no_such_table(db, name)
        return info

    def has_table(self, db: str, name: str) -> bool:
        info = self.dbs.get(db.lower())
        return info is not None and name.lower() in self.tables.get(info.id, {})

    def db_of_table(self, table_id: int) -> DBInfo:
        for info in self.dbs.values():
            if any(t.id == table_id for t in self.tables.get(info.id, {}).values()):
                return info
        raise InputError(f"no database holds table id {table_id}")

    def user_tables(self) -> list[tuple[str, str, TableInfo]]:
        out = []
        for db in self.dbs.values():
            if db.name.lower() == st.MYSQL_DB_NAME:
                continue
            for info in self.tables.get(db.id, {}).values():
                out.append((db.name, info.name, copy.deepcopy(info)))
        return out

    def alloc_ids(self, n: int) -> list[int]:
        """`GenGlobalIDs`: ids after NextGlobalID; jobs, schemas, tables and partitions share them."""
        first = self.next_global_id + 1
        self.next_global_id += n
        return list(range(first, first + n))

    # ---- meta writes (one call per meta.Mutator method) ----------------------------------------

    def write_next_global_id(self, txn: KvTxn) -> None:
        txn.put(mk.string_key(mk.NEXT_GLOBAL_ID), str(self.next_global_id).encode())

    def bump_schema_version(self, txn: KvTxn) -> int:
        """`GenSchemaVersion`: every DDL step that changes the schema takes a new version."""
        self.schema_version += 1
        txn.put(mk.string_key(mk.SCHEMA_VERSION_KEY), str(self.schema_version).encode())
        return self.schema_version

    @staticmethod
    def write_diff(txn: KvTxn, diff: dict) -> None:
        """`SetSchemaDiff`: SchemaDiff JSON (pkg/meta/model SchemaDiff) under `Diff:<version>`."""
        txn.put(mk.string_key(mk.diff_key(diff["version"])), _json_bytes(diff))

    def put_db(self, txn: KvTxn, info: DBInfo) -> None:
        self.dbs[info.name.lower()] = info
        self.tables.setdefault(info.id, {})
        txn.put(mk.db_info_key(info.id), _json_bytes(info.to_json()))

    def drop_db(self, txn: KvTxn, info: DBInfo) -> None:
        """`DropDatabase`: HClear(DB:<id>) then HDel(DBs, DB:<id>)."""
        for table in self.tables.pop(info.id, {}).values():
            self._delete_table_keys(txn, info.id, table.id)
        self.dbs.pop(info.name.lower(), None)
        txn.delete(mk.db_info_key(info.id))

    def put_table(self, txn: KvTxn, db_id: int, info: TableInfo, old_name: str | None = None) -> None:
        """`CreateTableOrView` / `UpdateTable`: HSet(DB:<dbid>, Table:<id>, TableInfo JSON)."""
        tables = self.tables.setdefault(db_id, {})
        if old_name is not None:
            tables.pop(old_name.lower(), None)
        tables[info.name.lower()] = info
        txn.put(mk.table_info_key(db_id, info.id), _json_bytes(info.to_json()))

    def drop_table(self, txn: KvTxn, db_id: int, info: TableInfo) -> None:
        """`DropTableOrView` + `GetAutoIDAccessors().Del()`: the table field and its id allocators."""
        self.tables.get(db_id, {}).pop(info.name.lower(), None)
        self._delete_table_keys(txn, db_id, info.id)

    def _delete_table_keys(self, txn: KvTxn, db_id: int, table_id: int) -> None:
        txn.delete(mk.table_info_key(db_id, table_id))
        if self.rowid_bases.pop(table_id, None) is not None:
            txn.delete(mk.hash_key(mk.db_key(db_id), b"TID:%d" % table_id))

    def write_rowid_base(self, txn: KvTxn, db_id: int, table_id: int, base: int) -> None:
        """Auto-id allocator `TID:<tid>` in hash `DB:<dbid>` (docs/metadata.md#meta-keys-and-values)."""
        self.rowid_bases[table_id] = base
        txn.put(mk.hash_key(mk.db_key(db_id), b"TID:%d" % table_id), str(base).encode())

    # ---- bootstrap and reload ----------------------------------------------------------------

    def bootstrap(self, txn: KvTxn) -> None:
        """What TiDB's bootstrap leaves behind that a replicator reads: `mysql` and its DDL tables."""
        db = st.mysql_db()
        self.put_db(txn, db)
        for table in st.system_tables():
            table.update_timestamp = txn.start_ts
            self.put_table(txn, db.id, table)
        self.next_global_id = st.FIRST_USER_ID
        self.write_next_global_id(txn)
        txn.put(mk.string_key(mk.DDL_TABLE_VERSION), str(st.DDL_TABLE_VERSION).encode())
        self.bump_schema_version(txn)

    @classmethod
    def load(cls, cluster: Any, ts: int) -> Catalog | None:
        """Rebuild the mirror from the meta keys at `ts`; None when TiDB was never bootstrapped."""
        next_id = snapshot_get(cluster, mk.string_key(mk.NEXT_GLOBAL_ID), ts)
        if next_id is None:
            return None
        version = snapshot_get(cluster, mk.string_key(mk.SCHEMA_VERSION_KEY), ts)
        catalog = cls(next_global_id=int(next_id), schema_version=int(version or 0))
        for _key, value in snapshot_scan(cluster, *mk.hash_span(mk.DBS), ts):
            db = DBInfo.from_json(value)
            catalog.dbs[db.name.lower()] = db
            tables = catalog.tables.setdefault(db.id, {})
            for key, field_value in snapshot_scan(cluster, *mk.hash_span(mk.db_key(db.id)), ts):
                field_name = mk.decode_meta_key(key).field or b""
                if mk.parse_table_field(field_name) is not None:
                    info = TableInfo.from_json(field_value)
                    tables[info.name.lower()] = info
                elif field_name.startswith(b"TID:"):
                    catalog.rowid_bases[int(field_name[4:])] = int(field_value)
        return catalog
