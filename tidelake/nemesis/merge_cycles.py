"""The apply level's merges: the `tidelake merge` and `tidelake syncpoint` paths over what landed,
with the plan's merge crashes and write errors, each followed by a fresh run of the same step, and
`tidelake maintenance` between them when the plan says so.

More: docs/internals.md#merge_cycles.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tidelake.lake.layout import LakeLayout
from tidelake.maintenance.lake_upkeep import run_maintenance
from tidelake.merge.merge_run import MergeReport, run_merge
from tidelake.nemesis.landing_check import Anomaly
from tidelake.nemesis.merge_crash import MergeCrashed, MergeCrashSwitch, MergeWriteError
from tidelake.nemesis.plan import MERGE_CRASH, MERGE_STEPS, MergeFault
from tidelake.syncpoint.cut import SyncpointOutcome, run_syncpoint

MERGE_CHUNK_ROWS = 40  # small chunks: several checkpoints per merge run to check
SYNCPOINT_INTERVAL_S = 1


@dataclass
class MergeCycles:
    failures: list[Anomaly] = field(default_factory=list)  # `merge_failed`: a run that reported a failure
    struck: Counter[str] = field(default_factory=Counter)  # crashes by failpoint
    write_errors: Counter[str] = field(default_factory=Counter)  # write errors that struck, by failpoint
    missed: Counter[str] = field(default_factory=Counter)
    maintained: bool = False


def merge_cycles(spark: Any, root: str, mid_ts: int, final_ts: int, faults: Sequence[MergeFault] = (),
                 maintenance: bool = False) -> MergeCycles:
    """Merge to `mid_ts`, take a syncpoint, maybe run maintenance, merge to `final_ts`, failing the
    runs `faults` name."""
    layout = LakeLayout(root)
    out = MergeCycles()

    def merge(until_ts: int | None = None, **kwargs: Any) -> MergeReport:
        report = run_merge(spark, layout, until_ts=until_ts, max_chunk_rows=MERGE_CHUNK_ROWS, **kwargs)
        out.failures.extend(Anomaly("merge_failed", t.table_key, until_ts or 0, f"{t.table}: {t.reason}")
                            for t in report.failed)
        return report

    def syncpoint() -> None:
        result = run_syncpoint(spark, layout, SYNCPOINT_INTERVAL_S, merge=lambda _s, _l, **kw: merge(**kw))
        failed = (SyncpointOutcome.INCOMPLETE, SyncpointOutcome.HELD, SyncpointOutcome.NO_ROOM)
        if result.outcome in failed:  # nobody else writes here, and the lake has room
            out.failures.append(Anomaly("merge_failed", 0, result.ts or 0, f"syncpoint: {result.reason}"))

    steps: dict[str, Callable[[], None]] = {"merge_mid": lambda: merge(mid_ts), "syncpoint": syncpoint,
                                            "merge_final": lambda: merge(final_ts)}
    switch = MergeCrashSwitch()
    with switch.armed():
        for step in MERGE_STEPS:
            if step == "merge_final" and maintenance:
                run_maintenance(spark, layout)
                out.maintained = True
            _run_step(steps[step], [f for f in faults if f.step == step], switch, out)
    return out


def _run_step(run: Callable[[], None], faults: list[MergeFault], switch: MergeCrashSwitch, out: MergeCycles) -> None:
    for i, fault in enumerate(faults):
        switch.fault_at(fault)
        reported = len(out.failures)
        raised = False
        try:
            run()
        except MergeCrashed:
            out.struck[fault.point] += 1
            continue  # a fresh run of the step, with its next fault armed
        except MergeWriteError:
            raised = True
        finally:
            struck = switch.write_error_struck
            switch.restart()
        if struck:
            out.write_errors[fault.point] += 1
            if raised or len(out.failures) > reported:
                del out.failures[reported:]  # the run reported the error it met, as it must
            else:
                out.failures.append(Anomaly("write_error_hidden", 0, 0, f"{fault.step}: a write error at pass "
                                            f"{fault.nth} of {fault.point} struck and the run reported no failure"))
            continue
        # the run completed untouched: this and later faults did not strike
        out.missed.update(f.point if f.kind == MERGE_CRASH else f"{f.kind}:{f.point}" for f in faults[i:])
        return
    run()
