"""Scriptable in-process ChangeData servers and a PD stand-in for edge-case tests of the client.

Each test decides what a store answers to each request (`on_request(conn, request)`), so every
error class and routing mode can be driven exactly; the end-to-end behaviour against a real
simulated cluster is covered by the integration test.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent import futures
from dataclasses import dataclass

import grpc

from tidelake.capture.eventfeed.span_divider import RegionTarget
from tidelake.kvproto import cdcpb_pb2, cdcpb_pb2_grpc, metapb_pb2

E = cdcpb_pb2.Event
CLUSTER_ID = 4242


class Conn:
    """One server-side stream: what it received and a way to push events or fail it."""

    def __init__(self, method: str, multiplexed: bool) -> None:
        self.method = method
        self.multiplexed = multiplexed
        self.requests: list[cdcpb_pb2.ChangeDataRequest] = []
        self.out: queue.SimpleQueue = queue.SimpleQueue()

    def send(self, event: cdcpb_pb2.ChangeDataEvent) -> None:
        self.out.put(event)

    def abort(self, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE) -> None:
        self.out.put(code)

    def rid(self, request: cdcpb_pb2.ChangeDataRequest) -> int:
        """request_id to echo: the subscription on multiplexed streams, 0 on plain ones (docs/wire.md#resolvedts-framing)."""
        return request.request_id if self.multiplexed else 0

    def entries(self, request, *rows) -> None:
        ev = cdcpb_pb2.ChangeDataEvent()
        ev.events.add(region_id=request.region_id, request_id=self.rid(request)).entries.entries.extend(rows)
        self.send(ev)

    def resolved(self, request_id: int, region_ids, ts: int) -> None:
        rid = request_id if self.multiplexed else 0
        self.send(cdcpb_pb2.ChangeDataEvent(resolved_ts=cdcpb_pb2.ResolvedTs(regions=region_ids, ts=ts,
                                                                             request_id=rid)))

    def error(self, request, **error_fields) -> None:
        ev = cdcpb_pb2.ChangeDataEvent()
        ev.events.add(region_id=request.region_id, request_id=self.rid(request),
                      error=cdcpb_pb2.Error(**error_fields))
        self.send(ev)


class ScriptedStore(cdcpb_pb2_grpc.ChangeDataServicer):
    def __init__(self, store_id: int, on_request, multiplexing: bool = True) -> None:
        self.store_id = store_id
        self.on_request = on_request
        self.multiplexing = multiplexing
        self.conns: list[Conn] = []
        self.probes = 0
        self._mutex = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        cdcpb_pb2_grpc.add_ChangeDataServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"
        self.server.start()

    def requests(self) -> list[cdcpb_pb2.ChangeDataRequest]:
        with self._mutex:
            return [r for c in self.conns for r in c.requests]

    def EventFeed(self, request_iterator, context):
        return self._serve(Conn("EventFeed", False), request_iterator, context)

    def EventFeedV2(self, request_iterator, context):
        features = dict(context.invocation_metadata()).get("features", "")
        if features and not self.multiplexing:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"unknown features: {features}")
        return self._serve(Conn("EventFeedV2", "stream-multiplexing" in features), request_iterator, context)

    def _serve(self, conn: Conn, request_iterator, context):
        with self._mutex:
            self.conns.append(conn)

        def read():
            try:
                for request in request_iterator:
                    with self._mutex:
                        conn.requests.append(request)
                    self.on_request(self, conn, request)
            except grpc.RpcError:
                pass
            conn.out.put(None)

        threading.Thread(target=read, daemon=True).start()
        while True:
            item = conn.out.get()
            if item is None:
                with self._mutex:
                    if not conn.requests:
                        self.probes += 1
                return
            if isinstance(item, grpc.StatusCode):
                context.abort(item, "injected stream failure")
            yield item

    def stop(self) -> None:
        self.server.stop(grace=None)


@dataclass
class PDRegion:
    id: int
    start: bytes
    end: bytes
    version: int
    leader_store: int


class FakePD:
    """cluster_id, scan_regions, batch_scan_regions, get_store, get_all_stores over a mutable region list."""

    def __init__(self, stores: dict[int, str], regions: list[PDRegion], versions: dict[int, str] | None = None):
        self.cluster_id = CLUSTER_ID
        self.stores = stores
        self.regions = regions
        self.versions = versions or {}
        self.scans = 0
        self.batch_scans = 0
        self.mutex = threading.Lock()

    def _target(self, r: PDRegion) -> RegionTarget:
        meta = metapb_pb2.Region(id=r.id, start_key=r.start, end_key=r.end,
                                 region_epoch=metapb_pb2.RegionEpoch(conf_ver=1, version=r.version))
        for store_id in sorted(self.stores):
            meta.peers.add(id=r.id * 100 + store_id, store_id=store_id)
        leader = next((p for p in meta.peers if p.store_id == r.leader_store), None)
        return RegionTarget(meta, leader)

    def scan_regions(self, start: bytes, end: bytes, limit: int = 1024):
        with self.mutex:
            self.scans += 1
            hits = [r for r in self.regions
                    if (not r.end or r.end > start) and (not end or r.start < end)]
            return [self._target(r) for r in sorted(hits, key=lambda r: r.start)[:limit]]

    def batch_scan_regions(self, ranges, limit: int = 1024):
        """PD's BatchScanRegions: the regions of every range in key order, each once, `limit` in all."""
        with self.mutex:
            self.batch_scans += 1
        out, seen = [], set()
        for start, end in ranges:
            for target in self.scan_regions(start, end, limit):
                if target.region.id not in seen and len(out) < limit:
                    seen.add(target.region.id)
                    out.append(target)
        return out

    def get_store(self, store_id: int) -> metapb_pb2.Store:
        return metapb_pb2.Store(id=store_id, address=self.stores[store_id],
                                version=self.versions.get(store_id, "8.5.0"))

    def get_all_stores(self):
        return [self.get_store(s) for s in sorted(self.stores)]


class RecordingSink:
    def __init__(self) -> None:
        self.rows = []
        self.resolved = []
        self.table_resolved = []
        self.cond = threading.Condition()

    def on_rows(self, rows) -> None:
        with self.cond:
            self.rows.extend(rows)
            self.cond.notify_all()

    def on_resolved(self, table_id, span, ts) -> None:
        with self.cond:
            self.resolved.append((table_id, span, ts))
            self.cond.notify_all()

    def on_table_resolved(self, table_id, ts) -> None:
        with self.cond:
            self.table_resolved.append((table_id, ts))
            self.cond.notify_all()

    def wait_for(self, predicate, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while not predicate(self):
                left = deadline - time.monotonic()
                assert left > 0, f"timed out; rows={len(self.rows)} table_resolved={self.table_resolved[-3:]}"
                self.cond.wait(min(left, 0.1))

