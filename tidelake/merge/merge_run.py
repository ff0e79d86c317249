"""A merge run: every selected table advanced as far as the watermarks and the cap allow, up to
`threads` tables at once (tidelake.merge.table_merge does one table), then one merge-log entry
per table. It keeps invariant 2 for the merge: the watermarks are read once, FIRST, then the DDL
history and one changelog snapshot shared by the run's tables.

Each table thread has its own session of the same Spark application (txn confs are per
session; tidelake.spark.spark_session.sibling_session). Tables that share a first window worth
reading together are read in one pass (tidelake.merge.run_pass), and the first windows the driver
writes in one scan of the changelog snapshot.
Owner: `tidelake merge` and the merge DAG's jobs (tidelake.orchestration.job_entry).
"""

from __future__ import annotations

import logging
import queue
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from pyspark.sql import SparkSession

from tidelake.config import HistoryConfig
from tidelake.errors import InputError
from tidelake.failpoints import failpoint
from tidelake.lake.damage import explain_failure, first_line
from tidelake.lake.control import ControlTables
from tidelake.lake.layout import LakeLayout
from tidelake.lake.lease import Leases, hold, replica_lease
from tidelake.lake.replica_catalog import ReplicaCatalog, ReplicaState
from tidelake.lake.schema_history import SchemaHistory, TableKey
from tidelake.lake.store_room import probe_room, refusal
from tidelake.lake.watermarks import Watermarks
from tidelake.merge import table_merge
from tidelake.merge.changelog_reader import Window
from tidelake.merge.changelog_snapshot import ChangelogSnapshot
from tidelake.merge.merge_log import MergeLogEntry, MergeStatus, append_entries
from tidelake.merge.merge_metrics import write_merge_metrics
from tidelake.merge.rebuild import rebuild_refusal, start_rebuild
from tidelake.merge.replica_handles import ReplicaHandles
from tidelake.merge.run_pass import RunPass, close_pass, open_pass
from tidelake.merge.table_merge import (
    FirstPlan,
    ProgressFn,
    RunScope,
    TableMerge,
    TableResult,
    table_name,
)
from tidelake.merge.table_plan import DEFAULT_CHUNK_ROWS, estimated_rows
from tidelake.merge.writers import spark_writer
from tidelake.side_by_side import side_by_side
from tidelake.spark.spark_session import release_session, sibling_session

log = logging.getLogger(__name__)

DEFAULT_THREADS = 2  # tables merged at once in one Spark application
# Changes (estimated) the run pass caches at most; windows beyond it read their own.
RUN_PASS_MAX_ROWS = 2_000_000
# Changes (estimated) the driver reads ahead at most for the windows it writes; beyond, their own reads.
READ_AHEAD_MAX_ROWS = table_merge.DRIVER_WINDOW_MAX_ROWS  # held in memory at once: one driver window's worth


@dataclass
class MergeReport:
    run_id: str
    started_at: datetime
    watermarks: Watermarks
    tables: list[TableResult] = field(default_factory=list)
    log_refused: str | None = None  # why the store refused the run's merge-log entries, if it did

    @property
    def no_room(self) -> list[TableResult]:
        """The failed tables, when every one of them failed for the store's lack of room (the same
        run later succeeds); empty when any failed otherwise."""
        failed = self.failed
        return failed if failed and all(t.no_room for t in failed) else []

    @property
    def failed(self) -> list[TableResult]:
        return [t for t in self.tables if t.status in (MergeStatus.ERROR, MergeStatus.STOPPED)]

    @property
    def blocked(self) -> list[TableResult]:
        """The blocked tables when no table advanced (the run did no work while work was waiting);
        empty otherwise."""
        if any(t.status == MergeStatus.MERGED for t in self.tables):
            return []
        return [t for t in self.tables if t.status == MergeStatus.BLOCKED]


def run_merge(
    spark: SparkSession,
    layout: LakeLayout,
    tables: Sequence[str] | None = None,
    until_ts: int | None = None,
    max_chunk_rows: int = DEFAULT_CHUNK_ROWS,
    progress: ProgressFn | None = None,
    write_log: bool = True,
    rebuild: str | None = None,
    threads: int = DEFAULT_THREADS,
    history_config: HistoryConfig | None = None,
    handles: ReplicaHandles | None = None,
    write_metrics: bool = True,
    read: tuple[ControlTables, ChangelogSnapshot] | None = None,
) -> MergeReport:
    """Merge `tables` (default all) as far as the watermarks and `until_ts` allow. `rebuild`
    ('db.table') first gives that table a new empty replica to replay from its CREATE
    (tidelake.merge.rebuild). `history_config` (the changefeed's [history]) turns on history
    tables and soft deletes for the tables it selects. `handles`: the replicas' logs kept from
    the caller's earlier runs (a long-running merger's; tidelake.merge.replica_handles).
    `write_metrics` False: the merge metrics file is left to the caller (the follower's side).
    `read`: the control tables and changelog snapshot the caller read for this run (RunScope.read)."""
    if threads < 1:
        raise InputError(f"merge threads must be at least 1, got {threads}")
    scope = replace(RunScope.read(layout, until_ts, max_chunk_rows, history_config, progress, read), handles=handles)
    history = scope.history
    keys = history.select(tables or ([rebuild] if rebuild is not None else None))
    if rebuild is not None:
        (rebuilt,) = history.select([rebuild])
        keys = keys if rebuilt in keys else [*keys, rebuilt]
    report = MergeReport(uuid.uuid4().hex, datetime.now(timezone.utc), scope.watermarks)
    # Every replica this run writes is leased first, before anything is planned from its state.
    with hold(layout, {key: (replica_lease(key), f"replica of {table_name(history, key)}") for key in keys}) as leases:
        if rebuild is not None:
            if rebuilt in leases.refused:
                raise leases.refused[rebuilt]
            _start_rebuild(layout, history, rebuild)
        blocked = [TableResult(int(key), table_name(history, key), MergeStatus.BLOCKED, reason=str(leases.refused[key]),
                               held=True)
                   for key in keys if key in leases.refused]
        keys = [key for key in keys if key not in leases.refused]
        outcomes = _merge_tables(spark, scope, keys, threads, report, leases)
    report.tables = blocked + [result for result, _ in outcomes]
    if write_log:
        failpoint("merge.before_log", report.run_id)
        try:
            if any(r.no_room for r, _ in outcomes):  # ask first: a refused delta-rs write prints a Rust panic
                probe_room(layout.root, layout.storage_options)
            append_entries(layout, [_log_entry(report.run_id, r, report.started_at) for r in blocked]
                           + [entry for _, entry in outcomes])
            if write_metrics:
                write_merge_metrics(layout)  # docs/operations.md#metrics
        except Exception as exc:
            cause = refusal(exc)
            if cause is None:
                raise
            # The log is for status; the replicas' commits carry their checkpoints. Status shows
            # the previous run until the next one writes its entries.
            report.log_refused = f"{cause}: {first_line(exc)}"
            log.warning("merge run %s: its merge-log entries were not written: %s", report.run_id[:8],
                        report.log_refused)
    return report


def _merge_tables(spark: SparkSession, scope: RunScope, keys: list[TableKey], threads: int, report: MergeReport,
                  leases: Leases) -> list[tuple[TableResult, MergeLogEntry]]:
    """Merge the leased `keys`, up to `threads` at once; each table's commits are fenced by its lease.
    The catalog is read once, now that the leases are held, and shared by the table threads."""
    layout, history = scope.layout, scope.history
    if not keys:
        return []
    parallel = min(threads, len(keys))
    catalog = ReplicaCatalog(layout)
    try:
        scope = replace(scope, catalog=catalog, entries=catalog.entries())
    except Exception:  # each table then reads the catalog itself, and reports its own failure
        log.warning("the replica catalog could not be read once for the run", exc_info=True)
        scope = replace(scope, catalog=catalog)
    firsts: dict[TableKey, FirstPlan] = {}
    if len(keys) > 1:
        planned = side_by_side(lambda key: _first_plan(scope, key), keys, parallel, "tidelake-merge")
        firsts = {key: first for key, first in zip(keys, planned) if first is not None}
    run_pass = _open_run_pass(spark, layout, scope.changelog, firsts)
    _read_ahead(scope.changelog, firsts, run_pass)
    scope = replace(scope, run_pass=run_pass)
    idle_sessions: queue.SimpleQueue[SparkSession] = queue.SimpleQueue()  # one per thread, reused by its tables
    sessions: list[SparkSession] = []

    # A table merged again after the others moved may have applied a DDL the first time: it reads
    # the catalog afresh.
    again_scope = replace(scope, entries=None)

    def merge_one(key: TableKey, first: bool = True) -> tuple[TableResult, datetime]:
        started = datetime.now(timezone.utc)
        failpoint("merge.next_table", key)
        session = None
        try:
            if parallel > 1 and spark is not None:  # a run without Spark writes every window on the driver
                try:
                    session = idle_sessions.get_nowait()
                except queue.Empty:
                    session = sibling_session(spark)
                    sessions.append(session)
            with leases.fencing(key):
                # the first plan (and the replica's handle in it) goes with the table: held once
                result = TableMerge(scope if first else again_scope, key, session or spark,
                                    firsts.pop(key, None) if first else None).run()
        except Exception as exc:  # before the table's own handling (its catalog, its session): still its row
            no_room = refusal(exc) is not None
            result = TableResult(int(key), table_name(history, key), MergeStatus.ERROR,
                                 reason=explain_failure(layout, exc), no_room=no_room)
            if no_room:
                log.warning("merge of %s failed: %s", result.table, result.reason)
            else:
                log.exception("merge of %s failed", result.table)
        finally:
            if session is not None:
                idle_sessions.put(session)
        return result, started

    def merge_all(batch: list[TableKey], first: bool) -> list[tuple[TableResult, datetime]]:
        return side_by_side(lambda key: merge_one(key, first), batch, parallel, "tidelake-merge")

    try:
        outcomes = merge_all(keys, True)
        # A table that reached its EXCHANGE PARTITION before the other table's replica did goes
        # again while the pass before moved some table on: its partner may have reached the
        # barrier since, so a syncpoint's or a scheduled run's single merge takes both past it.
        moved = any(_moved(result) for result, _ in outcomes)
        while moved:
            waiting = [i for i, (result, _) in enumerate(outcomes) if result.partner_behind]
            if not waiting:
                break
            again = merge_all([TableKey(outcomes[i][0].table_key) for i in waiting], False)
            moved = any(_moved(result) for result, _ in again)
            for i, (result, _) in zip(waiting, again):
                outcomes[i] = (_then(outcomes[i][0], result), outcomes[i][1])
    finally:
        for session in sessions:
            release_session(session)
        if run_pass is not None:
            close_pass(spark, run_pass)
    return [(result, _log_entry(report.run_id, result, started)) for result, started in outcomes]


def _moved(result: TableResult) -> bool:
    return bool(result.windows or result.ddls_applied)


def _then(before: TableResult, after: TableResult) -> TableResult:
    """One table's result over two passes of a run: the second's outcome, the sums of both."""
    return replace(after, checkpoint_before=before.checkpoint_before, windows=before.windows + after.windows,
                   ddls_applied=before.ddls_applied + after.ddls_applied, rows_in=before.rows_in + after.rows_in,
                   rows_out=before.rows_out + after.rows_out, duration_s=before.duration_s + after.duration_s)


def _first_plan(scope: RunScope, key: TableKey) -> FirstPlan | None:
    """None when the table's own handling decides (stopped, dropped, an error it will report). The
    replica's log it opens goes to the table's merge, which brings it up to date."""
    try:
        entry = scope.entry(scope.catalog, key)
        if entry is not None and entry.state != ReplicaState.ACTIVE:
            return None
        replica = scope.open_replica(key, entry.path) if entry is not None else None
        checkpoint = replica.checkpoint() if replica is not None else None
        stats = scope.stats(key, checkpoint)
        plan = scope.plan(key, checkpoint, stats)
    except Exception:  # reported by the table's merge, which plans again
        log.debug("no first plan for table %s", key, exc_info=True)
        return None
    return FirstPlan(checkpoint, stats, plan, replica)


def _open_run_pass(spark: SparkSession, layout: LakeLayout, changelog: ChangelogSnapshot,
                   firsts: dict[TableKey, FirstPlan]) -> RunPass | None:
    """The run pass over every first window worth sharing; None for fewer than two."""
    windows, total = {}, 0.0
    for key, first in firsts.items():
        plan = first.plan
        if plan.at_barrier or not plan.chunks:
            continue
        lo, hi = plan.chunks[0]
        rows = estimated_rows(first.stats, lo, hi)
        empty = not any(s.max_ts > lo and s.min_ts <= hi for s in first.stats)
        if (empty or rows <= table_merge.DRIVER_WINDOW_MAX_ROWS or rows > spark_writer.NEW_KEYS_CHECK_MAX_ROWS
                or total + rows > RUN_PASS_MAX_ROWS):  # a small window is read on the driver
            continue
        total += rows
        windows[key] = Window(tuple(plan.physical_ids), lo, hi)
    if len(windows) < 2:
        return None
    try:
        return open_pass(spark, layout, windows, changelog.bucket_seconds)
    except Exception:  # each table then reads its own window, as without the pass
        log.warning("the run pass over %d tables failed; each table reads its own window", len(windows),
                    exc_info=True)
        return None


def _read_ahead(changelog: ChangelogSnapshot, firsts: dict[TableKey, FirstPlan], run_pass: RunPass | None) -> None:
    """The first windows the driver writes, read in one scan of the run's changelog snapshot
    (ChangelogSnapshot.read_ahead); none for fewer than two."""
    windows, total = [], 0.0
    for key, first in firsts.items():
        plan = first.plan
        if plan.at_barrier or not plan.chunks or (run_pass is not None and key in run_pass.windows):
            continue
        lo, hi = plan.chunks[0]
        rows = estimated_rows(first.stats, lo, hi)
        empty = not any(s.max_ts > lo and s.min_ts <= hi for s in first.stats)
        if empty or rows > table_merge.DRIVER_WINDOW_MAX_ROWS or total + rows > READ_AHEAD_MAX_ROWS:
            continue
        total += rows
        windows.append((plan.physical_ids, lo, hi))
    if len(windows) < 2:
        return
    try:
        changelog.read_ahead(windows)
    except Exception:  # each table then reads its own window, as without it
        log.warning("reading %d windows ahead failed; each table reads its own", len(windows), exc_info=True)


def _start_rebuild(layout: LakeLayout, history: SchemaHistory, name: str) -> None:
    (key,) = history.select([name])
    refusal = rebuild_refusal(layout, history, key)
    if refusal is not None:
        raise InputError(f"cannot rebuild {name}: {refusal}")
    entry = start_rebuild(layout, history, key)
    log.info("rebuilding %s into %s from its CREATE", name, entry.path)


def _log_entry(run_id: str, r: TableResult, started: datetime) -> MergeLogEntry:
    return MergeLogEntry(
        run_id, int(r.table_key), r.table, r.status, r.checkpoint_before, r.checkpoint_after, r.windows,
        r.ddls_applied, r.rows_in, r.rows_out, r.duration_s, r.reason, started, datetime.now(timezone.utc),
        r.replica,
    )
