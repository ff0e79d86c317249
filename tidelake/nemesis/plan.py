"""A schedule's plan, drawn from its seed alone: the workload, and which fault strikes when.

The same seed always gives the same plan, so `--seed S --schedules 1` reruns schedule S with the
same statements and the same faults at the same offsets. Thread timing still differs from run to
run (what a fault hits depends on what is in flight), as with any Jepsen-style nemesis.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tidelake.capture.landing.lander import LANDER_FAILPOINTS
from tidelake.errors import InputError
from tidelake.merge.ddl_apply import DDL_FAILPOINTS
from tidelake.merge.table_merge import MERGE_FAILPOINTS
from tidelake.syncpoint.cut import SYNCPOINT_FAILPOINTS

WORKLOADS = ("bank", "mixed")
LEVELS = ("landing", "apply")
PULLER_MODES = ("thread", "process")  # the changefeed on a thread of the nemesis, or as `tidelake pull` shards

# Faults the simulator applies (tidelake.sim.faults), and the two the nemesis applies to the puller.
SIM_FAULTS: dict[str, int] = {
    "split": 3, "merge": 2, "transfer_leader": 3, "reset_streams": 2, "server_busy": 2, "slow_store": 1,
    "restart_store": 1, "commit_before_prewrite": 1, "duplicate_delivery": 1, "pd_unavailable": 1,
}
PULLER_CRASH = "puller_crash"
LAKE_WRITE_ERROR = "lake_write_error"
WEIGHTS: dict[str, int] = {**SIM_FAULTS, PULLER_CRASH: 2, LAKE_WRITE_ERROR: 2}
FAULT_KINDS = tuple(WEIGHTS)

BETWEEN_FLUSHES = "between_flushes"
# Where a puller crash strikes: at once (between flushes), or when its lander next passes a
# point of a flush (before a commit, or after it landed and before the next one).
CRASH_POINTS = (BETWEEN_FLUSHES, *(p for p in LANDER_FAILPOINTS if p != "lander.open"))
CRASH_POINT_WAIT_S = 2.0  # a crash armed at a point not passed by then after its offset strikes at once
DDL_CRASH_POINTS = frozenset({"lander.before_ddl", "lander.after_ddl"})  # passed in flushes carrying DDL only
# A lake write error at an `after_` point is a lost acknowledgement: the commit landed, the
# writer was told it failed.
WRITE_ERROR_POINTS = tuple(p for p in LANDER_FAILPOINTS if p != "lander.open")


@dataclass(frozen=True)
class FaultEvent:
    at_s: float  # seconds after traffic starts
    kind: str
    point: str = ""  # puller_crash / lake_write_error: the lander failpoint
    duration_s: float = 0.0  # lake_write_error: how long writes there fail


# The apply level's steps (tidelake.nemesis.merge_cycles), in order, and the apply failpoints a
# fault of each can strike at. The bank workload's only DDLs are its CREATEs, applied by the
# first merge; a rewrite needs a column change (the mixed workload's DDL).
MERGE_CRASH = "merge_crash"
# A lake write error of the merge: at a `before_` point a failed commit (of a window, a DDL, the
# syncpoint's record or the merge log), at merge.after_commit a lost acknowledgement (the replica
# commit landed, the run was told it failed). Unlike a crash, the run goes on and reports it.
MERGE_WRITE_ERROR = "merge_write_error"
MERGE_FAULT_KINDS = (MERGE_CRASH, MERGE_WRITE_ERROR)
MERGE_STEPS = ("merge_mid", "syncpoint", "merge_final")
APPLY_FAILPOINTS = (*MERGE_FAILPOINTS, *DDL_FAILPOINTS, *SYNCPOINT_FAILPOINTS)
DDL_POINTS = ("merge.after_ddl", "ddl_apply.before_commit")  # passed only where a DDL is applied
ONCE_A_RUN = frozenset({"merge.before_log", *SYNCPOINT_FAILPOINTS})  # passed once per run: no nth pass above 1
WRITE_ERROR_COMMITS = frozenset({"merge.before_commit", "merge.after_commit", "merge.before_log",
                                 "ddl_apply.before_commit", *SYNCPOINT_FAILPOINTS})


@dataclass(frozen=True)
class MergeFault:
    """The merge run of `step` meets `kind` at the `nth` pass of apply failpoint `point`; after a
    crash a fresh run resumes, after a write error the run goes on and the step runs again."""

    step: str
    point: str
    nth: int
    kind: str = MERGE_CRASH


@dataclass(frozen=True)
class SchedulePlan:
    seed: int
    workload: str
    duration_s: float
    events: tuple[FaultEvent, ...]
    merge_faults: tuple[MergeFault, ...] = ()  # apply level only
    maintenance: bool = False  # apply level: a maintenance run between the syncpoint and the final merge


def draw_plan(seed: int, workload: str, duration_s: float, level: str = "landing") -> SchedulePlan:
    """3 to 8 faults at uniform offsets over `duration_s` seconds of traffic; at the apply level,
    also 1 to 3 crashes of the merge and 0 to 2 write errors of it, and maintenance between merges
    in half of the schedules (each from its own random stream, so the landing faults and the merge
    crashes of a seed are the ones it drew before write errors and maintenance were added)."""
    if level not in LEVELS:
        raise InputError(f"unknown nemesis level {level!r} (known: {', '.join(LEVELS)})")
    if workload not in WORKLOADS:
        raise InputError(f"unknown nemesis workload {workload!r} (known: {', '.join(WORKLOADS)})")
    if duration_s <= 0:
        raise InputError(f"schedule duration must be above zero, got {duration_s}")
    rng = random.Random(seed)
    events = []
    for _ in range(rng.randint(3, 8)):
        at = round(rng.uniform(0, duration_s), 3)
        kind = rng.choices(FAULT_KINDS, weights=[WEIGHTS[k] for k in FAULT_KINDS])[0]
        if kind == PULLER_CRASH:
            events.append(FaultEvent(at, kind, rng.choice(CRASH_POINTS)))
        elif kind == LAKE_WRITE_ERROR:
            events.append(FaultEvent(at, kind, rng.choice(WRITE_ERROR_POINTS), round(rng.uniform(0.2, 1.0), 3)))
        else:
            events.append(FaultEvent(at, kind))
    events = tuple(sorted(events, key=lambda e: e.at_s))
    if level != "apply":
        return SchedulePlan(seed, workload, duration_s, events)
    extra = random.Random(f"{seed}:apply-write")
    faults = [*_draw_merge_faults(random.Random(f"{seed}:apply"), workload, 1, 3, MERGE_CRASH),
              *_draw_merge_faults(extra, workload, 0, 2, MERGE_WRITE_ERROR)]
    # A step's faults strike in turn (each in a fresh run of it): DDL points first, since a run
    # applies a table's pending DDL before its windows and a rerun does not apply it again.
    faults.sort(key=lambda f: (MERGE_STEPS.index(f.step), f.point not in DDL_POINTS))
    return SchedulePlan(seed, workload, duration_s, events, tuple(faults), extra.random() < 0.5)


def crash_shards(plan: SchedulePlan, shards: int) -> dict[int, int]:
    """Process mode: the shard each puller crash kills, by its index in `plan.events`, drawn from
    a stream of its own (the plan stays the thread mode's). A crash at a DDL point kills shard 0,
    the only shard that lands DDL."""
    rng = random.Random(f"{plan.seed}:shards")
    return {i: 0 if e.point in DDL_CRASH_POINTS else rng.randrange(shards)
            for i, e in enumerate(plan.events) if e.kind == PULLER_CRASH}


def fault_points(step: str, workload: str, kind: str = MERGE_CRASH) -> tuple[str, ...]:
    """The apply failpoints a merge fault of `kind` in `step` can strike at with `workload`."""
    ddl = step == "merge_mid" or workload != "bank"
    points = [p for p in MERGE_FAILPOINTS if p not in DDL_POINTS]
    if ddl:
        points.extend(DDL_POINTS)
    if workload != "bank":
        points.append("ddl_apply.after_rewrite")
    if step == "syncpoint":
        points.extend(SYNCPOINT_FAILPOINTS)
    if kind == MERGE_WRITE_ERROR:
        points = [p for p in points if p in WRITE_ERROR_COMMITS]
    return tuple(points)


def _draw_merge_faults(rng: random.Random, workload: str, least: int, most: int, kind: str) -> list[MergeFault]:
    faults = []
    for _ in range(rng.randint(least, most)):
        step = rng.choice(MERGE_STEPS)
        point = rng.choice(fault_points(step, workload, kind))
        faults.append(MergeFault(step, point, 1 if point in ONCE_A_RUN else rng.randint(1, 3), kind))
    return faults
