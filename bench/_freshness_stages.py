"""Stage assignment of bench_freshness.py: for each change, when the lake first showed it at each stage.

Pure computation, no I/O: the bench reads the lake's Delta logs into version points (commit time
of a version, and what that version shows) and this turns them into seconds from each change's
upstream commit (the physical part of its commit ts, tidelake/tso.py). A stage that never showed
a change leaves None, counted as missing, never as a number.

    landed     the first changelog version whose added files hold the change's commit ts
    covered    the first watermarks version where its table's resolved ts >= its commit ts
    merged     the first replica version whose checkpoint >= its commit ts
    syncpoint  the first syncpoints version holding a cut ts >= its commit ts
"""

from __future__ import annotations

import sys
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import percentile  # noqa: E402
from tidelake import tso  # noqa: E402

STAGES = ("landed", "covered", "merged", "syncpoint")


@dataclass(frozen=True)
class Change:
    """One upstream change, its own transaction: (table, row_id, commit_ts) names it."""

    table: str
    row_id: int
    op: str
    commit_ts: int


class Reach:
    """A quantity that versions of one Delta table show (a resolved ts, a checkpoint, the newest cut ts),
    in version order as (commit time ms, value). `first_at_or_above(ts)` is the commit time of the
    first version whose value is >= ts: a running maximum turns that into a binary search (the
    first version with value >= ts is where the running maximum first reaches ts)."""

    def __init__(self, points: Iterable[tuple[int, int]]) -> None:
        self._times: list[int] = []
        self._peaks: list[int] = []
        for time_ms, value in points:
            self._times.append(time_ms)
            self._peaks.append(value if not self._peaks else max(self._peaks[-1], value))

    def first_at_or_above(self, ts: int) -> int | None:
        at = bisect_left(self._peaks, ts)
        return self._times[at] if at < len(self._peaks) else None

    def __len__(self) -> int:
        return len(self._times)


def first_landing(versions: Iterable[tuple[int, Iterable[int]]]) -> dict[int, int]:
    """commit ts -> commit time (ms) of the first version, in version order, whose added files hold
    a row of that commit ts. `versions`: (commit time ms, commit ts of the rows it added)."""
    landed: dict[int, int] = {}
    for time_ms, commit_tss in versions:
        for ts in commit_tss:
            landed.setdefault(ts, time_ms)
    return landed


def stage_seconds(change: Change, landed: Mapping[int, int], covered: Mapping[str, Reach],
                  merged: Mapping[str, Reach], syncpoints: Reach | None) -> dict[str, float | None]:
    """Seconds from the change's upstream commit to each stage; None where the stage never showed it
    (syncpoint: also when syncpoints were off, `syncpoints` None)."""
    times = {
        "landed": landed.get(change.commit_ts),
        "covered": covered[change.table].first_at_or_above(change.commit_ts) if change.table in covered else None,
        "merged": merged[change.table].first_at_or_above(change.commit_ts) if change.table in merged else None,
        "syncpoint": syncpoints.first_at_or_above(change.commit_ts) if syncpoints is not None else None,
    }
    committed = tso.physical_ms(change.commit_ts)
    return {stage: None if at is None else (at - committed) / 1000 for stage, at in times.items()}


def out_of_order(per_change: Sequence[Mapping[str, float | None]]) -> int:
    """Changes a later stage showed before an earlier one did: each stage is written after the one
    before it (watermarks after the changelog they cover, a merge only up to the watermarks, a cut
    only of merged replicas), so a count above 0 is a fault of the lake or of this measurement."""
    wrong = 0
    for stages in per_change:
        seen = [stages[s] for s in STAGES if stages[s] is not None]
        wrong += any(later < earlier for earlier, later in zip(seen, seen[1:]))
    return wrong


def summarize(per_change: Sequence[Mapping[str, float | None]]) -> dict[str, dict[str, float | int | None]]:
    """Per stage: changes it showed, changes it never showed, p50/p95/p99/max seconds of those it showed."""
    out: dict[str, dict[str, float | int | None]] = {}
    for stage in STAGES:
        seen = [s[stage] for s in per_change if s[stage] is not None]
        out[stage] = {"changes": len(seen), "missing": len(per_change) - len(seen),
                      **{f"p{p}": percentile(seen, p) if seen else None for p in (50, 95, 99)},
                      "max": max(seen) if seen else None}
    return out
