"""What one tidelake_merge run does around its Spark jobs: plan and group the tables into merge
job specs (tidelake.orchestration.job_spec), and read where each replica stands for the asset events.

The plan is made here, once per run: which tables, in which groups, up to which cap, with the
merge planner's view of each table logged (pending DDL, waiting watermarks); tables with nothing
to do cost no Spark job. Each job then merges its tables' windows from the watermarks it reads
when it runs, never past the run's cap.
Owner: the merge DAG (tidelake.orchestration.airflow.dags.merge).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from deltalake.exceptions import DeltaError

from tidelake import tso
from tidelake.config import ChangefeedConfig, load_config
from tidelake.errors import InputError
from tidelake.lake.checkpoint import checkpoint_version, read_checkpoint
from tidelake.lake.control import read_control
from tidelake.lake.lake_check import check_lake_root, pulled_into
from tidelake.lake.layout import LakeLayout
from tidelake.lake.lease import live_holder, merge_follower_lease
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.schema_history import SchemaHistory, TableKey
from tidelake.lake.watermarks import read_watermarks
from tidelake.merge.rebuild import rebuild_refusal
from tidelake.merge.table_plan import plan_table
from tidelake.merge.window_spec import leaves_replica_unchanged
from tidelake.orchestration.announced_states import announced_states, record_announced
from tidelake.orchestration.assets import ReplicaVersion, changed_replicas
from tidelake.orchestration.backfill import run_cap_ts
from tidelake.orchestration.job_spec import MergeJob, to_json
from tidelake.orchestration.params import MergeRequest, parse_merge_request
from tidelake.syncpoint.records import merge_cap, next_boundary, read_syncpoints

log = logging.getLogger(__name__)
STATE_READERS = 16  # replicas' states read at once


@dataclass(frozen=True)
class PlanLine:
    """One table's line in the run's plan."""

    table: str
    checkpoint: int | None  # None: no replica yet (the merge job creates it)
    upper: int | None
    has_work: bool
    pending_ddl: str | None = None
    blocked: str | None = None

    def describe(self) -> str:
        def at(ts: int | None) -> str:
            return "-" if ts is None else f"{ts} ({tso.to_datetime(ts):%Y-%m-%d %H:%M:%S})"

        if self.checkpoint is None:
            return f"{self.table}: no replica yet, the merge creates it"
        ddl = f"; next DDL: {self.pending_ddl}" if self.pending_ddl else ""
        why = f"; waiting: {self.blocked}" if self.blocked else ""
        idle = "" if self.has_work else "; nothing to do"
        return f"{self.table}: checkpoint {at(self.checkpoint)} -> {at(self.upper)}{ddl}{why}{idle}"


def live_tables(history: SchemaHistory) -> dict[str, TableKey]:
    """Replicated tables by their current `db.table` name."""
    return {".".join(history.current_name(key)): key for key in history.live_tables()}


def replica_paths(layout: LakeLayout, tables: Mapping[str, TableKey]) -> dict[str, str | None]:
    """Replica folder of each table from the replica catalog; None before its first merge."""
    entries = ReplicaCatalog(layout).entries()
    return {name: entries[key].path if key in entries else None for name, key in tables.items()}


def plan_tables(
    config: ChangefeedConfig, request: MergeRequest, cap_ts: int | None
) -> list[PlanLine]:
    """Per requested table: where it is, how far this run can take it, and what holds it back."""
    layout = LakeLayout.from_config(config.lake)
    control = read_control(layout)
    watermarks, history = control.watermarks, control.history
    known = live_tables(history)
    names = list(request.tables or sorted(known))
    paths = replica_paths(layout, {name: known[name] for name in names})
    plans = []
    for name in names:
        path = paths[name]
        checkpoint = None if path is None else read_checkpoint(path, layout.storage_options)
        if checkpoint is None:
            plans.append(PlanLine(name, checkpoint, None, has_work=True))
            continue
        plan = plan_table(known[name], checkpoint, watermarks, history, cap_ts, passes=leaves_replica_unchanged)
        event = plan.barrier_event or history.next_ddl_after(known[name], checkpoint)
        pending = None if event is None else f"{event.action_name} at {event.commit_ts}"
        plans.append(PlanLine(name, checkpoint, plan.upper, not plan.idle, pending, plan.reason))
    return plans


def group_tables(tables: Sequence[str], groups: int) -> list[list[str]]:
    """Spread tables over at most `groups` Spark jobs, round-robin in name order (stable across
    runs, so a table's job name and logs stay where users look for them)."""
    ordered = sorted(tables)
    count = min(groups, len(ordered))
    return [ordered[i::count] for i in range(count)]


def check_rebuild(config: ChangefeedConfig, table: str) -> None:
    """Refuse a rebuild in the plan, before any Spark job, when the changelog cannot replay it."""
    layout = LakeLayout.from_config(config.lake)
    history = SchemaHistory.load(layout)
    refusal = rebuild_refusal(layout, history, live_tables(history)[table])
    if refusal is not None:
        raise InputError(f"param 'rebuild': {refusal}")


def replica_states(config: ChangefeedConfig, tables: Iterable[str]) -> dict[str, ReplicaVersion | None]:
    """Checkpoint and Delta version of each replica now (None: no replica or no checkpoint yet)."""
    tables = list(tables)
    layout = LakeLayout.from_config(config.lake)
    known = live_tables(SchemaHistory.load(layout))
    paths = replica_paths(layout, {t: known[t] for t in tables if t in known})

    def state(table: str) -> ReplicaVersion | None:
        path = paths.get(table)
        at = None if path is None else checkpoint_version(path, layout.storage_options)
        return None if at is None else ReplicaVersion(*at)

    with ThreadPoolExecutor(max_workers=STATE_READERS) as pool:  # a log read each: mostly waiting on the store
        return dict(zip(tables, pool.map(state, tables)))


def states_before(config: ChangefeedConfig, tables: Sequence[str]) -> dict[str, ReplicaVersion | None]:
    """Each table's state the run's asset events compare with: the one last announced
    (tidelake.orchestration.announced_states), else its state now (a table never announced
    before is announced once it changes)."""
    layout = LakeLayout.from_config(config.lake)
    try:
        announced = announced_states(layout, config.changefeed_id)
    except (DeltaError, OSError) as exc:  # the events are not worth a run that merges nothing
        log.warning("could not read the announced replica states in %s (%s): this run announces only its own "
                    "commits", layout.announced, (str(exc).splitlines() or [repr(exc)])[0])
        announced = {}
    now = replica_states(config, [t for t in tables if t not in announced])
    return {t: announced[t] if t in announced else now[t] for t in tables}


def states_to_xcom(states: Mapping[str, ReplicaVersion | None]) -> dict[str, Any]:
    return {t: None if s is None else [s.checkpoint_ts, s.delta_version] for t, s in states.items()}


def states_from_xcom(raw: Mapping[str, Any]) -> dict[str, ReplicaVersion | None]:
    return {t: None if s is None else ReplicaVersion(int(s[0]), int(s[1])) for t, s in raw.items()}


def plan_run(config_path: str, params: Mapping[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
    """The plan task: validate the trigger params, cap the run, plan, and hand each Spark job its
    merge job spec (one per group), plus the replicas' states before the run."""
    config = load_config(config_path)
    layout = LakeLayout.from_config(config.lake)
    check_lake_root(layout)
    if not pulled_into(layout):
        # The changefeed's own lake before the puller's first flush: a scheduled run that comes
        # first has nothing to merge, which is not a failure (a lake of another kind still is).
        log.info("nothing has been pulled into %s yet: nothing to merge", layout.root)
        return {"merge_jobs": [], "before": {}, "syncpoint": False}
    request = parse_merge_request(params, sorted(live_tables(SchemaHistory.load(layout))))
    follower = follower_line(layout)
    if follower is not None and request.rebuild is None:  # a rebuild is asked for by hand: it runs
        log.info("%s", follower)
        # What the follower merged since the last announcement is announced by the publish task.
        tables = sorted(live_tables(SchemaHistory.load(layout))) if request.tables is None else request.tables
        return {"merge_jobs": [], "before": states_to_xcom(states_before(config, tables)), "syncpoint": False}
    cap_ts = syncpoint_cap(layout, config.merge.syncpoint_interval_s, run_cap_ts(context, request.until_ts))
    log.info("cap: %s", "latest watermarks" if cap_ts is None else f"{cap_ts} ({tso.to_datetime(cap_ts)})")
    plans = plan_tables(config, request, cap_ts)
    for plan in plans:
        log.info("%s", plan.describe())
    todo = [p.table for p in plans if p.has_work]
    if request.rebuild is not None:
        check_rebuild(config, request.rebuild)
        log.info("rebuild: %s gets a new replica replayed from its CREATE", request.rebuild)
        todo = [request.rebuild]
    if request.dry_run:
        log.info("dry run: would merge %d of %d tables: %s", len(todo), len(plans), ", ".join(todo) or "none")
        todo = []
    groups = group_tables(todo, request.groups)
    skip_syncpoint = syncpoint_skip_reason(config, request, context) or syncpoint_not_due(
        layout, config.merge.syncpoint_interval_s)
    if config.merge.syncpoint_interval_s is not None:
        log.info("syncpoint: %s", f"not this run ({skip_syncpoint})" if skip_syncpoint else "due after the merges")
    return {
        "merge_jobs": [
            {"spec": to_json(MergeJob(config_path, tuple(g), cap_ts, request.rebuild)),
             "name": job_name(config.changefeed_id, g)}
            for g in groups
        ],
        # Every planned table, not only those with work: the syncpoint job may advance any of them.
        "before": states_to_xcom(states_before(config, [p.table for p in plans])),
        "syncpoint": skip_syncpoint is None,
    }


def follower_line(layout: LakeLayout) -> str | None:
    """The one line a scheduled run logs when it leaves the merge to a live merge follower
    (`tidelake merge --follow`, lease merge-follower); None when none runs."""
    record = live_holder(layout, merge_follower_lease())
    if record is None:
        return None
    return f"merge follower {record.holder.describe()} is running; this run leaves the merge to it"


def syncpoint_cap(layout: LakeLayout, interval_s: int | None, cap_ts: int | None) -> int | None:
    """With syncpoints on, no merge passes the first boundary above the last recorded syncpoint:
    a table that ran past an unrecorded boundary would hold every later cut back until all the
    others caught up with it (tidelake.syncpoint.records.merge_cap)."""
    if interval_s is None:
        return cap_ts

    boundary = merge_cap(layout, interval_s)
    caps = [c for c in (cap_ts, boundary) if c is not None]
    return min(caps) if caps else None


def syncpoint_not_due(layout: LakeLayout, interval_s: int | None) -> str | None:
    """Why no new syncpoint can be reached yet, read without Spark (None: one may be): the next
    boundary after the last cut must be below the DDL watermark, a bound on every table's reach
    (tidelake.syncpoint.cut), so runs between boundaries start no Spark job for nothing."""
    if interval_s is None:
        return None

    recorded = read_syncpoints(layout)
    if not recorded:
        return None
    boundary = next_boundary(recorded[-1].ts, interval_s)
    ddl_resolved = read_watermarks(layout).ddl_resolved
    if ddl_resolved < boundary:
        return f"the next boundary {boundary} is above the DDL watermark {ddl_resolved}"
    return None


def syncpoint_skip_reason(config: ChangefeedConfig, request: MergeRequest, context: Mapping[str, Any]) -> str | None:
    """Why this run takes no syncpoint (None: it takes one after its merges).

    The syncpoint job merges EVERY table to the latest reachable boundary, so only runs that ask
    for everything take one: not a dry run, a subset of tables, an until cap, or a backfill run
    (a backfill reproduces past intervals; a cut at the latest boundary would jump past them)."""
    if config.merge.syncpoint_interval_s is None:
        return "syncpoints are off ([merge].syncpoint_interval is not set)"
    if request.dry_run:
        return "dry run"
    if request.tables is not None:
        return "the run merges only some tables"
    if request.until_ts is not None:
        return "the run has an until cap"
    run = context.get("dag_run")
    if run is not None and str(run.run_type) == "backfill":  # DagRunType.BACKFILL_JOB
        return "backfill run"
    return None


def job_name(changefeed_id: str, tables: Sequence[str], shown: int = 3) -> str:
    """Spark application name, also the mapped task's label in Airflow: the tables it merges."""
    more = f" +{len(tables) - shown} more" if len(tables) > shown else ""
    return f"tidelake merge {changefeed_id}: {', '.join(tables[:shown])}{more}"


def announce_after_run(config_path: str, before: Mapping[str, Any]) -> dict[str, ReplicaVersion]:
    """Replicas of the run's tables that got a new commit since `before`: the asset events to emit,
    their states recorded as announced. A record that cannot be written is a warning: the next
    run announces these commits again. The one gap: a publish that recorded and then failed
    before Airflow stored its events (docs/internals.md#announced_states)."""
    config = load_config(config_path)
    states = states_from_xcom(before)
    now = replica_states(config, states)
    layout = LakeLayout.from_config(config.lake)
    try:
        record_announced(layout, config.changefeed_id, now)
    except (DeltaError, OSError) as exc:
        log.warning("could not record the announced replica states in %s (%s): the next run announces "
                    "these commits again", layout.announced, (str(exc).splitlines() or [repr(exc)])[0])
    return changed_replicas(states, {t: s for t, s in now.items() if s is not None})


def table_choices(config: ChangefeedConfig) -> list[str]:
    """Tables the trigger form suggests, read while the DAG file is parsed. An unreachable lake
    must not break the DAG, and the list is only a suggestion (the plan task checks the names
    against the lake), so a failed read gives no suggestions and a warning."""

    try:
        return sorted(live_tables(SchemaHistory.load(LakeLayout.from_config(config.lake))))
    except (OSError, DeltaError, InputError) as exc:
        log.warning("%s: cannot list the lake's tables for the trigger form: %s", config.lake.root, exc)
        return []
