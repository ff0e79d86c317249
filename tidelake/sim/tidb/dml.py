"""Row-level DML in one transaction, written as TiDB's `AddRecord`/`UpdateRecord` write it.

A row is one record key `t{physical id}_r{handle}` holding row format v2
(docs/encoding.md#record-row-key), under the partition's id in a partitioned table. Index entries
are not written; a unique key is enforced by locking its index key, as TiDB's pessimistic
transactions do. The front fills what TiDB fills (defaults, AUTO_INCREMENT/AUTO_RANDOM ids,
generated columns) and refuses at commit (8028) a transaction whose table a DDL dropped,
truncated or rewrote meanwhile.

More: docs/internals.md#dml.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.column_default import origin_default
from tidelake.codec.keys import decode_record_key, index_key, record_key, table_record_span
from tidelake.codec.row import EXTRA_HANDLE_NAME, decode_row, encode_row, row_handle
from tidelake.codec.row_value import encode_key_datum
from tidelake.codec.schema import STATE_PUBLIC, ColumnInfo, FieldType, IndexInfo, TableInfo
from tidelake.errors import InputError
from tidelake.sim.tidb import partition as part
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.coerce import STRICT, Mode, to_column, value_text
from tidelake.sim.tidb.expr import Compiled, parse_expression
from tidelake.sim.tidb.kvtxn import KvTxn, TxnConflictError
from tidelake.sim.tidb.table_changes import unique_value, with_changing_values, writable
from tidelake.sim.tidb.types import CURRENT_TIMESTAMP

_BINARY_KEY = FieldType(tp=mt.TYPE_VARCHAR, flen=-1, charset="binary", collate="binary")
_WRITABLE = frozenset({2, 3, STATE_PUBLIC})  # write-only, write-reorg, public


def column_default(column: ColumnInfo, now: datetime | None = None, mode: Mode = STRICT) -> Any:
    """The value INSERT uses for an omitted column: its DEFAULT (CURRENT_TIMESTAMP: the statement's time)."""
    if isinstance(column.default, str) and column.default.upper().startswith(CURRENT_TIMESTAMP):
        return to_column(now or datetime.now(), column, mode)
    return origin_default(replace(column, origin_default=column.default, origin_default_bit=column.default_bit))


@dataclass(frozen=True)
class RowRef:
    """A row a statement found: where it lives and its values (with `_tidb_rowid` when that is the handle)."""

    physical: int
    handle: int | bytes
    values: dict


class Txn:
    """`with tidb.txn() as t:` — inserts, upserts, updates and deletes over any tables, one commit."""

    def __init__(self, tidb: Any, lock_ttl_ms: int | None = None, mode: str | None = None) -> None:
        self._tidb = tidb
        self._kv = KvTxn(tidb.cluster, lock_ttl_ms, mode or tidb.txn_mode)
        self._touched: dict[int, tuple[int, int, int]] = {}  # physical id -> (db id, table id, reorg epoch)
        self.last_insert_id = 0  # the first AUTO_INCREMENT id the last statement allocated
        self.sql_mode: Mode = STRICT
        self.now: datetime | None = None  # the statement's time (NOW(), CURRENT_TIMESTAMP); None: the clock

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

    @property
    def pessimistic(self) -> bool:
        return self._kv.pessimistic

    @property
    def wrote(self) -> bool:
        return len(self._kv) > 0

    # ---- statements (the Python front's row-at-a-time API) -----------------------------------

    def insert(self, db: str, table: str, row: dict) -> int | bytes:
        """INSERT one row; returns its handle. A duplicate key is TiDB's error 1062."""
        self.begin_statement()
        db_id, info = self._table(db, table)
        return self.put_row(db_id, info, self.complete(db_id, info, row))

    def upsert(self, db: str, table: str, row: dict) -> int | bytes:
        """REPLACE INTO: the row replaces whatever rows share its primary or a unique key."""
        self.begin_statement()
        db_id, info = self._table(db, table)
        return self.put_row(db_id, info, self.complete(db_id, info, row), replace=True)

    def update(self, db: str, table: str, key: dict, changes: dict) -> bool:
        """UPDATE ... WHERE <primary key or _tidb_rowid> = key; False when no such row."""
        self.begin_statement()
        db_id, info = self._table(db, table)
        found = self.find(db_id, info, key)
        if found is None:
            return False
        unknown = [c for c in changes if info.column_by_name(c) is None or c == EXTRA_HANDLE_NAME]
        if unknown:
            raise er.bad_field(unknown[0], "field list")
        self.put_row(db_id, info, self.updated(info, found.values, changes), old=found)
        return True

    def add(self, db: str, table: str, key: dict, amounts: dict) -> bool:
        """UPDATE ... SET c = c + amount WHERE <key>: the current values are read in this
        transaction: optimistic, a concurrent writer of the row makes the commit conflict;
        pessimistic, the row is locked and read at its latest version (a bank transfer)."""
        self.begin_statement()
        db_id, info = self._table(db, table)
        found = self.find(db_id, info, key)
        if found is None:
            return False
        return self.update(db, table, key, {c: found.values[c] + amount for c, amount in amounts.items()})

    def delete(self, db: str, table: str, key: dict) -> bool:
        """DELETE ... WHERE <primary key or _tidb_rowid> = key; False when no such row."""
        self.begin_statement()
        db_id, info = self._table(db, table)
        found = self.find(db_id, info, key)
        if found is None:
            return False
        self.delete_row(db_id, info, found)
        return True

    # ---- statement building blocks (the SQL front) -------------------------------------------

    def begin_statement(self) -> dict:
        """A statement starts: a fresh for_update_ts (pessimistic), and a savepoint for its rollback."""
        self._kv.begin_statement()
        self.last_insert_id = 0
        return self.savepoint()

    def savepoint(self, named: bool = False) -> dict:
        """What `rollback_statement` returns to: the writes so far (each statement; named: SAVEPOINT)."""
        return {"kv": self._kv.savepoint(named), "touched": dict(self._touched)}

    def rollback_statement(self, savepoint: dict) -> None:
        """Undo the writes since `savepoint`; the transaction goes on (TiDB's statement rollback, and
        ROLLBACK TO SAVEPOINT, which like TiDB's keeps the pessimistic locks taken since)."""
        self._kv.rollback_to(savepoint["kv"])
        self._touched = dict(savepoint["touched"])

    def table(self, db: str, table: str) -> tuple[int, TableInfo]:
        return self._table(db, table)

    def new_read_ts(self) -> None:
        """A statement retry: read (and lock) again at a fresh for_update_ts (pessimistic)."""
        self._kv.begin_statement()

    def rows(self, db_id: int, info: TableInfo, physical_ids: list[int] | None = None,
             handle_range: tuple[int, int] | None = None, snapshot: bool = False) -> list[RowRef]:
        """Every row the statement sees (pessimistic: latest committed at for_update_ts; optimistic, or
        `snapshot` (a plain SELECT): at start_ts), this transaction's own writes included. Nothing is
        locked. `handle_range` keeps integer handles in [low, high]."""
        out = []
        for physical in physical_ids if physical_ids is not None else info.physical_ids():
            start, end = table_record_span(physical)
            if handle_range is not None:
                low, high = handle_range
                if low > high:
                    continue
                start = record_key(physical, low)
                end = record_key(physical, high + 1) if high < (1 << 63) - 1 else end
            for key, value in self._kv.scan(start, end, at_start=snapshot):
                handle = decode_record_key(key)[1]
                out.append(RowRef(physical, handle, self._decode(info, value, handle)))
        return out

    def current(self, db_id: int, info: TableInfo, ref: RowRef | tuple[int, int | bytes],
                snapshot: bool = False) -> RowRef | None:
        """The row at its latest version, locked (pessimistic), or None when it is gone; `snapshot`
        reads it at start_ts without a lock (a plain SELECT)."""
        physical, handle = (ref.physical, ref.handle) if isinstance(ref, RowRef) else ref
        key = record_key(physical, handle)
        value = self._kv.read(key) if snapshot else self._kv.get(key)
        return None if value is None else RowRef(physical, handle, self._decode(info, value, handle))

    def find(self, db_id: int, info: TableInfo, key: dict, snapshot: bool = False) -> RowRef | None:
        """The row a key dict names: PK columns, or `_tidb_rowid` for tables without a clustered PK."""
        if info.is_common_handle or info.handle_column() is not None:
            values = self._key_values(info, key)
            handle = row_handle(info, values)
            candidates = self._physical_candidates(info, values)
        else:
            handle = key.get(EXTRA_HANDLE_NAME)
            if not isinstance(handle, int):
                raise InputError(f"{info.name} has no clustered primary key: address rows by {EXTRA_HANDLE_NAME!r}")
            candidates = self._physical_candidates(info, key)
        for physical in candidates:
            found = self.current(db_id, info, (physical, handle), snapshot)
            if found is not None:
                return found
        return None

    def _physical_candidates(self, info: TableInfo, values: dict) -> list[int]:
        """The partition a row with `values` lives in, or every partition when they do not say."""
        if info.partition is None:
            return [info.id]
        columns = part.partition_columns(info)
        if columns and all(any(k.lower() == c.lower() for k in values) for c in columns):
            try:
                return [part.locate(info, self._with_generated(info, dict(values)))]
            except er.SqlError:
                return info.physical_ids()
        return info.physical_ids()

    def _key_values(self, info: TableInfo, key: dict) -> dict:
        out = {}
        for k, v in key.items():
            col = info.column_by_name(k)
            out[col.name if col else k] = v
        return out

    def complete(self, db_id: int, info: TableInfo, row: dict, explicit_auto: bool = True) -> dict:
        """An INSERT's row: defaults for omitted columns, AUTO_INCREMENT/AUTO_RANDOM ids, generated
        columns computed, unknown or generated names given a value refused."""
        given = {}
        for name, value in row.items():
            column = info.column_by_name(name)
            if column is None or (column.state != STATE_PUBLIC and name != EXTRA_HANDLE_NAME):
                if name == EXTRA_HANDLE_NAME and not (info.pk_is_handle or info.is_common_handle):
                    given[EXTRA_HANDLE_NAME] = value
                    continue
                raise er.bad_field(name, "field list")
            if column.is_generated:
                raise er.sql_error(er.GENERATED_COLUMN_VALUE, f"The value specified for generated column "
                                                              f"'{column.name}' in table '{info.name}' is not allowed.")
            given[column.name] = value
        values: dict[str, Any] = {}
        auto_random = (info.raw or {}).get("auto_random_bits") or 0
        for column in info.columns:
            if column.state != STATE_PUBLIC or column.is_generated:
                continue
            value = given.get(column.name, _MISSING)
            flag = column.field_type.flag
            if flag & mt.AUTO_INCREMENT_FLAG and (value is _MISSING or value is None or value == 0):
                values[column.name] = self._tidb.rowids.alloc(db_id, info.id)
                self.last_insert_id = self.last_insert_id or values[column.name]
            elif auto_random and info.handle_column() is column and (value is _MISSING or value is None or value == 0):
                values[column.name] = self._auto_random(db_id, info, auto_random)
                self.last_insert_id = self.last_insert_id or values[column.name]
            elif value is _MISSING:
                if flag & mt.NO_DEFAULT_VALUE_FLAG and mt.is_not_null(flag) and self.sql_mode.strict:
                    raise er.sql_error(er.NO_DEFAULT_FOR_FIELD, f"Field '{column.name}' doesn't have a default value")
                values[column.name] = column_default(column, self.now, self.sql_mode)
            else:
                values[column.name] = value
                if flag & mt.AUTO_INCREMENT_FLAG and isinstance(value, int):
                    self._tidb.rowids.rebase(db_id, info.id, value)
            if values[column.name] is None and mt.is_not_null(flag):
                raise er.sql_error(er.BAD_NULL, f"Column '{column.name}' cannot be null")
        if EXTRA_HANDLE_NAME in given:
            values[EXTRA_HANDLE_NAME] = given[EXTRA_HANDLE_NAME]
        return self._with_generated(info, values)

    def updated(self, info: TableInfo, current: dict, changes: dict) -> dict:
        """A row after SET: ON UPDATE CURRENT_TIMESTAMP columns not set move to now when anything changed,
        generated columns are computed again."""
        names = {}
        for name, value in changes.items():
            column = info.column_by_name(name)
            if column is None:
                raise er.bad_field(name, "field list")
            if column.is_generated:
                raise er.sql_error(er.GENERATED_COLUMN_VALUE, f"The value specified for generated column "
                                                              f"'{column.name}' in table '{info.name}' is not allowed.")
            if value is None and mt.is_not_null(column.field_type.flag):
                raise er.sql_error(er.BAD_NULL, f"Column '{column.name}' cannot be null")
            names[column.name] = value
        values = {**current, **names}
        if any(_differs(current.get(k), v) for k, v in names.items()):
            for column in info.columns:
                if column.field_type.flag & mt.ON_UPDATE_NOW_FLAG and column.name not in names:
                    values[column.name] = to_column(self.now or datetime.now(), column, self.sql_mode)
        return self._with_generated(info, values)

    def _with_generated(self, info: TableInfo, values: dict) -> dict:
        for column in info.columns:
            if column.is_generated and column.state in _WRITABLE:
                value = _compiled(column.generated_expr_string).evaluate(values, now=self.now)
                values[column.name] = to_column(value, column, self.sql_mode)
        return values

    def conflicts(self, db_id: int, info: TableInfo, values: dict, exclude: RowRef | None = None) -> list[RowRef]:
        """Live rows that share the handle or a unique key with `values` (what REPLACE and ON DUPLICATE
        KEY UPDATE meet), the handle's row first; each unique key's index key gets locked."""
        found: dict[bytes, RowRef] = {}
        handle = row_handle(info, values)
        if handle is not None:
            for physical in self._physical_candidates(info, values):
                row = self.current(db_id, info, (physical, handle))
                if row is not None:
                    found[record_key(physical, handle)] = row
        for index in self._unique_indexes(info):
            key = self._unique_key(info, index, values)
            if key is None:
                continue
            self._kv.lock_only(index_key(info.id, index.id, self._index_lock_bytes(info, index, key)))
            for row in self.rows(db_id, info):
                if self._unique_key(info, index, row.values) == key:
                    locked = self.current(db_id, info, row)
                    if locked is not None and self._unique_key(info, index, locked.values) == key:
                        found.setdefault(record_key(locked.physical, locked.handle), locked)
        if exclude is not None:
            found.pop(record_key(exclude.physical, exclude.handle), None)
        return list(found.values())

    def put_row(self, db_id: int, info: TableInfo, values: dict, old: RowRef | None = None,
                replace: bool = False) -> int | bytes:
        """Write `values` as a row (moving it when its handle or partition changed); any other row with
        the same handle or unique key is TiDB's error 1062, or, with `replace`, deleted first (REPLACE)."""
        values = {k: v for k, v in values.items()}
        physical = part.locate(info, values)
        handle = row_handle(info, values)
        if handle is None:
            handle = old.handle if old is not None else values.get(EXTRA_HANDLE_NAME)
            if handle is None:
                handle = self._tidb.rowids.alloc(db_id, info.id)
        key = record_key(physical, handle)
        clash = self.conflicts(db_id, info, values, exclude=old)
        if clash and not replace:
            raise self._duplicate(info, values, clash[0])
        for row in clash:
            if (row.physical, row.handle) != (physical, handle):
                self.delete_row(db_id, info, row)
        if old is not None and (old.physical, old.handle) != (physical, handle):
            self._kv.delete(record_key(old.physical, old.handle))
        if old is not None:  # an UPDATE that sets the AUTO_INCREMENT column rebases it (TiDB's updateRecord)
            column = next((c for c in info.columns if c.field_type.flag & mt.AUTO_INCREMENT_FLAG), None)
            value = values.get(column.name) if column is not None else None
            if isinstance(value, int) and value != old.values.get(column.name):
                self._tidb.rowids.rebase(db_id, info.id, value)
        self._touch(db_id, info, physical)
        stored = {k: v for k, v in with_changing_values(info, values, self.sql_mode).items() if k != EXTRA_HANDLE_NAME}
        self._kv.put(key, encode_row(writable(info), stored))
        return handle

    def delete_row(self, db_id: int, info: TableInfo, ref: RowRef) -> None:
        self._touch(db_id, info, ref.physical)
        self._kv.delete(record_key(ref.physical, ref.handle))

    # ---- commit --------------------------------------------------------------------------------

    def prewrite(self) -> None:
        """Lock every written key now; a long transaction then holds them until commit (classic 2PC)."""
        self._kv.prewrite(hold=True)

    def commit(self) -> int:
        """Commit (0 when nothing was written). TxnConflictError when a written table changed identity."""
        with self._tidb.schema_lock:
            stale = [pid for pid, (db_id, table_id, epoch) in self._touched.items()
                     if pid not in self._tidb.live_physical_ids(db_id, table_id)
                     or self._tidb.reorg_epoch.get(table_id, 0) != epoch
                     or table_id in self._tidb.reorg_running]
            if stale:
                self._kv.rollback()
                raise TxnConflictError(f"Information schema is changed during the execution of the statement "
                                       f"(physical tables {stale} were dropped, truncated or rewritten by a DDL)")
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

    def _touch(self, db_id: int, info: TableInfo, physical: int) -> None:
        self._touched.setdefault(physical, (db_id, info.id, self._tidb.reorg_epoch.get(info.id, 0)))

    def _decode(self, info: TableInfo, value: bytes, handle: int | bytes) -> dict:
        """A stored row with its virtual generated columns computed, as TiDB reads them."""
        values = decode_row(value, info, handle)
        for column in info.columns:
            if column.is_generated and not column.generated_stored and column.state == STATE_PUBLIC:
                computed = _compiled(column.generated_expr_string).evaluate(values, now=self.now)
                values[column.name] = to_column(computed, column, self.sql_mode)
        return values

    def _auto_random(self, db_id: int, info: TableInfo, shard_bits: int) -> int:
        """AUTO_RANDOM: shard bits from the transaction's start ts above an incremental id, below the
        sign bit (pkg/meta/autoid `ShardIDFormat`). The incremental part shares the table's allocator."""
        range_bits = (info.raw or {}).get("auto_random_range_bits") or 64
        increment_bits = range_bits - 1 - shard_bits
        shard = zlib.crc32(self.start_ts.to_bytes(8, "big")) & ((1 << shard_bits) - 1)
        return shard << increment_bits | self._tidb.rowids.alloc(db_id, info.id) & ((1 << increment_bits) - 1)

    @staticmethod
    def _unique_indexes(info: TableInfo) -> list[IndexInfo]:
        """Unique keys the record key does not enforce: UNIQUE indexes and a non-clustered PRIMARY KEY."""
        return [i for i in info.indices if i.unique and i.state in _WRITABLE
                and not (i.primary and info.is_common_handle)]

    @staticmethod
    def _unique_key(info: TableInfo, index: IndexInfo, values: dict) -> tuple | None:
        key = []
        for ic in index.columns:
            column = info.column_by_name(ic.name)
            value = unique_value(values.get(column.name), column, ic.length)
            if value is None:
                return None  # NULLs never clash in a unique index
            key.append(value)
        return tuple(key)

    @staticmethod
    def _index_lock_bytes(info: TableInfo, index: IndexInfo, key: tuple) -> bytes:
        out = b""
        for ic, value in zip(index.columns, key):
            ft = info.column_by_name(ic.name).field_type
            try:
                out += encode_key_datum(value, ft)
            except InputError:  # a collation the key codec lacks: its folded text stands in
                out += encode_key_datum(value_text(value).encode("utf-8"), _BINARY_KEY)
        return out

    def _duplicate(self, info: TableInfo, values: dict, clash: RowRef) -> er.SqlError:
        handle_col = info.handle_column()
        if handle_col is not None and values.get(handle_col.name) == clash.values.get(handle_col.name):
            return er.duplicate_entry(value_text(values.get(handle_col.name)), f"{info.name}.PRIMARY")
        for index in ([info.primary_index()] if info.is_common_handle else []) + self._unique_indexes(info):
            if index is not None and self._unique_key(info, index, values) is not None and \
                    self._unique_key(info, index, values) == self._unique_key(info, index, clash.values):
                shown = "-".join(value_text(values.get(ic.name)) for ic in index.columns)
                return er.duplicate_entry(shown, f"{info.name}.{index.name}")
        return er.duplicate_entry(value_text(clash.handle), f"{info.name}.PRIMARY")


_MISSING = object()
_COMPILED: dict[str, Compiled] = {}


def _compiled(text: str) -> Compiled:
    compiled = _COMPILED.get(text)
    if compiled is None:
        compiled = _COMPILED[text] = Compiled(parse_expression(text))
    return compiled


def _differs(a: Any, b: Any) -> bool:
    return not (a == b and type(a) is type(b)) if not (a is None or b is None) else a is not b

