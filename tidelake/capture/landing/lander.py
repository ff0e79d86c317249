"""The lander: buffers the puller's raw row changes and lands them durably and idempotently.

A flush commits changelog, DDL rows, then watermarks (invariant 1: a watermark only after the
events it covers), all three under the flush's sequence as app transaction, so a retry skips
what landed and a second puller under our app id stops the lander. Memory is bounded by the
quota, and by the process's RSS growth where it owns its process. Owner: the changefeed's shard.

More: docs/internals.md#lander.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from tidelake.capture.landing.app_txn import LakeConflictError
from tidelake.capture.landing.bucket_compaction import BucketCompactor
from tidelake.capture.landing.changelog_writer import ChangelogWriter
from tidelake.capture.landing.ddl_writer import DdlWriter
from tidelake.capture.landing.lander_metrics import LanderMetrics, default_lander_metrics
from tidelake.capture.landing.resident_memory import ResidentGrowth
from tidelake.capture.landing.watermark_retirement import retired_watermark_ids
from tidelake.capture.landing.watermark_writer import WatermarkWriter
from tidelake.errors import InputError, StopRequested
from tidelake.failpoints import failpoint
from tidelake.lake.damage import first_line
from tidelake.lake.ddl_log import DdlRow
from tidelake.lake.layout import DEFAULT_BUCKET_SECONDS, LakeLayout
from tidelake.lake.row_change import OP_DELETE, OP_PUT, ROW_OVERHEAD_BYTES, RowChange, check_ops
from tidelake.lake.store_room import check_room, probe_room, refusal

log = logging.getLogger(__name__)

APP_ID_PREFIX = "tidelake-puller/"
LANDER_FAILPOINTS = (
    "lander.open",
    "lander.before_changelog", "lander.after_changelog",
    "lander.before_ddl", "lander.after_ddl",
    "lander.before_watermarks", "lander.after_watermarks",
)
# The floor of the RSS check is this fraction of a flush: a flush under memory pressure still
# carries at least an eighth of a full one, so commits stay few (a larger floor held more RSS).
FLOOR_DIVISOR = 8
# A call larger than this fraction of the quota is admitted in pieces of at most that size (a row
# larger is a piece of its own), so a producer waits at the quota as if it had offered rows a few
# at a time: the feed hands over up to a thousand rows per call, and a call is admitted whole.
PIECE_DIVISOR = 16
# While the store has no room: the longest wait between two tries of the flush, and how often the
# lander says again that landing is paused.
PAUSED_RETRY_S = 10.0
PAUSED_REMINDER_S = 60.0
# TiCDC's changefeed id rule (pkg/config: ^[a-zA-Z0-9]+(\-[a-zA-Z0-9]+)*$), shard suffixes too.
_CHANGEFEED_ID = re.compile(r"^[A-Za-z0-9]+([-_.][A-Za-z0-9]+)*$")


class LanderClosedError(StopRequested):
    """Rows were offered after close() or refuse_rows(): the puller is winding down, it did not fail."""


_OPS = frozenset((OP_PUT, OP_DELETE))
_OP = attrgetter("op")


def _per_table(rows: Iterable[RowChange]) -> dict[int, tuple[int, int]]:
    """table id -> (rows, key + value + old value bytes)."""
    totals: dict[int, tuple[int, int]] = {}
    for r in rows:
        count, nbytes = totals.get(r.table_id, (0, 0))
        totals[r.table_id] = (count + 1, nbytes + len(r.key) + len(r.value) + len(r.old_value))
    return totals


@dataclass
class _Batch:
    seq: int
    rows: list[RowChange]
    ddl: list[DdlRow]
    table_resolved: dict[int, int]
    ddl_resolved: int
    memory: int  # what the quota counts (memory_bytes)
    per_table: dict[int, tuple[int, int]]  # table id -> (rows, payload bytes) of `rows`: the per-table metrics
    watermarks_changed: bool = False


@dataclass
class _Durable:
    table_resolved: dict[int, int] = field(default_factory=dict)
    ddl_resolved: int = 0


class Lander:
    """Lands one changefeed's (or puller shard's) raw changes into the lake."""

    def __init__(
        self,
        layout: LakeLayout,
        changefeed_id: str,
        memory_quota_bytes: int = 256 << 20,
        flush_interval_s: float = 5.0,
        flush_bytes: int = 64 << 20,
        bucket_seconds: int = DEFAULT_BUCKET_SECONDS,
        metrics: LanderMetrics | None = None,
        prune_interval_s: float = 60.0,
        compact_interval_s: float = 60.0,
        resident: ResidentGrowth | None = None,
        floor_bytes: int | None = None,
    ) -> None:
        if not _CHANGEFEED_ID.match(changefeed_id):
            raise InputError(f"changefeed id {changefeed_id!r} must match {_CHANGEFEED_ID.pattern}")
        if memory_quota_bytes <= 0 or flush_bytes <= 0 or flush_interval_s <= 0:
            raise InputError("lander memory quota, flush bytes and flush interval must be positive")
        self.app_id = APP_ID_PREFIX + changefeed_id
        self._writer = uuid.uuid4().hex  # names this instance in every commit it makes
        self._quota = memory_quota_bytes
        self._flush_bytes = min(flush_bytes, memory_quota_bytes)
        self._resident = resident
        self._floor = self._flush_bytes // FLOOR_DIVISOR if floor_bytes is None else floor_bytes
        self._piece = max(1, memory_quota_bytes // PIECE_DIVISOR)
        self._interval = flush_interval_s
        self._changelog = ChangelogWriter(layout, self.app_id, bucket_seconds)
        self._ddl_log = DdlWriter(layout, self.app_id)
        self._watermarks = WatermarkWriter(layout, self.app_id)
        self._layout = layout
        self._prune_interval = prune_interval_s
        self._next_prune = time.monotonic() + prune_interval_s

        durable = self._watermarks.load()
        self._durable = _Durable(dict(durable.table_resolved), durable.ddl_resolved)
        self._reported = _Durable(dict(durable.table_resolved), durable.ddl_resolved)
        self._next_seq = 1 + max(
            self._changelog.committed_seq(),
            self._ddl_log.committed_seq(),
            self._watermarks.committed_seq(),
        )

        self._cond = threading.Condition(threading.RLock())
        self._rows: list[RowChange] = []
        self._ddl: list[DdlRow] = []
        self._buffered = 0  # memory_bytes of _rows (not yet taken by a flush)
        self._buffered_tables: dict[int, tuple[int, int]] = {}  # _per_table of _rows, summed as they are added
        self._payload_added = 0  # key + value + old value bytes of every row added
        self._in_flight: _Batch | None = None
        self._closed = False
        self._refusing = False  # a wind-down: producers get LanderClosedError instead of waiting for room
        self._fatal: LakeConflictError | None = None
        self._flush_wanted = False
        self._paused: str | None = None  # why landing waits for the store, while it does
        self._paused_since = self._paused_said = 0.0
        self._flush_lock = threading.RLock()
        self._flush_depth = 0
        self._flush_again = False
        self._labels = {"changefeed": changefeed_id}
        self._metrics = metrics or default_lander_metrics()
        self._buffered_gauge = self._metrics.buffered_bytes.labels(**self._labels)
        self._flusher = threading.Thread(
            target=self._flush_loop, name=f"lander-{changefeed_id}", daemon=True
        )
        self._compactor = BucketCompactor(
            layout, lambda: self.durable_watermarks()[0], compact_interval_s,
            lambda files: self._metrics.compacted_files.labels(**self._labels).inc(files), changefeed_id,
        )
        failpoint("lander.open", self)  # before the threads start: a failed open leaves no thread behind
        self._flusher.start()
        self._compactor.start()

    # --- producer side -------------------------------------------------------------------

    def add_rows(self, rows: Sequence[RowChange]) -> None:
        """Buffer rows, in order; blocks while the memory quota is full (backpressure). A call of
        more than a PIECE_DIVISOR-th of the quota is admitted piece by piece."""
        if not _OPS.issuperset(map(_OP, rows)):
            check_ops(rows)  # names the first bad row; nothing is buffered
        per_table = _per_table(rows)
        payload = sum(nbytes for _, nbytes in per_table.values())
        if payload + ROW_OVERHEAD_BYTES * len(rows) <= self._piece or len(rows) == 1:
            self._admit(rows, per_table, payload)
            return
        piece: list[RowChange] = []
        size = 0
        for row in rows:
            row_bytes = ROW_OVERHEAD_BYTES + len(row.key) + len(row.value) + len(row.old_value)
            if piece and size + row_bytes > self._piece:
                self._admit_piece(piece)
                piece, size = [], 0
            piece.append(row)
            size += row_bytes
        self._admit_piece(piece)

    def _admit_piece(self, rows: list[RowChange]) -> None:
        per_table = _per_table(rows)
        self._admit(rows, per_table, sum(nbytes for _, nbytes in per_table.values()))

    def _admit(self, rows: Sequence[RowChange], per_table: dict[int, tuple[int, int]], payload: int) -> None:
        """Buffer `rows` whole once they fit the quota (or nothing else is held)."""
        nbytes = payload + ROW_OVERHEAD_BYTES * len(rows)  # = memory_bytes(rows)
        with self._cond:
            if self._resident is not None:
                self._resident.mark_base()
            while self._used() > 0 and (self._used() + nbytes > self._quota or self._grown_too_much(nbytes)):
                self._check_open()
                self._flush_wanted = True
                self._cond.notify_all()
                self._cond.wait()
            self._check_open()
            self._rows.extend(rows)
            self._buffered += nbytes
            self._payload_added += payload
            for table_id, (count, table_bytes) in per_table.items():
                buffered_count, buffered_bytes = self._buffered_tables.get(table_id, (0, 0))
                self._buffered_tables[table_id] = (buffered_count + count, buffered_bytes + table_bytes)
            self._buffered_gauge.set(self._used())
            if self._buffered >= self._flush_bytes:
                self._flush_wanted = True
                self._cond.notify_all()

    def add_ddl(self, rows: Sequence[DdlRow]) -> None:
        """Buffer DDL rows; they land before any DDL resolved ts reported after this call."""
        with self._cond:
            self._check_open()
            self._ddl.extend(rows)

    def resolve(self, table_id: int, ts: int) -> None:
        """No change of physical table `table_id` <= ts is still to be added."""
        with self._cond:
            if self._resident is not None:
                self._resident.mark_base()
            if ts > self._reported.table_resolved.get(table_id, 0):
                self._reported.table_resolved[table_id] = ts

    def resolve_ddl(self, ts: int) -> None:
        """The DDL puller's resolved ts: every DDL job finished <= ts was added."""
        with self._cond:
            self._reported.ddl_resolved = max(self._reported.ddl_resolved, ts)

    def buffered_bytes(self) -> int:
        """Memory of the rows buffered or in a flush not yet landed: what the memory quota counts."""
        with self._cond:
            return self._used()

    def payload_bytes_added(self) -> int:
        """Key + value + old value bytes of every row added so far: the capture's volume in bytes, as
        the tidelake_lander_bytes_total metric counts it once landed."""
        with self._cond:
            return self._payload_added

    def paused(self) -> str | None:
        """Why flushes wait for the store to have room again; None while they land."""
        with self._cond:
            return self._paused

    def durable_watermarks(self) -> tuple[dict[int, int], int]:
        """(table resolved ts, ddl resolved ts) as landed so far."""
        with self._cond:
            return dict(self._durable.table_resolved), self._durable.ddl_resolved

    # --- flushing ------------------------------------------------------------------------

    def flush(self) -> None:
        """Land everything added and resolved before this call; raises if landing fails."""
        with self._flush_lock:
            self._flush_depth += 1
            try:
                if self._fatal is not None:
                    raise self._fatal
                if self._flush_depth > 1:
                    self._flush_again = True
                    return
                again = True
                while again:
                    self._flush_again = False
                    self._flush_once()
                    again = self._flush_again
            finally:
                self._flush_depth -= 1

    def refuse_rows(self) -> None:
        """From now on add_rows raises LanderClosedError, also in a producer waiting at the quota:
        a wind-down does not wait for the store to take a flush first. Their rows are not buffered,
        so they are above the durable watermarks and pulled again by the next run; close() still
        lands what is buffered."""
        with self._cond:
            self._refusing = True
            self._cond.notify_all()

    def close(self) -> None:
        """Flush what is buffered and stop; add_rows fails afterwards."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._compactor.stop()
        if self._flusher is not threading.current_thread():
            self._flusher.join()
        self.flush()

    def _flush_once(self) -> None:
        if self._in_flight is not None:
            self._land(self._in_flight)  # a failed flush is retried first, with its sequence
        self._prune_retired()
        batch = self._take()
        if batch is not None:
            self._land(batch)

    def _take(self) -> _Batch | None:
        with self._cond:
            table_resolved = dict(self._reported.table_resolved)
            ddl_resolved = self._reported.ddl_resolved
            changed = (
                table_resolved != self._durable.table_resolved
                or ddl_resolved != self._durable.ddl_resolved
            )
            if not (self._rows or self._ddl or changed):
                return None
            batch = _Batch(
                self._next_seq, self._rows, self._ddl, table_resolved, ddl_resolved,
                self._buffered, self._buffered_tables, watermarks_changed=changed,
            )
            self._next_seq += 1
            self._rows, self._ddl, self._buffered, self._buffered_tables = [], [], 0, {}
            self._in_flight = batch
            self._cond.notify_all()  # the buffer is empty again: a producer held by the floor goes on
            return batch

    def _land(self, batch: _Batch) -> None:
        started = time.monotonic()
        try:
            if self.paused() is not None:  # the store refused: ask it cheaply before the flush's own writes
                probe_room(self._layout.root, self._layout.storage_options)
            check_room(self._layout.root, batch.memory)
            self._commit(batch)
        except LakeConflictError as exc:
            self._metrics.flush_failures.labels(**self._labels).inc()
            with self._cond:
                self._fatal = exc
                self._cond.notify_all()
            raise
        except Exception:
            self._metrics.flush_failures.labels(**self._labels).inc()
            raise
        with self._cond:
            self._in_flight = None
            if batch.watermarks_changed:
                self._durable = _Durable(batch.table_resolved, batch.ddl_resolved)
            self._buffered_gauge.set(self._used())
            self._cond.notify_all()
        self._metrics.flushes.labels(**self._labels).inc()
        self._metrics.rows.labels(**self._labels).inc(len(batch.rows))
        self._metrics.bytes.labels(**self._labels).inc(sum(nbytes for _, nbytes in batch.per_table.values()))
        for table_id, (count, nbytes) in batch.per_table.items():
            self._metrics.table_rows.labels(table_id=str(table_id), **self._labels).inc(count)
            self._metrics.table_bytes.labels(table_id=str(table_id), **self._labels).inc(nbytes)
        self._metrics.flush_seconds.labels(**self._labels).observe(time.monotonic() - started)

    def _commit(self, batch: _Batch) -> None:
        """The three commits of one flush, in the order the invariants need."""
        w = self._writer
        if batch.rows:
            failpoint("lander.before_changelog", self)
            if not self._changelog.append(batch.rows, batch.seq, w):
                self._accept_skip(batch, "changelog", self._changelog.writer_of(batch.seq))
            failpoint("lander.after_changelog", self)
        if batch.ddl:
            failpoint("lander.before_ddl", self)
            if not self._ddl_log.insert(batch.ddl, batch.seq, w):
                self._accept_skip(batch, "ddl", self._ddl_log.writer_of(batch.seq))
            failpoint("lander.after_ddl", self)
        if batch.watermarks_changed:
            failpoint("lander.before_watermarks", self)
            written = self._watermarks.write(
                batch.table_resolved,
                batch.ddl_resolved,
                self._changelog.version(),
                self._ddl_log.version(),
                batch.seq,
                w,
            )
            if not written:
                self._accept_skip(batch, "watermarks", self._watermarks.writer_of(batch.seq))
            failpoint("lander.after_watermarks", self)

    def _prune_retired(self) -> None:
        """Forget the watermarks of retired physical ids no merge can need (see module doc)."""
        now = time.monotonic()
        if now < self._next_prune:
            return
        self._next_prune = now + self._prune_interval
        # Only ids landed and not resolved since: the DDL history read below then holds every DDL
        # the puller saw before their last resolve, e.g. the RECOVER TABLE a join came with.
        with self._cond:
            candidates = {
                pid: ts for pid, ts in self._durable.table_resolved.items()
                if self._reported.table_resolved.get(pid) == ts
            }
        try:
            retired = retired_watermark_ids(self._layout, candidates)
        except Exception:  # pruning is housekeeping: a failed look must never stop landing
            log.exception("looking for retired watermarks of %s failed; retrying later", self.app_id)
            return
        if not retired:
            return
        with self._cond:
            for pid in retired:
                if self._reported.table_resolved.get(pid) == candidates[pid]:
                    self._reported.table_resolved.pop(pid)
        log.info("%s drops the watermarks of retired physical ids %s", self.app_id, sorted(retired))

    def _accept_skip(self, batch: _Batch, table: str, writer: str | None) -> None:
        """A commit of this flush's sequence exists: fine if it is our own lost ack."""
        if writer != self._writer:
            raise LakeConflictError(
                f"{table} already holds flush {batch.seq} of {self.app_id}, committed by "
                f"{writer or 'an unknown writer'}, not by this lander: another puller is "
                f"landing this changefeed"
            )
        log.info("%s flush %d of %s had landed before the retry", table, batch.seq, self.app_id)

    def _flush_loop(self) -> None:
        backoff = self._interval
        while True:
            with self._cond:
                deadline = time.monotonic() + backoff
                while not (self._closed or self._flush_wanted):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                if self._closed:
                    return
                self._flush_wanted = False
            try:
                self.flush()
                backoff = self._interval
                self._resume()
                if self._resident is not None:  # the flush's rows and buffers are free now
                    self._resident.release_freed()
                    with self._cond:  # a producer held by the RSS check looks again, after the trim
                        self._cond.notify_all()
            except LakeConflictError as exc:  # an operator's mistake, not a bug: the message, no trace
                log.error("lander of %s stopped: %s", self.app_id, exc)
                return
            except Exception as exc:
                cause = refusal(exc)
                if cause is None:
                    log.exception("flush of %s failed; retrying", self.app_id)
                    backoff = min(backoff * 2, 30.0)
                else:
                    self._pause(cause, exc)
                    backoff = min(backoff * 2, PAUSED_RETRY_S)

    def _pause(self, cause: str, exc: Exception) -> None:
        """One line when landing pauses for the store (and a reminder now and then), not a trace
        per try: the buffer is kept, and producers wait at the quota."""
        now = time.monotonic()
        with self._cond:
            first = self._paused != cause
            if first:
                self._paused, self._paused_since = cause, now
            if not (first or now - self._paused_said >= PAUSED_REMINDER_S):
                return
            self._paused_said = now
            since, buffered = now - self._paused_since, self._used()
        detail = first_line(exc)
        log.warning("landing of %s paused %.0f s: %s; %.1f MiB kept in memory, retried every %.0f s at most "
                    "(%s)", self.app_id, since, cause, buffered / 2**20, PAUSED_RETRY_S, detail)

    def _resume(self) -> None:
        with self._cond:
            cause, self._paused = self._paused, None
            since = time.monotonic() - self._paused_since
        if cause is not None:
            log.warning("landing of %s resumed after %.0f s paused (%s)", self.app_id, since, cause)

    # --- helpers -------------------------------------------------------------------------

    def _grown_too_much(self, nbytes: int) -> bool:
        """The process grew by more than the quota, and this flush's floor is already buffered."""
        return (self._resident is not None and self._buffered >= self._floor
                and self._resident.growth() + nbytes > self._quota)

    def _used(self) -> int:
        return self._buffered + (self._in_flight.memory if self._in_flight else 0)

    def _check_open(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._closed or self._refusing:
            raise LanderClosedError(f"lander of {self.app_id} is closed")
