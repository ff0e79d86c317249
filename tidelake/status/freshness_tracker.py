"""Freshness per stage kept between calls: the figures collect_freshness gives over the last
`span_s`, each call reading only the log versions committed since the previous one (watermarks,
changelog, the replicas of tables with changes in the span, syncpoints) and dropping those that
fell out of the span; each stage is read and figured by tidelake.status.freshness. A call after a
gap longer than the span, or after a failed call, starts over from the span's versions. Memory
follows the span's changes, as one full computation's does.
Owner: the merge follower's freshness metrics (tidelake.status.freshness_metrics).

More: docs/internals.md#freshness_tracker.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

from tidelake.lake.delta_commits import DeltaCommit, DeltaLog
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import read_entries
from tidelake.lake.schema_history import SchemaHistory, TableKey
from tidelake.status.freshness import (RECENT_SPAN_S, REPLICA_READERS, FreshnessReport, StageReach, WatermarkFold,
                                       assemble, changes_of, covered_reach, first_landed, landed_stamps,
                                       merge_checkpoint, merged_reach, read_cut, tables_by_physical_id)

T = TypeVar("T")


class SpanLog(Generic[T]):
    """One Delta log's commits within the span, in version order, as (commit time ms, what its
    stage read from it), and `cursor`, the newest version read (None: the log had none)."""

    def __init__(self, cursor: int | None) -> None:
        self.cursor = cursor
        self.entries: list[tuple[int, T]] = []

    def add(self, commits: Sequence[DeltaCommit], payloads: Iterable[T]) -> None:
        self.entries.extend((commit.timestamp_ms, payload) for commit, payload in zip(commits, payloads))
        if commits:
            self.cursor = commits[-1].version

    def drop_before(self, since_ms: int) -> list[T]:
        """Drop the entries through the last one committed before `since_ms`, where a walk back
        from the newest version stops (DeltaLog.commits_since); what they held, oldest first."""
        last = max((n for n, (time_ms, _) in enumerate(self.entries) if time_ms < since_ms), default=-1)
        dropped = [payload for _, payload in self.entries[:last + 1]]
        del self.entries[:last + 1]
        return dropped


def _first_read(log: DeltaLog, since_ms: int, now_ms: int) -> tuple[SpanLog, list[DeltaCommit]]:
    """An empty SpanLog at the log's newest version and the span's commits to add to it."""
    newest = log.latest_version()
    return SpanLog(newest), (log.commits_since(since_ms, now_ms) if newest is not None else [])


def _read_on(span: SpanLog | None, log: DeltaLog, since_ms: int, now_ms: int) -> tuple[SpanLog, list[DeltaCommit]]:
    """`span` (a first read when None) and the commits to add to it: those after its cursor."""
    if span is None:
        return _first_read(log, since_ms, now_ms)
    return span, log.commits_after(span.cursor, now_ms)


class FreshnessTracker:
    """`report()` is collect_freshness(layout, span_s) of every table, kept up to date: the
    state between calls is each log's SpanLog, the watermarks as of its cursor (a WatermarkFold)
    and as of the version before the span (`base`)."""

    def __init__(self, layout: LakeLayout, span_s: float = RECENT_SPAN_S) -> None:
        self.layout, self.span_s = layout, span_s
        options = layout.storage_options
        self._watermarks = DeltaLog(layout.watermarks, options)
        self._changelog = DeltaLog(layout.changelog, options)
        self._syncpoints = DeltaLog(layout.syncpoints, options)
        self._reset()

    def _reset(self) -> None:
        self._read_at_ms: int | None = None
        self._floor_ms = 0  # the span starts no earlier: the watermarks' log kept less at the first call
        self._fold = WatermarkFold()
        self._base: dict[int, int] = {}
        self._marks: SpanLog[dict[int, int]] | None = None
        self._landed: SpanLog[set[tuple[int, int]]] | None = None
        self._cuts: SpanLog[tuple[int, set[str]] | None] | None = None
        self._replicas: dict[TableKey, tuple[DeltaLog, SpanLog[int | None]]] = {}

    def report(self, now_ms: int | None = None) -> FreshnessReport:
        """The figures over the `span_s` before `now_ms` (default: the wall clock; calls in time
        order), reading the versions committed since the previous call."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        if self._read_at_ms is None or now_ms - self._read_at_ms > self.span_s * 1000:
            self._reset()
        try:
            report = self._update(now_ms)
        except BaseException:
            self._reset()  # a log read halfway is read again from the span
            raise
        self._read_at_ms = now_ms
        return report

    def _update(self, now_ms: int) -> FreshnessReport:
        since_ms = max(now_ms - int(self.span_s * 1000), self._floor_ms)
        reads: dict[str, int] = {}
        history = SchemaHistory.load(self.layout)
        key_of = tables_by_physical_id(history)

        log = self._watermarks
        if self._marks is None:
            self._marks, commits = _first_read(log, since_ms, now_ms)
            reads["watermarks"] = len(commits)
            self._fold, commits, kept_since_ms = WatermarkFold.at_span_start(self.layout, log, commits)
            self._base = self._fold.resolved()
            if kept_since_ms is not None and kept_since_ms > since_ms:  # the watermarks' log keeps less than the span
                self._floor_ms = since_ms = kept_since_ms
        else:
            commits = log.commits_after(self._marks.cursor, now_ms)
            reads["watermarks"] = len(commits)
        self._marks.add(commits, [self._fold.apply(log, commit) for commit in commits])
        dropped = self._marks.drop_before(since_ms)
        if dropped:
            self._base = dropped[-1]

        log = self._changelog
        self._landed, commits = _read_on(self._landed, log, since_ms, now_ms)
        reads["changelog"] = len(commits)
        self._landed.add(commits, landed_stamps(log, commits))
        self._landed.drop_before(since_ms)
        landed = first_landed(self._landed.entries)
        changes = changes_of(landed, self._base, key_of)

        reads["replicas"] = self._follow_replicas({key_of[pid] for pid, _ in changes}, since_ms, now_ms)

        log = self._syncpoints
        self._cuts, commits = _read_on(self._cuts, log, since_ms, now_ms)
        reads["syncpoints"] = len(commits)
        self._cuts.add(commits, [read_cut(log, commit) for commit in commits])
        self._cuts.drop_before(since_ms)

        reach = StageReach(landed, covered_reach(self._marks.entries, {pid for pid, _ in changes}),
                           {key: merged_reach(span.entries) for key, (_, span) in self._replicas.items()},
                           self._cuts.cursor is not None,
                           [(time_ms, *cut) for time_ms, cut in self._cuts.entries if cut is not None])
        span_s = self.span_s if since_ms == now_ms - int(self.span_s * 1000) else (now_ms - since_ms) / 1000
        return assemble(self.layout.root, history, key_of, span_s, now_ms, changes, reach, reads)

    def _follow_replicas(self, changed: set[TableKey], since_ms: int, now_ms: int) -> int:
        """Bring the replicas of the tables with changes up to date, forget the others (and a
        replica whose folder changed: a rebuilt one); the versions read."""
        entries = read_entries(self.layout)
        paths = {key: entries[key].path for key in changed if key in entries}

        def catch_up(key: TableKey) -> tuple[DeltaLog, SpanLog[int | None], int]:
            tracked = self._replicas.get(key)
            if tracked is not None and tracked[0].path == paths[key]:
                log, span = tracked
                commits = log.commits_after(span.cursor, now_ms)
            else:
                log = DeltaLog(paths[key], self.layout.storage_options)
                span, commits = _first_read(log, since_ms, now_ms)
            span.add(commits, [merge_checkpoint(commit) for commit in commits])
            span.drop_before(since_ms)
            return log, span, len(commits)

        with ThreadPoolExecutor(max_workers=REPLICA_READERS) as pool:
            caught = dict(zip(paths, pool.map(catch_up, paths)))
        self._replicas = {key: (log, span) for key, (log, span, _) in caught.items()}
        return sum(read for _, _, read in caught.values())
