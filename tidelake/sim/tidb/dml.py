"""Row-level DML in one transaction, written as TiDB's `AddRecord`/`UpdateRecord` write it.

A row is one record key `t{physical id}_r{handle}` whose value is row format v2 from codec's
`encode_row` (docs/encoding.md#record-row-key, docs/encoding.md#row-value-format-v2). The handle is the int PK (pk_is_handle), the encoded
PK columns (common handle) or an allocated `_tidb_rowid` (docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns). Partitioned
tables write under the partition's id. Index entries are not written: replicators read only the
record span `[t_r, t_s)`. At commit the transaction is refused if a table it wrote was dropped or
truncated meanwhile, as TiDB's schema validator refuses it. The transaction runs in the front's
tidb_txn_mode (pessimistic by default, with async commit and 1PC; tidelake.sim.tidb.kvtxn).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.column_default import origin_default
from tidelake.codec.keys import record_key
from tidelake.codec.row import EXTRA_HANDLE_NAME, decode_row, encode_row, row_handle
from tidelake.codec.schema import STATE_PUBLIC, ColumnInfo, TableInfo
from tidelake.errors import InputError
from tidelake.sim.tidb import partition as part
from tidelake.sim.tidb.kvtxn import KvTxn, TxnConflictError


def column_default(column: ColumnInfo) -> Any:
    """The value INSERT uses for an omitted column: its DEFAULT, parsed like an origin default."""
    return origin_default(replace(column, origin_default=column.default, origin_default_bit=column.default_bit))


class Txn:
    """`with tidb.txn() as t:` — inserts, upserts, updates and deletes over any tables, one commit."""

    def __init__(self, tidb: Any, lock_ttl_ms: int | None = None, mode: str | None = None) -> None:
        self._tidb = tidb
        self._kv = KvTxn(tidb.cluster, lock_ttl_ms, mode or tidb.txn_mode)
        self._touched: dict[int, tuple[int, int]] = {}  # physical id -> (db id, table id)

    @property
    def start_ts(self) -> int:
        return self._kv.start_ts

    @property
    def commit_ts(self) -> int:
        return self._kv.commit_ts

    @property
    def mode(self) -> str:
        return self._kv.mode

    @property
    def protocol(self) -> str:
        """How it committed: "1pc", "async-commit" or "2pc" ("" before commit)."""
        return self._kv.protocol

    # ---- statements --------------------------------------------------------------------------

    def insert(self, db: str, table: str, row: dict) -> int | bytes:
        """INSERT one row; returns its handle. A duplicate key is an InputError (TiDB error 1062)."""
        self._kv.begin_statement()
        db_id, info = self._table(db, table)
        values = self._complete(db_id, info, row)
        physical, handle = self._locate(db_id, info, values, allocate=True)
        key = record_key(physical, handle)
        if self._kv.get(key) is not None:
            raise InputError(f"duplicate entry for key {_describe(info, values, handle)} in {db}.{table}")
        self._write(db_id, info, physical, key, values)
        return handle

    def upsert(self, db: str, table: str, row: dict) -> int | bytes:
        """REPLACE INTO: the row replaces whatever row has the same primary key."""
        self._kv.begin_statement()
        db_id, info = self._table(db, table)
        values = self._complete(db_id, info, row)
        physical, handle = self._locate(db_id, info, values, allocate=True)
        self._write(db_id, info, physical, record_key(physical, handle), values)
        return handle

    def update(self, db: str, table: str, key: dict, changes: dict) -> bool:
        """UPDATE ... WHERE <primary key or _tidb_rowid> = key; False when no such row."""
        self._kv.begin_statement()
        db_id, info = self._table(db, table)
        found = self._find(db_id, info, key)
        if found is None:
            return False
        physical, handle, record, old_value = found
        current = decode_row(old_value, info, handle)
        unknown = [c for c in changes if info.column_by_name(c) is None or c == EXTRA_HANDLE_NAME]
        if unknown:
            raise InputError(f"{db}.{table}: cannot update unknown columns {unknown}")
        values = {**current, **changes}
        new_physical, new_handle = self._locate(db_id, info, values, allocate=False, rowid=handle)
        new_record = record_key(new_physical, new_handle)
        if new_record != record:
            if self._kv.get(new_record) is not None:
                raise InputError(f"duplicate entry for key {_describe(info, values, new_handle)} in {db}.{table}")
            self._kv.delete(record)
        self._write(db_id, info, new_physical, new_record, values)
        return True

    def add(self, db: str, table: str, key: dict, amounts: dict) -> bool:
        """UPDATE ... SET c = c + amount WHERE <key>: the current values are read in this
        transaction: optimistic, a concurrent writer of the row makes the commit conflict;
        pessimistic, the row is locked and read at its latest version (a bank transfer)."""
        self._kv.begin_statement()
        db_id, info = self._table(db, table)
        found = self._find(db_id, info, key)
        if found is None:
            return False
        current = decode_row(found[3], info, found[1])
        return self.update(db, table, key, {c: current[c] + amount for c, amount in amounts.items()})

    def delete(self, db: str, table: str, key: dict) -> bool:
        """DELETE ... WHERE <primary key or _tidb_rowid> = key; False when no such row."""
        self._kv.begin_statement()
        db_id, info = self._table(db, table)
        found = self._find(db_id, info, key)
        if found is None:
            return False
        physical, _handle, record, _ = found
        self._touched[physical] = (db_id, info.id)
        self._kv.delete(record)
        return True

    # ---- commit --------------------------------------------------------------------------------

    def prewrite(self) -> None:
        """Lock every written key now; a long transaction then holds them until commit (classic 2PC)."""
        self._kv.prewrite(hold=True)

    def commit(self) -> int:
        """Commit (0 when nothing was written). TxnConflictError when a written table changed identity."""
        with self._tidb.schema_lock:
            stale = [pid for pid, (db_id, table_id) in self._touched.items()
                     if pid not in self._tidb.live_physical_ids(db_id, table_id)]
            if stale:
                self._kv.rollback()
                raise TxnConflictError(f"information schema is changed: physical tables {stale} were dropped or "
                                       "truncated during the transaction")
            return self._kv.commit()

    def rollback(self) -> None:
        self._kv.rollback()

    def __enter__(self) -> Txn:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.rollback()
            return
        try:
            self.commit()
        except BaseException:
            self.rollback()  # no lock may outlive a failed commit
            raise

    # ---- internals -----------------------------------------------------------------------------

    def _table(self, db: str, table: str) -> tuple[int, TableInfo]:
        return self._tidb.resolve_table(db, table)

    def _complete(self, db_id: int, info: TableInfo, row: dict) -> dict:
        """Defaults for omitted columns, AUTO_INCREMENT ids, unknown names refused."""
        unknown = [c for c in row if info.column_by_name(c) is None]
        if unknown:
            raise InputError(f"{info.name}: unknown columns {unknown}")
        values = {}
        for column in info.columns:
            if column.state != STATE_PUBLIC:
                continue
            given = next((v for k, v in row.items() if k.lower() == column.name.lower()), _MISSING)
            if given is not _MISSING and given is not None:
                values[column.name] = given
                if column.field_type.flag & mt.AUTO_INCREMENT_FLAG:
                    self._tidb.rowids.rebase(db_id, info.id, int(given))
            elif column.field_type.flag & mt.AUTO_INCREMENT_FLAG:
                values[column.name] = self._tidb.rowids.alloc(db_id, info.id)
            elif given is _MISSING:
                values[column.name] = column_default(column)
            else:
                values[column.name] = None
        return values

    def _locate(self, db_id: int, info: TableInfo, values: dict, allocate: bool,
                rowid: int | bytes | None = None) -> tuple[int, int | bytes]:
        """(physical id, handle) of a row."""
        physical = part.locate(info, values)
        handle = row_handle(info, values)
        if handle is not None:
            return physical, handle
        if rowid is not None:
            return physical, rowid
        if not allocate:
            raise InputError(f"{info.name}: row has no handle")
        return physical, self._tidb.rowids.alloc(db_id, info.id)

    def _find(self, db_id: int, info: TableInfo, key: dict) -> tuple[int, int | bytes, bytes, bytes] | None:
        """The row a key dict names: PK columns, or `_tidb_rowid` for tables without a clustered PK."""
        if info.is_common_handle or info.handle_column() is not None:
            physical, handle = self._locate(db_id, info, dict(key), allocate=False)
            candidates = [(physical, handle)]
        else:
            rowid = key.get(EXTRA_HANDLE_NAME)
            if not isinstance(rowid, int):
                raise InputError(f"{info.name} has no clustered primary key: address rows by {EXTRA_HANDLE_NAME!r}")
            column = part.partition_column(info)
            if info.partition is not None and column in key:
                candidates = [(part.locate(info, key), rowid)]
            else:
                candidates = [(pid, rowid) for pid in info.physical_ids()]
        for physical, handle in candidates:
            record = record_key(physical, handle)
            value = self._kv.get(record)
            if value is not None:
                return physical, handle, record, value
        return None

    def _write(self, db_id: int, info: TableInfo, physical: int, key: bytes, values: dict) -> None:
        self._touched[physical] = (db_id, info.id)
        self._kv.put(key, encode_row(info, {k: v for k, v in values.items() if k != EXTRA_HANDLE_NAME}))


_MISSING = object()


def _describe(info: TableInfo, values: dict, handle: int | bytes) -> str:
    pk = info.handle_column()
    if pk is not None:
        return f"'{values.get(pk.name)}' for PRIMARY"
    if info.is_common_handle:
        index = info.primary_index()
        return "'" + "-".join(str(values.get(c.name)) for c in index.columns) + "' for PRIMARY"
    return f"_tidb_rowid {handle!r}"
