"""A schedule's plan, drawn from its seed alone: the workload, and which fault strikes when.

The same seed always gives the same plan, so `--seed S --schedules 1` reruns schedule S with the
same statements and the same faults at the same offsets. Thread timing still differs from run to
run (what a fault hits depends on what is in flight), as with any Jepsen-style nemesis.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tidelake.errors import InputError
from tidelake.lake.lander import LANDER_FAILPOINTS

WORKLOADS = ("bank", "mixed")

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
# A lake write error at an `after_` point is a lost acknowledgement: the commit landed, the
# writer was told it failed.
WRITE_ERROR_POINTS = tuple(p for p in LANDER_FAILPOINTS if p != "lander.open")


@dataclass(frozen=True)
class FaultEvent:
    at_s: float  # seconds after traffic starts
    kind: str
    point: str = ""  # puller_crash / lake_write_error: the lander failpoint
    duration_s: float = 0.0  # lake_write_error: how long writes there fail


@dataclass(frozen=True)
class SchedulePlan:
    seed: int
    workload: str
    duration_s: float
    events: tuple[FaultEvent, ...]


def draw_plan(seed: int, workload: str, duration_s: float) -> SchedulePlan:
    """3 to 8 faults at uniform offsets over `duration_s` seconds of traffic."""
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
    return SchedulePlan(seed, workload, duration_s, tuple(sorted(events, key=lambda e: e.at_s)))
