"""Freshness per stage: for the changes landed within a recent span, seconds from each change's
upstream commit (the physical part of its commit ts) to the commit time of the first lake version
showing it landed (changelog), covered (watermarks), merged (the replica's checkpoint) and in a
syncpoint (a recorded cut), read from the Delta logs' commits within the span only
(tidelake.lake.delta_commits). A change is (physical table, commit ts); one a stage has not shown
yet is pending there, never a number. Each stage is implemented once, here; freshness_tracker
keeps the same figures between calls. Owner: `tidelake freshness`; the merge's freshness metrics
and the Replication page show it.

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
from tidelake.lake.flush_stamps import stamps_of
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import read_entries
from tidelake.lake.schema_history import SchemaHistory, TableKey
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
    key_of = tables_by_physical_id(history, tables)
    reads: dict[str, int] = {}

    watermarks = DeltaLog(layout.watermarks, layout.storage_options)
    mark_commits = watermarks.commits_since(since_ms, now_ms)
    reads["watermarks"] = len(mark_commits)
    fold, mark_commits, kept_since_ms = WatermarkFold.at_span_start(layout, watermarks, mark_commits)
    base = fold.resolved()
    covered = covered_reach(((c.timestamp_ms, fold.apply(watermarks, c)) for c in mark_commits), set(key_of))
    if kept_since_ms is not None and kept_since_ms > since_ms:  # the watermarks' log keeps less than the span
        since_ms, span_s = kept_since_ms, (now_ms - kept_since_ms) / 1000

    changelog = DeltaLog(layout.changelog, layout.storage_options)
    landed_commits = changelog.commits_since(since_ms, now_ms)
    reads["changelog"] = len(landed_commits)
    landed = first_landed(zip((c.timestamp_ms for c in landed_commits),
                              landed_stamps(changelog, landed_commits, set(key_of))))
    changes = changes_of(landed, base, key_of)

    entries = read_entries(layout)
    paths = {key: entries[key].path for key in sorted({key_of[pid] for pid, _ in changes}) if key in entries}
    with ThreadPoolExecutor(max_workers=REPLICA_READERS) as pool:
        replica_commits = dict(zip(paths, pool.map(
            lambda key: DeltaLog(paths[key], layout.storage_options).commits_since(since_ms, now_ms), paths)))
    reads["replicas"] = sum(len(c) for c in replica_commits.values())
    merged = {key: merged_reach((c.timestamp_ms, merge_checkpoint(c)) for c in commits)
              for key, commits in replica_commits.items()}

    cuts_log = DeltaLog(layout.syncpoints, layout.storage_options)
    syncpoints = cuts_log.latest_version() is not None
    cut_commits = cuts_log.commits_since(since_ms, now_ms) if syncpoints else []
    reads["syncpoints"] = len(cut_commits)
    cuts = [(c.timestamp_ms, *cut) for c in cut_commits if (cut := read_cut(cuts_log, c)) is not None]
    return assemble(layout.root, history, key_of, span_s, now_ms, changes,
                    StageReach(landed, covered, merged, syncpoints, cuts), reads)


def tables_by_physical_id(history: SchemaHistory, tables: Sequence[str] | None = None) -> dict[int, TableKey]:
    """Every physical id `tables` ever had (default: every table of the history), to its table."""
    return {pid: key for key in history.select(list(tables) if tables else None) for pid in history.all_physical_ids(key)}


def landed_stamps(log: DeltaLog, commits: Sequence[DeltaCommit], pids: set[int] | None = None) -> list[set[tuple[int, int]]]:
    """Per commit, the (physical table, commit ts) it landed, of `pids` (None: every table): named
    in its commitInfo (tidelake.lake.flush_stamps), else, for a table it does not name, from its
    added files. A file whose statistics give one commit ts is not read; the others are read side
    by side."""
    out: list[set[tuple[int, int]]] = [set() for _ in commits]
    files = []
    for n, commit in enumerate(commits):
        named = stamps_of(commit.info, f"{log.path} version {commit.version}") or {}
        out[n].update((pid, ts) for pid, landed in named.items() if pids is None or pid in pids for ts in landed)
        files.extend((n, int(added.partition["table_id"]), added) for added in commit.added
                     if added.partition.get("table_id") is not None
                     and int(added.partition["table_id"]) not in named
                     and (pids is None or int(added.partition["table_id"]) in pids))

    def stamps(added: AddedFile) -> Iterable[int]:
        low, high = added.min_values.get("commit_ts"), added.max_values.get("commit_ts")
        if low is not None and low == high:
            return (int(low),)
        return set(log.read_file(added.path, ["commit_ts"]).column(0).to_pylist())

    with ThreadPoolExecutor(max_workers=FILE_READERS) as pool:
        for (n, pid, _), found in zip(files, pool.map(stamps, [added for _, _, added in files])):
            out[n].update((pid, ts) for ts in found)
    return out


def first_landed(stamps: Iterable[tuple[int, Iterable[tuple[int, int]]]]) -> dict[tuple[int, int], int]:
    """(physical table, commit ts) -> commit time of the first commit holding it, from (commit time
    ms, what it holds) in version order."""
    landed: dict[tuple[int, int], int] = {}
    for time_ms, held in stamps:
        for change in held:
            landed.setdefault(change, time_ms)
    return landed


def changes_of(landed: dict[tuple[int, int], int], base: dict[int, int],
               key_of: dict[int, TableKey]) -> list[tuple[int, int]]:
    """The changes of the span: those landed of the tables asked for, less any commit ts its table's
    watermark covered before the span (`base`): landed again, it is a replayed puller's duplicate."""
    return [(pid, ts) for (pid, ts) in landed if pid in key_of and ts > base.get(pid, 0)]


class WatermarkFold:
    """The watermarks as of one version: every puller rewrites its own partition per flush, so a
    version's watermarks are the partitions it rewrote over those before it, folded as every
    reader folds them (tidelake.lake.watermarks)."""

    def __init__(self, by_puller: dict[str | None, pa.Table] | None = None) -> None:
        self._by_puller = by_puller or {}

    @classmethod
    def at_span_start(cls, layout: LakeLayout, log: DeltaLog,
                      commits: list[DeltaCommit]) -> tuple[WatermarkFold, list[DeltaCommit], int | None]:
        """The watermarks before the span's `commits` (without any: the newest version's), the
        commits left to apply, and when the span must start instead (None: as asked). That version
        must load (its log is kept an hour, docs/design.md#lake-layout): when it does not, the span
        starts at the first version of it that loads, whose state is the base."""
        if not commits:
            newest = log.latest_version()
            return (cls() if newest is None else cls(_partitions(_load_watermarks(layout, newest))), commits, None)
        if commits[0].version == 0:  # the span holds the whole log: nothing before it
            return cls(), commits, None
        # the version before the span, else each version of it in turn: the state after it, the
        # commits after it and its time as the span's start
        bases = [(commits[0].version - 1, commits, None)]
        tried = commits[:WATERMARK_BASE_TRIES - 1]
        bases += [(c.version, commits[n + 1:], c.timestamp_ms) for n, c in enumerate(tried)]
        for version, rest, start_ms in bases:
            try:
                rows = _load_watermarks(layout, version)
            except DeltaError:  # that version's log was cleaned up
                continue
            return cls(_partitions(rows)), rest, start_ms
        raise InputError(f"{layout.watermarks}: no version of the span loads (its log was cleaned up): "
                         "give a shorter --since")

    def apply(self, log: DeltaLog, commit: DeltaCommit) -> dict[int, int]:
        """Move to `commit`'s version; each physical table's resolved ts there."""
        for partition in commit.removed_partitions:
            self._by_puller.pop(partition.get("puller"), None)
        rewritten: dict[str | None, list[pa.Table]] = {}
        for added in commit.added:
            rewritten.setdefault(added.partition.get("puller"), []).append(log.read_file(added.path, FOLDED))
        for puller, parts in rewritten.items():
            self._by_puller[puller] = pa.concat_tables(parts)
        return self.resolved()

    def resolved(self) -> dict[int, int]:
        """Each physical table's resolved ts as of this version."""
        if not self._by_puller:
            return {}
        rows = pa.concat_tables([t.select(FOLDED) for t in self._by_puller.values()])
        return fold_watermarks(rows).table_resolved


def _load_watermarks(layout: LakeLayout, version: int) -> pa.Table:
    return read_delta(DeltaTable(layout.watermarks, version=version, storage_options=layout.storage_options),
                      ["puller", *FOLDED])


def _partitions(rows: pa.Table) -> dict[str | None, pa.Table]:
    return {puller: rows.filter(pc.equal(rows.column("puller"), puller))
            for puller in set(rows.column("puller").to_pylist())}


def covered_reach(versions: Iterable[tuple[int, dict[int, int]]], pids: set[int]) -> dict[int, Reach]:
    """Per physical table of `pids`, what the watermark versions (commit time ms, resolved ts per
    table) showed of its resolved ts."""
    points: dict[int, list[tuple[int, int]]] = {}
    for time_ms, resolved in versions:
        for pid, ts in resolved.items():
            if pid in pids:
                points.setdefault(pid, []).append((time_ms, ts))
    return {pid: Reach(p) for pid, p in points.items()}


def merge_checkpoint(commit: DeltaCommit) -> int | None:
    """The checkpoint a replica version recorded (the merge's txn, tidelake.lake.checkpoint), if any."""
    return commit.txns.get(MERGE_APP_ID)


def merged_reach(versions: Iterable[tuple[int, int | None]]) -> Reach:
    """What a replica's versions (commit time ms, merge_checkpoint) showed of its checkpoint."""
    return Reach((time_ms, checkpoint) for time_ms, checkpoint in versions if checkpoint is not None)


def read_cut(log: DeltaLog, commit: DeltaCommit) -> tuple[int, set[str]] | None:
    """The cut ts a syncpoints version recorded and the tables it left out (`excluded` of its row);
    None for a version that recorded no cut."""
    if SYNCPOINT_APP_ID not in commit.txns:
        return None
    left_out: set[str] = set()
    for added in commit.added:
        for text in log.read_file(added.path, ["excluded"]).column(0).to_pylist():
            left_out.update(json.loads(text or "{}"))
    return commit.txns[SYNCPOINT_APP_ID], left_out


@dataclass(frozen=True)
class StageReach:
    """What the span's versions showed, per stage: first landing per change, the watermarks per
    physical table, the checkpoint per replica, and the cuts as (commit time ms, cut ts, left out);
    `syncpoints` False when the lake records none."""

    landed: dict[tuple[int, int], int]
    covered: dict[int, Reach]
    merged: dict[TableKey, Reach]
    syncpoints: bool
    cuts: list[tuple[int, int, set[str]]]


def assemble(lake: str, history: SchemaHistory, key_of: dict[int, TableKey], span_s: float, now_ms: int,
             changes: list[tuple[int, int]], reach: StageReach, reads: dict[str, int]) -> FreshnessReport:
    """The report of `changes`: each one's seconds from its commit to the first version of each
    stage showing it (None: pending), figures over all and per table (its current name)."""
    in_cuts: dict[str, Reach] = {}  # per table: the cuts that did not leave it out
    seconds: list[dict[str, float | None]] = []
    names: list[str] = []
    for pid, ts in changes:
        key = key_of[pid]
        name = ".".join(history.current_name(key))
        if name not in in_cuts:
            in_cuts[name] = Reach((t, cut) for t, cut, left_out in reach.cuts if name not in left_out)
        at = {"landed": reach.landed[(pid, ts)],
              "covered": reach.covered[pid].first_at_or_above(ts) if pid in reach.covered else None,
              "merged": reach.merged[key].first_at_or_above(ts) if key in reach.merged else None,
              "syncpoint": in_cuts[name].first_at_or_above(ts)}
        committed = tso.physical_ms(ts)
        seconds.append({stage: None if t is None else (t - committed) / 1000 for stage, t in at.items()})
        seconds[-1]["age"] = (now_ms - committed) / 1000
        names.append(name)
    per_table: dict[str, list[dict[str, float | None]]] = {}
    for name, row in zip(names, seconds):
        per_table.setdefault(name, []).append(row)
    return FreshnessReport(lake, span_s, now_ms, len(changes), reach.syncpoints, _figures(seconds),
                           {name: _figures(rows) for name, rows in per_table.items()}, reads)


def _figures(rows: list[dict[str, float | None]]) -> dict[str, StageFigures]:
    out = {}
    for stage in STAGES:
        shown = sorted(r[stage] for r in rows if r[stage] is not None)
        waiting = [r["age"] for r in rows if r[stage] is None]
        out[stage] = StageFigures(len(shown), len(waiting), percentiles(shown, QUANTILES),
                                  shown[-1] if shown else None, max(waiting) if waiting else None)
    return out


def percentiles(values: Sequence[float], qs: Sequence[int]) -> dict[int, float | None]:
    """The q-th percentile of sorted `values` for each of `qs` (interpolated between ranks; None
    when empty), the cut points computed once."""
    if len(values) <= 1:
        return {q: values[0] if values else None for q in qs}
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {q: cuts[q - 1] for q in qs}
