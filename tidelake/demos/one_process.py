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

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.config import load_config
from tidelake.config_writer import changefeed_document, write_config
from tidelake.errors import InputError
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import read_watermarks
from tidelake.merge.merge_run import run_merge
from tidelake.sim.cluster import SimCluster
from tidelake.sim.ddl_tour import TOUR_DB, TOUR_SCRATCH_DB, DdlTour
from tidelake.sim.faults import FaultInjector
from tidelake.sim.tidb.session import SimTiDB
from tidelake.sim.workload import WorkloadRunner
from tidelake.spark.spark_session import get_session
from tidelake.status.status_report import collect_status
from tidelake.table_filter import TableFilter
from tidelake.upstream.kv_snapshot import SnapshotReader
from tidelake.upstream.pd_client import PDClient
from tidelake.verify.verifier import Verifier
from tidelake.wait import wait_until

if TYPE_CHECKING:
    from rich.console import Console

    from tidelake.status.status_report import StatusReport
    from tidelake.verify.verifier import VerifyReport

WORKLOAD_DB = "demo"
CHANGEFEED_ID = "demo"
DEMO_RULES = (f"{WORKLOAD_DB}.*", f"{TOUR_DB}.*", f"{TOUR_SCRATCH_DB}.*")


def write_demo_changefeed(path: Path, pd_address: str, lake_root: Path) -> Path:
    """The demo's changefeed.toml in the workdir: the same file works with `tidelake pull --config`."""
    doc = changefeed_document(CHANGEFEED_ID, [pd_address], lake_root, rules=DEMO_RULES, gc_ttl="1h",
                              puller={"flush_interval": "300ms"})
    return write_config(path, doc, "Written by `tidelake demo`; run the puller on it with `tidelake pull --config <this file>`.")


def wait_for_watermarks(layout: LakeLayout, ts: int, physical_ids: list[int], puller: PullerThread,
                        timeout_s: float = 120.0) -> None:
    """Until the DDL watermark and every listed physical table's watermark reach `ts`."""
    wait_until(lambda: read_watermarks(layout).reached(ts, physical_ids), timeout_s, f"watermarks at {ts}",
               check=puller.check, interval_s=0.2,
               waiting=lambda: f"lagging physical tables {read_watermarks(layout).lagging(ts, physical_ids)[:5]}")


@dataclass
class OneProcessOptions:
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


def run_demo(options: OneProcessOptions, console: Console) -> DemoResult:
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


def _run(options: OneProcessOptions, workdir: Path, console: Console) -> DemoResult:
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
        config = load_config(write_demo_changefeed(workdir / "changefeed.toml", cluster.pd_address, lake))
        say(f"changefeed config: {workdir / 'changefeed.toml'}")
        tour = DdlTour(tidb, options.seed)
        faults = FaultInjector(cluster, "tour", options.seed)
        replicated = TableFilter.parse(DEMO_RULES)
        with PullerThread(config, progress_interval_s=3600, gc_advance_interval_s=1.0) as puller:
            wait_for_watermarks(layout, 1, [], puller, 60)
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
            wait_for_watermarks(layout, final_ts, tidb.physical_ids(replicated), puller)
        report = run_merge(spark, layout, until_ts=final_ts)
        cycles += 1
        say(f"final merge up to {final_ts}: {sum(t.rows_in for t in report.tables)} changes")
        verify_report = _verify(spark, layout, cluster, console)
        pd = PDClient([cluster.pd_address], caller_id="tidelake-demo")
        try:
            status = collect_status(layout, pd.get_ts(), exact=True)
        finally:
            pd.close()
    return DemoResult(workdir, final_ts, verify_report, status, cycles, tour.ran, dict(faults.applied),
                      workload.counters.snapshot())


def _traffic_and_merges(options: OneProcessOptions, spark: Any, tour: DdlTour, layout: LakeLayout, puller: PullerThread,
                        say: Callable[[str], None]) -> int:
    """Merge cycles while traffic runs, the DDL tour spread over the duration; the cycle count."""
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
    # The demo prints its own progress; Spark's console progress bars would interleave with it.
    session = get_session("tidelake-demo", master=master, extra_confs={"spark.ui.showConsoleProgress": "false"})
    session.sparkContext.setLogLevel("ERROR")
    return session


def _verify(spark: Any, layout: LakeLayout, cluster: SimCluster, console: Console) -> VerifyReport:
    pd = PDClient([cluster.pd_address], caller_id="tidelake-demo-verify")
    try:
        with SnapshotReader(pd) as reader:
            return Verifier(spark, layout, reader,
                            progress=lambda t, phase, n: console.print(f"[bold cyan]demo[/] verify {t}: {phase} {n} rows")
                            ).run()
    finally:
        pd.close()
