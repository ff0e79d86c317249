"""One table's part of a merge run: its replica advanced window by window up to its plan's upper
bound, DDLs applied at their barriers (docs/design.md invariants 3 and 4). Owner: TableMerge, for its table.

Opened once: the run's control tables, changelog snapshot and catalog (RunScope; the catalog as
read once the run held its leases), its history-table state (again after a DDL), its replica's log
(brought up to date, a log listing, before each window and for the facts). Its writer, Spark or
delta-rs (tidelake.merge.writers), is chosen once per plan (a DDL can change the replica's
features); both run tidelake.merge.window_spec. A checkpoint moves only in the commit that writes
the rows up to it, and a write whose txn is recorded is skipped, so a rerun after a crash anywhere
redoes at most one window or DDL step."""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import TypeVar

from delta.exceptions.base import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
)
from deltalake.exceptions import CommitFailedError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from tidelake.codec.ddl_job import ActionType
from tidelake.codec.schema import TableInfo
from tidelake.config import HistoryConfig
from tidelake.errors import InputError
from tidelake.failpoints import failpoint
from tidelake.lake.checkpoint import checkpoint_at_version, read_checkpoint, version_at_checkpoint
from tidelake.lake.control import ControlTables, read_control
from tidelake.lake.damage import explain_failure
from tidelake.lake.history_table import history_checkpoint, history_path
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog, ReplicaEntry, ReplicaState
from tidelake.lake.replica_facts import ReplicaFacts, replica_facts
from tidelake.lake.schema_history import DdlEvent, SchemaHistory, TableKey
from tidelake.lake.store_room import refusal
from tidelake.lake.watermarks import Watermarks
from tidelake.merge.changelog_snapshot import ChangelogSnapshot, WindowKeys
from tidelake.merge.ddl_apply import ExchangePartner, PartnerBehind, UnsupportedDDL, apply_ddl, record_checkpoint
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.replica_handles import ReplicaHandle, ReplicaHandles
from tidelake.merge.replica_schema import exclude_wide_decimals
from tidelake.merge.run_pass import RunPass
from tidelake.merge.scd2_history import create_history, write_history
from tidelake.merge.soft_deletes import enable_soft_deletes
from tidelake.merge.table_plan import DEFAULT_CHUNK_ROWS, FileStat, TableMergePlan, estimated_rows, plan_table
from tidelake.merge.window_spec import Removal, leaves_replica_unchanged, rows_at_ddl_ts
from tidelake.merge.writers.delta_rs_writer import DeltaRsWriter, writable
from tidelake.merge.writers.replica_window import ReplicaWindow, WindowWriter
from tidelake.merge.writers.spark_writer import SparkWriter

log = logging.getLogger(__name__)

MERGE_FAILPOINTS = ("merge.next_table", "merge.before_commit", "merge.after_commit", "merge.after_ddl",
                    "merge.before_log")
# Windows of at most this many changes (estimated from file stats) are written with delta-rs on
# the driver when the replica allows; larger ones by Spark.
DRIVER_WINDOW_MAX_ROWS = 200_000
CONFLICT_RETRIES = 3
# A lost Delta commit race, by either engine: both Spark's classic (py4j) and Connect exceptions
# derive from delta's base classes; delta-rs raises CommitFailedError.
_RACES = (ConcurrentAppendException, ConcurrentDeleteDeleteException, ConcurrentDeleteReadException,
          ConcurrentTransactionException, ConcurrentWriteException, CommitFailedError)
T = TypeVar("T")


class StepKind(StrEnum):
    WINDOW = "window"  # a merged window (lo, hi]
    DDL = "ddl"  # a DDL applied at its barrier
    DONE = "done"  # the table's part of the run ended (merged, stopped or failed)


@dataclass(frozen=True)
class MergeProgress:
    """One step of a table, reported as it happens."""

    table: str
    kind: StepKind
    checkpoint: int | None
    detail: str


ProgressFn = Callable[[MergeProgress], None]


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
    held: bool = False  # blocked because another writer holds the replica's lease (reason names it)
    no_room: bool = False  # failed because the store had no room (reason names it): nothing half-committed
    partner_behind: bool = False  # blocked at an EXCHANGE PARTITION until the other table's replica reaches it


@dataclass(frozen=True)
class RunScope:
    """What every table of one run shares, read once for the run (tidelake.merge.merge_run)."""

    layout: LakeLayout
    watermarks: Watermarks
    history: SchemaHistory
    changelog: ChangelogSnapshot
    until_ts: int | None
    max_chunk_rows: int
    history_config: HistoryConfig | None = None
    progress: ProgressFn | None = None
    run_pass: RunPass | None = None
    catalog: ReplicaCatalog | None = None  # the run's, shared by its table threads
    # The catalog as read once the run held its replicas' leases: no other writer changes a leased
    # table's entry, and a table's own DDL makes it read the catalog again. None: read it each time.
    entries: Mapping[int, ReplicaEntry] | None = None
    # Replicas' handles kept across runs by a long-running merger (the follower); None: opened per run.
    handles: ReplicaHandles | None = None

    @classmethod
    def read(cls, layout: LakeLayout, until_ts: int | None = None, max_chunk_rows: int = DEFAULT_CHUNK_ROWS,
             history_config: HistoryConfig | None = None, progress: ProgressFn | None = None,
             read: tuple[ControlTables, ChangelogSnapshot] | None = None) -> RunScope:
        """The watermarks first, then the DDL history and the changelog (invariant 2); `read`: those
        the caller read so, just before the run (a merge follower's pass), not read again."""
        control, changelog = read if read is not None else (read_control(layout), None)
        return cls(layout, control.watermarks, control.history, changelog or ChangelogSnapshot(layout), until_ts,
                   max_chunk_rows, history_config, progress)

    def stats(self, key: TableKey, checkpoint: int | None) -> list[FileStat]:
        """Changelog file stats of the table's physical ids at `checkpoint`, up to their watermarks."""
        if checkpoint is None:
            return []
        ids = self.history.physical_ids_at(key, checkpoint)
        resolved = [self.watermarks.table_resolved.get(pid, checkpoint) for pid in ids]
        return self.changelog.file_stats(ids, checkpoint, max(resolved, default=checkpoint))

    def entry(self, catalog: ReplicaCatalog, key: TableKey) -> ReplicaEntry | None:
        """The table's catalog entry at the start of its part of the run."""
        return self.entries.get(int(key)) if self.entries is not None else catalog.get(key)

    def open_replica(self, key: TableKey, path: str) -> ReplicaHandle | None:
        """The table's replica at `path` as of now: the handle kept from an earlier run brought up
        to date (tidelake.merge.replica_handles), else opened; None when there is none."""
        if self.handles is not None:
            return self.handles.take(key, path, self.layout.storage_options)
        return ReplicaHandle.open(path, self.layout.storage_options)

    def plan(self, key: TableKey, checkpoint: int | None, stats: Sequence[FileStat]) -> TableMergePlan:
        return plan_table(key, checkpoint, self.watermarks, self.history, self.until_ts, stats, self.max_chunk_rows,
                          passes=leaves_replica_unchanged)


@dataclass(frozen=True)
class FirstPlan:
    """A table's first step of the run, planned before the run pass reads the changelog."""

    checkpoint: int | None
    stats: list[FileStat]
    plan: TableMergePlan
    replica: ReplicaHandle | None = None  # the log it was planned from, for the table's merge


def retry_on_conflict(step: Callable[[], T], what: str) -> T:
    """Run an idempotent Delta step again when it lost a concurrent-commit race."""
    attempt = 0
    while True:
        try:
            return step()
        except _RACES as exc:
            if attempt == CONFLICT_RETRIES:
                raise
            attempt += 1
            log.warning("%s lost a Delta commit race (%s); retry %d of %d", what, type(exc).__name__, attempt,
                        CONFLICT_RETRIES)
            time.sleep(random.uniform(0, 0.5 * 2**attempt))


class TableMerge:
    """Merges one table in one session; `run` never raises (a failure is the table's result)."""

    def __init__(self, scope: RunScope, key: TableKey, spark: SparkSession, first: FirstPlan | None = None) -> None:
        self.scope = scope
        self.key = key
        self.spark = spark
        self.first = first
        self.layout = scope.layout
        self.catalog = scope.catalog or ReplicaCatalog(scope.layout)
        self.result = TableResult(int(key), table_name(scope.history, key))
        self.spark_writer = SparkWriter(spark, scope.layout, scope.changelog)
        self.delta_rs_writer = DeltaRsWriter(scope.changelog, self.spark_writer)
        self.entry: ReplicaEntry | None = None
        self.scd2: str | None = None  # the history table's path, when the replica has one
        self.writer: WindowWriter | None = None  # the current plan's
        # its log: opened once for the run (or kept from an earlier one), brought up to date at each use
        self._replica: ReplicaHandle | None = first.replica if first is not None else None
        self._written = False  # the last step was a window, whose writer left the handle at its commit

    def run(self) -> TableResult:
        result, started = self.result, time.monotonic()
        try:
            self._run()
        except PartnerBehind as exc:  # an EXCHANGE PARTITION waiting for the other table (merge_run retries it)
            result.status, result.reason, result.partner_behind = MergeStatus.BLOCKED, str(exc), True
            self._report(StepKind.DONE, result.checkpoint_after, f"blocked: {exc}")
        except UnsupportedDDL as exc:
            result.status, result.reason = MergeStatus.STOPPED, exc.reason
            if self.catalog.get(self.key) is not None:
                self.catalog.mark_stopped(self.key, exc.reason, result.checkpoint_after or 0)  # the DDL's barrier
            self._report(StepKind.DONE, result.checkpoint_after, f"stopped: {exc.reason}")
        except Exception as exc:  # one table's failure must not stop the others; it is logged and retried next run
            result.status, result.reason = MergeStatus.ERROR, explain_failure(self.layout, exc)
            result.no_room = refusal(exc) is not None
            if result.no_room:  # the store's answer, not a bug: one line, no trace
                log.warning("merge of %s failed: %s", result.table, result.reason)
            else:
                log.exception("merge of %s failed", result.table)  # trace: in the log
            self._replica, self._written = None, False  # the failure may have been the log itself: read afresh
            entry = self.catalog.get(self.key)
            if entry is not None:
                result.checkpoint_after = read_checkpoint(entry.path, self.layout.storage_options)
            self._report(StepKind.DONE, result.checkpoint_after, f"error: {result.reason}")
        finally:
            result.replica = self._facts()
            result.duration_s = time.monotonic() - started
            if self.scope.handles is not None and self._replica is not None:
                self.scope.handles.keep(self.key, self._replica)  # for the table's next run
            self._replica = None  # a run of many tables holds only the handles of those in flight
        return result

    def _run(self) -> None:
        result, scope = self.result, self.scope
        self.entry = scope.entry(self.catalog, self.key)
        if self.entry is not None and self.entry.state == ReplicaState.STOPPED:
            result.status, result.reason = MergeStatus.STOPPED, self.entry.reason
            return
        replica = self._replica_at(self.entry.path) if self.entry is not None else None
        checkpoint = replica.checkpoint() if replica is not None else None
        result.checkpoint_before = result.checkpoint_after = checkpoint
        if self.entry is not None and self.entry.state == ReplicaState.DROPPED:
            return
        self._options(checkpoint)
        first, self.first = self.first, None
        while True:
            if first is not None and first.checkpoint == checkpoint:  # planned before the run pass
                stats, plan = first.stats, first.plan
            else:
                stats = scope.stats(self.key, checkpoint)
                plan = scope.plan(self.key, checkpoint, stats)
            first = None
            if plan.at_barrier:
                checkpoint = self._ddl(plan.barrier_event)
                continue
            if plan.idle:
                if plan.reason is not None and result.windows == result.ddls_applied == 0:
                    result.status, result.reason = MergeStatus.BLOCKED, plan.reason
                break
            info = scope.history.table_info_at(self.key, checkpoint)
            self.writer = None  # chosen at the plan's first window, for all of them
            largest = max(estimated_rows(stats, lo, hi) for lo, hi in plan.chunks)
            for lo, hi in plan.chunks:
                checkpoint = self._window(info, plan.physical_ids, lo, hi, stats, largest)
        if result.windows or result.ddls_applied:
            result.status = MergeStatus.MERGED
        self._report(StepKind.DONE, checkpoint, result.status)

    def _window(self, info: TableInfo, physical_ids: Sequence[int], lo: int, hi: int, stats: Sequence[FileStat],
                rows: float) -> int:
        """Merge (lo, hi], its history first; the new checkpoint."""
        result = self.result
        if self.scd2 is not None:
            driver = self.scope.changelog if rows <= DRIVER_WINDOW_MAX_ROWS else None  # as the replica's writer
            check = partial(self._check_history_window, info, lo)
            retry_on_conflict(lambda: write_history(self.spark, self.layout, self.scd2, info, physical_ids, hi,
                                                    self.scope.changelog.bucket_seconds, stats, lo, driver, check),
                              f"{result.table} history ({lo}, {hi}]")
        shared = self.scope.run_pass.source(self.spark, self.key, lo, hi) if self.scope.run_pass is not None else None
        rows_in, rows_out = retry_on_conflict(
            lambda: self._write(self.entry.path, info, physical_ids, lo, hi, stats, rows, shared),
            f"{result.table} window ({lo}, {hi}]")
        failpoint("merge.after_commit", self.entry.path)
        self._written = True
        result.checkpoint_after = hi
        result.windows += 1
        result.rows_in += rows_in
        result.rows_out += rows_out
        self._report(StepKind.WINDOW, hi, f"({lo}, {hi}]: {rows_in} changes, {rows_out} rows written")
        return hi

    def _write(self, path: str, info: TableInfo, physical_ids: Sequence[int], lo: int, hi: int,
               stats: Sequence[FileStat], rows: float, shared: tuple[DataFrame, WindowKeys] | None = None,
               removal: Removal | None = None) -> tuple[int, int]:
        """One attempt at the window on the replica's log as of now, nothing written if hi is recorded."""
        handle = self._replica_at(path)
        if handle is None:
            raise InputError(f"no replica at {path}")
        replica = handle.table
        target = StructType.fromJson(json.loads(replica.schema().to_json()))
        window = ReplicaWindow(path, replica, target, info, tuple(physical_ids), lo, hi, stats, shared, removal,
                               handle)
        recorded = window.recorded
        if recorded is not None and recorded >= hi:  # as Delta skips a write whose txn is recorded
            return 0, 0
        if self.writer is None:
            small = rows <= DRIVER_WINDOW_MAX_ROWS and writable(replica, target, column_mapping=True)
            self.writer = self.delta_rs_writer if small else self.spark_writer
        version = replica.version()
        written = self.writer.write(window)
        if self.writer is self.delta_rs_writer:  # it left the handle at its commit (Spark's: not on it)
            handle.committed(version, hi)
        return written

    def _ddl(self, event: DdlEvent) -> int:
        """Apply the DDL at its barrier, the history's steps first; the new checkpoint."""
        result = self.result
        self._written = False
        if self.scd2 is not None and event.creates_table:  # RECOVER TABLE: no history rows, its ts
            retry_on_conflict(lambda: write_history(self.spark, self.layout, self.scd2, event.table_info_after, (),
                                                    event.commit_ts, self.scope.changelog.bucket_seconds,
                                                    changelog=self.scope.changelog),
                              f"{result.table} history {event.action_name}")
        finish = self._finish_ddl(event)
        partner = self._exchange_partner(event) if event.action == ActionType.EXCHANGE_TABLE_PARTITION else None
        retry_on_conflict(lambda: apply_ddl(self.spark, self.layout, self.key, event, self.catalog, finish, self.scd2,
                                            partner),
                          f"{result.table} {event.action_name}")
        failpoint("merge.after_ddl", self.key)
        result.checkpoint_after = event.commit_ts
        result.ddls_applied += 1
        self._report(StepKind.DDL, event.commit_ts, f"{event.action_name} (job {event.job_id})")
        self.entry = self.catalog.get(self.key)  # a DDL creates, renames or drops it
        self._options(event.commit_ts)
        return event.commit_ts

    def _exchange_partner(self, event: DdlEvent) -> ExchangePartner | None:
        """The other table's replica of an EXCHANGE PARTITION as of the barrier; None when the
        other table is not replicated: the puller then landed the received id's rows as puts at
        the DDL's ts (docs/sql-front.md#what-the-replica-side-does)."""
        others = [k for k in self.scope.history.job_tables(event.job_id, event.commit_ts) if k != self.key]
        if not others:
            return None
        entry = self.catalog.get(others[0])  # None until its first merge creates its replica
        checkpoint = read_checkpoint(entry.path, self.layout.storage_options) if entry is not None else None
        if entry is None or checkpoint is None or checkpoint < event.barrier:
            raise PartnerBehind(f"{event.action_name} (job {event.job_id}) waits for the other table's replica "
                                f"to reach {event.barrier} (at {checkpoint})")
        version = version_at_checkpoint(entry.path, event.barrier, self.layout.storage_options)
        if version is None or checkpoint_at_version(entry.path, version, self.layout.storage_options) != event.barrier:
            raise UnsupportedDDL(f"{event.action_name} of {event.db}.{event.name} at {event.commit_ts}: the replica "
                                 f"of {entry.db}.{entry.name} has no version at {event.barrier}; bootstrap both tables")
        return ExchangePartner(entry.path, version)

    def _finish_ddl(self, event: DdlEvent) -> Callable[[str, Removal | None], None] | None:
        """The last commits of a DDL (apply_ddl's `finish`): the history's commit at the DDL's ts D
        first (on the driver when few rows, as a window's), then the replica's with the rows
        committed at exactly D (none for a dropped table) and the removal of the rows the DDL
        removes, in one commit. Those rows are in the ids after the DDL (ids it removes stop at
        D - 1), including the rows a re-partitioning copied into its new ids
        (tidelake.capture.changefeed.copied_rows)."""
        gone = event.drops_table or event.table_info_after is None
        lo, hi = rows_at_ddl_ts(event)
        stats = [] if gone else self.scope.changelog.file_stats(event.table_info_after.physical_ids(), lo, hi)
        rows = None if gone else partial(self._merge_at_ddl_ts, event, stats)
        if self.scd2 is None:
            return rows

        def finish(path: str, removal: Removal | None) -> None:
            info = event.table_info_after if rows is not None else event.table_info_before
            ids = info.physical_ids() if rows is not None else ()
            driver = self.scope.changelog if estimated_rows(stats, lo, hi) <= DRIVER_WINDOW_MAX_ROWS else None
            write_history(self.spark, self.layout, self.scd2, info, ids, event.commit_ts,
                          self.scope.changelog.bucket_seconds, stats, event.barrier, driver)
            if rows is not None:
                rows(path, removal)
            else:
                record_checkpoint(self.spark, path, event.commit_ts, self.layout.storage_options)

        return finish

    def _merge_at_ddl_ts(self, event: DdlEvent, stats: Sequence[FileStat], path: str,
                         removal: Removal | None) -> None:
        """The commit that finishes a DDL at its ts D: the rows committed at exactly D, decoded with
        the schema after it (tidelake.merge.window_spec.rows_at_ddl_ts), and the rows the DDL
        removes (`removal`). `stats` are those of the ids after the DDL at D: without a file at D
        nothing is read."""
        info = event.table_info_after
        lo, hi = rows_at_ddl_ts(event)
        self.writer = None  # the DDL may have changed what the replica allows: chosen again
        self._write(path, info, info.physical_ids(), lo, hi, stats, estimated_rows(stats, lo, hi), removal=removal)

    def _options(self, checkpoint: int | None) -> None:
        """Turn on what the changefeed's [history] asks for the table (a history table, soft
        deletes) and note its history table; a replica not merged yet gets them later. A
        replica with wide decimals, and its history table, get their statistics property
        (exclude_wide_decimals)."""
        entry, config = self.entry, self.scope.history_config
        self.scd2 = None
        if entry is None or entry.state != ReplicaState.ACTIVE or checkpoint is None:
            return
        path = history_path(self.layout, entry.path)
        info = self.scope.history.table_info_at(self.key, checkpoint)
        if info is not None and exclude_wide_decimals(self.spark, entry.path, info, self.layout.storage_options):
            log.info("%s.%s: its wide DECIMAL columns get no file statistics (delta.dataSkippingStatsColumns), so "
                     "delta-rs may merge it", entry.db, entry.name)
        if config is not None and config.wants_soft_deletes(entry.db, entry.name):
            if enable_soft_deletes(self.spark, entry.path, self.layout.storage_options):
                log.info("%s.%s: soft deletes on", entry.db, entry.name)
        if config is not None and config.wants_scd2(entry.db, entry.name):
            if info is not None and create_history(self.spark, entry.path, path, info, self.layout.storage_options):
                log.info("%s.%s: history table created at %s", entry.db, entry.name, path)
        if history_checkpoint(path, self.layout.storage_options) is not None:
            self.scd2 = path
            if info is not None and exclude_wide_decimals(self.spark, path, info, self.layout.storage_options):
                log.info("%s.%s: its history table's wide DECIMAL columns get no file statistics", entry.db, entry.name)

    def _check_history_window(self, info: TableInfo, lo: int, h: int) -> None:
        """A history table behind its replica (only if a run ever advanced the replica without it)
        catches up in the next window, which reads its changes from the history's own checkpoint
        `h` (write_history's, read on the log it writes to): right only while the table decodes the
        same way since then."""
        if h < lo and self.scope.history.table_info_at(self.key, h) != info:
            raise InputError(f"history table {self.scd2} is at {h}, behind its replica at {lo} across a DDL: "
                             "remove the history folder and it is created again from the replica")

    def _facts(self) -> ReplicaFacts | None:
        """The replica's facts for the merge log (status reads them there), read after the table's
        last commit of the run; None when it has none or they cannot be read (status then reads
        the replica itself)."""
        try:
            entry = self.entry if self.entry is not None else self.catalog.get(self.key)
            held = self._replica
            if self._written and held is not None and entry is not None and held.path == entry.path:
                replica = held  # as of this run's last commit, and the run holds the replica's lease
            else:
                replica = None if entry is None else self._replica_at(entry.path)
            return None if replica is None else replica_facts(self.layout, entry.path, replica.table,
                                                              replica.checkpoint())
        except Exception:  # noqa: BLE001 - the facts are for status only; the run's outcome stands
            log.warning("table %s: replica facts not read for the merge log", self.key, exc_info=True)
            return None

    def _replica_at(self, path: str) -> ReplicaHandle | None:
        """The replica at `path` as of now: the run's handle of its log brought up to date (as a
        listing of the log's new commits, which holds every commit of any writer), opened (or
        taken from those kept across runs) the first time; None when there is none at `path`."""
        if self._replica is not None and self._replica.path == path:
            self._replica.refresh()
            return self._replica
        self._replica = self.scope.open_replica(self.key, path)
        return self._replica

    def _report(self, kind: StepKind, checkpoint: int | None, detail: str) -> None:
        if self.scope.progress is not None:
            self.scope.progress(MergeProgress(self.result.table, kind, checkpoint, detail))


def table_name(history: SchemaHistory, key: TableKey) -> str:
    db, name = history.current_name(key)
    return f"{db}.{name}"
