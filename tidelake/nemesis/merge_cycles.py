"""The apply level's merges: the `tidelake merge` and `tidelake syncpoint` paths over what
landed, with the plan's merge crashes, each followed by a fresh run of the same step.

Steps, in order: a merge up to a ts halfway through the traffic (it also applies the CREATEs), a
syncpoint with a 1 s interval (it merges every table to S first), a merge up to the final TSO.
Merges go in chunks of MERGE_CHUNK_ROWS changes, so a run records several checkpoints and passes
several commits to crash at. A crash armed for a step strikes in its first run; the step then runs
again with the step's next crash armed, and so on, until a run of it completes. A crash whose
point no run of its step passed often enough is `missed`. This module drives the product's merge;
the verdict is tidelake.nemesis.apply_check's, which shares no code with it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tidelake.apply.merge_job import run_merge
from tidelake.apply.syncpoint_job import SyncpointOutcome, run_syncpoint
from tidelake.lake.layout import LakeLayout
from tidelake.nemesis.landing_check import Anomaly
from tidelake.nemesis.merge_crash import MergeCrashed, MergeCrashSwitch
from tidelake.nemesis.plan import MERGE_STEPS, MergeCrash

MERGE_CHUNK_ROWS = 40  # small chunks: several checkpoints per merge run to check
SYNCPOINT_INTERVAL_S = 1


@dataclass
class MergeCycles:
    failures: list[Anomaly] = field(default_factory=list)  # `merge_failed`: a run that reported a failure
    struck: Counter[str] = field(default_factory=Counter)  # crashes by failpoint
    missed: Counter[str] = field(default_factory=Counter)


def merge_cycles(spark: Any, root: str, mid_ts: int, final_ts: int, crashes: Sequence[MergeCrash] = ()) -> MergeCycles:
    """Merge to `mid_ts`, take a syncpoint, merge to `final_ts`, crashing the runs `crashes` name."""
    layout = LakeLayout(root)
    out = MergeCycles()

    def merge(until_ts: int | None = None, **kwargs: Any) -> None:
        report = run_merge(spark, layout, until_ts=until_ts, max_chunk_rows=MERGE_CHUNK_ROWS, **kwargs)
        out.failures.extend(Anomaly("merge_failed", t.table_key, until_ts or 0, f"{t.table}: {t.reason}")
                            for t in report.failed)

    def syncpoint() -> None:
        result = run_syncpoint(spark, layout, SYNCPOINT_INTERVAL_S, merge=lambda _s, _l, **kw: merge(**kw))
        if result.outcome == SyncpointOutcome.INCOMPLETE:
            out.failures.append(Anomaly("merge_failed", 0, result.ts or 0, f"syncpoint: {result.reason}"))

    steps: dict[str, Callable[[], None]] = {"merge_mid": lambda: merge(mid_ts), "syncpoint": syncpoint,
                                            "merge_final": lambda: merge(final_ts)}
    switch = MergeCrashSwitch()
    with switch.armed():
        for step in MERGE_STEPS:
            _run_step(steps[step], [c for c in crashes if c.step == step], switch, out)
    return out


def _run_step(run: Callable[[], None], crashes: list[MergeCrash], switch: MergeCrashSwitch, out: MergeCycles) -> None:
    for i, crash in enumerate(crashes):
        switch.crash_at(crash)
        try:
            run()
        except MergeCrashed:
            out.struck[crash.point] += 1
            continue  # a fresh run of the step, with its next crash armed
        finally:
            switch.restart()
        out.missed.update(c.point for c in crashes[i:])  # the run completed: this and later crashes did not strike
        return
    run()
