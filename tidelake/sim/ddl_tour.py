"""A scripted tour of every DDL kind the merge supports, each followed by DML on the table it touched.

The one-process demo and the tests drive it against SimTiDB, so one run shows every kind of
barrier the merge handles (column and index changes, renames, partitions, truncates, drops).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from decimal import Decimal
from typing import Any

TOUR_DB = "tour"
TOUR_SCRATCH_DB = "tour_scratch"


class DdlTour:
    """Every DDL kind the merge supports, once, each followed by DML on the table it touched.

    Runs on its own tables (databases `tour`, `tour_scratch`) so the random workload's model of
    its schema stays true. `step()` runs the next statement group; `done` when all ran.
    """

    def __init__(self, tidb: Any, seed: int) -> None:
        self.tidb = tidb
        self.rng = random.Random(seed)
        self.next_id = 1
        self.ledger_bound = 2000  # rows go below the last range partition's bound
        self.ran: list[str] = []
        self.jobs: list[Any] = []  # the finished DDLJobs, in order
        self._steps: list[tuple[str, Callable[[], Any]]] = [
            ("create database", lambda: (tidb.create_database(TOUR_DB), tidb.create_database(TOUR_SCRATCH_DB))),
            ("create table", self._create_tables),
            ("add column", lambda: tidb.add_column(TOUR_DB, "items", ("note", "varchar(20)"))),
            ("add index", lambda: tidb.add_index(TOUR_DB, "items", "idx_qty", ["qty"])),
            ("modify column", lambda: tidb.modify_column(TOUR_DB, "items", "qty", "bigint")),
            ("rename column", lambda: tidb.rename_column(TOUR_DB, "items", "note", "remark")),
            ("drop index", lambda: tidb.drop_index(TOUR_DB, "items", "idx_qty")),
            ("drop column", lambda: tidb.drop_column(TOUR_DB, "items", "remark")),
            ("rename table", lambda: tidb.rename_table(TOUR_DB, "items", "goods")),
            ("add partition", self._add_partition),
            ("truncate partition", lambda: tidb.truncate_partition(TOUR_DB, "ledger", "p0")),
            ("drop partition", lambda: tidb.drop_partition(TOUR_DB, "ledger", "p1")),
            ("truncate table", lambda: tidb.truncate_table(TOUR_DB, "goods")),
            ("drop table", lambda: tidb.drop_table(TOUR_SCRATCH_DB, "temp")),
            ("drop database", lambda: tidb.drop_database(TOUR_SCRATCH_DB)),
        ]
        self._index = 0

    @property
    def done(self) -> bool:
        return self._index >= len(self._steps)

    @property
    def kinds(self) -> list[str]:
        return [name for name, _ in self._steps]

    def step(self) -> str | None:
        """Run the next DDL, then a few DML transactions; the DDL's name, None when finished."""
        if self.done:
            return None
        name, run = self._steps[self._index]
        self._index += 1
        jobs = run()
        self.jobs.extend(jobs if isinstance(jobs, (list, tuple)) else [jobs])
        self.ran.append(name)
        self.dml()
        return name

    def _add_partition(self) -> Any:
        job = self.tidb.add_partition(TOUR_DB, "ledger", "p2", 3000)
        self.ledger_bound = 3000
        return job

    def _create_tables(self) -> list[Any]:
        tidb = self.tidb
        return [
            tidb.create_table(TOUR_DB, "items", [("id", "bigint"), ("name", "varchar(32)"), ("qty", "int")],
                              primary_key=["id"]),
            tidb.create_table(TOUR_DB, "ledger", [("id", "bigint"), ("amount", "decimal(10,2)")], primary_key=["id"],
                              partition={"type": "range", "column": "id", "bounds": [("p0", 1000), ("p1", 2000)]}),
            tidb.create_table(TOUR_SCRATCH_DB, "temp", [("k", "varchar(16)"), ("v", "double")]),
        ]

    def dml(self) -> None:
        """Insert, update and delete a little in every tour table that exists now."""
        tables = {(db, name): info for db, name, info in self.tidb.tables() if db in (TOUR_DB, TOUR_SCRATCH_DB)}
        for (db, name), info in sorted(tables.items()):
            with self.tidb.txn() as txn:
                for _ in range(3):
                    txn.upsert(db, name, self._row(name, info))
            self._delete_and_update(db, name, info)

    def _row(self, name: str, info: Any) -> dict:
        self.next_id += 1
        columns = {c.name for c in info.public_columns()}
        row: dict = {}
        if name == "ledger":
            row["id"] = self.rng.randrange(0, self.ledger_bound)
            row["amount"] = Decimal(self.rng.randint(1, 99_999)) / 100
            return row
        if "id" in columns:
            row["id"] = self.next_id
        for col, value in (("name", f"n{self.next_id}"), ("qty", self.rng.randint(0, 100)), ("note", "hello"),
                           ("k", f"k{self.next_id}"), ("v", self.rng.random())):
            if col in columns:
                row[col] = value
        return row

    def _delete_and_update(self, db: str, name: str, info: Any) -> None:
        """Delete one row and update another (tables keyed by `id`)."""
        rows = self.tidb.select_all(db, name)
        if len(rows) < 2 or "id" not in rows[0]:
            return
        gone, changed = self.rng.sample(rows, 2)
        columns = {c.name for c in info.public_columns()}
        with self.tidb.txn() as txn:
            txn.delete(db, name, {"id": gone["id"]})
            if "qty" in columns:
                txn.update(db, name, {"id": changed["id"]}, {"qty": self.rng.randint(0, 1000)})
            elif "amount" in columns:
                txn.update(db, name, {"id": changed["id"]}, {"amount": Decimal("1.25")})
