"""A lake fed the way the puller feeds it, and the upstream state to check replicas against.

DDL rows come from TiDB-shaped jobs run through the puller's own SchemaTracker/job_rows
(tests/lake/ddl_jobs.py); row values are encoded by the codec exactly as TiDB writes them
(encode_row, record_key); everything lands through the real Lander (changelog, ddl, watermarks).
`expected_rows` replays every committed change in commit order into a key -> value map (the
MVCC view of the upstream) and decodes what is left: an oracle independent of merge's collapse.
"""

from __future__ import annotations

import itertools
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

from lake.ddl_jobs import DdlFeed, Upstream

from tidelake import tso
from tidelake.capture.landing.lander import Lander
from tidelake.codec.keys import decode_record_key, record_key
from tidelake.codec.row import decode_row, encode_row, row_handle
from tidelake.codec.schema import TableInfo
from tidelake.codec.spark_types import spark_value
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.row_change import OP_DELETE, OP_PUT, RowChange
from tidelake.merge.merge_run import run_merge
from tidelake.merge.replica_schema import COMMIT_TS_COLUMN, PARTITION_ID_COLUMN, ROWID_COLUMN, is_partitioned


class Txn:
    """One upstream transaction: every change gets the same commit ts."""

    def __init__(self, lake: FedLake, commit_ts: int) -> None:
        self.lake = lake
        self.commit_ts = commit_ts
        self.changes: list[RowChange] = []

    def _key(self, info: TableInfo, row: dict[str, Any], rowid: int | None) -> bytes:
        handle = row_handle(info, row) if rowid is None else rowid
        pid = info.physical_ids()[row["id"] % len(info.physical_ids())] if is_partitioned(info) else info.id
        return record_key(pid, handle)

    def put(self, db: str, name: str, row: dict[str, Any], rowid: int | None = None,
            written_with: TableInfo | None = None) -> None:
        """`written_with`: the schema the writer used (an older one, for a txn that began before a DDL)."""
        info = written_with or self.lake.up.table(db, name)
        key = self._key(info, row, rowid)
        self._add(key, OP_PUT, encode_row(info, row))

    def delete(self, db: str, name: str, row: dict[str, Any], rowid: int | None = None) -> None:
        info = self.lake.up.table(db, name)
        self._add(self._key(info, row, rowid), OP_DELETE, b"")

    def _add(self, key: bytes, op: str, value: bytes) -> None:
        table_id, _ = decode_record_key(key)
        old = self.lake.state.get(key, b"")
        self.changes.append(RowChange(table_id, self.commit_ts, self.commit_ts - 1, op, key, value, old, 1))


class FedLake:
    def __init__(self, root: str) -> None:
        self.layout = LakeLayout(root)
        self.up = Upstream()
        self.feed = DdlFeed(self.up)
        self.lander = Lander(self.layout, "cf-merge-test", flush_interval_s=3600)
        self.committed: list[RowChange] = []
        self.state: dict[bytes, bytes] = {}
        self.rowids = itertools.count(1)
        self._landed_ddl = 0
        self.lander.add_ddl(self.feed.rows)
        self._landed_ddl = len(self.feed.rows)

    def ddl(self, job) -> int:
        """Run a DDL job upstream and hand its rows to the lander; returns its commit ts."""
        self.feed.run(job)
        self.lander.add_ddl(self.feed.rows[self._landed_ddl :])
        self._landed_ddl = len(self.feed.rows)
        return job.finished_ts

    @contextmanager
    def txn(self, commit_ts: int | None = None):
        """One upstream txn at the next ts, or at `commit_ts` (async commit/1PC can share a ts)."""
        t = Txn(self, commit_ts if commit_ts is not None else self.up.tick())
        yield t
        for change in t.changes:
            self.state[change.key] = change.value
            if change.op == OP_DELETE:
                del self.state[change.key]
        self.committed += t.changes
        self.lander.add_rows(t.changes)

    def reland(self, changes: list[RowChange]) -> None:
        """Land changes again in a later flush, as a crash-replayed puller does (invariant 5)."""
        self.lander.flush()
        self.lander.add_rows(changes)

    def resolve(self, ts: int | None = None) -> int:
        """Every table's physical ids and the DDL puller resolved at `ts` (default: now); flush."""
        ts = ts if ts is not None else self.up.tick()
        for _, info in self.up.tables.values():
            for pid in info.physical_ids():
                self.lander.resolve(pid, ts)
        self.lander.resolve_ddl(ts)
        self.lander.flush()
        return ts

    def close(self) -> None:
        self.lander.close()

    def expected_rows(self, db: str, name: str, at_ts: int) -> list[dict[str, Any]]:
        """Upstream `db`.`name` as of `at_ts`, in replica columns, from replaying the commits."""
        info = self.up.table(db, name)
        pids = set(info.physical_ids())
        latest: dict[bytes, RowChange] = {}
        for change in sorted(self.committed, key=lambda c: c.commit_ts):
            if change.commit_ts <= at_ts and change.table_id in pids:
                latest[change.key] = change
        rows = []
        for key, change in latest.items():
            if change.op == OP_DELETE:
                continue
            table_id, handle = decode_record_key(key)
            values = decode_row(change.value, info, handle)
            row = {c.name: spark_value(values.get(c.name), c.field_type) for c in info.public_columns()}
            row[COMMIT_TS_COLUMN] = change.commit_ts
            if ROWID_COLUMN in values:
                row[ROWID_COLUMN] = values[ROWID_COLUMN]
            if is_partitioned(info):
                row[PARTITION_ID_COLUMN] = table_id
            rows.append(row)
        return sorted_rows(rows)


def sorted_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: sorted((k, repr(v)) for k, v in r.items()))


def replica_rows(spark, path: str) -> list[dict[str, Any]]:
    return sorted_rows([r.asDict() for r in spark.read.format("delta").load(path).collect()])


NOTE_COLUMNS = [("id", "bigint", "pk"), ("note", "varchar(20)")]


def shop_lake(root: str, tables: tuple[str, ...] = ("orders", "items")) -> FedLake:
    """A fed lake whose upstream clock starts 5 minutes ago, with schema `shop` and `tables` of
    NOTE_COLUMNS created (no row yet)."""
    lake = FedLake(root)
    lake.up.ts = tso.from_datetime(datetime.now(timezone.utc) - timedelta(minutes=5))
    lake.ddl(lake.up.create_schema("shop"))
    for name in tables:
        lake.ddl(lake.up.create_table("shop", name, NOTE_COLUMNS))
    return lake


def put(lake: FedLake, table: str, ids: range, note: str) -> None:
    """One transaction writing rows `ids` of `shop.table`, each noted `{note}{id}`."""
    with lake.txn() as t:
        for i in ids:
            t.put("shop", table, {"id": i, "note": f"{note}{i}"})


def path_of(lake: FedLake, table: str) -> str:
    """The replica folder of `shop.table`."""
    return ReplicaCatalog(lake.layout).find("shop", table).path


def recent_change_lake(root: str) -> tuple[FedLake, int]:
    """A lake of `shop.orders` created two minutes ago, its replica merged a minute ago, and one
    change committed 10 s ago, landed and resolved (not merged); and that change's commit ts."""
    lake = FedLake(root)
    now_ms = int(time.time() * 1000)
    lake.up.ts = tso.compose(now_ms - 120_000)
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk")]))
    lake.resolve(tso.compose(now_ms - 60_000))
    run_merge(None, lake.layout, write_log=False)
    commit_ts = tso.compose(now_ms - 10_000)
    with lake.txn(commit_ts) as t:
        t.put("shop", "orders", {"id": 1})
    lake.resolve(tso.compose(now_ms - 5_000))
    return lake, commit_ts


def by_driver(commit: dict) -> bool:
    """Whether a replica commit (DeltaTable.history()) was the driver's, delta-rs' or the window
    rewrite's own (tidelake.merge.writers.file_rewrite), not Spark's."""
    return not str(commit.get("engineInfo", "")).startswith("Apache-Spark")


def by_rewrite(commit: dict) -> bool:
    """Whether a replica commit was the window rewrite's own (tidelake.merge.writers.file_rewrite),
    not a delta-rs MERGE or append, nor Spark's."""
    return str(commit.get("engineInfo", "")).startswith("tidelake/")
