"""Freshness per stage: for the changes landed within a recent span, seconds from each change's
upstream commit (the physical part of its commit ts) to the commit time of the first lake version
showing it landed (changelog), covered (watermarks), merged (the replica's checkpoint) and in a
syncpoint (a recorded cut), read from the Delta logs' commits within the span only
(tidelake.lake.delta_commits). A change is (physical table, commit ts); one a stage has not shown
yet is pending there, never a number.
Owner: `tidelake freshness`; the merge's freshness metrics and the Replication page show it.

More: docs/internals.md#freshness.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from tidelake import tso
from tidelake.config import parse_duration
from tidelake.errors import InputError
from tidelake.lake.checkpoint import MERGE_APP_ID
from tidelake.lake.delta_commits import AddedFile, DeltaCommit, DeltaLog
from tidelake.lake.delta_read import read_delta
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import read_entries
from tidelake.lake.schema_history import SchemaHistory
from tidelake.lake.watermarks import fold_watermarks
from tidelake.syncpoint.records import SYNCPOINT_APP_ID

STAGES = ("landed", "covered", "merged", "syncpoint")
QUANTILES = (50, 95, 99)
DEFAULT_SPAN_S = 600  # `tidelake freshness`
RECENT_SPAN_S = 300  # the merge's metrics and the Replication page: the default merge schedule
REPLICA_READERS = 16  # replica logs read at once
FILE_READERS = 8  # changelog files read at once (parquet decoding releases the GIL)
WATERMARK_BASE_TRIES = 12  # versions tried for a base state: a checkpoint is written every 10
FOLDED = ["kind", "table_id", "resolved_ts", "changelog_version", "ddl_version"]  # what fold_watermarks reads


@dataclass(frozen=True)
class StageFigures:
    """One stage over a set of changes: how many it showed and how many it has not yet (pending),
    seconds from commit of those it showed (None without any), and the age of the oldest pending."""

    shown: int
    pending: int
    quantiles: dict[int, float | None]
    max_s: float | None
    oldest_pending_s: float | None

    def to_json(self) -> dict[str, Any]:
        return {"shown": self.shown, "pending": self.pending,
                **{f"p{q}": value for q, value in self.quantiles.items()},
                "max": self.max_s, "oldest_pending_s": self.oldest_pending_s}


@dataclass
class FreshnessReport:
    """Per stage figures over every change of the span, and per table (`db.table`). `syncpoints`
    is False when the lake records none (the stage is then left out, not pending)."""

    lake: str
    span_s: float
    now_ms: int
    changes: int
    syncpoints: bool
    stages: dict[str, StageFigures]
    tables: dict[str, dict[str, StageFigures]] = field(default_factory=dict)
    versions_read: dict[str, int] = field(default_factory=dict)

    @property
    def shown_stages(self) -> tuple[str, ...]:
        return STAGES if self.syncpoints else STAGES[:-1]

    def summary_line(self) -> str:
        """One line: the changes, then p50/p99 seconds per stage and what each has not shown yet."""
        def seconds(value: float | None) -> str:
            return "-" if value is None else f"{value:.1f}"

        stages = ", ".join(f"{s} p50 {seconds(self.stages[s].quantiles[50])}s p99 {seconds(self.stages[s].quantiles[99])}s"
                           + (f" ({self.stages[s].pending} pending)" if self.stages[s].pending else "")
                           for s in self.shown_stages)
        return f"{self.changes} changes landed in the last {self.span_s:.0f}s: {stages}"

    def to_json(self) -> dict[str, Any]:
        return {
            "lake": self.lake,
            "span_s": self.span_s,
            "now_ms": self.now_ms,
            "changes": self.changes,
            "syncpoints": self.syncpoints,
            "stages": {s: self.stages[s].to_json() for s in self.shown_stages},
            "tables": {name: {s: figures[s].to_json() for s in self.shown_stages}
                       for name, figures in sorted(self.tables.items())},
            "versions_read": self.versions_read,
        }


class Reach:
    """What the versions of one Delta table showed of a growing quantity (a resolved ts, a
    checkpoint, a cut ts), as (commit time ms, value) in version order. The first version whose
    value reaches a ts is where the running maximum first does: a binary search."""

    def __init__(self, points: Iterable[tuple[int, int]]) -> None:
        self._times: list[int] = []
        self._peaks: list[int] = []
        for time_ms, value in points:
            self._times.append(time_ms)
            self._peaks.append(value if not self._peaks else max(self._peaks[-1], value))

    def first_at_or_above(self, ts: int) -> int | None:
        """Commit time (ms) of the first version showing `ts`, None if none does yet."""
        at = bisect_left(self._peaks, ts)
        return self._times[at] if at < len(self._peaks) else None


def parse_span(text: str) -> float:
    """Seconds of a span: a number of seconds, or a duration as the config writes them (90s, 10m,
    1h30m: tidelake.config.parse_duration)."""
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parse_duration(text)
        except ValueError:
            seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise InputError(f"--since {text!r} is not a span: give seconds or a duration such as 90s, 10m or 1h30m")
    return seconds


def collect_freshness(layout: LakeLayout, span_s: float = DEFAULT_SPAN_S, tables: Sequence[str] | None = None,
                      now_ms: int | None = None) -> FreshnessReport:
    """Freshness per stage of the changes landed in the last `span_s` seconds before `now_ms`
    (default: the wall clock), of `tables` ('db.table'; default every table of the DDL history),
    as the lake stood at `now_ms`: versions committed after it are left out."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    since_ms = now_ms - int(span_s * 1000)
    history = SchemaHistory.load(layout)
    keys = history.select(list(tables) if tables else None)
    key_of = {pid: key for key in keys for pid in history.all_physical_ids(key)}
    reads: dict[str, int] = {}

    watermarks = DeltaLog(layout.watermarks, layout.storage_options)
    mark_commits = watermarks.commits_since(since_ms, now_ms)
    reads["watermarks"] = len(mark_commits)
    base, covered, kept_since_ms = _covered(layout, watermarks, mark_commits, set(key_of))
    if kept_since_ms is not None and kept_since_ms > since_ms:  # the watermarks' log keeps less than the span
        since_ms, span_s = kept_since_ms, (now_ms - kept_since_ms) / 1000

    changelog = DeltaLog(layout.changelog, layout.storage_options)
    landed_commits = changelog.commits_since(since_ms, now_ms)
    reads["changelog"] = len(landed_commits)
    landed = _landed(changelog, landed_commits, set(key_of))
    # A commit ts already covered before the span landed before it too: landed again (a replayed
    # puller's duplicate), it is not a change of this span.
    changes = [(pid, ts) for (pid, ts) in landed if ts > base.get(pid, 0)]

    entries = read_entries(layout)
    changed_keys = sorted({key_of[pid] for pid, _ in changes})
    paths = {key: entries[key].path for key in changed_keys if key in entries}
    with ThreadPoolExecutor(max_workers=REPLICA_READERS) as pool:
        replica_commits = dict(zip(paths, pool.map(
            lambda key: DeltaLog(paths[key], layout.storage_options).commits_since(since_ms, now_ms), paths)))
    reads["replicas"] = sum(len(c) for c in replica_commits.values())
    merged = {key: _txn_reach(commits, MERGE_APP_ID) for key, commits in replica_commits.items()}

    cuts_log = DeltaLog(layout.syncpoints, layout.storage_options)
    syncpoints = cuts_log.latest_version() is not None
    cut_commits = cuts_log.commits_since(since_ms, now_ms) if syncpoints else []
    reads["syncpoints"] = len(cut_commits)
    cuts = _cuts(cuts_log, cut_commits)
    in_cuts: dict[str, Reach] = {}  # per table: the cuts that did not leave it out

    seconds: list[dict[str, float | None]] = []
    names: list[str] = []
    for pid, ts in changes:
        key = key_of[pid]
        name = ".".join(history.current_name(key))
        if name not in in_cuts:
            in_cuts[name] = Reach((t, cut) for t, cut, left_out in cuts if name not in left_out)
        at = {"landed": landed[(pid, ts)],
              "covered": covered[pid].first_at_or_above(ts) if pid in covered else None,
              "merged": merged[key].first_at_or_above(ts) if key in merged else None,
              "syncpoint": in_cuts[name].first_at_or_above(ts)}
        committed = tso.physical_ms(ts)
        seconds.append({stage: None if t is None else (t - committed) / 1000 for stage, t in at.items()})
        seconds[-1]["age"] = (now_ms - committed) / 1000
        names.append(name)
    per_table: dict[str, list[dict[str, float | None]]] = {}
    for name, row in zip(names, seconds):
        per_table.setdefault(name, []).append(row)
    return FreshnessReport(layout.root, span_s, now_ms, len(changes), syncpoints, _figures(seconds),
                           {name: _figures(rows) for name, rows in per_table.items()}, reads)


def _landed(log: DeltaLog, commits: list[DeltaCommit], pids: set[int]) -> dict[tuple[int, int], int]:
    """(physical table, commit ts) -> commit time of the first of `commits` whose added files hold it.
    A file whose statistics give one commit ts is not read; the others are read side by side."""
    files = [(commit.timestamp_ms, int(added.partition["table_id"]), added) for commit in commits
             for added in commit.added if int(added.partition.get("table_id") or -1) in pids]

    def stamps(added: AddedFile) -> Iterable[int]:
        low, high = added.min_values.get("commit_ts"), added.max_values.get("commit_ts")
        if low is not None and low == high:
            return (int(low),)
        return set(log.read_file(added.path, ["commit_ts"]).column(0).to_pylist())

    landed: dict[tuple[int, int], int] = {}
    with ThreadPoolExecutor(max_workers=FILE_READERS) as pool:
        for (time_ms, pid, _), found in zip(files, pool.map(stamps, [added for _, _, added in files])):
            for ts in found:
                landed.setdefault((pid, ts), time_ms)
    return landed


def _covered(layout: LakeLayout, log: DeltaLog, commits: list[DeltaCommit],
             pids: set[int]) -> tuple[dict[int, int], dict[int, Reach], int | None]:
    """Each physical table's resolved ts before the span, what each version within it showed, and
    when the span must start instead (None: as asked). Every puller rewrites its own partition per
    flush: a version's watermarks are the partitions it rewrote over those before it, folded as
    every reader folds them (tidelake.lake.watermarks). The version before the span must load
    (its log is kept an hour, docs/design.md#lake-layout): when it does not, the span starts at the
    first version of it that loads, whose state is the base."""
    by_puller: dict[str | None, pa.Table] = {}
    kept_since_ms = None
    for n, commit in enumerate(commits[:WATERMARK_BASE_TRIES]):
        version = commit.version - 1 if n == 0 else commit.version
        if version < 0:
            break
        try:
            rows = read_delta(DeltaTable(layout.watermarks, version=version, storage_options=layout.storage_options),
                              ["puller", *FOLDED])
        except DeltaError:  # that version's log was cleaned up
            continue
        for puller in set(rows.column("puller").to_pylist()):
            by_puller[puller] = rows.filter(pc.equal(rows.column("puller"), puller))
        if n > 0:
            commits, kept_since_ms = commits[n + 1:], commit.timestamp_ms
        break
    else:
        if commits and commits[0].version > 0:
            raise InputError(f"{layout.watermarks}: no version of the span loads (its log was cleaned up): "
                             "give a shorter --since")
    base = _resolved(by_puller)
    points: dict[int, list[tuple[int, int]]] = {}
    for commit in commits:
        for partition in commit.removed_partitions:
            by_puller.pop(partition.get("puller"), None)
        rewritten: dict[str | None, list[pa.Table]] = {}
        for added in commit.added:
            rewritten.setdefault(added.partition.get("puller"), []).append(log.read_file(added.path, FOLDED))
        for puller, parts in rewritten.items():
            by_puller[puller] = pa.concat_tables(parts)
        for pid, ts in _resolved(by_puller).items():
            if pid in pids:
                points.setdefault(pid, []).append((commit.timestamp_ms, ts))
    return ({pid: ts for pid, ts in base.items() if pid in pids}, {pid: Reach(p) for pid, p in points.items()},
            kept_since_ms)


def _resolved(by_puller: dict[str | None, pa.Table]) -> dict[int, int]:
    if not by_puller:
        return {}
    rows = pa.concat_tables([t.select(FOLDED) for t in by_puller.values()])
    return fold_watermarks(rows).table_resolved


def _cuts(log: DeltaLog, commits: list[DeltaCommit]) -> list[tuple[int, int, set[str]]]:
    """(commit time ms, cut ts, the tables it left out: `excluded` of its row) of each recorded cut."""
    out = []
    for commit in commits:
        if SYNCPOINT_APP_ID not in commit.txns:
            continue
        left_out: set[str] = set()
        for added in commit.added:
            for text in log.read_file(added.path, ["excluded"]).column(0).to_pylist():
                left_out.update(json.loads(text or "{}"))
        out.append((commit.timestamp_ms, commit.txns[SYNCPOINT_APP_ID], left_out))
    return out


def _txn_reach(commits: list[DeltaCommit], app_id: str) -> Reach:
    return Reach((c.timestamp_ms, c.txns[app_id]) for c in commits if app_id in c.txns)


def _figures(rows: list[dict[str, float | None]]) -> dict[str, StageFigures]:
    out = {}
    for stage in STAGES:
        shown = sorted(r[stage] for r in rows if r[stage] is not None)
        waiting = [r["age"] for r in rows if r[stage] is None]
        out[stage] = StageFigures(len(shown), len(waiting), {q: percentile(shown, q) for q in QUANTILES},
                                  shown[-1] if shown else None, max(waiting) if waiting else None)
    return out


def percentile(values: Sequence[float], q: int) -> float | None:
    """The q-th percentile of sorted `values`, interpolated between ranks; None when empty."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]
