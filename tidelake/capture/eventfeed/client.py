"""EventFeed client: subscribes table spans from a checkpoint and keeps them subscribed.

Behaves as TiCDC's shared kv client (docs/wire.md#ticdc-client-behaviour): a subscription's span is divided
into regions through PD (docs/wire.md#span-division), each region gets a request on its leader store's stream with the
checkpoint recorded for exactly its piece, and region errors are handled by class (docs/wire.md#region-error-handling):
not_leader goes to the named leader, epoch_not_match / region_not_found re-divide the piece,
busy / congested / broken streams back off and retry, and protocol or compatibility errors stop
the feed with one clear error. Rows go to the sink as soon as they are matched; a table's
resolved ts is the minimum over its pieces (span frontier) and is reported only when it rises.
Owner: the puller runner, one client per changefeed shard.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import grpc

from tidelake import tso
from tidelake.capture.eventfeed.backoff import backoff_s
from tidelake.capture.eventfeed.delayed_tasks import DelayedTasks
from tidelake.capture.eventfeed.frontier import SpanFrontier
from tidelake.capture.eventfeed.prewrites import PrewriteBudget
from tidelake.capture.eventfeed.region_state import RegionFeedState
from tidelake.capture.eventfeed.region_workers import RegionWorkers
from tidelake.capture.eventfeed.span_divider import (
    LockedRange,
    LockOutcome,
    RangeLock,
    RegionLike,
    RegionTarget,
    Span,
    batch_regions_covering,
    disjoint_batch,
)
from tidelake.capture.eventfeed.stale_locks import RegionLockResolver
from tidelake.capture.eventfeed.store_stream import StoreStream, StreamUnavailable
from tidelake.capture.eventfeed.store_version import TICDC_VERSION, check_store_version
from tidelake.capture.puller_errors import IncompatibleClusterError, PullerError
from tidelake.config import TlsConfig
from tidelake.errors import StopRequested, TidelakeError
from tidelake.kvproto import cdcpb_pb2, kvrpcpb_pb2, metapb_pb2
from tidelake.lake.row_change import RowChange
from tidelake.upstream.channels import make_channel

log = logging.getLogger(__name__)

_subscription_ids = itertools.count(1)  # TiCDC AllocSubscriptionID: global, from 1 (docs/wire.md#request-it-sends)
# A region's committed rows of one hand-off go to the sink in calls of about this many rows (more
# only when one event completes more): one sink call per event cost more than its rows when
# events are small, and the bound keeps what the sink's memory quota admits at once small.
SINK_BATCH_ROWS = 1024


class PDLike(Protocol):
    """The part of tidelake.upstream.pd_client.PDClient the puller uses."""

    @property
    def cluster_id(self) -> int: ...

    def batch_scan_regions(self, ranges: list[Span], limit: int = 1024) -> list[RegionLike]: ...

    def get_store(self, store_id: int) -> metapb_pb2.Store: ...

    def get_all_stores(self) -> list[metapb_pb2.Store]: ...


class EventFeedSink(Protocol):
    """Where the feed delivers. Called from region worker threads, possibly concurrently;
    a call may block (memory quota) and that slows the feed down. For one table,
    on_table_resolved(ts) is called only after every row with commit_ts <= ts went to on_rows.
    A sink must not call back into the client (it runs under the subscription's lock)."""

    def on_rows(self, rows: list[RowChange]) -> None: ...

    def on_resolved(self, table_id: int, span: Span, ts: int) -> None: ...

    def on_table_resolved(self, table_id: int, ts: int) -> None: ...


@dataclass(eq=False)
class _Subscription:
    id: int
    table_id: int
    span: Span
    start_ts: int
    frontier: SpanFrontier
    range_lock: RangeLock
    reported_ts: int
    mutex: threading.Lock = field(default_factory=threading.Lock)
    feeds: set[_RegionFeed] = field(default_factory=set)
    stopped: bool = False


@dataclass(eq=False)
class _RegionFeed:
    """One region request in flight: the token the store stream routes events to."""

    subscription: _Subscription
    target: RegionTarget
    locked: LockedRange
    state: RegionFeedState
    stream: StoreStream
    attempt: int


@dataclass(frozen=True)
class FeedOptions:
    workers: int = 4
    ticdc_version: str = TICDC_VERSION
    filter_loop: bool = False
    scan_limit: int = 1024  # regions per PD lookup (TiCDC's ScanRegions limit)
    divide_batch: int = 1024  # spans per PD lookup: the spans waiting for regions go in one BatchScanRegions
    backoff_base_s: float = 0.05
    backoff_cap_s: float = 5.0
    probe_timeout_s: float = 10.0
    # Stale-lock resolution (docs/wire.md#stale-locks-on-lagging-regions): a region whose resolved ts lags PD's ts by more
    # than resolve_lock_lag_s gets its expired locks resolved, at most resolve_lock_regions regions
    # a tick and each region at most once per resolve_lock_min_interval_s (TiCDC: 20 s, 2 s, 10 s).
    resolve_lock_lag_s: float = 20.0
    resolve_lock_tick_s: float = 2.0
    resolve_lock_min_interval_s: float = 10.0
    resolve_lock_regions: int = 16
    # A store stream with no region for idle_stream_s is closed (TiCDC: 60 s, docs/wire.md#stream-setup),
    # checked every idle_check_s; the next region for that store opens a new one.
    idle_stream_s: float = 60.0
    idle_check_s: float = 10.0
    # Unmatched prewrites held in memory, all regions together; more wait in a local spill file
    # until their commit (prewrites.py): a huge transaction costs disk, not memory. The spill
    # file goes in spill_dir ([puller].spill_dir; None: tempfile's folder). A changefeed's puller
    # takes 1/64 of its memory quota, at most this (prewrites.memory_for_quota).
    prewrite_memory_bytes: int = 16 << 20
    spill_dir: str | None = None


class EventFeedClient:
    """Subscriptions over all stores of one cluster. Use as a context manager, or start()/close().

    `wait()` re-raises the error that stopped the feed (a PullerError or a sink's TidelakeError).
    Given a `lock_resolver`, the client owns it (closes it) and resolves stale locks with it.
    """

    def __init__(
        self,
        pd: PDLike,
        sink: EventFeedSink,
        options: FeedOptions = FeedOptions(),
        tls: TlsConfig | None = None,
        channel_factory: Callable[[str], grpc.Channel] | None = None,
        lock_resolver: RegionLockResolver | None = None,
    ) -> None:
        self._pd = pd
        self._sink = sink
        self._channel_factory = channel_factory or (lambda address: make_channel(address, tls))
        self._options = options
        self._header = cdcpb_pb2.Header(cluster_id=pd.cluster_id, ticdc_version=options.ticdc_version)
        self._mutex = threading.Lock()
        self._subscriptions: dict[int, _Subscription] = {}
        self._channels: dict[str, grpc.Channel] = {}
        self._streams: dict[int, StoreStream] = {}
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._tasks = DelayedTasks("eventfeed-scheduler", self._fail)
        self._divides: list[tuple[_Subscription, Span, int]] = []  # spans waiting for a PD lookup
        self._divide_queued = False
        self._workers = RegionWorkers(options.workers, self._fail)
        self._prewrites = PrewriteBudget(options.prewrite_memory_bytes, options.spill_dir)
        self._lock_resolver = lock_resolver
        self._lock_tasks = DelayedTasks("eventfeed-lock-resolver", self._fail)
        self._lock_runs: dict[int, float] = {}  # region id -> monotonic time of its last resolve pass
        self._idle_since: dict[int, float] = {}  # store id -> monotonic time its stream was first seen idle
        self._locks_resolved = 0
        self._started = False
        # What metrics read (tidelake.capture.changefeed.puller_metrics): region errors by kind and
        # streams opened again to a store that had one, counted since start.
        self._region_errors: collections.Counter[str] = collections.Counter()
        self._reconnects: collections.Counter[int] = collections.Counter()
        self._stores_seen: set[int] = set()

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> EventFeedClient:
        """Check every TiKV store's version (docs/wire.md#version-checks), then start the threads."""
        for store in self._pd.get_all_stores():
            check_store_version(store)
        self._workers.start()
        self._tasks.start()
        self._tasks.submit(self._close_idle_streams, self._options.idle_check_s)
        if self._lock_resolver is not None and self._options.resolve_lock_lag_s > 0:
            self._lock_tasks.start()
            self._lock_tasks.submit(self._resolve_stale_locks, self._options.resolve_lock_tick_s)
        self._started = True
        return self

    def __enter__(self) -> EventFeedClient:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._done.set()
        self._tasks.stop()
        self._lock_tasks.stop()
        if self._lock_resolver is not None:
            self._lock_resolver.close()
        with self._mutex:
            streams = list(self._streams.values())
            self._streams.clear()
            channels = list(self._channels.values())
            self._channels.clear()
            for sub in self._subscriptions.values():
                sub.stopped = True
        # Workers first: a stream's receiver blocked on a full worker queue (the sink is full)
        # then returns at once, instead of holding its stream's close for its join timeout.
        self._workers.stop()
        for stream in streams:
            stream.close()
        for channel in channels:
            channel.close()
        self._prewrites.close()

    @property
    def error(self) -> BaseException | None:
        return self._error

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the feed stops (True) or the timeout passes (False); raise its error."""
        stopped = self._done.wait(timeout_s)
        if self._error is not None:
            raise self._error
        return stopped

    # ---- subscriptions ---------------------------------------------------------------------

    def subscribe(self, table_id: int, span: Span, start_ts: int, subscription_id: int | None = None) -> int:
        """Feed changes of `span` (region space) committed after `start_ts`; returns the id."""
        if not self._started:
            raise PullerError("EventFeedClient.subscribe called before start()")
        sub_id = next(_subscription_ids) if subscription_id is None else subscription_id
        if sub_id <= 0:
            raise PullerError(f"subscription id must be positive (0 is TiCDC's invalid id), got {sub_id}")
        sub = _Subscription(
            id=sub_id,
            table_id=table_id,
            span=span,
            start_ts=start_ts,
            frontier=SpanFrontier(span[0], span[1], start_ts),
            range_lock=RangeLock(span[0], span[1], start_ts),
            reported_ts=start_ts,
        )
        with self._mutex:
            if sub_id in self._subscriptions:
                raise PullerError(f"subscription id {sub_id} is already in use")
            self._subscriptions[sub_id] = sub
        self._divide(sub, span, 0)
        return sub_id

    def unsubscribe(self, subscription_id: int) -> None:
        with self._mutex:
            sub = self._subscriptions.pop(subscription_id, None)
            streams = list(self._streams.values())
        if sub is None:
            return
        with sub.mutex:
            sub.stopped = True
            for feed in sub.feeds:
                feed.state.stopped = True
            sub.feeds.clear()
        for stream in streams:
            stream.deregister(subscription_id, self._header)

    def table_resolved_ts(self, subscription_id: int) -> int:
        """The subscription's current frontier (min resolved ts over its span)."""
        sub = self._subscriptions[subscription_id]
        with sub.mutex:
            return sub.frontier.frontier()

    def region_count(self, subscription_id: int) -> int:
        sub = self._subscriptions[subscription_id]
        with sub.mutex:
            return len(sub.feeds)

    def prewrite_usage(self) -> tuple[int, int]:
        """(bytes, rows): unmatched prewrites in memory and in the spill file, all regions together."""
        return self._prewrites.used, self._prewrites.spilled

    def region_states(self) -> dict[int, dict[str, int]]:
        """Per table: region requests in flight that wait for their initial scan
        ('initializing') and those past it ('replicating', TiKV's Initialized event, docs/wire.md#row-handling-per-region)."""
        with self._mutex:
            subs = list(self._subscriptions.values())
        states: dict[int, dict[str, int]] = {}
        for sub in subs:
            with sub.mutex:
                ready = sum(1 for feed in sub.feeds if feed.state.initialized)
                counts = states.setdefault(sub.table_id, {"initializing": 0, "replicating": 0})
                counts["replicating"] += ready
                counts["initializing"] += len(sub.feeds) - ready
        return states

    def error_counts(self) -> tuple[dict[str, int], dict[int, int]]:
        """(region errors by kind, including 'stream_broken'; stream reconnects by store id)."""
        with self._mutex:
            return dict(self._region_errors), dict(self._reconnects)

    def locks_resolved(self) -> int:
        """Locks that stale-lock passes decided (rolled back or committed) since start (docs/wire.md#stale-locks-on-lagging-regions)."""
        return self._locks_resolved

    def stream_count(self) -> int:
        """Store streams open now."""
        with self._mutex:
            return len(self._streams)

    # ---- idle streams (scheduler thread) ----------------------------------------------------

    def _close_idle_streams(self) -> None:
        """Close store streams that have carried no region for `idle_stream_s` (TiCDC closes a
        stream idle for 60 s, docs/wire.md#stream-setup): a store whose regions all moved away, or whose
        tables all left the feed, holds no stream, no receiving thread and no TiKV connection state."""
        if self._done.is_set():
            return
        now = time.monotonic()
        with self._mutex:
            streams = dict(self._streams)
        for store_id, stream in streams.items():
            if stream.regions:
                self._idle_since.pop(store_id, None)
                continue
            since = self._idle_since.setdefault(store_id, now)
            if now - since >= self._options.idle_stream_s:
                log.info("store %d: no region on its stream for %.0fs; closing it", store_id, now - since)
                self._idle_since.pop(store_id, None)
                self._drop_stream(store_id, stream)
        self._tasks.submit(self._close_idle_streams, self._options.idle_check_s)

    # ---- stale locks (lock resolver thread) ------------------------------------------------

    def _resolve_stale_locks(self) -> None:
        """One tick: resolve the locks of the regions lagging most (TiCDC shared_client
        `resolveLock` / tiflow pkg/txnutil/lock_resolver.go `Resolve`, docs/wire.md#stale-locks-on-lagging-regions)."""
        if self._done.is_set() or self._lock_resolver is None:
            return
        try:
            self._resolve_lagging_regions(self._lock_resolver)
        except Exception as exc:  # PD unreachable: TiCDC logs and tries again on the next tick
            log.warning("stale-lock check failed: %s", exc)
        self._lock_tasks.submit(self._resolve_stale_locks, self._options.resolve_lock_tick_s)

    def _resolve_lagging_regions(self, resolver: RegionLockResolver) -> None:
        opts = self._options
        now_ts = resolver.current_ts()
        max_version = tso.compose(max(0, tso.physical_ms(now_ts) - int(opts.resolve_lock_lag_s * 1000)))
        lagging: list[tuple[int, int, int, Span]] = []
        with self._mutex:
            subs = list(self._subscriptions.values())
        for sub in subs:
            with sub.mutex:
                for feed in sub.feeds:
                    state = feed.state
                    if state.initialized and not state.stopped and state.last_resolved_ts <= max_version:
                        lagging.append((state.last_resolved_ts, sub.table_id, feed.target.region.id, state.span))
        lagging.sort()
        now = time.monotonic()
        if len(self._lock_runs) > 1024:
            self._lock_runs = {r: t for r, t in self._lock_runs.items() if now - t < opts.resolve_lock_min_interval_s}
        passes = 0
        for resolved_ts, table_id, region_id, span in lagging:
            if passes >= opts.resolve_lock_regions or self._done.is_set():
                break
            last = self._lock_runs.get(region_id)
            if last is not None and now - last < opts.resolve_lock_min_interval_s:
                continue
            self._lock_runs[region_id] = now
            passes += 1
            try:
                found, alive = resolver.resolve(span, max_version, self._done)
            except Exception as exc:  # TiCDC: "event feed resolve lock fail", retried later
                log.warning("table %d region %d: resolving locks below %d failed: %s",
                            table_id, region_id, max_version, exc)
                continue
            self._locks_resolved += found - alive
            if found:
                log.info("table %d region %d lagging at resolved ts %d: %d locks below %d, %d still alive",
                         table_id, region_id, resolved_ts, found, max_version, alive)

    # ---- scheduling (scheduler thread) -----------------------------------------------------

    def _divide(self, sub: _Subscription, span: Span, attempt: int) -> None:
        """Queue `span` for region lookup; the spans queued meanwhile share one PD request."""
        with self._mutex:
            self._divides.append((sub, span, attempt))
            if self._divide_queued:
                return
            self._divide_queued = True
        self._tasks.submit(self._divide_queued_spans)

    def _divide_queued_spans(self) -> None:
        """Find the regions of the queued spans in PD and request each piece (docs/wire.md#span-division).

        TiCDC divides each span with its own ScanRegions; at thousands of tables that is thousands
        of PD requests at start and after every store failure, so the spans waiting at the same
        time go in one BatchScanRegions (client-go's region cache batches the same way)."""
        with self._mutex:
            live = [d for d in self._divides if not d[0].stopped]
            taken, later = disjoint_batch([span for _, span, _ in live])
            batch = [live[i] for i in taken[: self._options.divide_batch]]
            self._divides = [live[i] for i in taken[self._options.divide_batch:] + later]
            self._divide_queued = bool(self._divides)
        if self._divide_queued:
            self._tasks.submit(self._divide_queued_spans)
        if not batch or self._done.is_set():
            return
        try:
            results = batch_regions_covering(
                self._pd, [(span, sub.span) for sub, span, _ in batch], self._options.scan_limit)
        except PullerError:
            raise
        except Exception as exc:  # PD unavailable or failing over: retry like TiCDC, forever
            log.warning("loading regions of %d spans failed (%s); retrying", len(batch), exc)
            for sub, span, attempt in batch:
                self._retry_divide(sub, span, attempt + 1)
            return
        for (sub, span, attempt), (pieces, rest, past_limit) in zip(batch, results):
            if sub.stopped:
                continue
            for target, piece in pieces:
                self._request_region(sub, target, piece, attempt)
            if rest is None:
                continue
            if past_limit:  # PD stopped at its limit before this part: the next lookup brings it
                self._divide(sub, rest, attempt)
            else:
                log.info("table %d: no region covers %s yet; retrying", sub.table_id, _fmt(rest))
                self._retry_divide(sub, rest, attempt + 1)

    def _retry_divide(self, sub: _Subscription, span: Span, attempt: int) -> None:
        delay = backoff_s(attempt, self._options.backoff_base_s, self._options.backoff_cap_s)
        self._tasks.submit(lambda: self._divide(sub, span, attempt), delay)

    def _retry_region(self, sub: _Subscription, target: RegionTarget, span: Span, attempt: int,
                      min_delay_s: float = 0.0) -> None:
        delay = max(min_delay_s, backoff_s(attempt, self._options.backoff_base_s, self._options.backoff_cap_s))
        self._tasks.submit(lambda: self._request_region(sub, target, span, attempt), delay)

    def _request_region(self, sub: _Subscription, target: RegionTarget, span: Span, attempt: int) -> None:
        if sub.stopped or self._done.is_set():
            return
        region = target.region
        result = sub.range_lock.lock(span[0], span[1], region.id, region.region_epoch.version)
        if result.kind is LockOutcome.STALE:
            for retry in result.retry:
                self._retry_divide(sub, retry, attempt + 1)
            return
        if result.kind is LockOutcome.WAIT:  # an older region still holds part of it; its error is on the way
            self._retry_region(sub, target, span, attempt + 1)
            return
        locked = result.locked
        leader = target.leader
        if leader is None or leader.store_id == 0:
            sub.range_lock.unlock(locked, locked.checkpoint_ts)
            self._retry_divide(sub, span, attempt + 1)  # no leader known: ask PD again (docs/wire.md#region-error-handling)
            return
        try:
            stream = self._stream_for(leader.store_id)
        except PullerError:
            raise
        except Exception as exc:  # store unreachable, PD lookup failed: ask PD again later
            self._give_back(sub, locked, span, attempt, f"store {leader.store_id} unavailable ({exc})")
            return
        state = RegionFeedState(sub.id, region.id, span, sub.start_ts, locked.checkpoint_ts, self._prewrites)
        feed = _RegionFeed(sub, target, locked, state, stream, attempt)
        with sub.mutex:
            if sub.stopped:
                sub.range_lock.unlock(locked, locked.checkpoint_ts)
                return
            sub.feeds.add(feed)
        try:
            stream.register(feed, self._region_request(sub, region, span, locked.checkpoint_ts))
        except StreamUnavailable as exc:
            with sub.mutex:
                sub.feeds.discard(feed)
            self._give_back(sub, locked, span, attempt, str(exc))

    def _give_back(self, sub: _Subscription, locked: LockedRange, span: Span, attempt: int, why: str) -> None:
        log.warning("region %d of table %d: %s; retrying", locked.region_id, sub.table_id, why)
        sub.range_lock.unlock(locked, locked.checkpoint_ts)
        self._retry_divide(sub, span, attempt + 1)

    def _region_request(self, sub: _Subscription, region: metapb_pb2.Region, span: Span,
                        checkpoint_ts: int) -> cdcpb_pb2.ChangeDataRequest:
        # docs/wire.md#request-it-sends; the `request` oneof stays unset, which TiKV treats as Register
        return cdcpb_pb2.ChangeDataRequest(
            header=self._header,
            region_id=region.id,
            region_epoch=region.region_epoch,
            checkpoint_ts=checkpoint_ts,
            start_key=span[0],
            end_key=span[1],
            request_id=sub.id,
            extra_op=kvrpcpb_pb2.ReadOldValue,
            filter_loop=self._options.filter_loop,
        )

    def _stream_for(self, store_id: int) -> StoreStream:
        with self._mutex:
            stream = self._streams.get(store_id)
        if stream is not None and not stream.closed:
            return stream
        store = self._pd.get_store(store_id)
        check_store_version(store)
        if store.state == metapb_pb2.Tombstone or not store.address:
            raise StreamUnavailable(f"store {store_id} is tombstoned or has no address")
        with self._mutex:
            channel = self._channels.get(store.address)
            if channel is None:
                channel = self._channel_factory(store.address)
                self._channels[store.address] = channel
        stream = StoreStream(store_id, channel, _Router(self), self._options.probe_timeout_s)
        with self._mutex:
            current = self._streams.get(store_id)
            if current is not None and not current.closed:
                stale_stream, stream = stream, current
            else:
                self._streams[store_id] = stream
                stale_stream = None
                if store_id in self._stores_seen:
                    self._reconnects[store_id] += 1
                self._stores_seen.add(store_id)
        if stale_stream is not None:
            stale_stream.close()
        return stream

    def _drop_stream(self, store_id: int, stream: StoreStream | None = None) -> None:
        with self._mutex:
            current = self._streams.get(store_id)
            if current is None or (stream is not None and current is not stream):
                return
            del self._streams[store_id]
        current.close()

    # ---- region events (worker threads) ----------------------------------------------------

    def _on_entries(self, feed: _RegionFeed, events: list[list[cdcpb_pb2.Event.Row]]) -> None:
        """Apply a region's Entries events in order; their committed rows go to the sink in calls
        of SINK_BATCH_ROWS or more, each before the next event is applied past that bound and all
        before this returns (so before any resolved ts this worker handles next)."""
        changes: list[RowChange] = []
        try:
            for rows in events:
                if feed.state.stopped or self._done.is_set():
                    break
                changes.extend(feed.state.handle_rows(rows))
                if len(changes) >= SINK_BATCH_ROWS:
                    batch, changes = changes, []
                    self._sink.on_rows(batch)
        except BaseException:
            if changes:  # the rows of the events before the failing one were completed: delivered, as they were
                with contextlib.suppress(Exception):  # the feed fails with the event's error, not the sink's
                    self._sink.on_rows(changes)
            raise
        if changes:
            self._sink.on_rows(changes)

    def _on_resolved(self, feeds: list[_RegionFeed], ts: int) -> None:
        if self._done.is_set():
            return
        advanced: dict[int, list[_RegionFeed]] = {}
        for feed in feeds:
            if feed.state.handle_resolved(ts):
                self._sink.on_resolved(feed.subscription.table_id, feed.state.span, ts)
                advanced.setdefault(feed.subscription.id, []).append(feed)
        for moved in advanced.values():
            sub = moved[0].subscription
            with sub.mutex:  # one hold per table: its regions' forwards, then its report, in order
                for feed in moved:
                    if not feed.state.stopped:
                        sub.frontier.forward(feed.state.span[0], feed.state.span[1], ts)
                table_ts = sub.frontier.frontier()
                if table_ts > sub.reported_ts and not sub.stopped:
                    sub.reported_ts = table_ts
                    self._sink.on_table_resolved(sub.table_id, table_ts)

    def _stop_feed(self, feed: _RegionFeed) -> bool:
        """Mark the feed finished and free its range with the progress it made."""
        sub = feed.subscription
        with sub.mutex:
            if feed.state.stopped:
                return False
            feed.state.stopped = True
            sub.feeds.discard(feed)
            if sub.stopped:
                return False
        sub.range_lock.unlock(feed.locked, feed.state.last_resolved_ts)
        return True

    def _on_error(self, feed: _RegionFeed, error: cdcpb_pb2.Error) -> None:
        """docs/wire.md#region-error-handling: unlock the range first, then act by error class."""
        if self._done.is_set() or not self._stop_feed(feed):
            return
        sub, target, span = feed.subscription, feed.target, feed.state.span
        region_id = target.region.id
        attempt = 0 if feed.state.initialized else feed.attempt + 1
        kind = next((f.name for f, _ in error.ListFields()), "empty error")
        with self._mutex:
            self._region_errors[kind] += 1
        log.info("region %d of table %d on store %d: %s at resolved ts %d",
                 region_id, sub.table_id, feed.stream.store_id, kind, feed.state.last_resolved_ts)
        if error.HasField("not_leader"):
            leader = error.not_leader.leader if error.not_leader.HasField("leader") else None
            if leader is not None and leader.store_id != 0:
                self._retry_region(sub, RegionTarget(target.region, leader), span, attempt)
            else:
                self._retry_divide(sub, span, attempt)
        elif error.HasField("epoch_not_match") or error.HasField("region_not_found"):
            self._retry_divide(sub, span, attempt)
        elif error.HasField("server_is_busy"):
            self._retry_region(sub, target, span, max(attempt, 1), error.server_is_busy.backoff_ms / 1000)
        elif error.HasField("congested"):
            self._retry_region(sub, target, span, max(attempt, 1))
        elif error.HasField("duplicate_request"):
            raise PullerError(
                f"TiKV store {feed.stream.store_id} rejected region {region_id} of table {sub.table_id} "
                f"as a duplicate request (subscription {sub.id}): two feeds share a request id"
            )
        elif error.HasField("compatibility"):
            raise IncompatibleClusterError(
                f"TiKV store {feed.stream.store_id} rejected the CDC request for region {region_id}: "
                f"it requires a client of version {error.compatibility.required_version}"
            )
        elif error.HasField("cluster_id_mismatch"):
            mismatch = error.cluster_id_mismatch
            raise IncompatibleClusterError(
                f"TiKV store {feed.stream.store_id} belongs to cluster {mismatch.current}, "
                f"but PD reported cluster {mismatch.request}: check the PD addresses"
            )
        else:
            self._retry_region(sub, target, span, attempt)

    def _on_broken(self, feed: _RegionFeed, reason: str) -> None:
        if self._done.is_set() or not self._stop_feed(feed):
            return
        with self._mutex:
            self._region_errors["stream_broken"] += 1
        log.info("region %d of table %d: %s; dividing its span again",
                 feed.target.region.id, feed.subscription.table_id, reason)
        self._retry_divide(feed.subscription, feed.state.span, feed.attempt + 1)

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            if not isinstance(exc, TidelakeError):
                log.error("event feed stopped by an unexpected error", exc_info=exc)
                wrapped = PullerError(f"event feed stopped: {exc!r}")
                wrapped.__cause__ = exc
                exc = wrapped
            self._error = exc
            if isinstance(exc, StopRequested) or self._done.is_set():  # a wind-down: the caller judges it
                log.info("event feed stopped: %s", exc)
            else:
                log.error("event feed stopped: %s", exc)
        self._done.set()


class _Router:
    """StreamHandler that hands each event to the worker owning its subscription (table).

    All of a subscription's regions share one worker, so a region's rows still come before the
    resolved ts that covers them, and a ResolvedTs message (TiKV sends one per subscription per
    store per tick, kvproto cdcpb.proto ChangeDataEvent.resolved_ts) is one hand-off and one
    wakeup, not one per worker its regions hash to."""

    def __init__(self, client: EventFeedClient) -> None:
        self._client = client

    def _submit(self, feed: _RegionFeed, fn: Callable[[], None]) -> None:
        workers = self._client._workers
        workers.submit(workers.index_of(feed.subscription.id), fn)

    def on_entries(self, token: _RegionFeed, events: list[list[cdcpb_pb2.Event.Row]]) -> None:
        self._submit(token, lambda: self._client._on_entries(token, events))

    def on_resolved(self, tokens: list[_RegionFeed], ts: int) -> None:
        by_subscription: dict[int, list[_RegionFeed]] = {}
        for feed in tokens:  # one subscription per message as TiKV groups them; any other grouping stays ordered
            by_subscription.setdefault(feed.subscription.id, []).append(feed)
        for feeds in by_subscription.values():
            self._submit(feeds[0], lambda feeds=feeds: self._client._on_resolved(feeds, ts))

    def on_error(self, token: _RegionFeed, error: cdcpb_pb2.Error) -> None:
        self._submit(token, lambda: self._client._on_error(token, error))

    def on_broken(self, tokens: list[_RegionFeed], reason: str) -> None:
        if tokens and tokens[0].stream.closed:
            self._client._drop_stream(tokens[0].stream.store_id, tokens[0].stream)
        for feed in tokens:
            self._submit(feed, lambda feed=feed: self._client._on_broken(feed, reason))


def _fmt(span: Span) -> str:
    return f"[{span[0].hex()}, {span[1].hex() or '+inf'})"
