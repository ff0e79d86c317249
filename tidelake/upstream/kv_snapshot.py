"""Consistent snapshot reads from TiKV at one TSO: KvScan region by region, KvGet, KvBatchGet.

This is client-go's snapshot (`txnsnapshot/scan.go`, `snapshot.go`) over plain unary kvrpcpb
calls (docs/metadata.md#snapshot-reads-over-kvrpcpb): RAW keys, region bounds decoded from PD's encoded keys,
every region error handled by re-locating or backing off, and every lock met resolved so rows
of transactions committed at or below the read ts are included and nothing else is.
Owner: the upstream clients; bootstrap, `tidelake verify` and the puller read through it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from tidelake.codec.keys import table_record_span
from tidelake.config import TlsConfig
from tidelake.kvproto import kvrpcpb_pb2
from tidelake.upstream.backoffer import Backoffer
from tidelake.upstream.lock_resolver import LockResolver, ReadLocks
from tidelake.upstream.pd_client import PDClient
from tidelake.upstream.region_cache import CachedRegion
from tidelake.upstream.region_request import RegionRequestSender
from tidelake.upstream.upstream_errors import BelowGCSafepointError, UpstreamError

SCAN_BATCH = 256  # client-go scanBatchSize
_GC_CHECK_INTERVAL_S = 10.0


@dataclass(frozen=True)
class ScanProgress:
    regions_done: int
    rows: int
    bytes: int


class SnapshotReader:
    """Reads at caller-chosen TSOs; thread-safe, so several scans may run in parallel."""

    def __init__(
        self,
        pd: PDClient,
        tls: TlsConfig | None = None,
        *,
        batch_size: int = SCAN_BATCH,
        request_timeout_s: float = 30.0,
        backoff_budget_s: float = 120.0,
        lock_wait_budget_s: float = 600.0,
        progress: Callable[[ScanProgress], None] | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1 (TiKV returns nothing for limit 0)")
        self._pd = pd
        self._sender = RegionRequestSender(pd, tls, timeout_s=request_timeout_s)
        self._resolver = LockResolver(self._sender)
        self._batch = batch_size
        self._budget_s = backoff_budget_s
        self._lock_budget_s = lock_wait_budget_s
        self._progress = progress
        self._gc_checked: tuple[float, int] | None = None

    def _backoffer(self) -> Backoffer:
        return Backoffer(self._budget_s, cancel=self._pd.cancel)  # a stopping caller does not wait out the budget

    def _lock_backoffer(self) -> Backoffer:
        return Backoffer(self._lock_budget_s, cancel=self._pd.cancel)

    # --- GC visibility (docs/metadata.md#what-a-client-sees-when-its-ts-is-older-than-gc, client-go CheckVisibility) -------------

    def _check_visibility(self, ts: int) -> None:
        now = time.monotonic()
        cached = self._gc_checked
        if cached is None or now - cached[0] > _GC_CHECK_INTERVAL_S:
            cached = self._gc_checked = (now, self._pd.get_gc_safepoint())
        if ts < cached[1]:
            raise BelowGCSafepointError(
                f"GC life time is shorter than the read: snapshot ts {ts} is below the GC safepoint "
                f"{cached[1]}, so versions it needs may be gone"
            )

    # --- point reads -----------------------------------------------------------------------

    def get(self, key: bytes, ts: int) -> bytes | None:
        """The value of raw `key` at `ts`, or None when absent or deleted."""
        self._check_visibility(ts)
        return self._get(key, ts, ReadLocks(), self._backoffer(), self._lock_backoffer())

    def _get(self, key: bytes, ts: int, read_locks: ReadLocks, bo: Backoffer, lock_bo: Backoffer) -> bytes | None:
        def build(_region: CachedRegion, ctx: kvrpcpb_pb2.Context) -> kvrpcpb_pb2.GetRequest:
            read_locks.apply(ctx)
            return kvrpcpb_pb2.GetRequest(context=ctx, key=key, version=ts)

        while True:
            resp, _ = self._sender.send(key, "KvGet", build, bo)
            if resp.HasField("error"):
                self._resolve_or_raise(resp.error, ts, read_locks, lock_bo, f"KvGet {key.hex()}")
                continue
            return None if resp.not_found else resp.value

    def batch_get(self, keys: Iterable[bytes], ts: int) -> dict[bytes, bytes]:
        """Values of the raw keys that exist at `ts` (absent keys are left out, as TiKV does)."""
        self._check_visibility(ts)
        pending = sorted(set(keys))
        found: dict[bytes, bytes] = {}
        read_locks = ReadLocks()
        bo, lock_bo = self._backoffer(), self._lock_backoffer()
        while pending:
            in_region: list[bytes] = []

            def build(region: CachedRegion, ctx: kvrpcpb_pb2.Context) -> kvrpcpb_pb2.BatchGetRequest:
                in_region[:] = [k for k in pending if region.contains(k)]
                read_locks.apply(ctx)
                return kvrpcpb_pb2.BatchGetRequest(context=ctx, keys=in_region, version=ts)

            resp, _ = self._sender.send(pending[0], "KvBatchGet", build, bo)
            if resp.HasField("error"):
                self._resolve_or_raise(resp.error, ts, read_locks, lock_bo, "KvBatchGet")
                continue
            for pair in resp.pairs:
                if pair.HasField("error"):
                    key = pair.error.locked.key or pair.key
                    value = self._locked_pair(pair, ts, read_locks, bo, lock_bo)
                else:
                    key, value = pair.key, pair.value
                if value is not None:
                    found[key] = value
            done = set(in_region)
            pending = [k for k in pending if k not in done]
        return found

    # --- range reads -----------------------------------------------------------------------

    def scan(self, start: bytes, end: bytes, ts: int) -> Iterator[tuple[bytes, bytes]]:
        """Every (raw key, value) in [start, end) visible at `ts`, in key order; empty end = +inf.

        Follows splits, merges and leader moves mid-scan: keys already yielded stay valid
        because every request reads at the same ts (docs/metadata.md#the-scan-loop-of-a-snapshot-reader)."""
        if end and start >= end:
            return
        next_key = start
        regions_done = rows = nbytes = 0
        read_locks = ReadLocks()
        lock_bo = self._lock_backoffer()
        while True:
            self._check_visibility(ts)
            resp, region = self._scan_batch(next_key, end, ts, read_locks, lock_bo)
            for pair in resp.pairs:
                if pair.HasField("error"):
                    key = pair.error.locked.key or pair.key
                    value = self._locked_pair(pair, ts, read_locks, self._backoffer(), lock_bo)
                    if value is None:
                        continue
                else:
                    key, value = pair.key, pair.value
                rows += 1
                nbytes += len(key) + len(value)
                yield key, value
            if len(resp.pairs) < self._batch:
                regions_done += 1
                if self._progress is not None:
                    self._progress(ScanProgress(regions_done, rows, nbytes))
                if region.end is None or (end and region.end >= end):
                    return
                next_key = region.end
            else:
                last = resp.pairs[-1]
                next_key = (last.error.locked.key if last.HasField("error") else last.key) + b"\x00"  # kv.NextKey

    def _scan_batch(self, next_key: bytes, end: bytes, ts: int, read_locks: ReadLocks,
                    lock_bo: Backoffer) -> tuple[kvrpcpb_pb2.ScanResponse, CachedRegion]:
        bo = self._backoffer()

        def build(region: CachedRegion, ctx: kvrpcpb_pb2.Context) -> kvrpcpb_pb2.ScanRequest:
            # client-go clips end_key to the region even though TiKV would clip it too.
            if region.end is not None and (not end or region.end < end):
                req_end = region.end
            else:
                req_end = end
            read_locks.apply(ctx)
            ctx.not_fill_cache = True
            return kvrpcpb_pb2.ScanRequest(
                context=ctx, start_key=next_key, end_key=req_end, limit=self._batch, version=ts
            )

        while True:
            resp, region = self._sender.send(next_key, "KvScan", build, bo)
            if resp.HasField("error"):
                # Response-level lock: pairs are incomplete; resolve, then redo the same request.
                self._resolve_or_raise(resp.error, ts, read_locks, lock_bo, f"KvScan from {next_key.hex()}")
                continue
            return resp, region

    def _locked_pair(self, pair: kvrpcpb_pb2.KvPair, ts: int, read_locks: ReadLocks, bo: Backoffer,
                     lock_bo: Backoffer) -> bytes | None:
        """client-go resolveCurrentLock: a point KvGet of the locked key, which resolves the lock."""
        if not pair.error.HasField("locked"):
            raise UpstreamError(f"read of key {pair.key.hex()} failed: {pair.error}")
        return self._get(pair.error.locked.key, ts, read_locks, bo, lock_bo)

    def _resolve_or_raise(self, error: kvrpcpb_pb2.KeyError, ts: int, read_locks: ReadLocks,
                          lock_bo: Backoffer, what: str) -> None:
        if not error.HasField("locked"):
            raise UpstreamError(f"{what} at ts {ts}: {str(error).strip()}")
        lock = error.locked
        wait_ms = self._resolver.resolve([lock], ts, read_locks, lock_bo)
        if wait_ms:
            lock_bo.backoff(
                "txn_lock",
                f"key {lock.key.hex()} locked by txn {lock.lock_version} (primary {lock.primary_lock.hex()})",
                wait_ms / 1000,
            )

    def scan_table(self, table_ids: int | Iterable[int], ts: int) -> Iterator[tuple[bytes, bytes]]:
        """(raw record key, row value) of every row of the physical table(s) at `ts`; pass the
        partition ids for a partitioned table (TableInfo.physical_ids())."""
        ids = [table_ids] if isinstance(table_ids, int) else list(table_ids)
        for table_id in ids:
            start, end = table_record_span(table_id)
            yield from self.scan(start, end, ts)

    def close(self) -> None:
        self._sender.close()

    def __enter__(self) -> "SnapshotReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
