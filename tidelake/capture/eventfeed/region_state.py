"""Per (subscription, region) state machine: prewrite/commit matching and resolved ts.

Implements TiCDC's `handleEventEntry` + matcher (docs/wire.md#row-handling-per-region) and resolved-ts rules
(docs/wire.md#resolved-ts-handling). This is where Flink CDC lost rows (a COMMIT arriving before its PREWRITE during the
incremental scan, docs/peers.md#flink-cdc-tidb-connector): before INITIALIZED such commits are cached and matched
when the scan ends; after INITIALIZED an unmatched COMMIT is fatal instead of silently dropped.
Owner: the EventFeed client, one state per region subscription.
"""

from __future__ import annotations

import logging

from tidelake.capture.eventfeed.prewrites import Prewrite, PrewriteBudget, UnmatchedPrewrites
from tidelake.capture.puller_errors import PrewriteNotMatchError, ProtocolViolationError
from tidelake.codec.keys import TABLE_PREFIX_LEN, table_id_of
from tidelake.codec.memcomparable_bytes import decode_bytes, encode_bytes
from tidelake.errors import InputError
from tidelake.kvproto import cdcpb_pb2
from tidelake.lake.row_change import RowChange

log = logging.getLogger(__name__)

Row = cdcpb_pb2.Event.Row
_PREWRITE = cdcpb_pb2.Event.PREWRITE
_COMMIT = cdcpb_pb2.Event.COMMIT
_ROLLBACK = cdcpb_pb2.Event.ROLLBACK
_COMMITTED = cdcpb_pb2.Event.COMMITTED
_INITIALIZED = cdcpb_pb2.Event.INITIALIZED
_OPS = {Row.PUT: "put", Row.DELETE: "delete"}


class RegionFeedState:
    """What one region subscription has seen: unmatched prewrites, cached rows, resolved ts.

    `table_start_ts` is the subscription's start ts (commits at or below it are already in the
    replica's starting point); `checkpoint_ts` is the resolved ts recorded for this sub-span in
    the range lock, sent as the request's checkpoint (docs/wire.md#span-division). Unmatched prewrites wait in memory
    within `prewrite_budget`, beyond it on local disk (prewrites.py). Not thread-safe: one
    region's events are handled by one worker, in arrival order.
    """

    def __init__(
        self,
        subscription_id: int,
        region_id: int,
        span: tuple[bytes, bytes],
        table_start_ts: int,
        checkpoint_ts: int,
        prewrite_budget: PrewriteBudget | None = None,
    ) -> None:
        self.subscription_id = subscription_id
        self.region_id = region_id
        self.span = span
        self.table_start_ts = table_start_ts
        self.last_resolved_ts = checkpoint_ts
        self.initialized = False
        self.stopped = False
        self._unmatched = UnmatchedPrewrites(prewrite_budget)
        self._cached_commits: list[Row] = []
        self._cached_rollbacks: list[Row] = []
        self._raw_span = _raw_span(span)
        self._table_prefix = b""  # the last row's 't' + table id bytes, and its decoded id
        self._table_id = 0

    @property
    def unmatched_count(self) -> int:
        return len(self._unmatched)

    def handle_rows(self, rows: list[Row]) -> list[RowChange]:
        """Apply one Entries event; return the committed changes it completes, in order."""
        out: list[RowChange] = []
        prewrites: list[tuple[int, bytes, Prewrite]] = []  # a run of PREWRITEs, stored together
        unmatched = self._unmatched
        # Per-row work inline, no method call on the common paths (a call cost as much as the
        # check it made): the sub-span check against raw bounds, a COMMIT's match and emit.
        raw_span = self._raw_span
        span_start, span_end = raw_span if raw_span is not None else (b"", None)
        for row in rows:
            kind = row.type
            # Each read of a bytes field copies it out of the message (upb): read the key once.
            key = row.key
            if kind != _INITIALIZED:  # docs/wire.md#row-handling-per-region: rows outside the sub-span are dropped
                if raw_span is None:
                    if not self._encoded_key_in_span(key):
                        continue
                elif key < span_start or (span_end is not None and key >= span_end):
                    continue
            if kind == _PREWRITE:
                prewrites.append((row.start_ts, key, (row.value, row.old_value, row.generation)))
                continue
            if prewrites:  # before anything that may look them up
                unmatched.put_many(prewrites)
                prewrites = []
            if kind == _COMMIT:
                start_ts = row.start_ts
                initialized = self.initialized
                prewrite = unmatched.take(start_ts, key) if initialized else self._match(row, key, False)
                if prewrite is None:
                    if initialized:
                        raise PrewriteNotMatchError(
                            f"region {self.region_id}: COMMIT of key {key.hex()} start_ts {start_ts} "
                            f"commit_ts {row.commit_ts} after INITIALIZED without its PREWRITE"
                        )
                    self._cached_commits.append(row)
                    continue
                commit_ts = row.commit_ts
                if commit_ts <= self.table_start_ts:
                    continue  # stale: already part of the subscription's starting point (docs/wire.md#row-handling-per-region)
                if commit_ts <= self.last_resolved_ts:
                    self._raise_before_resolved(key, commit_ts, "COMMIT")
                # The prewrite's own bytes objects: writing them into the COMMIT message and
                # reading them back would copy each value twice more.
                out.append(self._row_change(row, key, commit_ts, start_ts, prewrite[0], prewrite[1]))
            elif kind == _COMMITTED:
                commit_ts = row.commit_ts
                if commit_ts <= self.last_resolved_ts:
                    self._raise_before_resolved(key, commit_ts, "COMMITTED")
                out.append(self._row_change(row, key, commit_ts, row.start_ts, row.value, row.old_value))
            elif kind == _ROLLBACK:
                if self.initialized:
                    unmatched.take(row.start_ts, key)
                else:
                    self._cached_rollbacks.append(row)
            elif kind == _INITIALIZED:
                self._on_initialized(out)
            else:
                raise ProtocolViolationError(
                    f"region {self.region_id}: row of unknown type {kind} for key {key.hex()}"
                )
        if prewrites:
            unmatched.put_many(prewrites)
        return out

    def handle_resolved(self, ts: int) -> bool:
        """Advance the region's resolved ts; False when ignored (not initialized, stopped, or lower)."""
        # docs/wire.md#resolved-ts-handling
        if not self.initialized or self.stopped or ts < self.last_resolved_ts:
            return False
        self.last_resolved_ts = ts
        return True

    def _on_initialized(self, out: list[RowChange]) -> None:
        self.initialized = True
        cached, self._cached_commits = self._cached_commits, []
        for row in cached:
            # A commit whose PREWRITE never came must be covered by a scan COMMITTED row (docs/wire.md#commits-need-their-prewrite).
            key = row.key
            prewrite = self._match(row, key, True)
            if prewrite is not None:
                self._emit_commit(row, key, prewrite, out)
            else:
                log.info("region %d: ignore COMMIT of key %s start_ts %d without prewrite (scanned as COMMITTED)",
                         self.region_id, key.hex(), row.start_ts)
        rollbacks, self._cached_rollbacks = self._cached_rollbacks, []
        for row in rollbacks:
            self._unmatched.take(row.start_ts, row.key)

    def _match(self, commit: Row, key: bytes, initialized: bool) -> Prewrite | None:
        """The waiting prewrite the COMMIT of `key` takes (its value and old value are the
        commit's), None if it cannot be matched now."""
        if initialized:
            return self._unmatched.take(commit.start_ts, key)
        prewrite = self._unmatched.get(commit.start_ts, key)
        if prewrite is None or not prewrite[0] or prewrite[2] != 0:
            return None  # the scan may still deliver the real prewrite (docs/wire.md#row-handling-per-region)
        self._unmatched.take(commit.start_ts, key)
        return prewrite

    def _emit_commit(self, row: Row, key: bytes, prewrite: Prewrite, out: list[RowChange]) -> None:
        """A cached COMMIT matched at INITIALIZED; handle_rows does the same inline."""
        commit_ts = row.commit_ts
        if commit_ts <= self.table_start_ts:
            return  # stale: already part of the subscription's starting point (docs/wire.md#row-handling-per-region)
        if commit_ts <= self.last_resolved_ts:
            self._raise_before_resolved(key, commit_ts, "COMMIT")
        out.append(self._row_change(row, key, commit_ts, row.start_ts, prewrite[0], prewrite[1]))

    def _raise_before_resolved(self, key: bytes, commit_ts: int, kind: str) -> None:
        raise ProtocolViolationError(
            f"region {self.region_id}: {kind} of key {key.hex()} has commit_ts {commit_ts} "
            f"<= resolved ts {self.last_resolved_ts} already reported (docs/wire.md#commit-timestamps-above-every-watermark)"
        )

    def _row_change(self, row: Row, key: bytes, commit_ts: int, start_ts: int, value: bytes,
                    old_value: bytes) -> RowChange:
        op = _OPS.get(row.op_type)
        if op is None:
            raise ProtocolViolationError(
                f"region {self.region_id}: committed row for key {key.hex()} commit_ts {commit_ts} "
                f"has op_type {row.op_type}, expected PUT or DELETE"
            )
        if key[:TABLE_PREFIX_LEN] != self._table_prefix:  # rows of a region share their table
            self._table_id = table_id_of(key)
            self._table_prefix = key[:TABLE_PREFIX_LEN]
        return RowChange(self._table_id, commit_ts, start_ts, op, key, value, old_value, self.region_id)

    def _encoded_key_in_span(self, raw_key: bytes) -> bool:
        # docs/wire.md#keys: row keys are raw, spans are encoded; compare in encoded space. A span
        # with raw bounds (the same order: the encoding preserves it) is compared in handle_rows.
        encoded = encode_bytes(raw_key)
        start, end = self.span
        return encoded >= start and (not end or encoded < end)


def _raw_span(span: tuple[bytes, bytes]) -> tuple[bytes, bytes | None] | None:
    """Raw bounds (None end = +inf) when both ends are complete encodings of a raw key, which
    lets a row key be compared without encoding it; None for any other bound."""
    bounds = []
    for bound in span:
        if not bound:
            bounds.append(b"" if not bounds else None)  # empty start = -inf, empty end = +inf
            continue
        try:
            raw, end = decode_bytes(bound)
        except InputError:
            return None
        if end != len(bound):
            return None
        bounds.append(raw)
    return bounds[0], bounds[1]
