"""The merge follower: one long-running merge that applies changes as the watermarks cover them, so
the schedule no longer sets the freshness floor. An idle poll reads the watermarks only; a pass
merges a share of the tables with covered work (tidelake.merge.table_work), those taken longest ago
first, through run_merge, which never goes past min(resolved, barrier) and is capped at the next
syncpoint boundary; the next pass, with the watermarks read again, takes others. Cuts are taken in
the loop. A pass killed anywhere leaves whole commits, each recording its checkpoint, so the next
follower or scheduled run carries on. It holds the lease merge-follower for its lifetime, the
replicas' per pass; its metrics writer runs on a daemon thread. Owner: `tidelake merge --follow`.

More: docs/internals.md#follow.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pyspark.sql import SparkSession

from tidelake import tso
from tidelake.config import HistoryConfig
from tidelake.errors import EXIT_TRY_LATER, TidelakeError
from tidelake.lake.control import read_control
from tidelake.lake.damage import first_line
from tidelake.lake.layout import LakeLayout
from tidelake.lake.lease import Lease, LeaseLost, LeaseRecord, hold, merge_follower_lease
from tidelake.lake.schema_history import TableKey
from tidelake.lake.watermarks import Watermarks, read_watermarks
from tidelake.merge.changelog_snapshot import ChangelogSnapshot
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import MergeReport, run_merge
from tidelake.merge.replica_handles import ReplicaHandles
from tidelake.merge.table_merge import table_name
from tidelake.merge.table_plan import DEFAULT_CHUNK_ROWS
from tidelake.merge.table_work import find_work

log = logging.getLogger(__name__)

HEARTBEAT_S = 60.0  # at most one idle line this often
SWEEP_S = 300.0  # every replica's checkpoint read again, and the quiet windows of the stale ones merged
RETRY_S = 30.0  # a pass that failed, or a table that failed, is tried again after this
HELD_RETRY_S = 5.0  # a replica another writer held is tried again after this
# Tables merged at once: more threads than the scheduled runs' 2, as part of each small driver
# window's commit waits on the store (figures: bench/README.md, per-table fixed costs).
FOLLOW_THREADS = 4
# A pass merges a quarter of the tables with work (PASS_SHARE), or PASS_TABLES if that is more, the
# ones taken longest ago first; the rest wait for the next pass, which reads the watermarks again.
# A pass plans from the watermarks it read at its start, so a change covered during a pass waits
# for the pass after: shorter passes cut that wait at many tables, while each pass's own look reads
# every table's plan, so their number per visit of every table stays fixed (figures:
# bench/README.md, "Shorter passes at 1,000 tables").
PASS_SHARE = 4
PASS_TABLES = 250
METRICS_JOIN_S = 5.0  # a stopping follower waits this long for its metrics writer to end
_IDLE, _PASS = "idle", "pass"


class CutSteps(Protocol):
    """The syncpoint side of the loop (tidelake.syncpoint.follow_cut)."""

    def cap(self, marks: Watermarks) -> int | None:
        """The ts no merge may pass before the next cut is recorded (None: no cap), with the
        watermarks the pass plans from."""
        ...

    def due(self, marks: Watermarks, now: float) -> bool:
        """Whether a cut may be reachable, from the watermarks alone (`now`: monotonic)."""
        ...

    def take(self, spark: SparkSession, now: float, merge: Callable[..., MergeReport]) -> tuple[bool, list[str]]:
        """Try the cut, merging with `merge` (run_merge with the follower's options): (recorded,
        lines to print)."""
        ...


class FollowerRunning(TidelakeError):
    """Another merge follower holds the lake's lease merge-follower: one line names it."""

    exit_code = EXIT_TRY_LATER

    @classmethod
    def held_by(cls, layout: LakeLayout, record: LeaseRecord) -> FollowerRunning:
        return cls(f"another merge follower runs on {layout.root}: {record.holder.describe()} holds lease "
                   f"{merge_follower_lease()} token {record.token} (expires in "
                   f"{max(record.expires_at - time.time(), 0):.0f}s unless renewed)")


@dataclass(frozen=True)
class FollowOptions:
    poll_s: float = 1.0
    threads: int = FOLLOW_THREADS
    pass_tables: int = PASS_TABLES
    max_chunk_rows: int = DEFAULT_CHUNK_ROWS
    history_config: HistoryConfig | None = None
    heartbeat_s: float = HEARTBEAT_S
    sweep_s: float = SWEEP_S


@dataclass
class _Seen:
    """What the last look saw: the watermarks it planned from, and the replicas' checkpoints since;
    and what the passes owe: the tables with work a pass left out (each with the checkpoint it had
    then: owed while it still has it), and the tables a failed or held merge keeps out until their
    retry. Only what to look at: every merge plans from its replica."""

    marks: Watermarks | None = None
    known: dict[TableKey, int | None] = field(default_factory=dict)
    waiting: bool = False  # work the watermarks did not cover yet (or a held replica)
    look: bool = True  # look at the next poll whatever the watermarks say (the first, after a cut)
    again_at: float | None = None  # monotonic: look again then (a failed table's retry)
    sweep_at: float = 0.0
    turns: dict[TableKey, int] = field(default_factory=dict)  # the pass that last took each table
    owed: dict[TableKey, int | None] = field(default_factory=dict)  # left out, with its checkpoint then
    later: dict[TableKey, float] = field(default_factory=dict)  # monotonic: not taken again before


class Follower:
    """`run` polls until `stop` is set; each `poll` is one idle look or one pass (and maybe a cut).
    `metrics(done)`, the writer of the merge and freshness metrics files, runs on a daemon thread
    while `run` holds the lease, `done` set when it ends; the passes then write no metrics file."""

    def __init__(self, spark: SparkSession, layout: LakeLayout, options: FollowOptions,
                 say: Callable[[str], None], cuts: CutSteps | None = None,
                 stop: threading.Event | None = None,
                 metrics: Callable[[threading.Event], None] | None = None) -> None:
        self.spark, self.layout, self.options, self.say, self.cuts = spark, layout, options, say, cuts
        self.metrics = metrics
        self.stop = stop or threading.Event()
        self.passes = 0
        self._seen = _Seen()
        self._last_line = time.monotonic()
        self._last_pass: float | None = None
        self.handles = ReplicaHandles()  # the replicas' logs, kept from pass to pass

    def run(self) -> None:
        """Hold the follower lease and poll until stopped; FollowerRunning when another holds it."""
        try:
            self._follow()
        finally:
            self.handles.clear()
        self.say(f"merge follower: stopped after {self.passes} passes")

    def _follow(self) -> None:
        label = f"the merge follower of {self.layout.root}"
        with hold(self.layout, {"follower": (merge_follower_lease(), label)}, cancel=self.stop) as leases:
            if "follower" in leases.refused:
                raise FollowerRunning.held_by(self.layout, leases.refused["follower"].record)
            lease = leases.held.get("follower")  # None on a store without conditional writes
            self.say(f"merge follower of {self.layout.root}: following"
                     + (f" (lease {lease.name} token {lease.token})" if lease is not None else ""))
            done = threading.Event()
            side = None
            if self.metrics is not None:
                side = threading.Thread(target=self.metrics, args=(done,), name="merge-follower-metrics", daemon=True)
                side.start()
            try:
                self._loop(lease)
            finally:
                done.set()
                if side is not None:
                    side.join(METRICS_JOIN_S)

    def _loop(self, lease: Lease | None) -> None:
        failures = 0
        while not self.stop.is_set():
            try:
                did = self.poll(lease)
                failures = 0
            except LeaseLost:
                raise
            except Exception as exc:  # the store or Spark away: say so, wait, and look again
                failures += 1
                self._seen.look = True  # what the failed look planned is planned again
                delay = min(self.options.poll_s * 2 ** failures, RETRY_S)
                log.debug("merge follower pass failed", exc_info=True)
                self.say(f"merge follower: pass failed: {first_line(exc)}; again in {delay:.0f}s")
                self.stop.wait(delay)
                continue
            if did == _IDLE:
                self.stop.wait(self.options.poll_s)

    def poll(self, lease: Lease | None = None) -> str:
        """One look: the watermarks, then a pass when some table may have covered work, then a cut
        when one may be due. 'idle' when it read the watermarks only."""
        now = time.monotonic()
        marks = read_watermarks(self.layout)
        seen = self._seen
        did = _IDLE
        if self._worth_a_pass(marks, now):
            if lease is not None:
                lease.check()  # never start a pass under a lease this process lost
            self._pass(now)
            did = _PASS
        if self.cuts is not None and self.cuts.due(marks, now):
            if lease is not None:
                lease.check()
            recorded, lines = self.cuts.take(self.spark, now, self._merge)
            for line in lines:
                self.say(line)
            if recorded:  # the cap moved on, and the cut merged replicas: read them again
                seen.known.clear()
                seen.look = True
            did = _PASS
        if now - self._last_line >= self.options.heartbeat_s:  # nothing said for a while: merged nothing
            self._heartbeat(marks, now)
        return did

    def _worth_a_pass(self, marks: Watermarks, now: float) -> bool:
        seen = self._seen
        if seen.look or seen.marks is None or now >= seen.sweep_at or (seen.again_at is not None
                                                                        and now >= seen.again_at):
            return True
        landed = (marks.changelog_version, marks.ddl_version) != (seen.marks.changelog_version, seen.marks.ddl_version)
        return landed or (seen.waiting and marks != seen.marks)

    def _pass(self, now: float) -> None:
        seen = self._seen
        sweep = now >= seen.sweep_at
        if sweep:
            seen.known.clear()
            seen.sweep_at = now + self.options.sweep_s
        self.handles.expire()
        control = read_control(self.layout)  # the watermarks first, then the history and the changelog
        changelog = ChangelogSnapshot(self.layout)
        cap = self.cuts.cap(control.watermarks) if self.cuts is not None else None
        # A sweep merges a quiet window once its table's checkpoint is half a sweep behind it: a quiet
        # replica stays less than one and a half sweeps behind, and one merged lately is left alone
        # (a follower started after a scheduled run commits nothing to the replicas it just merged).
        work = find_work(self.layout, control, changelog, seen.known, cap, self.options.sweep_s / 2 if sweep else None)
        seen.marks, seen.known, seen.waiting = control.watermarks, dict(work.checkpoints), work.waiting
        if sweep:  # tables gone from the history (dropped, stopped) are forgotten
            seen.turns = {key: turn for key, turn in seen.turns.items() if key in seen.known}
            seen.later = {key: at for key, at in seen.later.items() if key in seen.known}
        seen.look, seen.again_at = False, _next_retry(seen.later, now)
        tables, left = self._take(work.tables, now)
        taken = {key: seen.known[key] for key in tables}
        seen.owed = {**left, **taken}  # a pass that fails owes its tables
        if not tables:
            return
        seen.look = True  # a pass that fails is looked at again
        history = control.history
        names = [table_name(history, key) for key in tables]
        # A dropped table whose name a new table took cannot be named: the pass then takes every table.
        found = history.find_many([tuple(name.split(".", 1)) for name in names])
        named = all(k == key for k, key in zip(found, tables))
        started = time.monotonic()
        report = self._merge(self.spark, self.layout, tables=names if named else None, until_ts=cap,
                             read=(control, changelog))  # the pass's own read, not a second one
        self.passes += 1
        for key in tables:
            seen.turns[key] = self.passes
        seen.owed = left
        self._after(report, time.monotonic() - started, taken)

    def _take(self, found: tuple[TableKey, ...], now: float) -> tuple[list[TableKey], dict[TableKey, int | None]]:
        """(the tables this pass merges, those it leaves out with their checkpoints) of the tables
        the look `found` with work and those an earlier pass owes whose checkpoint has not moved
        since (a sweep's quiet windows are found by the sweep only; a cut or a merge of every table
        moved the others): 1 / PASS_SHARE of them all (rounded up) or pass_tables, whichever is
        more, taken from those not waiting for a retry, the ones taken longest ago first."""
        seen = self._seen
        known = seen.known  # every table the look planned
        owed = (key for key, checkpoint in seen.owed.items() if key in known and known[key] == checkpoint)
        candidates = list(dict.fromkeys([*found, *owed]))
        candidates.sort(key=lambda key: seen.turns.get(key, 0))  # stable: the look's order among equals
        size = max(self.options.pass_tables, -(-len(candidates) // PASS_SHARE))
        due = [key for key in candidates if seen.later.get(key, 0.0) <= now]
        tables = due[:size]
        taken = set(tables)
        return tables, {key: known[key] for key in candidates if key not in taken}

    def _merge(self, spark: SparkSession, layout: LakeLayout, **kwargs) -> MergeReport:
        """run_merge with the follower's options: its passes' and its cuts' merges. With a metrics
        writer, that writer rewrites the merge metrics file, not each pass."""
        return run_merge(spark, layout, max_chunk_rows=self.options.max_chunk_rows, threads=self.options.threads,
                         history_config=self.options.history_config, handles=self.handles,
                         write_metrics=self.metrics is None, **kwargs)

    def _after(self, report: MergeReport, seconds: float, taken: dict[TableKey, int | None]) -> None:
        """What the pass's results teach: checkpoints, the tables kept out for a retry (owed again
        if the pass took them: a sweep's quiet window is not found again), the next wake-up, its line."""
        seen = self._seen
        for result in report.tables:
            key = TableKey(result.table_key)
            if result.checkpoint_after is not None and result.status != MergeStatus.ERROR:
                seen.known[key] = result.checkpoint_after
            else:
                seen.known.pop(key, None)
            if result.status == MergeStatus.BLOCKED and not result.held:
                seen.waiting = True
        now = time.monotonic()
        for result in report.tables:  # a failed table is tried again after RETRY_S, a held one sooner
            key = TableKey(result.table_key)
            retry = result.status in (MergeStatus.ERROR, MergeStatus.STOPPED) or result.held
            if retry:  # a held replica: maintenance or a bootstrap has its turn
                seen.later[key] = now + (HELD_RETRY_S if result.held else RETRY_S)
                if key in taken:
                    seen.owed[key] = taken[key]
            else:
                seen.later.pop(key, None)
        # The next poll passes while a table owed may be taken: one the pass had no room for, or one
        # left out for its retry whose wait ended while the pass ran.
        seen.look = any(seen.later.get(key, 0.0) <= now for key in seen.owed)
        seen.again_at = _next_retry(seen.later, now)
        if report.log_refused:
            seen.again_at = min(seen.again_at or now + RETRY_S, now + RETRY_S)
        merged = [r for r in report.tables if r.status == MergeStatus.MERGED]
        if merged or report.failed:
            self._last_pass = self._last_line = time.monotonic()
            self.say(pass_line(self.passes, report, seconds, len(seen.owed)))

    def _heartbeat(self, marks: Watermarks, now: float) -> None:
        self._last_line = now
        # The DDL watermark: a dropped table's row in table_resolved stays where it stopped.
        resolved = marks.ddl_resolved
        behind = f"watermarks {tso.lag_seconds(resolved, _now_ts()):.1f}s behind" if resolved else "no watermarks yet"
        last = f"last pass {now - self._last_pass:.0f}s ago" if self._last_pass is not None else "no pass yet"
        self.say(f"merge follower: idle; {behind}; {last}")


def _next_retry(later: dict[TableKey, float], now: float) -> float | None:
    """When the first table kept out for a retry may be taken again (None: none is kept out)."""
    return min((at for at in later.values() if at > now), default=None)


def pass_line(number: int, report: MergeReport, seconds: float, left: int = 0) -> str:
    """The progress line of a pass that did work: tables merged, windows, DDLs, changes, the worst
    replica lag after it (merged tables), the first failure, and the tables with work `left` for
    the next passes."""
    merged = [r for r in report.tables if r.status == MergeStatus.MERGED]
    now = _now_ts()
    lags = [(tso.lag_seconds(r.checkpoint_after, now), r.table) for r in merged if r.checkpoint_after is not None]
    worst = max(lags, default=None)
    line = (f"merge pass {number}: {len(merged)} of {len(report.tables)} tables merged, "
            f"{sum(r.windows for r in report.tables)} windows, {sum(r.ddls_applied for r in report.tables)} DDLs, "
            f"{sum(r.rows_in for r in report.tables)} changes in {seconds:.1f}s")
    if worst is not None:
        line += f"; worst replica lag {worst[0]:.1f}s ({worst[1]})"
    if report.failed:
        first = report.failed[0]
        line += f"; {len(report.failed)} failed ({first.table}: {first.reason}), retried in {RETRY_S:.0f}s"
    if left:
        line += f"; {left} tables with work waiting for the next passes"
    return line


def _now_ts() -> int:
    return tso.compose(int(time.time() * 1000))
