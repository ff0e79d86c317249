"""The merge loop: advance each replica to min(resolvedTs, barrierTs, cap), applying DDLs at barriers.

Per table, until the plan has nothing left:
  checkpoint (the replica's Delta txn) -> plan -> for each chunk (lo, hi]: read the changelog
  window with partition pruning, keep the last change per row key, decode (mount), INSERT (no
  key of the window has a row at lo: tidelake.merge.window_keys) or MERGE into the replica with
  txn (MERGE_APP_ID, hi) in the same commit -> at a barrier, apply_ddl. A window of at most
  DRIVER_WINDOW_MAX_ROWS changes does the same on the driver with delta-rs, without a Spark job
  (tidelake.merge.driver_window), when the replica allows it.

Why this is exactly-once: the checkpoint moves only inside the commit that writes the rows up
to it (invariant 3), and Delta skips an INSERT or MERGE whose txn version is not above the recorded one,
so a rerun after a crash at any point either finds the chunk committed (and plans from there)
or redoes it whole. Watermarks are read once, FIRST, before the ddl table, the changelog's file
stats and the changelog itself (invariant 2).

Last change per key: tidelake.merge.changelog_reader.collapse_last_change. The MERGE key (replica_schema.key_columns) is the handle,
prefixed by the partition id for partitioned tables, so each raw key maps to one replica row:
a PK change (delete old key + put new key in one txn) and a partition move (delete in one
physical id + put in another) are two rows, deleted and inserted. A common handle holds collation
keys, so one raw key can change its PK string ('ab' -> 'AB' under a _ci collation): such tables
match the replica on the PK as it was before the window (tidelake.merge.mount.match_columns).

Up to `threads` tables merge at once, each thread in its own session of the same application
(tidelake.spark.spark_session.sibling_session: the txn confs are per session; a thread's tables reuse it): a window is mostly Delta's driver-side planning between
small jobs, so two tables overlap well even on two cores (1.45x measured, bench/README.md).
Tables also run in parallel as separate jobs (Airflow mapped tasks), never two jobs on one table. A MERGE or DDL
step that loses a Delta commit race (an OPTIMIZE of the replica compacting files the MERGE read
raises ConcurrentDeleteReadException) is run again: each is idempotent by its txn version.

Failpoints (tidelake.failpoints, named in MERGE_FAILPOINTS and docs/nemesis.md §4) sit where a
crash of the run matters: as a table's turn starts, before and after each window's commit, after
a DDL's last commit, and before the merge log's append. The nemesis arms them to crash a run.

History and soft deletes (README "History for consumers"): a replica with an SCD2 history table
gets each window's and each DDL's history commit BEFORE its own (tidelake.merge.scd2_history
says why that is exactly-once); a replica with soft deletes is always MERGEd
(tidelake.merge.soft_deletes). The changefeed config's [history] section turns either on for a
table; once on, every merge keeps it, whichever way it is started.
"""

from __future__ import annotations

import json
import logging
import queue
import random
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from tidelake.config import HistoryConfig
from tidelake.errors import InputError
from tidelake.failpoints import failpoint
from tidelake.lake.checkpoint import (
    MERGE_APP_ID,
    checkpoint_metadata,
    open_replica,
    read_checkpoint,
)
from tidelake.lake.commit_buckets import bucket_seconds_of
from tidelake.lake.control import read_control
from tidelake.lake.damage import explain_failure
from tidelake.lake.history_table import history_checkpoint, history_path
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog, ReplicaEntry, ReplicaState
from tidelake.lake.replica_facts import ReplicaFacts, read_replica_facts
from tidelake.lake.row_change import OP_PUT
from tidelake.lake.schema_history import DdlEvent, SchemaHistory, TableKey
from tidelake.lake.watermarks import Watermarks
from tidelake.merge import driver_window
from tidelake.merge.changelog_reader import Window, collapse_last_change, read_changes
from tidelake.merge.ddl_apply import UnsupportedDDL, apply_ddl, leaves_replica_unchanged, record_checkpoint
from tidelake.merge.merge_log import MergeLogEntry, MergeStatus, append_entries
from tidelake.merge.merge_metrics import write_merge_metrics
from tidelake.merge.mount import MOUNT_OP_COLUMN, match_columns, mount, mount_arrow
from tidelake.merge.replica_schema import COMMIT_TS_COLUMN, DELETED_COLUMN, key_columns, quote
from tidelake.merge.run_pass import RunPass, close_pass, open_pass
from tidelake.merge.scd2_history import create_history, write_history
from tidelake.merge.soft_deletes import enable_soft_deletes, has_soft_deletes, live_condition
from tidelake.merge.table_plan import (
    DEFAULT_CHUNK_ROWS,
    ChangelogFiles,
    FileStat,
    TableMergePlan,
    changelog_file_stats,
    estimated_rows,
    plan_table,
    read_changelog_files,
)
from tidelake.merge.txn_confs import txn_confs
from tidelake.merge.window_keys import WindowKeys, window_keys
from tidelake.spark.spark_session import release_session, sibling_session
from tidelake.spark.temp_view import source_view

if TYPE_CHECKING:
    from deltalake import DeltaTable as DeltaLog
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from tidelake.codec.schema import TableInfo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MergeProgress:
    """One step of a table, reported as it happens."""

    table: str
    kind: StepKind
    checkpoint: int | None
    detail: str


class StepKind(StrEnum):
    WINDOW = "window"  # a merged window (lo, hi]
    DDL = "ddl"  # a DDL applied at its barrier
    DONE = "done"  # the table's part of the run ended (merged, stopped or failed)


@dataclass
class TableResult:
    table_key: int
    table: str
    status: str = MergeStatus.IDLE
    checkpoint_before: int | None = None
    checkpoint_after: int | None = None
    windows: int = 0
    ddls_applied: int = 0
    rows_in: int = 0
    rows_out: int = 0
    duration_s: float = 0.0
    reason: str | None = None
    replica: ReplicaFacts | None = None  # the replica's log once the run was done with the table


@dataclass
class MergeReport:
    run_id: str
    started_at: datetime
    watermarks: Watermarks
    tables: list[TableResult] = field(default_factory=list)

    @property
    def failed(self) -> list[TableResult]:
        return [t for t in self.tables if t.status in (MergeStatus.ERROR, MergeStatus.STOPPED)]


ProgressFn = Callable[[MergeProgress], None]
MERGE_FAILPOINTS = ("merge.next_table", "merge.before_commit", "merge.after_commit", "merge.after_ddl",
                    "merge.before_log")
T = TypeVar("T")
CONFLICT_RETRIES = 3
DEFAULT_THREADS = 2  # tables merged at once in one Spark application


def retry_on_conflict(step: Callable[[], T], what: str) -> T:
    """Run an idempotent Delta step again when it lost a concurrent-commit race."""
    # The base classes: both the classic (py4j) and the Spark Connect exceptions derive from them.
    from delta.exceptions.base import (
        ConcurrentAppendException,
        ConcurrentDeleteDeleteException,
        ConcurrentDeleteReadException,
        ConcurrentTransactionException,
        ConcurrentWriteException,
    )
    from deltalake.exceptions import CommitFailedError  # delta-rs' (tidelake.merge.driver_window)

    races = (ConcurrentAppendException, ConcurrentDeleteDeleteException, ConcurrentDeleteReadException,
             ConcurrentTransactionException, ConcurrentWriteException, CommitFailedError)
    attempt = 0
    while True:
        try:
            return step()
        except races as exc:
            if attempt == CONFLICT_RETRIES:
                raise
            attempt += 1
            log.warning("%s lost a Delta commit race (%s); retry %d of %d", what, type(exc).__name__, attempt,
                        CONFLICT_RETRIES)
            time.sleep(random.uniform(0, 0.5 * 2**attempt))


def table_name(history: SchemaHistory, key: TableKey) -> str:
    db, name = history.current_name(key)
    return f"{db}.{name}"


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
) -> MergeReport:
    """Merge `tables` (default all) as far as the watermarks and `until_ts` allow, `threads`
    tables at once. `rebuild` ('db.table'; the only table unless `tables` names more) first gives
    that table a new empty replica to replay from its CREATE (tidelake.merge.rebuild; an InputError
    when the changelog no longer holds all its changes). `history_config` (the changefeed's
    [history]) turns on history tables and soft deletes for the tables it selects."""
    if threads < 1:
        raise InputError(f"merge threads must be at least 1, got {threads}")
    control = read_control(layout)
    watermarks, history = control.watermarks, control.history
    keys = history.select(tables or ([rebuild] if rebuild is not None else None))
    if rebuild is not None:
        keys = _start_rebuild(layout, history, rebuild, keys)
    report = MergeReport(uuid.uuid4().hex, datetime.now(timezone.utc), watermarks)
    parallel = min(threads, len(keys))
    files = read_changelog_files(layout)  # after the watermarks (invariant 2): it holds all they cover
    firsts: dict[TableKey, FirstPlan] = {}
    if len(keys) > 1:
        catalog = ReplicaCatalog(layout)
        for key in keys:
            first = _first_plan(layout, catalog, history, watermarks, key, until_ts, max_chunk_rows, files)
            if first is not None:
                firsts[key] = first
    run_pass = _open_run_pass(spark, layout, firsts)

    idle_sessions: queue.SimpleQueue[SparkSession] = queue.SimpleQueue()  # one per thread, reused by its tables
    sessions: list[SparkSession] = []

    def merge_one(key: TableKey) -> tuple[TableResult, MergeLogEntry]:
        started = datetime.now(timezone.utc)
        failpoint("merge.next_table", key)
        session = None
        try:
            if parallel > 1:
                try:
                    session = idle_sessions.get_nowait()
                except queue.Empty:
                    session = sibling_session(spark)
                    sessions.append(session)
            result = _merge_table(session or spark, layout, ReplicaCatalog(layout), history, watermarks, key,
                                  until_ts, max_chunk_rows, progress, firsts.get(key), run_pass, history_config, files)
        except Exception as exc:  # before the table's own handling (its catalog, its session): still its row
            log.exception("merge of %s failed", table_name(history, key))
            result = TableResult(int(key), table_name(history, key), MergeStatus.ERROR,
                                 reason=explain_failure(layout, exc))
        finally:
            if session is not None:
                idle_sessions.put(session)
        return result, _log_entry(report.run_id, result, started)

    try:
        if parallel < 2:
            outcomes = [merge_one(key) for key in keys]
        else:
            with ThreadPoolExecutor(parallel, thread_name_prefix="tidelake-merge") as pool:
                outcomes = list(pool.map(merge_one, keys))
    finally:
        for session in sessions:
            release_session(session)
        if run_pass is not None:
            close_pass(spark, run_pass)
    report.tables = [result for result, _ in outcomes]
    if write_log:
        failpoint("merge.before_log", report.run_id)
        append_entries(layout, [entry for _, entry in outcomes])
        write_merge_metrics(layout)  # README "Metrics"
    return report


@dataclass(frozen=True)
class FirstPlan:
    """A table's first step of the run, planned before the run pass reads the changelog."""

    checkpoint: int | None
    stats: list[FileStat]
    plan: TableMergePlan


def _first_plan(layout: LakeLayout, catalog: ReplicaCatalog, history: SchemaHistory, watermarks: Watermarks,
                key: TableKey, until_ts: int | None, max_chunk_rows: int, files: ChangelogFiles) -> FirstPlan | None:
    """None when the table's own handling decides (stopped, dropped, an error it will report)."""
    try:
        entry = catalog.get(key)
        if entry is not None and entry.state != ReplicaState.ACTIVE:
            return None
        checkpoint = read_checkpoint(entry.path, layout.storage_options) if entry is not None else None
        stats = _stats(layout, history, key, checkpoint, watermarks, files)
        plan = plan_table(key, checkpoint, watermarks, history, until_ts, stats, max_chunk_rows,
                          passes=leaves_replica_unchanged)
    except Exception:  # reported by _merge_table, which plans again
        log.debug("no first plan for table %s", key, exc_info=True)
        return None
    return FirstPlan(checkpoint, stats, plan)


def _open_run_pass(spark: SparkSession, layout: LakeLayout, firsts: dict[TableKey, FirstPlan]) -> RunPass | None:
    """The run pass over every first window worth sharing; None for fewer than two."""
    from deltalake import DeltaTable as DeltaLog

    windows, total = {}, 0.0
    for key, first in firsts.items():
        plan = first.plan
        if plan.at_barrier or not plan.chunks:
            continue
        lo, hi = plan.chunks[0]
        rows = estimated_rows(first.stats, lo, hi)
        if (_no_files(first.stats, lo, hi) or rows <= DRIVER_WINDOW_MAX_ROWS or rows > NEW_KEYS_CHECK_MAX_ROWS
                or total + rows > RUN_PASS_MAX_ROWS):  # a small window is read on the driver
            continue
        total += rows
        windows[key] = Window(tuple(plan.physical_ids), lo, hi)
    if len(windows) < 2:
        return None
    try:
        seconds = bucket_seconds_of(DeltaLog(layout.changelog, storage_options=layout.storage_options))
        return open_pass(spark, layout, windows, seconds)
    except Exception:  # each table then reads its own window, as without the pass
        log.warning("the run pass over %d tables failed; each table reads its own window", len(windows),
                    exc_info=True)
        return None


def _start_rebuild(layout: LakeLayout, history: SchemaHistory, name: str, keys: list[TableKey]) -> list[TableKey]:
    from tidelake.merge.rebuild import rebuild_refusal, start_rebuild

    (key,) = history.select([name])
    refusal = rebuild_refusal(layout, history, key)
    if refusal is not None:
        raise InputError(f"cannot rebuild {name}: {refusal}")
    entry = start_rebuild(layout, history, key)
    log.info("rebuilding %s into %s from its CREATE", name, entry.path)
    return keys if key in keys else [*keys, key]


def _log_entry(run_id: str, r: TableResult, started: datetime) -> MergeLogEntry:
    return MergeLogEntry(
        run_id, int(r.table_key), r.table, r.status, r.checkpoint_before, r.checkpoint_after, r.windows,
        r.ddls_applied, r.rows_in, r.rows_out, r.duration_s, r.reason, started, datetime.now(timezone.utc),
        r.replica,
    )


def _merge_table(
    spark: SparkSession,
    layout: LakeLayout,
    catalog: ReplicaCatalog,
    history: SchemaHistory,
    watermarks: Watermarks,
    key: TableKey,
    until_ts: int | None,
    max_chunk_rows: int,
    progress: ProgressFn | None,
    first: FirstPlan | None = None,
    run_pass: RunPass | None = None,
    history_config: HistoryConfig | None = None,
    files: ChangelogFiles | None = None,
) -> TableResult:
    result = TableResult(int(key), table_name(history, key))
    started = time.monotonic()

    def report(kind: StepKind, checkpoint: int | None, detail: str) -> None:
        if progress is not None:
            progress(MergeProgress(result.table, kind, checkpoint, detail))

    try:
        entry = catalog.get(key)
        if entry is not None and entry.state == ReplicaState.STOPPED:
            result.status, result.reason = MergeStatus.STOPPED, entry.reason
            return result
        checkpoint = read_checkpoint(entry.path, layout.storage_options) if entry is not None else None
        result.checkpoint_before = result.checkpoint_after = checkpoint
        if entry is not None and entry.state == ReplicaState.DROPPED:
            return result

        def merge_chunk(path: str, info: TableInfo, physical_ids: Sequence[int], lo: int, hi: int,
                        stats: Sequence[FileStat] | None, scd2: str | None) -> int:
            if scd2 is not None:
                _check_history_window(layout, history, key, scd2, info, lo)
                retry_on_conflict(partial(write_history, spark, layout, scd2, info, physical_ids, hi, stats, lo),
                                  f"{result.table} history ({lo}, {hi}]")
            shared = run_pass.source(spark, key, lo, hi) if run_pass is not None else None
            rows_in, rows_out = retry_on_conflict(
                partial(merge_window, spark, layout, path, info, physical_ids, lo, hi, stats, shared),
                f"{result.table} window ({lo}, {hi}]",
            )
            failpoint("merge.after_commit", path)
            result.checkpoint_after = hi
            result.windows += 1
            result.rows_in += rows_in
            result.rows_out += rows_out
            report(StepKind.WINDOW, hi, f"({lo}, {hi}]: {rows_in} changes, {rows_out} rows written")
            return hi

        while True:
            scd2 = _table_options(spark, layout, catalog.get(key), history_config)
            if first is not None and first.checkpoint == checkpoint:  # planned before the run pass
                stats, plan = first.stats, first.plan
            else:
                stats = _stats(layout, history, key, checkpoint, watermarks, files)
                plan = plan_table(key, checkpoint, watermarks, history, until_ts, stats, max_chunk_rows,
                                  passes=leaves_replica_unchanged)
            first = None
            if plan.at_barrier:
                event = plan.barrier_event
                if scd2 is not None and event.creates_table:  # RECOVER TABLE: no history rows, its ts
                    retry_on_conflict(partial(write_history, spark, layout, scd2, event.table_info_after, (),
                                              event.commit_ts), f"{result.table} history {event.action_name}")
                finish = _finish_ddl(spark, layout, event, stats, scd2)
                retry_on_conflict(partial(apply_ddl, spark, layout, key, event, catalog, finish, scd2),
                                  f"{result.table} {event.action_name}")
                failpoint("merge.after_ddl", key)
                checkpoint = result.checkpoint_after = event.commit_ts
                result.ddls_applied += 1
                report(StepKind.DDL, checkpoint, f"{event.action_name} (job {event.job_id})")
                continue
            if plan.idle:
                if plan.reason is not None and result.windows == result.ddls_applied == 0:
                    result.status, result.reason = MergeStatus.BLOCKED, plan.reason
                break
            info = history.table_info_at(key, checkpoint)
            path = catalog.get(key).path
            for lo, hi in plan.chunks:
                checkpoint = merge_chunk(path, info, plan.physical_ids, lo, hi, stats, scd2)
        if result.windows or result.ddls_applied:
            result.status = MergeStatus.MERGED
        report(StepKind.DONE, checkpoint, result.status)
    except UnsupportedDDL as exc:
        result.status, result.reason = MergeStatus.STOPPED, exc.reason
        entry = catalog.get(key)
        if entry is not None:
            catalog.mark_stopped(key, exc.reason, result.checkpoint_after or 0)  # the DDL's barrier
        report(StepKind.DONE, result.checkpoint_after, f"stopped: {exc.reason}")
    except Exception as exc:  # one table's failure must not stop the others; it is logged and retried next run
        log.exception("merge of %s failed", result.table)
        result.status, result.reason = MergeStatus.ERROR, explain_failure(layout, exc)  # the trace is in the log
        entry = catalog.get(key)
        if entry is not None:
            result.checkpoint_after = read_checkpoint(entry.path, layout.storage_options)
        report(StepKind.DONE, result.checkpoint_after, f"error: {result.reason}")
    finally:
        result.replica = _facts_after(layout, catalog, key)
        result.duration_s = time.monotonic() - started
    return result


def _facts_after(layout: LakeLayout, catalog: ReplicaCatalog, key: TableKey) -> ReplicaFacts | None:
    """The replica's facts for the merge log (status reads them there), read after the table's
    last commit of the run; None when it has no replica or they cannot be read (status then reads
    the replica itself)."""
    try:
        entry = catalog.get(key)
        return None if entry is None else read_replica_facts(layout, entry.path)
    except Exception:  # noqa: BLE001 - the facts are for status only; the run's outcome stands
        log.warning("table %s: replica facts not read for the merge log", key, exc_info=True)
        return None


def _table_options(spark: SparkSession, layout: LakeLayout, entry: ReplicaEntry | None,
                   config: HistoryConfig | None) -> str | None:
    """Turn on what `config` asks for the table (a history table, soft deletes) and return the path
    of its history table, None when it has none. A replica not merged yet gets them later."""
    if entry is None or entry.state != ReplicaState.ACTIVE or read_checkpoint(entry.path, layout.storage_options) is None:
        return None
    path = history_path(layout, entry.path)
    if config is not None and config.wants_soft_deletes(entry.db, entry.name):
        if enable_soft_deletes(spark, entry.path, layout.storage_options):
            log.info("%s.%s: soft deletes on", entry.db, entry.name)
    if config is not None and config.wants_scd2(entry.db, entry.name):
        if create_history(spark, entry.path, path, layout.storage_options):
            log.info("%s.%s: history table created at %s", entry.db, entry.name, path)
    return path if history_checkpoint(path, layout.storage_options) is not None else None


def _check_history_window(layout: LakeLayout, history: SchemaHistory, key: TableKey, path: str, info: TableInfo,
                          lo: int) -> None:
    """A history table behind its replica (only if a run ever advanced the replica without it)
    catches up in the next window, which reads its changes from the history's own checkpoint:
    right only while the table decodes the same way since then."""
    h = history_checkpoint(path, layout.storage_options)
    if h is not None and h < lo and history.table_info_at(key, h) != info:
        raise InputError(f"history table {path} is at {h}, behind its replica at {lo} across a DDL: "
                         "remove the history folder and it is created again from the replica")


def _finish_ddl(spark: SparkSession, layout: LakeLayout, event: DdlEvent, stats: Sequence[FileStat] | None,
                scd2: str | None) -> Callable[[str], None] | None:
    """The last commits of a DDL (apply_ddl's `finish`): the history's commit at the DDL's ts D
    first, then the replica's, with the rows committed at exactly D (none for a dropped table)."""
    rows = (None if event.drops_table or event.table_info_after is None
            else partial(merge_at_ddl_ts, spark, layout, event, stats))
    if scd2 is None:
        return rows

    def finish(path: str) -> None:
        info = event.table_info_after if rows is not None else event.table_info_before
        ids = info.physical_ids() if rows is not None else ()
        write_history(spark, layout, scd2, info, ids, event.commit_ts, stats, event.barrier)
        if rows is not None:
            rows(path)
        else:
            record_checkpoint(spark, path, event.commit_ts, layout.storage_options)

    return finish


def merge_at_ddl_ts(
    spark: SparkSession, layout: LakeLayout, event: DdlEvent, stats: Sequence[FileStat] | None, path: str
) -> None:
    """The commit that finishes a DDL at its commit ts D: the table's changes committed at exactly
    D, recording checkpoint D (docs/design.md "DML at a DDL's commit ts").

    Async commit and 1PC compute commit ts instead of taking one from PD, so a DML can share D
    with the DDL (TiCDC cdc/entry/mounter.go mountRowKVEntry). The window before the barrier ends
    at D - 1 and the one after starts above D, so these rows are written here. They were written
    on the schema before the DDL but read upstream at D with the one after, which the replica has
    by now: they are decoded with it, and changes of physical ids the DDL removed are not read.

    `stats` are the changelog file stats the plan that reached this barrier read, over the ids
    before the DDL: rows at D are in those ids (an id the DDL creates holds none), so a DDL with
    no file at D commits without reading the changelog again."""
    info = event.table_info_after
    merge_window(spark, layout, path, info, info.physical_ids(), event.commit_ts - 1, event.commit_ts, stats)


def _stats(
    layout: LakeLayout, history: SchemaHistory, key: TableKey, checkpoint: int | None, watermarks: Watermarks,
    files: ChangelogFiles | None = None,
) -> list[FileStat]:
    if checkpoint is None:
        return []
    ids = history.physical_ids_at(key, checkpoint)
    resolved = [watermarks.table_resolved.get(pid, checkpoint) for pid in ids]
    return changelog_file_stats(layout, ids, checkpoint, max(resolved, default=checkpoint), files)


def merge_window(
    spark: SparkSession,
    layout: LakeLayout,
    path: str,
    info: TableInfo,
    physical_ids: Sequence[int],
    lo: int,
    hi: int,
    stats: Sequence[FileStat] | None = None,
    shared: tuple[DataFrame, WindowKeys] | None = None,
) -> tuple[int, int]:
    """Apply the changes of (lo, hi] to the replica at `path`, the last commit recording checkpoint
    hi. Returns (changes merged, replica rows written); (0, 0) if hi was already merged.
    `stats` (changelog file stats read after the watermarks) lets an empty window skip the read;
    `shared` is the window's collapsed changes and keys from the run pass (tidelake.merge.run_pass).

    A window of at most DRIVER_WINDOW_MAX_ROWS changes (by `stats`) into a replica delta-rs may
    write is read, decoded and committed on the driver (tidelake.merge.driver_window), the same
    commits as below without a Spark job.

    What the keys held at lo (tidelake.merge.window_keys, told on the driver from the window's old
    values: no Spark job) decides the commits:
    - no key held a row (and the replica is at lo): ONE INSERT of the keys' last puts;
    - otherwise ONE MERGE of every key. Splitting a mixed window into a MERGE of the held keys
      and an INSERT of the new ones was measured 1.4-1.8x slower than one MERGE (bench/README.md
      "Append what needs no MERGE"), so it is not done.
    All are SQL over a session temp view, not delta.tables: the same statement runs in a local
    session and over Spark Connect, where DeltaTable needs Delta's Connect server plugin, which
    Maven Central does not serve for Spark 4.2 (docs/stack.md §15)."""
    from deltalake import DeltaTable as DeltaLog
    from pyspark.sql.types import StructType

    replica = open_replica(path, layout.storage_options)  # once per attempt: its schema, version, checkpoint
    if replica is None:
        raise InputError(f"no replica at {path}")
    target = StructType.fromJson(json.loads(replica.schema().to_json()))
    if (stats is not None and estimated_rows(stats, lo, hi) <= DRIVER_WINDOW_MAX_ROWS
            and driver_window.writable(replica, target)):
        return _merge_on_driver(layout, replica, path, info, physical_ids, lo, hi, stats, target)
    version = replica.version()
    if _no_files(stats, lo, hi):
        # Nothing landed in the window: still a commit, so the checkpoint moves (the next
        # barrier becomes reachable). An insert-only MERGE of no rows never scans the replica.
        with txn_confs(spark, hi), source_view(spark.createDataFrame([], target)) as view:
            failpoint("merge.before_commit", path)
            spark.sql(f"MERGE INTO delta.{quote(path)} t USING {view} s ON false "
                      "WHEN NOT MATCHED THEN INSERT *").collect()
        return _metrics(path, version, hi, layout.storage_options)
    columns = ", ".join(quote(f.name) for f in target.fields)
    if shared is not None:
        collapsed, kinds = shared
    else:
        changelog = DeltaLog(layout.changelog, storage_options=layout.storage_options)
        changes = read_changes(spark, layout, physical_ids, lo, hi, bucket_seconds=bucket_seconds_of(changelog))
        collapsed = collapse_last_change(changes)
        kinds = None
        if stats is None or estimated_rows(stats, lo, hi) <= NEW_KEYS_CHECK_MAX_ROWS:
            kinds = window_keys(layout, physical_ids, lo, hi)
    # The INSERT is right only from the replica at lo. Another job that merged part of this
    # window ((lo, h], h < hi: an abandoned Airflow attempt, a `tidelake merge` by hand) leaves a
    # checkpoint between them, and appending again would duplicate the keys it added; a MERGE is
    # right from any state in [lo, hi]. Read on every attempt: a lost commit race (the other
    # job's txn of the same app id) retries this whole function (retry_on_conflict).
    # A replica with soft deletes holds keys deleted upstream, which come back without an old
    # value: it is always MERGEd (tidelake.merge.soft_deletes).
    soft = has_soft_deletes(target)
    done = replica.transaction_version(MERGE_APP_ID)
    if kinds is not None and kinds.held == 0 and done in (None, lo) and not soft:
        _insert(spark, path, mount(collapsed.where(collapsed["op"] == OP_PUT), info, target), columns, hi)
        return _metrics(path, version, hi, layout.storage_options, kinds.keys)
    if soft:
        target = StructType([f for f in target.fields if f.name != DELETED_COLUMN])
    with txn_confs(spark, hi):
        _merge(spark, path, mount(collapsed, info, target), info, target, soft)
    return _metrics(path, version, hi, layout.storage_options)


def _merge_on_driver(layout: LakeLayout, replica: DeltaLog, path: str, info: TableInfo, physical_ids: Sequence[int],
                     lo: int, hi: int, stats: Sequence[FileStat], target: StructType) -> tuple[int, int]:
    """merge_window's commits made with delta-rs on the driver (tidelake.merge.driver_window)."""
    import pyarrow.compute as pc

    done = replica.transaction_version(MERGE_APP_ID)
    if done is not None and done >= hi:  # as Spark's Delta skips a write whose txn is recorded
        return 0, 0
    collapsed = None if _no_files(stats, lo, hi) else driver_window.read_window(layout, physical_ids, lo, hi)
    if collapsed is None or collapsed.num_rows == 0:
        driver_window.record_only(replica, path, hi)
        return 0, 0
    columns = [f.name for f in target.fields]
    mounted = mount_arrow(collapsed, info, target)
    if driver_window.held_keys(collapsed) == 0 and done in (None, lo):  # see merge_window
        puts = mounted.filter(pc.equal(mounted[MOUNT_OP_COLUMN], OP_PUT)).select(columns)
        return collapsed.num_rows, driver_window.append(replica, path, puts, hi)
    return driver_window.merge(replica, path, mounted, _match_condition(info), columns, MOUNT_OP_COLUMN, hi)


# Windows of at most this many changes (estimated from file stats) are applied on the driver with
# delta-rs (tidelake.merge.driver_window) when the replica allows; larger ones by Spark.
DRIVER_WINDOW_MAX_ROWS = 200_000
# Above this many changes (estimated from file stats) a window's keys are not classified on the
# driver (tidelake.merge.window_keys holds the window's keys in memory): it goes through MERGE.
NEW_KEYS_CHECK_MAX_ROWS = 1_000_000
# Changes (estimated) the run pass caches at most; windows beyond it read their own.
RUN_PASS_MAX_ROWS = 2_000_000
def _merge(spark: SparkSession, path: str, source: DataFrame, info: TableInfo, target: StructType,
           soft: bool = False) -> None:
    """MERGE the mounted `source` into the replica (under the caller's commit confs). With `soft`
    deletes, a delete flags the row (and its commit ts) and a put clears the flag."""
    condition = _match_condition(info)
    columns = ", ".join(quote(f.name) for f in target.fields)
    values = ", ".join(f"s.{quote(f.name)}" for f in target.fields)
    updates = ", ".join(f"t.{quote(f.name)} = s.{quote(f.name)}" for f in target.fields)
    op = quote(MOUNT_OP_COLUMN)
    delete = "DELETE"
    if soft:
        flag, ts = quote(DELETED_COLUMN), quote(COMMIT_TS_COLUMN)
        delete = f"UPDATE SET t.{flag} = true, t.{ts} = s.{ts}"
        condition += f" AND (s.{op} = 'put' OR {live_condition('t')})"  # a flagged row stays as it was deleted
        columns, values, updates = f"{columns}, {flag}", f"{values}, false", f"{updates}, t.{flag} = false"
    with source_view(source) as view:
        failpoint("merge.before_commit", path)
        spark.sql(
            f"MERGE INTO delta.{quote(path)} t USING {view} s ON {condition} "
            f"WHEN MATCHED AND s.{op} = 'delete' THEN {delete} "
            f"WHEN MATCHED THEN UPDATE SET {updates} "
            f"WHEN NOT MATCHED AND s.{op} = 'put' THEN INSERT ({columns}) VALUES ({values})"
        ).collect()


def _match_condition(info: TableInfo) -> str:
    """The MERGE's ON clause: replica key columns = the source's (a common handle's row is found by
    its PK before the window, tidelake.merge.mount.match_columns)."""
    match = match_columns(info)
    return " AND ".join(f"t.{quote(k)} = s.{quote(match.get(k, k))}" for k in key_columns(info))


def _insert(spark: SparkSession, path: str, rows: DataFrame, columns: str, hi: int) -> None:
    """Append `rows` (replica `columns` and more) in the commit that records checkpoint hi;
    Delta skips it when hi is recorded already."""
    with txn_confs(spark, hi), source_view(rows) as view:
        failpoint("merge.before_commit", path)
        spark.sql(f"INSERT INTO delta.{quote(path)} ({columns}) SELECT {columns} FROM {view}").collect()


def _no_files(stats: Sequence[FileStat] | None, lo: int, hi: int) -> bool:
    return stats is not None and not any(s.max_ts > lo and s.min_ts <= hi for s in stats)


def _metrics(path: str, version_before: int | None, hi: int, storage_options: dict[str, str] | None,
             keys: int | None = None) -> tuple[int, int]:
    """(changes merged, replica rows written) of the commit this call made, found by the
    checkpoint its commitInfo records; (0, 0) when Delta skipped it (txn already recorded). An
    INSERT's changes are the window's `keys`. Read from the log with delta-rs: Spark's history()
    is a job per window."""
    from deltalake import DeltaTable as DeltaLog

    replica_log = DeltaLog(path, storage_options=storage_options)
    newer = replica_log.version() - (version_before if version_before is not None else -1)
    ours = checkpoint_metadata(hi)
    commit = next((c for c in replica_log.history(max(newer, 1)) if c.get("userMetadata") == ours
                   and (version_before is None or c["version"] > version_before)), None)
    return (0, 0) if commit is None else _rows_of(commit, keys)


def _rows_of(commit: dict, keys: int | None) -> tuple[int, int]:
    m = commit.get("operationMetrics") or {}
    if commit.get("operation") == "WRITE":
        return keys or 0, int(m.get("numOutputRows", 0))
    written = sum(int(m.get(k, 0)) for k in ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted"))
    return int(m.get("numSourceRows", 0)), written
