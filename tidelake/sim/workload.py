"""Seeded workloads for the simulated TiDB: DML mixes, hot keys, huge and long transactions, DDL.

A `WorkloadPlanner` turns (preset, seed) into a deterministic stream of statements using only its
own model of the schema and of which keys exist, so the same seed always yields the same
statements whether or not a cluster runs them. `WorkloadRunner` paces that stream against a
SimTiDB in a background thread; long transactions run in their own threads so their locks hold
resolved ts back while other traffic continues, as on a real cluster.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from tidelake.codec.schema import FieldType, TableInfo
from tidelake.errors import InputError
from tidelake.sim.tidb import table_changes as tc
from tidelake.sim.tidb.kvtxn import ASYNC_COMMIT, ONE_PC, TWO_PC, TxnConflictError, check_txn_mode
from tidelake.sim.tidb.partition import spec_from_dict
from tidelake.sim.tidb.table_spec import IndexSpec
from tidelake.sim.tidb.types import column_def, parse_field_type
from tidelake.sim.tidb.values import random_value

ROWID = "_tidb_rowid"
# Transactions larger than this take the cheap bulk-load row path (planning cost matters at 100k rows).
BULK_THRESHOLD = 1000
PRELOAD_TXN_ROWS = 10_000
HASH_PARTITIONS = 4  # hash-partitioned tables: p0..p3 by id % 4
_BULK_EPOCH = datetime(2024, 1, 1)


@dataclass(frozen=True)
class WorkloadPreset:
    """What a workload looks like; `txn_sizes` are (weight, rows) pairs, DDL/long-txn cadences in txns."""

    name: str
    description: str
    rate: float
    txn_sizes: tuple[tuple[int, int], ...]
    op_weights: tuple[int, int, int, int] = (50, 35, 10, 5)  # insert, update, delete, upsert
    multi_table_ratio: float = 0.2
    hot_key_ratio: float = 0.0
    hot_keys: int = 8
    ddl_every: int = 0
    long_txn_every: int = 0
    long_txn_hold_s: float = 0.0
    long_txn_rows: int = 10
    bank_accounts: int = 0  # > 0: the bank workload, this many accounts in each bank table
    txn_mode: str | None = None  # tidb_txn_mode of its DML; None = the front's (TiDB's default, pessimistic)
    # setup also creates the scratch tables the rarer DDL kinds need (SCRATCH_SETUP), so a short run meets them
    scratch_setup: bool = False


PRESETS: dict[str, WorkloadPreset] = {
    p.name: p
    for p in (
        WorkloadPreset("smoke", "a few small txns per second on every table kind; no DDL", 5.0, ((1, 1), (1, 3))),
        WorkloadPreset(
            "mixed",
            "1-1000 row txns, 30% hot-key updates, a DDL every 200 txns, a 5 s lock-holding txn every 300",
            50.0,
            ((60, 1), (30, 10), (9, 100), (1, 1000)),
            hot_key_ratio=0.3,
            ddl_every=200,
            long_txn_every=300,
            long_txn_hold_s=5.0,
        ),
        WorkloadPreset(
            "ddl-heavy",
            "small txns with a DDL of every kind every ~5 txns (columns, indexes, partitions, truncate, rename)",
            20.0,
            ((70, 1), (30, 5)),
            ddl_every=5,
        ),
        WorkloadPreset(
            "bulk",
            "large txns up to 100k rows (huge prewrites, many regions, region splits)",
            2.0,
            ((40, 1000), (40, 10_000), (20, 100_000)),
            op_weights=(90, 5, 0, 5),
            multi_table_ratio=0.0,
        ),
        WorkloadPreset(
            "hot",
            "single-row updates on 4 hot keys: many versions per key, commit-ts ordering",
            100.0,
            ((1, 1),),
            op_weights=(10, 85, 0, 5),
            hot_key_ratio=0.9,
            hot_keys=4,
        ),
        WorkloadPreset(
            "long-txn",
            "small txns plus a lock-holding txn of 20 s every 50 txns (resolved ts held back)",
            20.0,
            ((1, 1), (1, 10)),
            long_txn_every=50,
            long_txn_hold_s=20.0,
        ),
        WorkloadPreset(
            "bank",
            "transfers between accounts in three tables (range-partitioned, clustered common handle, no "
            "primary key), most across tables in one txn; the total of all balances never changes",
            50.0,
            ((1, 2),),
            bank_accounts=20,
        ),
        WorkloadPreset(
            "bank-optimistic",
            "the bank transfers in optimistic transactions: classic 2PC, no async commit, no 1PC; conflicting "
            "transfers fail at commit",
            50.0,
            ((1, 2),),
            bank_accounts=20,
            txn_mode="optimistic",
        ),
    )
}
BANK_INITIAL_BALANCE = 1000
BANK_TABLES = ("bank_range", "bank_clustered", "bank_nopk")


def bank_total(preset: WorkloadPreset) -> int:
    """What the balances of all bank tables sum to at every ts after the funding txn."""
    return preset.bank_accounts * len(BANK_TABLES) * BANK_INITIAL_BALANCE


def get_preset(name: str) -> WorkloadPreset:
    if name not in PRESETS:
        raise InputError(f"unknown workload preset {name!r} (known: {', '.join(PRESETS)})")
    return PRESETS[name]


# --- statements -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RowOp:
    """One DML statement on one row: insert/upsert carry `row`; update `key`+`changes` (add: the
    changes are amounts added to the current values); delete `key`."""

    kind: str
    db: str
    table: str
    row: dict = field(default_factory=dict)
    key: dict = field(default_factory=dict)
    changes: dict = field(default_factory=dict)


@dataclass(frozen=True)
class TxnOp:
    """One transaction; `hold_s` > 0 keeps its locks (prewritten, uncommitted) that long; a
    `preload` txn runs unpaced before the traffic."""

    rows: tuple[RowOp, ...]
    hold_s: float = 0.0
    preload: bool = False


@dataclass(frozen=True)
class DdlOp:
    """One DDL statement: the SimTiDB method and its keyword arguments; `kind` names the workload's
    DDL kind it issues (DDL_WEIGHTS), empty for a step another kind needs first."""

    method: str
    args: dict
    kind: str = ""


Op = TxnOp | DdlOp


# --- the planner's model of the schema --------------------------------------------------------


@dataclass
class _Table:
    db: str
    name: str
    columns: list[tuple[str, str]]  # (name, type) of non-key columns the planner writes
    handle: str  # 'int' | 'common' | 'rowid'
    pk: list[str]
    core: bool = True
    partition: str = ""  # '', 'range', 'hash'
    range_bounds: list[tuple[str, int]] = field(default_factory=list)
    keys: list = field(default_factory=list)
    key_pos: dict = field(default_factory=dict)
    next_id: int = 1
    added_columns: list[str] = field(default_factory=list)
    indexes: list[str] = field(default_factory=list)
    preloaded: bool = False  # holds the preload: never truncated, so it keeps its size
    # a rowid table's NOT NULL column holding each row's planned key, never updated: unique, so a
    # PRIMARY KEY may be added on it (`pk` then names it; the handle stays _tidb_rowid)
    unique: str = ""

    def add_key(self, key: Any) -> None:
        if key not in self.key_pos:
            self.key_pos[key] = len(self.keys)
            self.keys.append(key)

    def remove_key(self, key: Any) -> None:
        pos = self.key_pos.pop(key, None)
        if pos is None:
            return
        last = self.keys.pop()
        if pos < len(self.keys):
            self.keys[pos] = last
            self.key_pos[last] = pos

    def clear_keys(self, keep=lambda key: False) -> None:
        kept = [k for k in self.keys if keep(k)]
        self.keys, self.key_pos = [], {}
        for k in kept:
            self.add_key(k)


_REGIONS = ("eu", "us", "ap", "sa")
ZOO_TYPES = (
    "tinyint", "smallint", "mediumint", "int", "bigint", "bigint unsigned", "float", "double",
    "decimal(30,10)", "date", "datetime", "datetime(6)", "timestamp(3)", "time(2)", "year", "bit(12)",
    "json", "char(8)", "varchar(64)", "binary(4)", "varbinary(16)", "text", "blob",
    "enum('red','green','blue')", "set('a','b','c','d')",
)
# ADD COLUMN draws from every type of type_zoo and a few more, so a replica meets columns of types
# (and Delta table features) it did not have yet.
ADDABLE_TYPES = (*ZOO_TYPES, "varchar(32)", "decimal(12,3)", "datetime(3)")
# No DEFAULT for these: TiDB refuses one on BLOB, TEXT and JSON (ER_BLOB_CANT_HAVE_DEFAULT, 1101),
# and ColumnInfo JSON keeps a BINARY default as text, which random bytes are not.
NO_DEFAULT_TYPES = ("json", "text", "blob", "binary(4)", "varbinary(16)")
# MODIFY COLUMN targets by current type: metadata only (TiDB keeps the stored bytes), and ones TiDB
# rewrites every row for (pkg/ddl `needChangeColumnData`: another storage type) that every value of
# the old type fits, so TiDB never refuses them in strict mode.
MODIFY_IN_PLACE = {"int": "bigint", "varchar(32)": "varchar(128)"}
MODIFY_REORG = {"int": ("varchar(16)", "decimal(20,0)"), "bigint": ("decimal(24,0)",)}
# How often each DDL kind is drawn when it has a target (a kind without one is planned through the
# DDL that makes one: `_ENABLERS`). The kinds that move rows between tables or partitions, swap
# names or change a key weigh more: they are the hardest to replicate and need scratch tables.
DDL_WEIGHTS: dict[str, int] = {
    "create_table": 2, "drop_table": 3, "truncate_table": 2, "rename_table": 2, "add_column": 3,
    "drop_column": 5, "rename_column": 5, "modify_column": 3, "modify_column_reorg": 4, "add_index": 3,
    "drop_index": 4, "add_partition": 2, "drop_partition": 3, "truncate_partition": 3, "create_database": 2,
    "drop_database": 3, "swap_tables": 5, "partition_by": 5, "remove_partitioning": 3, "exchange_partition": 6,
    "reorganize_partition": 5, "multi_schema_change": 6, "add_primary_key": 5, "drop_primary_key": 5,
}
# What a kind without a target plans instead: the DDL that makes one.
_ENABLERS = {
    "drop_table": "create_table", "rename_table": "create_table", "drop_column": "add_column",
    "rename_column": "add_column", "modify_column": "create_table", "modify_column_reorg": "create_table",
    "drop_index": "add_index", "drop_database": "create_database", "swap_tables": "create_table",
    "partition_by": "create_table_int", "remove_partitioning": "partition_by", "exchange_partition": "partition_by",
    "add_primary_key": "create_table_nopk", "drop_primary_key": "add_primary_key", "multi_schema_change": "add_column",
    "drop_partition": "add_partition", "reorganize_partition": "add_partition", "truncate_partition": "add_partition",
    "create_database": "drop_database",
}
# The kind a planned DDL statement counts as, by its SimTiDB method, where the two names differ.
_METHOD_KINDS = {"rename_tables": "swap_tables", "alter_partitioning": "partition_by"}


class WorkloadPlanner:
    """Deterministic statement stream for (preset, seed): setup DDL first, then `preload_rows`
    bulk-loaded into `orders` (a table that already holds data, as bootstrap meets it), then
    paced traffic."""

    def __init__(self, preset: WorkloadPreset, seed: int = 0, database: str = "sim", preload_rows: int = 0) -> None:
        if preload_rows < 0:
            raise InputError(f"preload rows must be >= 0, got {preload_rows}")
        if preload_rows and preset.bank_accounts:
            raise InputError(f"preload rows go into `orders`, which the {preset.name} workload does not have")
        self.preset = preset
        self.database = database
        self.preload_rows = preload_rows
        self._preload_left = preload_rows
        self._rng = random.Random(seed)
        self._tables: dict[tuple[str, str], _Table] = {}
        self._txns = 0
        self._serial = 0
        self._scratch_dbs: list[str] = []
        self._types: dict[str, FieldType] = {}
        self._pending: list[Op] = self._bank_setup() if preset.bank_accounts else self._setup()
        if not preset.bank_accounts:
            self._tables[(database, "orders")].preloaded = preload_rows > 0

    def __iter__(self) -> Iterator[Op]:
        return self

    def __next__(self) -> Op:
        if not self._pending:
            if self._preload_left:
                self._pending.extend(self._plan_preload())
            elif self.preset.bank_accounts:
                self._pending.append(self._plan_transfer())
            else:
                self._pending.extend(self._plan_more())
        return self._pending.pop(0)

    def take(self, n: int) -> list[Op]:
        return [next(self) for _ in range(n)]

    # setup ------------------------------------------------------------------------------------

    def _setup(self) -> list[Op]:
        db = self.database
        ops: list[Op] = [DdlOp("create_database", {"name": db})]
        layouts = [
            _Table(db, "orders", [("customer", "int"), ("amount", "decimal(12,2)"), ("status", "enum('new','paid','shipped')"),
                                  ("note", "varchar(64)"), ("created", "datetime(3)"), ("payload", "json")], "int", ["id"]),
            _Table(db, "accounts", [("balance", "decimal(20,4)"), ("flags", "set('a','b','c')"), ("updated", "timestamp(6)")],
                   "common", ["region", "acct"]),
            _Table(db, "events", [("kind", "varchar(32)"), ("data", "blob"), ("seq", "bigint"), ("score", "double")], "rowid", []),
            _Table(db, "metrics", [("value", "double"), ("host", "varchar(16)")], "int", ["id"], partition="range",
                   range_bounds=[("p0", 1000), ("p1", 10_000), ("p2", 100_000)]),
            _Table(db, "sessions", [("user", "varchar(24)"), ("started", "datetime")], "int", ["id"], partition="hash"),
            _Table(db, "type_zoo", [(f"c_{i}", t) for i, t in enumerate(ZOO_TYPES)], "int", ["id"]),
            _Table(db, "long_txns", [("payload", "varchar(64)")], "int", ["id"], core=False),
        ]
        if self.preset.scratch_setup:  # two tables only: every replica costs each merge of a short run
            layouts += [self._scratch_table(db, self._next_name("scratch"), "rowid", pk=["uid"]),
                        self._scratch_table(db, self._next_name("scratch"), "int", partition="hash")]
        for table in layouts:
            self._tables[(table.db, table.name)] = table
            ops.append(DdlOp("create_table", self._create_args(table)))
        return ops

    @staticmethod
    def _scratch_table(db: str, name: str, handle: str, partition: str = "", pk: list[str] | None = None) -> _Table:
        """A setup scratch table that already has what the DDL dropping or renaming things needs: an
        added column and an index."""
        columns = [("v", "varchar(32)"), ("n", "int"), ("w", "int")]
        return _Table(db, name, columns, handle, pk if pk is not None else (["id"] if handle == "int" else []),
                      core=False, partition=partition, added_columns=["w"], indexes=["idx_0__v"],
                      unique="uid" if handle == "rowid" else "")

    def _bank_setup(self) -> list[Op]:
        """The bank tables, then one txn funding every account with the same balance."""
        db, n = self.database, self.preset.bank_accounts
        layouts = [
            _Table(db, "bank_range", [("balance", "bigint")], "int", ["id"], partition="range",
                   range_bounds=[("p0", n // 2 + 1), ("p1", n + 1)]),
            _Table(db, "bank_clustered", [("balance", "bigint")], "common", ["region", "acct"]),
            _Table(db, "bank_nopk", [("owner", "varchar(16)"), ("balance", "bigint")], "rowid", []),
        ]
        ops: list[Op] = [DdlOp("create_database", {"name": db})]
        funding = []
        for table in layouts:
            self._tables[(db, table.name)] = table
            ops.append(DdlOp("create_table", self._create_args(table)))
            for i in range(n):
                key = self._new_key(table)
                table.add_key(key)
                values = {"owner": f"owner-{i}"} if table.handle == "rowid" else {}
                funding.append(RowOp("insert", db, table.name, row={**self._key_dict(table, key, for_insert=True),
                                                                    **values, "balance": BANK_INITIAL_BALANCE}))
        ops.append(TxnOp(tuple(funding)))
        return ops

    def _plan_transfer(self) -> TxnOp:
        """Move an amount between two accounts, each `balance = balance -/+ amount` read in the txn."""
        rng = self._rng
        accounts = [(table, key) for table in self._tables.values() for key in table.keys]
        (source, source_key), (target, target_key) = rng.sample(accounts, 2)
        amount = rng.randint(1, 100)
        self._txns += 1
        return TxnOp((
            RowOp("add", source.db, source.name, key=self._key_dict(source, source_key), changes={"balance": -amount}),
            RowOp("add", target.db, target.name, key=self._key_dict(target, target_key), changes={"balance": amount}),
        ))

    def _create_args(self, table: _Table) -> dict:
        key_cols = {"int": [("id", "bigint", "pk")], "common": [("region", "varchar(8)", "pk"), ("acct", "bigint", "pk")],
                    "rowid": []}[table.handle]
        unique = [(table.unique, "bigint", "not null")] if table.unique else []
        args: dict = {"db": table.db, "name": table.name,
                      "columns": key_cols + unique + [(n, t) for n, t in table.columns]}
        if table.handle == "common":
            args["clustered"] = True
        elif table.handle == "rowid" and table.pk:
            args["primary_key"], args["clustered"] = list(table.pk), False  # NONCLUSTERED: rows keep _tidb_rowid
        if table.indexes:
            args["indexes"] = [(name, [name.rsplit("__", 1)[-1]], False) for name in table.indexes]
        if table.partition == "range":
            args["partition"] = {"type": "range", "column": "id", "bounds": list(table.range_bounds)}
        elif table.partition == "hash":
            args["partition"] = {"type": "hash", "column": "id", "count": HASH_PARTITIONS}
        return args

    def _plan_preload(self) -> list[Op]:
        """One chunk at a time: a million planned rows held at once would cost gigabytes."""
        size = min(PRELOAD_TXN_ROWS, self._preload_left)
        self._preload_left -= size
        return [TxnOp(self._bulk_rows(size), preload=True)]

    # traffic ----------------------------------------------------------------------------------

    def _plan_more(self) -> list[Op]:
        p, rng = self.preset, self._rng
        self._txns += 1
        ops: list[Op] = []
        if p.ddl_every and self._txns % p.ddl_every == 0:
            ops.extend(self._plan_ddl())
        if p.long_txn_every and self._txns % p.long_txn_every == 0:
            ops.append(self._plan_long_txn())
        size = rng.choices([s for _, s in p.txn_sizes], weights=[w for w, _ in p.txn_sizes])[0]
        if size > BULK_THRESHOLD:
            ops.append(TxnOp(self._bulk_rows(size)))
            return ops
        tables = self._dml_tables()
        chosen = [rng.choice(tables)]
        if len(tables) > 1 and rng.random() < p.multi_table_ratio:
            chosen.append(rng.choice([t for t in tables if t is not chosen[0]]))
        rows = tuple(self._plan_row(chosen[i % len(chosen)]) for i in range(size))
        ops.append(TxnOp(rows))
        return ops

    def _dml_tables(self) -> list[_Table]:
        return [t for t in self._tables.values() if t.name != "long_txns"]

    def _plan_row(self, table: _Table) -> RowOp:
        rng, p = self._rng, self.preset
        kind = rng.choices(("insert", "update", "delete", "upsert"), weights=p.op_weights)[0]
        if kind in ("update", "delete") and not table.keys:
            kind = "insert"
        if kind in ("insert", "upsert"):
            if kind == "upsert" and table.keys and table.handle != "rowid" and rng.random() < 0.5:
                key = self._pick_key(table)
            elif table.handle == "rowid" and kind == "upsert":
                kind, key = "insert", self._new_key(table)
            else:
                key = self._new_key(table)
            if table.partition == "range" and key >= table.range_bounds[-1][1]:
                return self._plan_row_without_partition_room(table)
            table.add_key(key)
            row = {**self._key_dict(table, key, for_insert=True), **self._values(table, len(table.columns))}
            return RowOp(kind, table.db, table.name, row=row)
        key = self._pick_key(table)
        if kind == "delete":
            table.remove_key(key)
            return RowOp("delete", table.db, table.name, key=self._key_dict(table, key))
        return RowOp("update", table.db, table.name, key=self._key_dict(table, key),
                     changes=self._values(table, rng.randint(1, max(1, min(3, len(table.columns))))))

    def _plan_row_without_partition_room(self, table: _Table) -> RowOp:
        """Range table full: update an existing row instead; the next DDL round adds a partition."""
        key = self._pick_key(table)
        return RowOp("update", table.db, table.name, key=self._key_dict(table, key), changes=self._values(table, 1))

    def _new_key(self, table: _Table) -> Any:
        key_id = table.next_id
        table.next_id += 1
        if table.handle == "common":
            return (_REGIONS[key_id % len(_REGIONS)], key_id)
        return key_id

    def _pick_key(self, table: _Table) -> Any:
        rng, p = self._rng, self.preset
        if p.hot_key_ratio and rng.random() < p.hot_key_ratio:
            hot = table.keys[: p.hot_keys]
            return rng.choice(hot)
        return rng.choice(table.keys)

    @staticmethod
    def _key_dict(table: _Table, key: Any, for_insert: bool = False) -> dict:
        if table.handle == "common":
            return {"region": key[0], "acct": key[1]}
        if table.handle == "rowid":
            if for_insert:
                return {table.unique: key} if table.unique else {}
            return {ROWID: key}
        return {"id": key}

    def _values(self, table: _Table, n: int) -> dict:
        rng = self._rng
        picked = table.columns if n >= len(table.columns) else rng.sample(table.columns, n)
        out = {}
        for name, type_spec in picked:
            out[name] = None if rng.random() < 0.05 else random_value(self._field_type(type_spec), rng)
        return out

    def _field_type(self, type_spec: str) -> FieldType:
        if type_spec not in self._types:
            self._types[type_spec] = parse_field_type(type_spec)
        return self._types[type_spec]

    def _bulk_rows(self, size: int) -> tuple[RowOp, ...]:
        """A bulk load into `orders`: values derived from the row number, no random draw per value."""
        table = self._tables[(self.database, "orders")]
        salt = self._rng.getrandbits(16)
        statuses = ("new", "paid", "shipped")
        rows = []
        for _ in range(size):
            key = self._new_key(table)
            table.add_key(key)
            rows.append(RowOp("insert", table.db, table.name, row={
                "id": key, "customer": (key * 7919 + salt) % 100_000, "amount": Decimal(key % 1_000_000).scaleb(-2),
                "status": statuses[key % 3], "note": f"bulk {salt} {key}",
                "created": _BULK_EPOCH + timedelta(milliseconds=key), "payload": None}))
        return tuple(rows)

    def _plan_long_txn(self) -> TxnOp:
        table = self._tables[(self.database, "long_txns")]
        rows = []
        for _ in range(self.preset.long_txn_rows):
            key = self._new_key(table)
            table.add_key(key)
            rows.append(RowOp("insert", table.db, table.name, row={"id": key, **self._values(table, 1)}))
        return TxnOp(tuple(rows), hold_s=self.preset.long_txn_hold_s)

    # DDL --------------------------------------------------------------------------------------

    def _plan_ddl(self) -> list[DdlOp]:
        """One DDL kind drawn by DDL_WEIGHTS among all kinds; one without a target yet plans the DDL
        that makes one instead (a scratch table of the shape it needs), so every kind comes often."""
        rng = self._rng
        range_table = next((t for t in self._tables.values() if t.partition == "range"), None)
        if range_table is not None and range_table.next_id >= range_table.range_bounds[-1][1] - 100:
            return [self._add_partition(range_table)]
        kinds = list(DDL_WEIGHTS)
        kind = rng.choices(kinds, weights=[DDL_WEIGHTS[k] for k in kinds])[0]
        wanted, candidates = kind, self._ddl_candidates()
        while not candidates.get(kind, True):
            kind = _ENABLERS[kind]
        ops = self._ddl_of_kind(kind)
        if kind != wanted and self._ddl_candidates()[wanted]:  # the enabler made a target: use it at once
            ops += self._ddl_of_kind(wanted)
        return [op if op.kind else replace(op, kind=_METHOD_KINDS.get(op.method, op.method)) for op in ops]

    def _ddl_candidates(self) -> dict[str, bool]:
        tables = self._dml_tables()
        scratch = [t for t in tables if not t.core]
        return {
            "create_table": True,
            "drop_table": bool(scratch),
            "truncate_table": True,
            "rename_table": bool(scratch),
            "add_column": True,
            "drop_column": any(t.added_columns for t in tables),
            "rename_column": any(t.added_columns for t in tables),
            "modify_column": any(self._modifiable(t) for t in tables),
            "modify_column_reorg": any(self._reorganisable(t) for t in tables),
            "add_index": True,
            "drop_index": any(t.indexes for t in tables),
            "add_partition": any(t.partition == "range" for t in tables),
            "drop_partition": any(t.partition == "range" and len(t.range_bounds) > 1 for t in tables),
            "truncate_partition": any(t.partition for t in tables),
            "create_database": len(self._scratch_dbs) < 2,
            "drop_database": bool(self._scratch_dbs),
            "swap_tables": bool(self._swappable()),
            "partition_by": any(not t.partition and t.handle == "int" for t in scratch),
            "remove_partitioning": any(t.partition == "hash" for t in scratch),
            "exchange_partition": any(t.partition == "hash" for t in scratch),
            "reorganize_partition": any(t.partition == "range" and len(t.range_bounds) > 1 for t in tables),
            "multi_schema_change": True,
            "add_primary_key": any(t.unique and not t.pk for t in scratch),
            "drop_primary_key": any(t.unique and t.pk for t in scratch),
        }

    def _swappable(self) -> list[tuple[_Table, _Table]]:
        """Pairs of scratch tables of one database, for RENAME TABLE a TO tmp, b TO a, tmp TO b."""
        scratch = [t for t in self._dml_tables() if not t.core]
        return [(a, b) for i, a in enumerate(scratch) for b in scratch[i + 1:] if a.db == b.db]

    def _next_name(self, prefix: str) -> str:
        self._serial += 1
        return f"{prefix}_{self._serial}"

    @staticmethod
    def _modifiable(table: _Table) -> list[str]:
        """Columns a MODIFY COLUMN may change in place: the added ones and a scratch table's own."""
        return [n for n, t in table.columns if (n in table.added_columns or not table.core) and t in MODIFY_IN_PLACE]

    @staticmethod
    def _reorganisable(table: _Table) -> list[str]:
        """Columns a MODIFY COLUMN may rewrite: as `_modifiable`, but no indexed one (the simulator
        rewrites no index, table_changes.modify_column)."""
        indexed = {idx.rsplit("__", 1)[-1] for idx in table.indexes}
        return [n for n, t in table.columns
                if (n in table.added_columns or not table.core) and t in MODIFY_REORG and n not in indexed]

    def _modified_type(self, table: _Table, name: str, kind: str) -> str:
        """The new type of a MODIFY COLUMN of `kind`; the model takes it."""
        old = dict(table.columns)[name]
        new_type = MODIFY_IN_PLACE[old] if kind == "modify_column" else self._rng.choice(MODIFY_REORG[old])
        table.columns = [(n, new_type if n == name else t) for n, t in table.columns]
        return new_type

    def _multi_schema_change(self, table: _Table) -> DdlOp:
        """One ALTER TABLE of several changes, one multi-schema change job (TiDB 6.2+), each change on
        its own column as TiDB requires: ADD COLUMN + ADD INDEX [+ MODIFY COLUMN], or DROP COLUMN +
        RENAME COLUMN of two added columns."""
        rng = self._rng
        droppable = [n for n in table.added_columns if not any(i.endswith(f"__{n}") for i in table.indexes)]
        if len(droppable) >= 2 and rng.random() < 0.5:
            dropped, renamed = rng.sample(droppable, 2)
            new_name = self._next_name("added")
            table.added_columns = [new_name if n == renamed else n for n in table.added_columns if n != dropped]
            table.columns = [(new_name if n == renamed else n, t) for n, t in table.columns if n != dropped]
            changes: tuple = (("drop_column", dropped), ("rename_column", renamed, new_name))
            return DdlOp("alter_table", {"db": table.db, "table": table.name, "changes": changes}, "multi_schema_change")
        indexable = [n for n, t in table.columns if t not in ("json", "blob", "text") and not t.startswith("set")]
        reorganisable = self._reorganisable(table)
        name, type_spec = self._next_name("added"), rng.choice(("int", "varchar(32)", "datetime(3)", "decimal(12,3)"))
        changes = (("add_column", (name, type_spec)),)
        if indexable:
            column = rng.choice(indexable)
            index = f"{self._next_name('idx')}__{column}"
            changes += (("add_index", index, (column,)),)
            reorganisable = [n for n in reorganisable if n != column]
        if reorganisable:
            column = rng.choice(reorganisable)
            changes += (("modify_column", column, self._modified_type(table, column, "modify_column_reorg")),)
        if indexable:
            table.indexes.append(changes[1][1])
        table.columns.append((name, type_spec))
        table.added_columns.append(name)
        return DdlOp("alter_table", {"db": table.db, "table": table.name, "changes": changes}, "multi_schema_change")

    def _ddl_of_kind(self, kind: str) -> list[DdlOp]:
        rng = self._rng
        tables = self._dml_tables()
        table = rng.choice(tables)
        if kind in ("create_table", "create_table_nopk", "create_table_int"):
            # half the scratch tables have no primary key, only a unique NOT NULL column one may be added on
            db = rng.choice([self.database, *self._scratch_dbs])
            columns = [("v", "varchar(32)"), ("n", "int")]
            if kind == "create_table_nopk" or (kind == "create_table" and rng.random() < 0.5):
                new = _Table(db, self._next_name("scratch"), columns, "rowid", [], core=False, unique="uid")
            else:
                new = _Table(db, self._next_name("scratch"), columns, "int", ["id"], core=False)
            self._tables[(db, new.name)] = new
            return [DdlOp("create_table", self._create_args(new))]
        if kind == "drop_table":
            table = rng.choice([t for t in tables if not t.core])
            del self._tables[(table.db, table.name)]
            return [DdlOp("drop_table", {"db": table.db, "name": table.name})]
        if kind == "truncate_table":
            if table.preloaded:
                table = rng.choice([t for t in tables if not t.preloaded])
            table.clear_keys()
            table.next_id = 1
            return [DdlOp("truncate_table", {"db": table.db, "name": table.name})]
        if kind == "rename_table":
            table = rng.choice([t for t in tables if not t.core])
            new_name = self._next_name("renamed")
            del self._tables[(table.db, table.name)]
            op = DdlOp("rename_table", {"db": table.db, "name": table.name, "new_name": new_name})
            table.name = new_name
            self._tables[(table.db, new_name)] = table
            return [op]
        if kind == "add_column":
            name, type_spec = self._next_name("added"), rng.choice(ADDABLE_TYPES)
            default = (None if type_spec in NO_DEFAULT_TYPES
                       else rng.choice((None, random_value(self._field_type(type_spec), rng))))
            table.columns.append((name, type_spec))
            table.added_columns.append(name)
            column = (name, type_spec, {"default": default}) if default is not None else (name, type_spec)
            return [DdlOp("add_column", {"db": table.db, "table": table.name, "column": column})]
        if kind in ("drop_column", "rename_column"):
            table = rng.choice([t for t in tables if t.added_columns])
            name = rng.choice(table.added_columns)
            for idx in list(table.indexes):
                if idx.endswith(f"__{name}"):  # TiDB refuses to drop an indexed column; drop the index first
                    table.indexes.remove(idx)
                    return [DdlOp("drop_index", {"db": table.db, "table": table.name, "name": idx})]
            table.added_columns.remove(name)
            type_spec = dict(table.columns)[name]
            table.columns = [c for c in table.columns if c[0] != name]
            if kind == "drop_column":
                return [DdlOp("drop_column", {"db": table.db, "table": table.name, "name": name})]
            new_name = self._next_name("added")
            table.columns.append((new_name, type_spec))
            table.added_columns.append(new_name)
            return [DdlOp("rename_column", {"db": table.db, "table": table.name, "name": name, "new_name": new_name})]
        if kind in ("modify_column", "modify_column_reorg"):
            columns_of = self._modifiable if kind == "modify_column" else self._reorganisable
            table = rng.choice([t for t in tables if columns_of(t)])
            name = rng.choice(columns_of(table))
            new_type = self._modified_type(table, name, kind)
            return [DdlOp("modify_column", {"db": table.db, "table": table.name, "name": name, "new_type": new_type},
                          kind)]
        if kind == "multi_schema_change":
            return [self._multi_schema_change(rng.choice(tables))]
        if kind in ("add_primary_key", "drop_primary_key"):
            table = rng.choice([t for t in tables if not t.core and t.unique and bool(t.pk) == (kind == "drop_primary_key")])
            table.pk = [] if table.pk else [table.unique]
            change = ("drop_primary_key",) if kind == "drop_primary_key" else ("add_primary_key", (table.unique,))
            return [DdlOp("alter_table", {"db": table.db, "table": table.name, "changes": (change,)}, kind)]
        if kind == "add_index":
            candidates = [n for n, t in table.columns if t not in ("json", "blob", "text") and not t.startswith("set")]
            if not candidates:
                return self._ddl_of_kind("create_table")
            column = rng.choice(candidates)
            name = f"{self._next_name('idx')}__{column}"
            table.indexes.append(name)
            return [DdlOp("add_index", {"db": table.db, "table": table.name, "name": name, "columns": [column]})]
        if kind == "drop_index":
            table = rng.choice([t for t in tables if t.indexes])
            name = table.indexes.pop(rng.randrange(len(table.indexes)))
            return [DdlOp("drop_index", {"db": table.db, "table": table.name, "name": name})]
        if kind == "add_partition":
            return [self._add_partition(next(t for t in tables if t.partition == "range"))]
        if kind == "drop_partition":
            table = next(t for t in tables if t.partition == "range" and len(t.range_bounds) > 1)
            name, bound = table.range_bounds.pop(0)
            table.clear_keys(keep=lambda k: k >= bound)
            return [DdlOp("drop_partition", {"db": table.db, "table": table.name, "name": name})]
        if kind == "truncate_partition":
            table = rng.choice([t for t in tables if t.partition])
            if table.partition == "range":
                index = rng.randrange(len(table.range_bounds))
                low = table.range_bounds[index - 1][1] if index else -(1 << 63)
                name, high = table.range_bounds[index]
                table.clear_keys(keep=lambda k: not low <= k < high)
            else:
                index = rng.randrange(HASH_PARTITIONS)
                name = f"p{index}"
                table.clear_keys(keep=lambda k: k % HASH_PARTITIONS != index)
            return [DdlOp("truncate_partition", {"db": table.db, "table": table.name, "name": name})]
        if kind == "create_database":
            name = self._next_name(f"{self.database}_scratch")
            self._scratch_dbs.append(name)
            return [DdlOp("create_database", {"name": name})]
        if kind == "drop_database":
            name = self._scratch_dbs.pop(0)
            for key in [k for k in self._tables if k[0] == name]:
                del self._tables[key]
            return [DdlOp("drop_database", {"name": name})]
        if kind in ("swap_tables", "partition_by", "remove_partitioning", "exchange_partition",
                    "reorganize_partition"):
            return self._repartition_or_swap(kind)
        raise AssertionError(f"unplanned DDL kind {kind}")

    def _repartition_or_swap(self, kind: str) -> list[DdlOp]:
        """DDL that moves rows between tables or partitions, or swaps names; the model follows."""
        rng = self._rng
        scratch = [t for t in self._dml_tables() if not t.core]
        if kind == "swap_tables":
            a, b = rng.choice(self._swappable())
            tmp, (a_name, b_name) = self._next_name("swap"), (a.name, b.name)
            a.name, b.name = b_name, a_name
            self._tables[(a.db, a.name)], self._tables[(b.db, b.name)] = a, b
            pairs = [(a.db, a_name, a.db, tmp), (a.db, b_name, a.db, a_name), (a.db, tmp, a.db, b_name)]
            return [DdlOp("rename_tables", {"pairs": pairs})]
        if kind == "partition_by":
            table = rng.choice([t for t in scratch if not t.partition and t.handle == "int"])
            table.partition = "hash"
            spec = spec_from_dict({"type": "hash", "column": "id", "count": HASH_PARTITIONS})
            return [DdlOp("alter_partitioning", {"db": table.db, "table": table.name, "spec": spec})]
        if kind == "remove_partitioning":
            table = rng.choice([t for t in scratch if t.partition == "hash"])
            table.partition = ""
            return [DdlOp("remove_partitioning", {"db": table.db, "table": table.name})]
        if kind == "exchange_partition":
            # EXCHANGE needs a normal table defined like the partitioned one: CREATE TABLE LIKE copies
            # the partitioning too, so it is removed first; the partition's rows move to it.
            pt = rng.choice([t for t in scratch if t.partition == "hash"])
            index = rng.randrange(HASH_PARTITIONS)
            nt = _Table(pt.db, self._next_name("exchanged"), list(pt.columns), pt.handle, list(pt.pk), core=False,
                        next_id=pt.next_id, added_columns=list(pt.added_columns), indexes=list(pt.indexes))
            for key in [k for k in pt.keys if k % HASH_PARTITIONS == index]:
                nt.add_key(key)
            pt.clear_keys(keep=lambda k: k % HASH_PARTITIONS != index)
            self._tables[(nt.db, nt.name)] = nt
            return [DdlOp("create_table_like", {"db": nt.db, "name": nt.name, "source_db": pt.db, "source": pt.name}),
                    DdlOp("remove_partitioning", {"db": nt.db, "table": nt.name}),
                    DdlOp("exchange_partition", {"db": pt.db, "table": pt.name, "partition": f"p{index}",
                                                 "other_db": nt.db, "other": nt.name})]
        table = next(t for t in self._dml_tables() if t.partition == "range" and len(t.range_bounds) > 1)
        (first, _), (second, bound) = table.range_bounds[:2]
        name = self._next_name("p")
        table.range_bounds[:2] = [(name, bound)]
        return [DdlOp("reorganize_partition", {"db": table.db, "table": table.name, "names": [first, second],
                                               "definitions": [(name, [str(bound)])]})]

    def _add_partition(self, table: _Table) -> DdlOp:
        name = self._next_name("p")
        bound = table.range_bounds[-1][1] * 2
        table.range_bounds.append((name, bound))
        return DdlOp("add_partition", {"db": table.db, "table": table.name, "name": name, "less_than": bound},
                     "add_partition")


# --- running against a SimTiDB ----------------------------------------------------------------


@dataclass
class WorkloadCounters:
    txns: int = 0
    rows: int = 0
    ddls: int = 0
    conflicts: int = 0
    long_txns: int = 0
    errors: int = 0
    preloaded: int = 0
    one_pc: int = 0  # committed txns by protocol (docs/wire.md#the-simulators-own-front-tidbs-transaction-modes)
    async_commit: int = 0
    two_pc: int = 0
    last_error: str = ""
    ddl_kinds: Counter[str] = field(default_factory=Counter)  # DDL that succeeded, by DdlOp.kind

    def snapshot(self) -> dict:
        return {**self.__dict__, "ddl_kinds": dict(self.ddl_kinds)}


class WorkloadRunner:
    """Runs a planner's statements against a SimTiDB at `rate` txn/s in a background thread."""

    def __init__(self, tidb: Any, preset: WorkloadPreset | str, seed: int = 0, rate: float | None = None,
                 database: str = "sim", preload_rows: int = 0, txn_mode: str | None = None) -> None:
        self.preset = get_preset(preset) if isinstance(preset, str) else preset
        self.rate = rate if rate is not None else self.preset.rate
        if self.rate <= 0:
            raise InputError(f"workload rate must be > 0 txn/s, got {self.rate}")
        self.tidb = tidb
        # an explicit mode, else the preset's, else the front's tidb_txn_mode
        self.txn_mode: str = check_txn_mode(txn_mode or self.preset.txn_mode or tidb.txn_mode, "workload txn_mode")
        self.planner = WorkloadPlanner(self.preset, seed, database, preload_rows)
        self.counters = WorkloadCounters()
        # (db, table, physical id, finished ts) of every id a DDL of this workload removed from the
        # user tables, named as before the DDL: the upstream's own record, for checkers
        # (tidelake.nemesis.landing_check)
        self.removed_ids: list[tuple[str, str, int, int]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._long: list[threading.Thread] = []

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="sim-workload", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop planning; lock-holding txns commit early so no lock outlives the workload."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for thread in self._long:
            thread.join(timeout)
        self._long = [t for t in self._long if t.is_alive()]

    def run_ops(self, n: int) -> None:
        """Execute the next `n` statements synchronously (tests, benchmarks)."""
        for _ in range(n):
            self._execute(next(self.planner))

    def _loop(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            op = next(self.planner)
            self._execute(op)
            if isinstance(op, TxnOp) and not op.hold_s and not op.preload:
                next_at = max(next_at + interval, time.monotonic() - 1.0)
                delay = next_at - time.monotonic()
                if delay > 0:
                    self._stop.wait(delay)

    def _execute(self, op: Op) -> None:
        try:
            if isinstance(op, DdlOp):
                before = self._physical_ids()
                if op.method == "alter_table":
                    job = self.tidb.alter_table(op.args["db"], op.args["table"],
                                                alter_plan(self.tidb, op.args["changes"]))
                else:
                    job = getattr(self.tidb, op.method)(**op.args)
                after = self._physical_ids()
                removed = {pid: named for pid, named in before.items() if pid not in after}
                self._count(ddls=1)
                with self._lock:
                    self.counters.ddl_kinds[op.kind or op.method] += 1
                    self.removed_ids += [(*removed[pid], pid, job.finished_ts) for pid in sorted(removed)
                                         if job.finished_ts]
            elif op.hold_s:
                thread = threading.Thread(target=self._run_long, args=(op,), name="sim-long-txn", daemon=True)
                self._long = [t for t in self._long if t.is_alive()] + [thread]
                thread.start()
            else:
                self._run_txn(op)
        except Exception as exc:  # the workload must outlive one failed statement; it is counted
            self._record_failure(exc)

    def _physical_ids(self) -> dict[int, tuple[str, str]]:
        return {pid: (db, table) for db, table, info in self.tidb.tables() for pid in info.physical_ids()}

    def _run_txn(self, op: TxnOp) -> None:
        with self.tidb.txn(mode=self.txn_mode) as txn:
            for row in op.rows:
                _apply(txn, row)
        if op.preload:
            self._count(preloaded=len(op.rows))
        else:
            self._count(txns=1, rows=len(op.rows), **_protocol_count(txn))

    def _run_long(self, op: TxnOp) -> None:
        try:
            with self.tidb.txn(lock_ttl_ms=int(op.hold_s * 1000) + 3000, mode=self.txn_mode) as txn:
                for row in op.rows:
                    _apply(txn, row)
                txn.prewrite()
                self._count(long_txns=1)
                self._stop.wait(op.hold_s)
            self._count(txns=1, rows=len(op.rows), **_protocol_count(txn))
        except Exception as exc:
            self._record_failure(exc)

    def _record_failure(self, exc: Exception) -> None:
        if isinstance(exc, TxnConflictError):
            self._count(conflicts=1)
        else:
            self._count(errors=1, last_error=f"{type(exc).__name__}: {exc}")

    def _count(self, last_error: str | None = None, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(self.counters, name, getattr(self.counters, name) + delta)
            if last_error is not None:
                self.counters.last_error = last_error


def _protocol_count(txn: Any) -> dict[str, int]:
    """The counter of the protocol a committed txn used (none for a txn that wrote nothing)."""
    name = {ONE_PC: "one_pc", ASYNC_COMMIT: "async_commit", TWO_PC: "two_pc"}.get(txn.protocol)
    return {name: 1} if name else {}


def alter_plan(tidb: Any, changes: tuple[tuple, ...]) -> Callable[[TableInfo], list[tc.TableChange]]:
    """The plan of SimTiDB.alter_table for a DdlOp's `changes` (each `(what, *args)`), each change
    planned on the table the ones before it leave, as the SQL front plans an ALTER TABLE of several
    actions (sim/sql/ddl_statements.py `execute_alter`); ADD PRIMARY KEY is NONCLUSTERED, as in TiDB."""
    def plan(info: TableInfo) -> list[tc.TableChange]:
        out, current = [], info
        for what, *args in changes:
            if what == "add_column":
                change = tc.add_column(current, column_def(args[0]), None, datetime.now())
            elif what == "drop_column":
                change = tc.drop_column(current, args[0])
            elif what == "rename_column":
                change = tc.rename_column(current, args[0], args[1])
            elif what == "modify_column":
                change = tidb.modify_change(current, args[0], args[1])
            elif what in ("add_index", "add_primary_key"):
                primary = what == "add_primary_key"
                name, columns = ("PRIMARY", args[0]) if primary else (args[0], args[1])
                spec = IndexSpec(name, tuple((c, -1) for c in columns), unique=primary, primary=primary)
                change = tc.add_index(current, spec, tidb.cluster)
            elif what == "drop_primary_key":
                change = tc.drop_index(current, "PRIMARY")
            else:
                raise InputError(f"alter_table change {what!r}: known are add_column, drop_column, rename_column, "
                                 f"modify_column, add_index, add_primary_key, drop_primary_key")
            out.append(change)
            current = change.apply_all(current)
        return out
    return plan


def _apply(txn: Any, row: RowOp) -> None:
    if row.kind == "insert":
        txn.insert(row.db, row.table, row.row)
    elif row.kind == "upsert":
        txn.upsert(row.db, row.table, row.row)
    elif row.kind == "update":
        txn.update(row.db, row.table, row.key, row.changes)
    elif row.kind == "add":
        txn.add(row.db, row.table, row.key, row.changes)
    else:
        txn.delete(row.db, row.table, row.key)

