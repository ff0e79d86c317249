"""TiKV's ChangeData (CDC) gRPC service for one simulated store
(docs/wire.md#tikv-cdc-server-behaviour, docs/wire.md#invariants-a-simulated-tikv-cdc-server-must-respect):
EventFeed and EventFeedV2 as TiKV's components/cdc serve them, register checks, incremental scans
interleaved with realtime rows, batched resolved ts, region errors. Where the simulator differs
from TiKV it says so where it does.

More: docs/internals.md#cdc_service.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from tidelake.kvproto import cdcpb_pb2, cdcpb_pb2_grpc
from tidelake.sim import cdc_errors
from tidelake.sim.cdc_conn import Conn, StreamAbort
from tidelake.sim.cdc_downstream import Downstream, DownstreamState, encode_rows
from tidelake.sim.cdc_features import UnknownFeatures, features_from_metadata
from tidelake.sim.cdc_memory_quota import SINK_MEMORY_QUOTA_BYTES, SinkMemoryQuota
from tidelake.sim.cdc_observed_range import ObservedRange
from tidelake.sim.cdc_recorder import StreamRecorder
from tidelake.sim.cdc_resolved_ts import MinTsTicker, advance, emit
from tidelake.sim.cdc_rows import realtime_rows
from tidelake.sim.mvcc import ApplyBatch

if TYPE_CHECKING:
    from tidelake.sim.cluster_view import ClusterView
    from tidelake.sim.regions import RegionChange, SimRegion

log = logging.getLogger(__name__)

KV_API_TIDB = cdcpb_pb2.ChangeDataRequest.KvAPI.TiDB
DEFAULT_SCAN_CONCURRENCY_LIMIT = 10_000  # TiKV cdc.incremental-scan-concurrency-limit
STORE_STOPPED = "store stopped"


class ChangeDataService(cdcpb_pb2_grpc.ChangeDataServicer):
    def __init__(self, store_id: int, cluster: ClusterView, *, min_ts_interval_s: float = 1.0,
                 record_path: str | Path | None = None,
                 incremental_scan_concurrency_limit: int = DEFAULT_SCAN_CONCURRENCY_LIMIT,
                 scan_threads: int = 2, sink_memory_quota_bytes: int = SINK_MEMORY_QUOTA_BYTES) -> None:
        self._store_id = store_id
        self._cluster = cluster
        self._scan_limit = incremental_scan_concurrency_limit
        self._quota = SinkMemoryQuota(sink_memory_quota_bytes)
        self._lock = threading.Lock()  # guards the registry fields below
        self._conns: dict[int, Conn[Downstream]] = {}
        self._downstreams: tuple[Downstream, ...] = ()  # copy-on-write: read lock-free by the observer
        # The same by region id (each value replaced whole under _lock, read lock-free): an applied
        # batch visits only the subscriptions of the regions its keys are in, as TiKV's per-region
        # observer does, not every subscription of the store.
        self._by_region: dict[int, tuple[Downstream, ...]] = {}
        self._pending_scans = 0
        self._closed = False
        self._recorder = StreamRecorder(record_path) if record_path is not None else None
        self._scan_pool = ThreadPoolExecutor(scan_threads, thread_name_prefix=f"cdc-scan-{store_id}")
        self._ticker = MinTsTicker(min_ts_interval_s, self._on_min_ts, f"cdc-min-ts-{store_id}")
        cluster.mvcc.add_observer(self._on_apply)
        cluster.regions.add_listener(self._on_region_change)
        cluster.faults.on_reset_streams(self._on_reset_streams)
        self._ticker.start()

    # ---- lifecycle -------------------------------------------------------------------------

    def add_to_server(self, server: grpc.Server) -> None:
        cdcpb_pb2_grpc.add_ChangeDataServicer_to_server(self, server)

    def close(self) -> None:
        """Stop serving: every open stream fails (the store went away), background work ends."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = list(self._conns.values())
        self._ticker.stop()
        self._cluster.mvcc.remove_observer(self._on_apply)
        self._cluster.regions.remove_listener(self._on_region_change)
        self._cluster.faults.remove_reset_listener(self._on_reset_streams)
        for conn in conns:
            self._drop_conn(conn)
            conn.abort(grpc.StatusCode.UNAVAILABLE, STORE_STOPPED)
        self._scan_pool.shutdown(wait=False, cancel_futures=True)
        if self._recorder is not None:
            self._recorder.close()

    def _on_reset_streams(self, store_id: int) -> None:
        """FaultState.reset_streams: abort this store's streams as a broken connection would."""
        if store_id != self._store_id:
            return
        with self._lock:
            conns = list(self._conns.values())
        for conn in conns:
            self._drop_conn(conn)
            conn.abort(grpc.StatusCode.UNAVAILABLE, "connection reset by fault injection")

    # ---- gRPC handlers (docs/wire.md#connection-setup) ---------------------------------------------

    def EventFeed(self, request_iterator, context):  # noqa: N802 - gRPC method name
        yield from self._serve(request_iterator, context, "EventFeed")

    def EventFeedV2(self, request_iterator, context):  # noqa: N802 - gRPC method name
        yield from self._serve(request_iterator, context, "EventFeedV2")

    def _serve(self, requests, context, method: str):
        explicit: tuple[str, ...] = ()
        if method == "EventFeedV2":
            try:
                explicit = features_from_metadata(context.invocation_metadata())
            except UnknownFeatures as unknown:
                context.abort(grpc.StatusCode.UNIMPLEMENTED, str(unknown))
        conn: Conn[Downstream] = Conn(context.peer(), method, explicit, self._quota)
        with self._lock:
            closed = self._closed
            if not closed:
                self._conns[conn.id] = conn
        if closed:
            context.abort(grpc.StatusCode.UNAVAILABLE, STORE_STOPPED)
        if self._recorder is not None:
            self._recorder.open_stream(conn.id, self._store_id, method, explicit, conn.peer)
        context.add_callback(lambda: self._drop_conn(conn))
        threading.Thread(target=self._receive, args=(conn, requests), name=f"cdc-recv-{conn.id}",
                         daemon=True).start()
        try:
            for item in conn.responses(context.is_active):
                if isinstance(item, StreamAbort):
                    self._record_close(conn, f"{item.code.name}: {item.details}")
                    context.abort(item.code, item.details)
                delay_ms = self._cluster.faults.slow_delay_ms(self._store_id)
                if delay_ms:
                    time.sleep(delay_ms / 1000)
                if self._recorder is not None:
                    self._recorder.event(conn.id, item.SerializeToString())
                yield item
            self._record_close(conn, "OK")
        finally:
            with self._lock:
                self._conns.pop(conn.id, None)
            conn.discard_pending()

    def _record_close(self, conn: Conn[Downstream], status: str) -> None:
        if self._recorder is not None:
            self._recorder.close_stream(conn.id, status)

    def _receive(self, conn: Conn[Downstream], requests) -> None:
        """Request loop; when the client half-closes, its subscriptions go and the stream ends OK."""
        try:
            for request in requests:
                if self._recorder is not None:
                    self._recorder.request(conn.id, request.SerializeToString())
                if conn.gate is None:
                    conn.set_version(request.header.ticdc_version)
                kind = request.WhichOneof("request")
                if kind in (None, "register"):
                    self._register(conn, request)
                elif kind == "deregister":
                    self._deregister(conn, request)
                else:
                    # TiKV hits unreachable!() here and the store process dies; the client sees its
                    # stream broken. We fail only this stream.
                    conn.abort(grpc.StatusCode.UNAVAILABLE,
                               f"cdc: request kind {kind} is unreachable in TiKV's ChangeData service")
                    break
        except Exception as err:  # noqa: BLE001 - a broken request stream ends the conn, as in TiKV
            log.debug("cdc conn %s receive failed: %s", conn.id, err)
        finally:
            self._drop_conn(conn)
            conn.finish()

    # ---- register / deregister (docs/wire.md#register, docs/wire.md#deregister) --------------------------------

    def _register(self, conn: Conn[Downstream], req: cdcpb_pb2.ChangeDataRequest) -> None:
        region_id, request_id = req.region_id, req.request_id

        def reject(error: cdcpb_pb2.Error) -> None:
            with conn.lock:
                conn.send_event(cdcpb_pb2.Event(region_id=region_id, request_id=request_id, error=error))

        gate = conn.gate
        cluster_id = self._cluster.cluster_id
        if gate is not None and gate.validate_cluster_id and req.header.cluster_id != cluster_id:
            return reject(cdc_errors.cluster_id_mismatch(cluster_id, req.header.cluster_id))
        if req.kv_api != KV_API_TIDB:  # RawKV needs api-version 2, which the simulator does not run
            return reject(cdc_errors.compatibility())
        if self._busy():
            return reject(cdc_errors.server_is_busy())
        region = self._cluster.regions.get(region_id)
        if region is None or region.peer_on(self._store_id) is None:
            return reject(cdc_errors.region_not_found(region_id))
        # raftstore's answer to the capture command: leadership first, then the epoch (version only).
        epoch_error = self._capture_error(region, req.region_epoch.version)
        observed = ObservedRange.requested(req.start_key, req.end_key, region.start_key, region.end_key)
        downstream = Downstream(conn, request_id, region_id, region.version, req.checkpoint_ts, observed)
        with conn.lock:
            if conn.closed:
                return None
            if downstream.key in conn.downstreams:
                conn.send_event(cdcpb_pb2.Event(region_id=region_id, request_id=request_id,
                                                error=cdc_errors.duplicate_request(region_id)))
                return None
            if epoch_error is not None:
                conn.send_event(cdcpb_pb2.Event(region_id=region_id, request_id=request_id, error=epoch_error))
                return None
            conn.downstreams[downstream.key] = downstream
        with self._lock:
            if self._closed:
                return None
            self._downstreams = self._downstreams + (downstream,)
            self._by_region[region_id] = self._by_region.get(region_id, ()) + (downstream,)
            self._pending_scans += 1
        self._scan_pool.submit(self._initialize, downstream)
        return None

    def _busy(self) -> bool:
        burst = self._cluster.faults.busy_remaining_ms(self._store_id) > 0
        with self._lock:
            return burst or self._pending_scans >= self._scan_limit

    def _capture_error(self, region: SimRegion, version: int) -> cdcpb_pb2.Error | None:
        if region.leader_store_id != self._store_id:
            return cdc_errors.not_leader(region.id, region.leader_peer())
        if version != region.version:
            return cdc_errors.epoch_not_match([region.to_pb()])
        return None

    def _deregister(self, conn: Conn[Downstream], req: cdcpb_pb2.ChangeDataRequest) -> None:
        """region_id 0 removes every region of the request_id; each gets region_not_found."""
        with conn.lock:
            if req.region_id:
                keys = [(req.request_id, req.region_id)]
            else:
                keys = [k for k in conn.downstreams if k[0] == req.request_id]
            removed = [conn.downstreams.pop(k) for k in keys if k in conn.downstreams]
        for d in removed:
            d.stop(cdc_errors.region_not_found(d.region_id))
        self._forget(removed)

    def _drop_conn(self, conn: Conn[Downstream]) -> None:
        """Deregister all of a conn's subscriptions silently (client went away, docs/wire.md#connection-setup)."""
        with conn.lock:
            removed = list(conn.downstreams.values())
            conn.downstreams.clear()
        for d in removed:
            d.stop(None)
        self._forget(removed)

    def _stop(self, downstreams: list[Downstream], error: cdcpb_pb2.Error) -> None:
        for d in downstreams:
            d.stop(error)
        self._forget(downstreams)

    def _forget(self, downstreams: list[Downstream]) -> None:
        if not downstreams:
            return
        gone = {id(d) for d in downstreams}
        with self._lock:
            self._downstreams = tuple(d for d in self._downstreams if id(d) not in gone)
            for region_id in {d.region_id for d in downstreams}:
                kept = tuple(d for d in self._by_region.get(region_id, ()) if id(d) not in gone)
                if kept:
                    self._by_region[region_id] = kept
                else:
                    self._by_region.pop(region_id, None)

    def _of_region(self, region_id: int) -> list[Downstream]:
        return list(self._by_region.get(region_id, ()))

    # ---- incremental scan (docs/wire.md#incremental-scan) -------------------------------------------

    def _initialize(self, d: Downstream) -> None:
        try:
            if d.state is DownstreamState.STOPPED:
                return
            # The downstream is attached to the observer already; a region change since the
            # register checks would have missed the listener, so check again (TiKV re-checks the
            # epoch when the capture command reaches raftstore).
            region = self._cluster.regions.get(d.region_id)
            error = (cdc_errors.region_not_found(d.region_id) if region is None
                     else self._capture_error(region, d.region_version))
            if error is not None:
                self._stop([d], error)
                return
            lo, hi = d.observed.raw_bounds()
            entries = self._cluster.mvcc.snapshot_delta(lo, hi or b"", d.checkpoint_ts)
            d.finish_scan(entries, self._cluster.faults.duplicate_delivery)
        except Exception:
            log.exception("cdc incremental scan of region %s failed", d.region_id)
            self._stop([d], cdc_errors.region_not_found(d.region_id))  # TiKV: other errors -> region_not_found
        finally:
            with self._lock:
                self._pending_scans -= 1

    # ---- realtime rows (docs/wire.md#realtime-rows) -----------------------------------------------

    def _on_apply(self, batch: ApplyBatch) -> None:
        if not self._downstreams:
            return
        rows = realtime_rows(batch)
        if not rows:
            return
        encoded = encode_rows(rows)
        regions = {self._cluster.regions.locate(enc).id for enc, _ in encoded}
        downstreams = [d for region_id in regions for d in self._by_region.get(region_id, ())]
        faults = self._cluster.faults
        congested = {d.region_id for d in downstreams
                     if not d.on_realtime(encoded, faults.commit_before_prewrite, faults.duplicate_delivery)}
        for region_id in congested:
            # docs/wire.md#errors-raised-after-registration: a batch the sink quota refuses fails the region's delegate,
            # i.e. every subscription of that region on this store.
            self._stop(self._of_region(region_id), cdc_errors.congested(region_id))

    # ---- region changes (docs/wire.md#errors-raised-after-registration) ---------------------------------------------

    def _on_region_change(self, change: RegionChange) -> None:
        if change.kind == "split":
            error = cdc_errors.epoch_not_match(r.to_pb() for r in change.new)
            for region in change.old:
                self._stop(self._of_region(region.id), error)
        elif change.kind == "merge":
            # PrepareMerge on the source and CommitMerge on the target are both answered with
            # epoch_not_match{current_regions: []}.
            for region in change.old:
                self._stop(self._of_region(region.id), cdc_errors.epoch_not_match([]))
        elif change.kind == "leader":
            for region in change.new:
                if region.leader_store_id != self._store_id:
                    self._stop(self._of_region(region.id), cdc_errors.not_leader(region.id, region.leader_peer()))
        elif change.kind == "removed":
            for region in change.new:
                if region.peer_on(self._store_id) is None:  # our peer was destroyed
                    self._stop(self._of_region(region.id), cdc_errors.region_not_found(region.id))
                elif region.leader_store_id != self._store_id:
                    self._stop(self._of_region(region.id), cdc_errors.not_leader(region.id, region.leader_peer()))

    # ---- resolved ts (docs/wire.md#resolved-ts) ------------------------------------------------

    def _on_min_ts(self) -> None:
        try:
            self._congest()
            downstreams = [d for d in self._downstreams if d.state is DownstreamState.NORMAL]
            if not downstreams:
                return
            min_ts = self._cluster.tso.next()  # before any lock is read: see cdc_resolved_ts
            self._cluster.mvcc.observe_ts(min_ts)  # a later 1PC must commit above it (docs/wire.md#resolved-ts-bounds)
            emit(advance(downstreams, min_ts, self._min_lock_ts, self._still_leads))
        except Exception:
            log.exception("cdc resolved ts tick on store %s failed", self._store_id)

    def _min_lock_ts(self, d: Downstream) -> int | None:
        lo, hi = d.observed.raw_bounds()
        return self._cluster.mvcc.min_lock_ts(lo, hi or b"")

    def _still_leads(self, d: Downstream) -> bool:
        region = self._cluster.regions.get(d.region_id)
        return region is not None and region.leader_store_id == self._store_id and region.version == d.region_version

    def _congest(self) -> None:
        """Sink congestion (fault): TiKV drops the region's subscriptions with `congested`."""
        faults = self._cluster.faults
        for region_id in {d.region_id for d in self._downstreams}:
            if faults.congested(region_id):
                self._stop(self._of_region(region_id), cdc_errors.congested(region_id))
