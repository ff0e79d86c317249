"""Resolve the expired locks that hold a lagging region's resolved ts (docs/wire.md#stale-locks-on-lagging-regions).

TiKV's resolved ts is min(lock start ts, TSO), so the lock of a transaction whose client died
pins its region, and so the table and the changefeed, until someone resolves it. TiCDC's
pkg/txnutil/lock_resolver.go `Resolve` scans the region's locks below a max version with
KvScanLock (1024 a page) and hands each page to client-go's lock resolver; we do the same with
the snapshot reader's LockResolver, which leaves live locks alone (TTL rules) and decides
expired ones with CheckTxnStatus, CheckSecondaryLocks (async commit) and ResolveLock.
Owner: the EventFeed client (the puller runner builds the resolver).
"""

from __future__ import annotations

import threading

from tidelake.codec.memcomparable_bytes import decode_bytes
from tidelake.config import TlsConfig
from tidelake.errors import InputError
from tidelake.kvproto import kvrpcpb_pb2
from tidelake.upstream.backoffer import Backoffer
from tidelake.upstream.lock_resolver import LockResolver, ReadLocks
from tidelake.upstream.pd_client import PDClient
from tidelake.upstream.region_request import RegionRequestSender
from tidelake.upstream.upstream_errors import UpstreamError

SCAN_LOCK_LIMIT = 1024  # tiflow pkg/txnutil/lock_resolver.go scanLockLimit
_BACKOFF_BUDGET_S = 20.0  # a pass gives up (and is retried on a later tick) after this much backing off


class RegionLockResolver:
    """Scans and resolves locks of one span below a version; owns its TiKV connections."""

    def __init__(self, pd: PDClient, tls: TlsConfig | None = None) -> None:
        self._sender = RegionRequestSender(pd, tls)
        self._resolver = LockResolver(self._sender, cleanup=True)

    def current_ts(self) -> int:
        return self._sender.pd.get_ts()

    def resolve(self, span: tuple[bytes, bytes], max_version: int,
                cancel: threading.Event | None = None) -> tuple[int, int]:
        """Resolve the locks with start ts <= max_version in `span` (region space, encoded keys);
        returns (locks found, locks still alive and left alone). A set `cancel` ends the backoffs."""
        start, end = _raw_bounds(span)
        found = alive = 0
        key = start
        while True:
            bo = Backoffer(_BACKOFF_BUDGET_S, cancel=cancel)

            def build(_region, ctx, key=key):
                return kvrpcpb_pb2.ScanLockRequest(context=ctx, max_version=max_version, start_key=key,
                                                   end_key=end, limit=SCAN_LOCK_LIMIT)

            resp, region = self._sender.send(key, "KvScanLock", build, bo)
            if resp.HasField("error"):
                raise UpstreamError(f"KvScanLock from {key.hex()} below {max_version}: {resp.error}")
            locks = list(resp.locks)
            for lock in locks:
                # caller_start_ts 0 as TiCDC's ResolveLocks(bo, 0, locks): resolve, never push; the
                # resolver cleans up every lock of a decided txn it meets (region-wide, once)
                self._resolver.resolve([lock], 0, ReadLocks(), bo)
                if self._resolver.final_status(lock.lock_version) is None:
                    alive += 1
            found += len(locks)
            if len(locks) >= SCAN_LOCK_LIMIT:
                key = locks[-1].key + b"\x00"
            elif region.end is None:
                return found, alive
            else:
                key = region.end
            if end and key >= end:
                return found, alive

    def close(self) -> None:
        self._sender.close()


def _raw_bounds(span: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
    """Raw keys for a region-space span; an empty bound stays empty (unbounded)."""
    try:
        return tuple(decode_bytes(bound)[0] if bound else b"" for bound in span)  # type: ignore[return-value]
    except InputError as exc:
        raise UpstreamError(f"span bound is not an encoded key: {exc}") from None
