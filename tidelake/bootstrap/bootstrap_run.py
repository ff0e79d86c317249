"""`tidelake bootstrap`: replicas of the selected tables at one TSO, handed off to the changefeed.

Order of operations (docs/metadata.md#tidelakes-start-sequence): choose T, hold a service GC safepoint at T-1
for the whole run (refusing a T the upstream may already have collected), read the schema at T,
settle where the changefeed covers each table from (handoff.py), read every table at its ts
region range by region range, and write each replica with its rows and checkpoint in one commit
(replica_write.py). A rerun after a crash skips the replicas already written and redoes the
rest; nothing half-written ever carries a checkpoint.
Owner: `tidelake bootstrap` and the bootstrap job (tidelake.orchestration.job_entry).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from tidelake.bootstrap import handoff
from tidelake.bootstrap.progress import TableProgress
from tidelake.bootstrap.replica_rows import replica_ddl
from tidelake.bootstrap.replica_write import write_replica
from tidelake.bootstrap.snapshot_plan import TableRead, region_ranges, tables_to_bootstrap
from tidelake.bootstrap.snapshot_read import read_table
from tidelake.bootstrap.spark_snapshot import AccumulatorWatcher, table_frame
from tidelake.codec.schema import TableInfo
from tidelake.config import ChangefeedConfig
from tidelake.errors import InputError, TidelakeError
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.ddl_log import start_snapshot_ts
from tidelake.lake.lake_check import check_lake_root
from tidelake.lake.layout import LakeLayout
from tidelake.lake.lease import hold, replica_lease
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.schema_history import SchemaHistory
from tidelake.lake.table_starts import StartState, TableStart, TableStarts
from tidelake.spark.spark_session import get_session
from tidelake.table_names import table_key
from tidelake.upstream.gc_safepoint import GCSafepointKeeper
from tidelake.upstream.kv_snapshot import SnapshotReader
from tidelake.upstream.pd_client import PDClient
from tidelake.upstream.schema_snapshot import SchemaSnapshot, load_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# A shard that was stopped longer than the join lead misses the join ts it was given; ask again.
JOIN_ATTEMPTS = 3
# TiCDC's "creating" safepoint TTL: after bootstrap it keeps T readable this long for a puller
# that has not started yet (a running puller holds its own).
GC_TTL_S = 3600.0


class JoinTimeoutError(TidelakeError):
    """The puller did not take the table into the changefeed in time."""


@dataclass(frozen=True)
class BootstrapOptions:
    at_ts: int | None = None
    tables: tuple[str, ...] = ()
    spark_threshold_regions: int = 4  # tables with at least this many region ranges read in Spark
    spark_master: str | None = None
    progress_interval_s: float = 5.0
    join_timeout_s: float = 120.0


@dataclass(frozen=True)
class TableResult:
    name: str
    ts: int
    path: str
    how: str  # 'local' | 'spark' | 'skipped'
    rows: int = 0
    bytes: int = 0
    seconds: float = 0.0


class Bootstrap:
    def __init__(self, config: ChangefeedConfig, options: BootstrapOptions = BootstrapOptions(),
                 spark: SparkSession | None = None, out: TextIO | None = None) -> None:
        self.config = config
        self.options = options
        self._spark = spark
        self._out = out if out is not None else sys.stderr
        self.layout = LakeLayout.from_config(config.lake)

    def say(self, text: str) -> None:
        print(f"bootstrap {self.config.changefeed_id}: {text}", file=self._out, flush=True)

    def run(self) -> list[TableResult]:
        cfg = self.config
        check_lake_root(self.layout)  # before Spark and PD: a wrong root is one line, not a stack
        endpoints = cfg.upstream.endpoints("the bootstrap job")
        # Every replica is written through Spark, so start its JVM now: launching it later means
        # forking (with a preexec_fn) a process whose gRPC threads are busy, and that child has
        # died before exec ("Java gateway process exited before sending its port number").
        self._session()
        pd = PDClient(endpoints, cfg.upstream.tls, caller_id=f"tidelake-bootstrap-{cfg.changefeed_id}")
        keeper = GCSafepointKeeper(pd, f"tidelake-bootstrap-{cfg.changefeed_id}", GC_TTL_S)
        try:
            with SnapshotReader(pd, cfg.upstream.tls) as reader:
                return self._run(pd, reader, keeper)
        finally:
            keeper.stop()  # the safepoint outlives us for its TTL (see GC_TTL_S)
            pd.close()

    def _run(self, pd: PDClient, reader: SnapshotReader, keeper: GCSafepointKeeper) -> list[TableResult]:
        start = start_snapshot_ts(self.layout)
        ts = self._choose_ts(pd, start)
        keeper.ensure_not_below_gc(ts)
        keeper.start()
        snapshot = load_schema(reader, ts)
        wanted = tables_to_bootstrap(self._selectable(snapshot), list(self.options.tables))
        if start is None:
            handoff.claim_start(self.layout, self.config.changefeed_id, snapshot, self.config.filter.table_filter())
            self.say(f"changefeed starts at ts {ts}: the puller's first run feeds every table from there")
            start = ts
        results: list[TableResult] = []
        plans: list[TableRead] = []
        joining: list[tuple[str, str]] = []
        starts = TableStarts(self.layout)
        joined = {table_key(s.db, s.table): s for s in starts.latest(self.config.changefeed_id)
                  if s.state in (StartState.JOINED, StartState.DONE)}
        for db, info in wanted:
            path = self._replica_path(db.name, info)
            checkpoint = read_checkpoint(path, self.layout.storage_options)
            if checkpoint is not None:
                self.say(f"{db.name}.{info.name}: already a replica at checkpoint {checkpoint}; skipped")
                results.append(TableResult(f"{db.name}.{info.name}", checkpoint, path, "skipped"))
                continue
            pids = snapshot.physical_ids(info)
            join = joined.get(table_key(db.name, info.name))
            if join is not None and join.state == StartState.JOINED:
                joining.append((db.name, info.name))  # joined in a run that crashed: read at its J
            elif handoff.fed_by_changefeed(self.layout, start, info, pids):
                if join is not None and ts < join.start_ts:
                    raise InputError(f"--at-ts {ts} is before {db.name}.{info.name} joined the changefeed "
                                     f"at {join.start_ts}")
                plans.append(TableRead(db, info, tuple(pids), ts))
            else:
                joining.append((db.name, info.name))
        plans += self._join(pd, reader, keeper, joining)
        for plan in plans:
            results.append(self._bootstrap_table(pd, reader, plan))
            if (plan.db.name, plan.info.name) in joining:
                self._mark_done(starts, plan)
        return results

    def _choose_ts(self, pd: PDClient, start: int | None) -> int:
        now = pd.get_ts()
        at = self.options.at_ts
        if at is None:
            return now
        if at > now:
            raise InputError(f"--at-ts {at} is later than the upstream's current TSO {now}")
        if start is not None and at < start:
            raise InputError(f"--at-ts {at} is before the changefeed's start ts {start}: the changelog "
                             "does not cover what follows it")
        return at

    def _selectable(self, snapshot: SchemaSnapshot) -> SchemaSnapshot:
        """Named tables may be outside the changefeed's filter (they are being added to it);
        without names, the filter decides."""
        if self.options.tables:
            return snapshot
        keep = self.config.filter.table_filter()
        tables = {db.id: [t for t in snapshot.tables.get(db.id, []) if keep.should_replicate_table(db.name, t.name)]
                  for db in snapshot.dbs}
        return SchemaSnapshot(snapshot.ts, snapshot.schema_version, snapshot.dbs, tables, snapshot.in_flight)

    # --- tables joining a running changefeed (table_starts.py) ----------------------------

    def _join(self, pd: PDClient, reader: SnapshotReader, keeper: GCSafepointKeeper,
              names: list[tuple[str, str]]) -> list[TableRead]:
        if not names:
            return []
        starts = TableStarts(self.layout)
        cf = self.config.changefeed_id
        open_requests = {table_key(s.db, s.table): s for s in starts.latest(cf) if s.state not in (StartState.DONE, StartState.REFUSED, StartState.MISSED)}
        requests = []
        for db, table in names:
            request = open_requests.get(table_key(db, table)) or starts.request(cf, db, table)
            requests.append(request)
            self.say(f"{db}.{table}: asked the puller to add it to the changefeed (request {request.request_id})")
        joined = self._wait_joined(starts, requests)
        keeper.ensure_not_below_gc(min(s.start_ts for s in joined))
        plans = []
        for start in joined:
            snapshot = load_schema(reader, start.start_ts)
            (db, info), = tables_to_bootstrap(snapshot, [f"{start.db}.{start.table}"])
            self.say(f"{db.name}.{info.name}: the puller feeds it from ts {start.start_ts}; reading it there")
            plans.append(TableRead(db, info, tuple(snapshot.physical_ids(info)), start.start_ts))
        return plans

    def _wait_joined(self, starts: TableStarts, requests: list[TableStart]) -> list[TableStart]:
        deadline = time.monotonic() + self.options.join_timeout_s
        ids = {r.request_id for r in requests}
        asked = {table_key(r.db, r.table): 1 for r in requests}
        while True:
            latest = {s.request_id: s for s in starts.latest(self.config.changefeed_id) if s.request_id in ids}
            for missed in [s for s in latest.values() if s.state == StartState.MISSED]:
                key = table_key(missed.db, missed.table)
                if asked[key] >= JOIN_ATTEMPTS:
                    continue
                asked[key] += 1
                again = starts.request(self.config.changefeed_id, missed.db, missed.table)
                self.say(f"{missed.db}.{missed.table}: {missed.reason}; asking again (request {again.request_id})")
                ids = (ids - {missed.request_id}) | {again.request_id}
                del latest[missed.request_id]
            refused = [s for s in latest.values() if s.state in (StartState.REFUSED, StartState.MISSED)]
            if refused:
                raise InputError("; ".join(f"{s.db}.{s.table}: the puller refused it: {s.reason}" for s in refused))
            done = [s for s in latest.values() if s.state in (StartState.JOINED, StartState.DONE)]
            if len(done) == len(ids):
                return done
            if time.monotonic() > deadline:
                raise JoinTimeoutError(
                    f"the puller of changefeed {self.config.changefeed_id} did not add "
                    f"{', '.join(f'{s.db}.{s.table}' for s in requests)} within {self.options.join_timeout_s:.0f}s; "
                    "is it running? The request is kept: rerun bootstrap once the puller runs"
                )
            time.sleep(0.5)

    def _mark_done(self, starts: TableStarts, plan: TableRead) -> None:
        for s in starts.latest(self.config.changefeed_id):
            if s.state == StartState.JOINED and s.same_table(plan.db.name, plan.info.name):
                starts.mark(s, StartState.DONE)

    # --- reading and writing one table ----------------------------------------------------

    def _bootstrap_table(self, pd: PDClient, reader: SnapshotReader, plan: TableRead) -> TableResult:
        """Write one replica under its lease (LeaseHeld, one line, while another writer holds it);
        a replica another bootstrap wrote while this one waited for the lease is skipped."""
        key = self._table_key(plan.db.name, plan.info)
        with hold(self.layout, {key: (replica_lease(key), f"replica of {plan.name}")}) as leases:
            if key in leases.refused:
                raise leases.refused[key]
            path = self._replica_path(plan.db.name, plan.info)
            checkpoint = read_checkpoint(path, self.layout.storage_options)
            if checkpoint is not None:
                self.say(f"{plan.name}: written meanwhile by another writer, at checkpoint {checkpoint}; skipped")
                return TableResult(plan.name, checkpoint, path, "skipped")
            with leases.fencing(key):
                return self._snapshot_table(pd, reader, plan)

    def _snapshot_table(self, pd: PDClient, reader: SnapshotReader, plan: TableRead) -> TableResult:
        ranges = [r for pid in plan.physical_ids for r in region_ranges(pd, pid)]
        progress = TableProgress(plan.name, len(ranges), self.options.progress_interval_s, self._out)
        path = self._replica_path(plan.db.name, plan.info, plan.ts)
        spark = self._session()
        if len(ranges) >= self.options.spark_threshold_regions:
            read = table_frame(spark, list(self.config.upstream.pd), self.config.upstream.tls, plan.info, ranges,
                               plan.ts)
            with AccumulatorWatcher(read, progress):
                self._write(spark, path, plan, read.frame)
            how = "spark"
        else:
            rows = read_table(reader, plan.info, ranges, plan.ts, progress)
            progress.read_done()
            # The replica's own schema: Spark's Arrow inference reads timestamp[us] as TIMESTAMP, not _NTZ.
            self._write(spark, path, plan, spark.createDataFrame(rows, schema=replica_ddl(plan.info)))
            how = "local"
        progress.finish(f"replica written at checkpoint {plan.ts} ({how})")
        return TableResult(plan.name, plan.ts, path, how, progress.rows, progress.bytes, progress.elapsed_s)

    def _replica_path(self, db: str, info: TableInfo, ts: int | None = None) -> str:
        """The catalog's path for the table (merge finds the replica there); `ts` registers it."""
        key = self._table_key(db, info)
        catalog = ReplicaCatalog(self.layout)
        if ts is not None:
            return catalog.assign(key, db, info.name, ts).path
        entry = catalog.get(key)
        return entry.path if entry is not None else self.layout.replica_path(db, info.name)

    def _table_key(self, db: str, info: TableInfo) -> int:
        """The catalog's key of the table: its key in the DDL history, else its table id."""
        key = SchemaHistory.load(self.layout).find(db, info.name)
        return int(key) if key is not None else info.id

    def _write(self, spark: SparkSession, path: str, plan: TableRead, rows: DataFrame) -> None:
        write_replica(spark, path, plan.info, rows, plan.ts, self.layout.storage_options)

    def _session(self) -> SparkSession:
        if self._spark is None:
            self._spark = get_session("tidelake-bootstrap", master=self.options.spark_master, lake=self.layout)
        return self._spark
