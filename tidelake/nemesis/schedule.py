"""One nemesis schedule: the simulator with a workload, the real puller, the plan's faults, then
the landing check.

Timeline: the cluster starts and the puller lands its first flush; the workload's schema and
first rows are written (so every table joins the feed at its CREATE and all of its rows are
changes the changelog must hold); traffic runs for the plan's duration while its faults strike
at their offsets; then traffic and faults stop (every temporary fault undone), the puller runs
until its watermarks pass a TSO taken after the last write, and stops. A crashed puller is
replaced at once by a new one on the same lake, which resumes from the durable watermarks.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidelake.config import parse_duration
from tidelake.config_writer import changefeed_document, config_from_document, write_config
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import read_watermarks
from tidelake.nemesis.apply_check import BankTable, check_replicas
from tidelake.nemesis.landing_check import Anomaly, BankSpec, check_landing, record_span
from tidelake.nemesis.merge_cycles import MergeCycles, merge_cycles
from tidelake.nemesis.mixed_check import check_mixed_replicas
from tidelake.nemesis.plan import (
    LAKE_WRITE_ERROR,
    MERGE_CRASH,
    MERGE_WRITE_ERROR,
    PULLER_CRASH,
    SchedulePlan,
    draw_plan,
)
from tidelake.nemesis.puller_crash import ThreadPullers
from tidelake.nemesis.puller_processes import ProcessPullers
from tidelake.sim.cluster import SimCluster
from tidelake.sim.faults import FaultInjector, FaultProfile
from tidelake.sim.tidb.session import SimTiDB
from tidelake.sim.workload import BANK_TABLES, WorkloadPreset, WorkloadRunner, bank_total, get_preset
from tidelake.table_filter import TableFilter
from tidelake.wait import wait_until

log = logging.getLogger(__name__)

DATABASE = "nemesis"
RULES = (f"{DATABASE}*.*",)
# A DDL job's steps this far apart (SimTiDB.step_pause_s), so a puller crash can come while the
# meta is mid-way, as TiDB's schema-version waits leave it (docs/internals.md#running_jobs).
DDL_STEP_PAUSE_S = 0.05  # the workload's database and the scratch ones the mixed workload makes
# Setup statements: the database, its tables, and for the bank the txn funding every account.
SETUP_OPS = {"bank": 1 + len(BANK_TABLES) + 1, "mixed": 10}
# Temporary faults short enough to end inside a schedule of a few seconds.
PROFILE = FaultProfile("nemesis", "faults applied one by one by the nemesis", 0.0, (), busy_ms=300, slow_ms=100,
                       window_s=1.0, store_down_s=1.0, pd_down_s=1.0)
FLUSH_INTERVAL = "200ms"


@dataclass
class ScheduleResult:
    plan: SchedulePlan
    faults: Counter[str] = field(default_factory=Counter)  # faults that struck
    # armed but not struck as planned: a lake write error whose point no flush passed while it
    # lasted; a crash at a flush point no flush passed in time (it struck between flushes instead)
    missed: Counter[str] = field(default_factory=Counter)
    anomalies: list[Anomaly] = field(default_factory=list)
    watermarks_checked: int = 0
    totals_checked: int = 0
    copies_checked: int = 0  # rows a DDL rewrote, landed at its finished ts (landing_check)
    removed_checked: int = 0  # physical ids a DDL removed, complete up to it (landing_check)
    txns: int = 0
    checkpoints_checked: int = 0  # apply level
    syncpoints_checked: int = 0
    merge_crashes: Counter[str] = field(default_factory=Counter)  # apply level: struck, by failpoint
    merge_write_errors: Counter[str] = field(default_factory=Counter)  # apply level: struck, by failpoint
    puller_kills: Counter[str] = field(default_factory=Counter)  # process mode: real SIGKILLs by where they struck
    skipped: Counter[str] = field(default_factory=Counter)  # process mode: lake write errors not applied
    maintained: bool = False  # apply level: maintenance ran between the syncpoint and the final merge
    values_checked: int = 0  # apply level, mixed: replica column values compared with the upstream
    unchecked: Counter[str] = field(default_factory=Counter)  # apply level, mixed: not compared, by reason
    ddls: Counter[str] = field(default_factory=Counter)  # DDL the workload issued (setup included), by kind
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.anomalies

    def anomalies_by_kind(self) -> dict[str, int]:
        return dict(sorted(Counter(a.kind for a in self.anomalies).items()))


def workload_preset(name: str) -> WorkloadPreset:
    """The preset at a short schedule's scale: the mixed one's DDL and long txns come every few
    seconds instead of every few minutes, and its setup makes the scratch tables the rarer DDL kinds
    need, so a schedule meets them."""
    preset = get_preset(name)
    if name == "mixed":
        return dataclasses.replace(preset, rate=30.0, txn_sizes=((60, 1), (30, 10), (10, 50)), ddl_every=15,
                                   long_txn_every=40, long_txn_hold_s=1.0, scratch_setup=True)
    return preset


def run_schedule(seed: int, workload: str = "bank", duration_s: float = 3.0, settle_timeout_s: float = 60.0,
                 workdir: Path | None = None, spark: Any = None, pullers: str = "thread",
                 shards: int = 1) -> ScheduleResult:
    """Run the schedule of `seed` and check what landed; with a Spark session, merge it (crashing
    the merge as the apply-level plan says) and check the replicas and syncpoints too.
    `pullers="process"` runs the changefeed as `shards` `tidelake pull` processes and its crashes
    as real SIGKILLs. The lake is removed unless `workdir` is given."""
    plan = draw_plan(seed, workload, duration_s, "apply" if spark is not None else "landing")
    root = workdir or Path(tempfile.mkdtemp(prefix=f"tidelake-nemesis-{seed}-"))
    started = time.monotonic()
    try:
        result = _run(plan, root, settle_timeout_s, spark, pullers, shards)
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    result.seconds = time.monotonic() - started
    return result


def _run(plan: SchedulePlan, root: Path, settle_timeout_s: float, spark: Any, mode: str, shards: int) -> ScheduleResult:
    result = ScheduleResult(plan)
    lake = root / "lake"
    cluster = SimCluster(n_stores=3, seed=plan.seed, leader_failover_delay_s=0.2, split_check_interval_s=0,
                         gc_interval_s=0, server_workers=8, cdc_options={"min_ts_interval_s": 0.2})
    with cluster:
        tidb = SimTiDB(cluster)
        preset = workload_preset(plan.workload)
        workload = WorkloadRunner(tidb, preset, seed=plan.seed, database=DATABASE)
        doc = changefeed_document("nemesis", [cluster.pd_address], lake, rules=RULES, gc_ttl="10m",
                                  puller={"flush_interval": FLUSH_INTERVAL, "shards": shards})
        layout = LakeLayout(str(lake))
        injector = FaultInjector(cluster, PROFILE, plan.seed)
        pullers = _pullers(mode, plan, doc, root, result).start()
        try:
            wait_until(lambda: pullers.ready(layout), 60, "the pullers' first flush", check=pullers.check)
            workload.run_ops(SETUP_OPS[plan.workload])
            tidb.step_pause_s = DDL_STEP_PAUSE_S
            funded_ts = cluster.tso.next()
            workload.start()
            try:
                _strike(plan, injector, pullers)
            finally:
                workload.stop()
                injector.stop()
                pullers.end_faults()
            result.faults.update(injector.applied)
            result.txns, result.ddls = workload.counters.txns, Counter(workload.counters.ddl_kinds)
            final_ts = _settle(cluster, tidb, layout, pullers, settle_timeout_s, result)
        finally:
            pullers.stop()
        result.faults, result.missed = +result.faults, +result.missed  # no zero counts
        result.puller_kills, result.skipped = pullers.kills, pullers.skipped
        bank = _bank_spec(cluster, tidb, preset, funded_ts) if plan.workload == "bank" else None
        rules = TableFilter.parse(RULES)
        removed = [(pid, ts) for db, table, pid, ts in workload.removed_ids if rules.should_replicate_table(db, table)]
        report = check_landing(str(lake), cluster.mvcc, bank, removed)
        result.anomalies.extend(report.anomalies)
        result.watermarks_checked, result.totals_checked = report.watermarks, report.totals
        result.copies_checked, result.removed_checked = report.copies, report.removed
        if spark is None:
            return result
        merged = merge_cycles(spark, str(lake), (funded_ts + final_ts) // 2, final_ts, plan.merge_faults,
                              plan.maintenance)
        _count_merges(merged, result)
        if bank is not None:
            applied = check_replicas(spark, str(lake), cluster.mvcc, bank_tables(tidb), bank.total, bank.funded_ts,
                                     final_ts)
            result.anomalies.extend(applied.anomalies)
            result.checkpoints_checked, result.syncpoints_checked = applied.checkpoints, len(applied.syncpoints)
        else:
            mixed = check_mixed_replicas(spark, str(lake), cluster.mvcc, DATABASE, final_ts)
            result.anomalies.extend(mixed.anomalies)
            result.checkpoints_checked, result.syncpoints_checked = mixed.checkpoints, len(mixed.syncpoints)
            result.values_checked, result.unchecked = mixed.values, mixed.unchecked
    return result


def _count_merges(merged: MergeCycles, result: ScheduleResult) -> None:
    result.merge_crashes, result.merge_write_errors = merged.struck, merged.write_errors
    result.maintained = merged.maintained
    if merged.struck:
        result.faults[MERGE_CRASH] += sum(merged.struck.values())
    if merged.write_errors:
        result.faults[MERGE_WRITE_ERROR] += sum(merged.write_errors.values())
    result.missed.update(merged.missed)
    result.anomalies.extend(merged.failures)


def _pullers(mode: str, plan: SchedulePlan, doc: dict[str, Any], root: Path,
             result: ScheduleResult) -> ThreadPullers | ProcessPullers:
    if mode == "thread":
        return ThreadPullers(config_from_document(doc, "nemesis"), result.faults, result.missed, result.anomalies)
    config = write_config(root / "changefeed.toml", doc)
    return ProcessPullers(config, doc["changefeed"]["id"], doc["puller"]["shards"], plan,
                          parse_duration(FLUSH_INTERVAL), root / "pullers", result.faults, result.missed,
                          result.anomalies)


def _strike(plan: SchedulePlan, injector: FaultInjector, pullers: ThreadPullers | ProcessPullers) -> None:
    """Apply each event at its offset, until the traffic's duration."""
    pullers.begin_traffic()
    begin = time.monotonic()
    for index, event in enumerate(plan.events):
        delay = begin + event.at_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if event.kind == PULLER_CRASH:
            pullers.crash(index, event)
        elif event.kind == LAKE_WRITE_ERROR:
            pullers.fail_writes(event)
        else:
            try:
                injector.apply(event.kind)  # counted by the injector when it found a target
            except Exception:  # noqa: BLE001 - a fault with no target now (a region moved) is skipped
                log.exception("fault %s did not apply", event.kind)
        pullers.replace_failed()
    left = begin + plan.duration_s - time.monotonic()
    if left > 0:
        time.sleep(left)


def _settle(cluster: SimCluster, tidb: SimTiDB, layout: LakeLayout, pullers: ThreadPullers | ProcessPullers,
            timeout_s: float, result: ScheduleResult) -> int:
    """Until the watermarks of every replicated table pass a TSO taken after the last write; that TSO."""
    final_ts = cluster.tso.next()
    ids = tidb.physical_ids(TableFilter.parse(RULES))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pullers.replace_failed()
        if read_watermarks(layout).reached(final_ts, ids):
            return final_ts
        time.sleep(0.1)
    lagging = read_watermarks(layout).lagging(final_ts, ids)
    result.anomalies.append(Anomaly("stuck", 0, final_ts, f"watermarks below {final_ts} after {timeout_s:.0f}s: "
                                    f"physical ids {lagging[:5]}"))
    return final_ts


def _bank_spec(cluster: SimCluster, tidb: SimTiDB, preset: WorkloadPreset, funded_before: int) -> BankSpec:
    """The bank tables' physical ids and balance column ids from the upstream's own schema, and
    the funding txn's commit ts: the first commit in any bank table."""
    columns: dict[int, int] = {}
    for name in BANK_TABLES:
        info = tidb.table_info(DATABASE, name)
        balance = next(c.id for c in info.columns if c.name.lower() == "balance")
        for pid in info.physical_ids():
            columns[pid] = balance
    funded = min(e.commit_ts for pid in columns for e in cluster.mvcc.snapshot_delta(*record_span(pid), 0)
                 if 0 < e.commit_ts <= funded_before)
    return BankSpec(columns, bank_total(preset), funded)


def bank_tables(tidb: SimTiDB, database: str = DATABASE) -> list[BankTable]:
    """Each bank table as the upstream defines it: physical ids, the balance column, the row identity."""
    tables = []
    for name in BANK_TABLES:
        info = tidb.table_info(database, name)
        balance = next(c.id for c in info.columns if c.name.lower() == "balance")
        if info.is_common_handle:
            identity = tuple(c.name for c in info.primary_index().columns)
        elif info.pk_is_handle:
            identity = (info.handle_column().name,)
        else:
            identity = ("_tidb_rowid",)
        tables.append(BankTable(database, name, tuple(info.physical_ids()), balance, identity))
    return tables
