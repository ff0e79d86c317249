"""`tidelake demo`: the whole path on the embedded default, then proof that it worked.

One process runs: the simulated cluster (PD + 3 TiKV stores over loopback gRPC) with its TiDB
front; a seeded DML workload on tables of every handle kind and column type; a scripted DDL tour
that runs every DDL kind the merge supports once, interleaved with DML on the touched tables;
light faults (region splits, leader transfers, an EventFeed stream reset, server-busy bursts);
the puller (PullerRunner on a thread, from a changefeed.toml written to the workdir, so the same
file works with `tidelake pull --config`); merge cycles with local Spark while traffic runs; then
a final merge of every table up to one TSO taken after traffic stopped, `verify` at that TSO, and
a per-table summary. The components talk over the same gRPC protocols as in production.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidelake.codec.keys import record_key, to_region_key
from tidelake.config import ChangefeedConfig, load_config
from tidelake.errors import InputError, TidelakeError
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import Watermarks, read_watermarks

if TYPE_CHECKING:
    from rich.console import Console

    from tidelake.sim.cluster import SimCluster
    from tidelake.lake.status import StatusReport
    from tidelake.apply.verify import VerifyReport

WORKLOAD_DB = "demo"
TOUR_DB = "tour"
TOUR_SCRATCH_DB = "tour_scratch"
CHANGEFEED_ID = "demo"


# --- changefeed config ----------------------------------------------------------------------


DEMO_RULES = (f"{WORKLOAD_DB}.*", f"{TOUR_DB}.*", f"{TOUR_SCRATCH_DB}.*")


def changefeed_toml(pd_address: str, lake_root: Path, flush_interval: str = "300ms",
                    rules: tuple[str, ...] = DEMO_RULES) -> str:
    """A changefeed.toml for the demo cluster (loadable by tidelake.config and `tidelake pull`)."""
    quoted = ", ".join(f'"{rule}"' for rule in rules)
    return (
        "# Written by `tidelake demo`; run the puller on it with `tidelake pull --config <this file>`.\n"
        f'[changefeed]\nid = "{CHANGEFEED_ID}"\n\n'
        f'[upstream]\npd = ["{pd_address}"]\ngc_ttl = "1h"\n\n'
        f"[filter]\nrules = [{quoted}]\n\n"
        f'[lake]\nroot = "{lake_root}"\n\n'
        f'[puller]\nflush_interval = "{flush_interval}"\n'
    )


def write_changefeed(path: Path, pd_address: str, lake_root: Path, rules: tuple[str, ...] = DEMO_RULES
                     ) -> ChangefeedConfig:
    path.write_text(changefeed_toml(pd_address, lake_root, rules=rules))
    return load_config(path)


# --- puller on a thread -----------------------------------------------------------------------


class PullerThread:
    """PullerRunner on a daemon thread; `error` holds what ended it early, `check()` re-raises it."""

    def __init__(self, config: ChangefeedConfig) -> None:
        from tidelake.capture.changefeed.runner import PullerRunner, RunOptions, Shard

        self.runner = PullerRunner(config, Shard(), RunOptions(progress_interval_s=3600, gc_advance_interval_s=1.0))
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="tidelake-puller", daemon=True)

    def _run(self) -> None:
        try:
            self.runner.run()
        except BaseException as exc:  # handed to the orchestrating thread by check()
            self.error = exc

    def start(self) -> PullerThread:
        self._thread.start()
        return self

    def check(self) -> None:
        if self.error is not None:
            raise self.error
        if not self._thread.is_alive():
            raise TidelakeError("the puller stopped unexpectedly")

    def stop(self, timeout_s: float = 60.0) -> None:
        self.runner.stop()
        self._thread.join(timeout_s)

    def __enter__(self) -> PullerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for_watermarks(
    layout: LakeLayout,
    ts: int,
    physical_ids: list[int],
    timeout_s: float = 120.0,
    check: Callable[[], None] = lambda: None,
) -> Watermarks:
    """Block until the DDL watermark and every listed physical table's watermark reach `ts`."""
    deadline = time.monotonic() + timeout_s
    while True:
        check()
        marks = read_watermarks(layout)
        lagging = [p for p in physical_ids if marks.table_resolved.get(p, 0) < ts]
        if marks.ddl_resolved >= ts and not lagging:
            return marks
        if time.monotonic() > deadline:
            raise TidelakeError(
                f"watermarks did not reach {ts} within {timeout_s:.0f}s (DDL at {marks.ddl_resolved}, "
                f"lagging physical tables {lagging[:5]})"
            )
        time.sleep(0.2)


def replicated_physical_ids(tidb: Any, rules: tuple[str, ...] = DEMO_RULES) -> list[int]:
    """Physical ids of the live tables a changefeed with `rules` replicates."""
    from tidelake.table_filter import TableFilter

    selected = TableFilter.parse(rules)
    return [pid for db, name, info in tidb.tables() if selected.should_replicate_table(db, name)
            for pid in info.physical_ids()]


# --- the scripted DDL tour ----------------------------------------------------------------------


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
                columns = {c.name for c in info.public_columns()}
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


# --- light faults -------------------------------------------------------------------------------


class LightFaults:
    """One fault every `interval_s`: region splits, leader transfers and short server-is-busy bursts
    in turn, plus one reset of a store's EventFeed streams. Seeded, so a demo run is reproducible."""

    KINDS = ("split", "leader transfer", "stream reset", "busy burst")

    def __init__(self, cluster: SimCluster, physical_ids: Callable[[], list[int]], seed: int,
                 interval_s: float = 3.0) -> None:
        self.cluster = cluster
        self.physical_ids = physical_ids
        self.rng = random.Random(seed)
        self.interval_s = interval_s
        self.injected: dict[str, int] = {k: 0 for k in self.KINDS}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="demo-faults", daemon=True)

    def start(self) -> LightFaults:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.cluster.faults.clear()

    def _loop(self) -> None:
        # One stream reset (the third fault): each makes the puller re-scan every region of that
        # store incrementally, so repeating it would turn "light" into a catch-up loop.
        recurring = [k for k in self.KINDS if k != "stream reset"]
        n = 0
        while not self._stop.wait(self.interval_s):
            kind = "stream reset" if n == 2 else recurring[n % len(recurring)]
            n += 1
            if self.inject(kind):
                self.injected[kind] += 1

    def inject(self, kind: str) -> bool:
        """Inject one fault of `kind`; False when there was no table region to inject it into."""
        cluster, rng = self.cluster, self.rng
        stores = sorted(cluster.store_addresses)
        if kind in ("split", "leader transfer"):
            ids = self.physical_ids()
            if not ids:
                return False
            key = to_region_key(record_key(rng.choice(ids), rng.randint(1, 2000)))
            region = cluster.regions.locate(key)
            if kind == "split":
                if region.start_key == key:
                    return False
                cluster.split_region(region.id, key)
            else:
                others = [s for s in region.store_ids() if s != region.leader_store_id]
                if not others:
                    return False
                cluster.transfer_leader(region.id, rng.choice(others))
        elif kind == "stream reset":
            cluster.faults.reset_streams(rng.choice(stores))
        else:
            cluster.faults.make_busy(rng.choice(stores), 300)
        return True


# --- the demo run ---------------------------------------------------------------------------------


@dataclass
class DemoOptions:
    workdir: Path | None = None
    duration_s: float = 40.0
    seed: int = 1
    keep: bool = False
    workload_rate: float = 5.0
    spark_master: str = "local[2]"


@dataclass
class DemoResult:
    workdir: Path
    final_ts: int
    verify: VerifyReport
    status: StatusReport
    merge_cycles: int
    ddl_kinds: list[str]
    faults: dict[str, int]
    workload: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.verify.ok


def run_demo(options: DemoOptions, console: Console) -> DemoResult:
    """Run the demo; the caller prints `summary_table(result)` and exits non-zero unless ok."""
    if options.duration_s <= 0:
        raise InputError(f"--duration must be above zero, got {options.duration_s}")
    made = options.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="tidelake-demo-")) if made else options.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    if (workdir / "lake").exists():
        raise InputError(f"{workdir / 'lake'} already exists: give an empty --workdir (the demo starts a new cluster)")
    try:
        return _run(options, workdir, console)
    finally:
        if not options.keep and made:
            shutil.rmtree(workdir, ignore_errors=True)
        elif not options.keep:  # a folder the user gave: remove only what the demo put there
            shutil.rmtree(workdir / "lake", ignore_errors=True)
            for name in ("changefeed.toml", "cluster.json"):
                (workdir / name).unlink(missing_ok=True)


def _run(options: DemoOptions, workdir: Path, console: Console) -> DemoResult:
    from tidelake.sim.cluster import SimCluster
    from tidelake.sim.tidb.session import SimTiDB
    from tidelake.sim.workload import WorkloadRunner
    from tidelake.apply.merge_job import run_merge
    from tidelake.lake.status import collect_status

    lake = workdir / "lake"
    layout = LakeLayout(str(lake))
    say = lambda text: console.print(f"[bold cyan]demo[/] {text}")  # noqa: E731
    # Spark first, before any gRPC thread runs: pyspark forks its JVM with a preexec_fn, which is
    # unsafe in a busy multi-threaded process ("Java gateway process exited" under load).
    say("starting Spark (the first run downloads the Delta jars)")
    spark = _spark(options.spark_master)
    with SimCluster(n_stores=3, seed=options.seed) as cluster:
        cluster.write_info(workdir / "cluster.json")
        say(f"simulated cluster up: PD {cluster.pd_address}, stores {sorted(cluster.store_addresses.values())}")
        tidb = SimTiDB(cluster)
        workload = WorkloadRunner(tidb, "smoke", seed=options.seed, rate=options.workload_rate, database=WORKLOAD_DB)
        config = write_changefeed(workdir / "changefeed.toml", cluster.pd_address, lake)
        say(f"changefeed config: {workdir / 'changefeed.toml'}")
        tour = DdlTour(tidb, options.seed)
        faults = LightFaults(cluster, lambda: replicated_physical_ids(tidb), options.seed)
        with PullerThread(config) as puller:
            wait_for_watermarks(layout, 1, [], 60, puller.check)
            # Tables are created after the changefeed start, so every replica starts at its CREATE
            # (tables that exist before the start are bootstrapped instead: `tidelake bootstrap`).
            workload.run_ops(8)  # the workload's schema (every handle kind, every column type) and first rows
            say("puller running; workload, DDL tour and faults start")
            workload.start()
            faults.start()
            try:
                cycles = _traffic_and_merges(options, spark, tour, layout, puller, say)
            finally:
                workload.stop()
                faults.stop()
            final_ts = cluster.tso.next()
            say(f"traffic stopped; final ts {final_ts}: waiting for the watermarks")
            wait_for_watermarks(layout, final_ts, replicated_physical_ids(tidb), 120, puller.check)
        report = run_merge(spark, layout, until_ts=final_ts)
        cycles += 1
        say(f"final merge up to {final_ts}: {sum(t.rows_in for t in report.tables)} changes")
        verify_report = _verify(spark, layout, cluster, console)
        from tidelake.upstream.pd_client import PDClient

        pd = PDClient([cluster.pd_address], caller_id="tidelake-demo")
        try:
            status = collect_status(layout, pd.get_ts())
        finally:
            pd.close()
    return DemoResult(workdir, final_ts, verify_report, status, cycles, tour.ran, dict(faults.injected),
                      workload.counters.snapshot())


def _traffic_and_merges(options: DemoOptions, spark: Any, tour: DdlTour, layout: LakeLayout, puller: PullerThread,
                        say: Callable[[str], None]) -> int:
    """Merge cycles while traffic runs, the DDL tour spread over the duration; the cycle count."""
    from tidelake.apply.merge_job import run_merge

    cycles = 0
    deadline = time.monotonic() + options.duration_s
    step_every = options.duration_s / (len(tour.kinds) + 1)
    next_step = time.monotonic()
    while time.monotonic() < deadline or not tour.done:
        puller.check()
        while not tour.done and time.monotonic() >= next_step:
            say(f"DDL: {tour.step()}")
            next_step += step_every
        report = run_merge(spark, layout)
        cycles += 1
        merged = sum(t.rows_in for t in report.tables)
        ddls = sum(t.ddls_applied for t in report.tables)
        say(f"merge cycle {cycles}: {len(report.tables)} tables, {merged} changes, {ddls} DDLs applied"
            + (f", {len(report.failed)} failed" if report.failed else ""))
    return cycles


def _spark(master: str) -> Any:
    from tidelake.apply.session import get_session

    # The demo prints its own progress; Spark's console progress bars would interleave with it.
    session = get_session("tidelake-demo", master=master, extra_confs={"spark.ui.showConsoleProgress": "false"})
    session.sparkContext.setLogLevel("ERROR")
    return session


def _verify(spark: Any, layout: LakeLayout, cluster: SimCluster, console: Console) -> VerifyReport:
    from tidelake.upstream.kv_snapshot import SnapshotReader
    from tidelake.upstream.pd_client import PDClient
    from tidelake.apply.verify import Verifier

    pd = PDClient([cluster.pd_address], caller_id="tidelake-demo-verify")
    try:
        with SnapshotReader(pd) as reader:
            return Verifier(spark, layout, reader,
                            progress=lambda t, phase, n: console.print(f"[bold cyan]demo[/] verify {t}: {phase} {n} rows")
                            ).run()
    finally:
        pd.close()


def summary_table(result: DemoResult) -> Any:
    """Per table: rows, checkpoint, lag, verified ✓/✗ (rich Table)."""
    from rich.table import Table

    from tidelake.lake.status import utc_text
    from tidelake.apply.verify import MATCH, SKIPPED

    lag = {t.table: t.lag_seconds for t in result.status.tables}
    table = Table(title=f"tidelake demo — {result.merge_cycles} merge cycles, final ts {result.final_ts}")
    for header in ("table", "rows", "checkpoint (UTC)", "lag", "verified"):
        table.add_column(header, justify="right" if header in ("rows", "lag") else "left")
    for v in result.verify.tables:
        mark = {MATCH: "[green]✓[/]", SKIPPED: f"[dim]– {v.note}[/]"}.get(v.status, f"[red]✗ {v.note or v.status}[/]")
        seconds = lag.get(v.table)
        table.add_row(v.table, str(v.replica_rows) if v.status != SKIPPED else "-", utc_text(v.checkpoint) or "-",
                      "-" if seconds is None else f"{seconds:.1f}s", mark)
    return table
