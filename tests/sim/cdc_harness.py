"""A small simulated cluster (SIM-STORE's pieces + our CDC servicer on loopback gRPC) and a client.

Built here rather than through SimCluster so the tests control the min-ts interval and nothing
moves regions behind their back.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc

from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.kvproto import cdcpb_pb2, cdcpb_pb2_grpc, metapb_pb2
from tidelake.sim.cdc_service import ChangeDataService
from tidelake.sim.fault_state import FaultState
from tidelake.sim.mvcc import MvccStore
from tidelake.sim.regions import RegionMap, SimRegion
from tidelake.sim.tso_oracle import TsoOracle

CLUSTER_ID = 7_000_000_001
VERSION = "8.5.0"
MUX = (("features", "stream-multiplexing"),)


class MiniCluster:
    def __init__(self, n_stores: int = 1, min_ts_interval_s: float = 0.05, record_dir=None,
                 **service_options) -> None:
        self.cluster_id = CLUSTER_ID
        self.tso = TsoOracle()
        self.mvcc = MvccStore()
        self.regions = RegionMap(list(range(1, n_stores + 1)))
        self.faults = FaultState()
        self.services: dict[int, ChangeDataService] = {}
        self.servers: dict[int, grpc.Server] = {}
        self.addresses: dict[int, str] = {}
        for store_id in range(1, n_stores + 1):
            record = None if record_dir is None else record_dir / f"store{store_id}.cdcrec"
            service = ChangeDataService(store_id, self, min_ts_interval_s=min_ts_interval_s, record_path=record,
                                        **service_options)
            server = grpc.server(ThreadPoolExecutor(max_workers=16))
            service.add_to_server(server)
            port = server.add_insecure_port("127.0.0.1:0")
            server.start()
            self.services[store_id], self.servers[store_id] = service, server
            self.addresses[store_id] = f"127.0.0.1:{port}"

    def stop_store(self, store_id: int) -> None:
        self.services[store_id].close()
        self.servers[store_id].stop(0)

    def close(self) -> None:
        for store_id in list(self.services):
            self.stop_store(store_id)

    # ---- transactions ------------------------------------------------------------------------

    def write(self, puts: dict[bytes, bytes | None], commit: bool = True) -> tuple[int, int]:
        """2PC over `puts` (None = delete); returns (start_ts, commit_ts or 0 when left locked)."""
        start = self.tso.next()
        muts = [("delete", k, b"") if v is None else ("put", k, v) for k, v in puts.items()]
        self.mvcc.prewrite(muts, muts[0][1], start, 3000)
        if not commit:
            return start, 0
        commit_ts = self.tso.next()
        self.mvcc.commit([k for _, k, _ in muts], start, commit_ts)
        return start, commit_ts

    def region_of(self, raw_key: bytes) -> SimRegion:
        return self.regions.locate(encode_bytes(raw_key))


def register_request(region: SimRegion, checkpoint_ts: int, request_id: int = 1, start: bytes = b"",
                     end: bytes = b"", cluster_id: int = CLUSTER_ID, version: str = VERSION,
                     epoch_version: int | None = None) -> cdcpb_pb2.ChangeDataRequest:
    """A request shaped like TiCDC's (docs/wire.md#request-it-sends): encoded span, request oneof unset."""
    return cdcpb_pb2.ChangeDataRequest(
        header=cdcpb_pb2.Header(cluster_id=cluster_id, ticdc_version=version),
        region_id=region.id, request_id=request_id, checkpoint_ts=checkpoint_ts,
        region_epoch=metapb_pb2.RegionEpoch(conf_ver=region.conf_ver,
                                            version=region.version if epoch_version is None else epoch_version),
        start_key=start or region.start_key, end_key=end or region.end_key, extra_op=1)


class Stream:
    """One EventFeed(V2) stream: send requests, collect every ChangeDataEvent in a queue."""

    _END = object()

    def __init__(self, address: str, v2: bool = True, metadata=MUX, options=()) -> None:
        self.channel = grpc.insecure_channel(address, options=list(options))
        stub = cdcpb_pb2_grpc.ChangeDataStub(self.channel)
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self.received: queue.SimpleQueue = queue.SimpleQueue()
        self.error: grpc.RpcError | None = None
        call = stub.EventFeedV2 if v2 else stub.EventFeed
        self._call = call(iter(self._requests.get, self._END), metadata=metadata if v2 else None)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for msg in self._call:
                self.received.put(msg)
        except grpc.RpcError as err:
            self.error = err
        self.received.put(None)

    def send(self, request: cdcpb_pb2.ChangeDataRequest) -> None:
        self._requests.put(request)

    def close_send(self) -> None:
        self._requests.put(self._END)

    def next(self, timeout: float = 5.0) -> cdcpb_pb2.ChangeDataEvent | None:
        return self.received.get(timeout=timeout)

    def collect_until(self, predicate, timeout: float = 5.0) -> list[cdcpb_pb2.ChangeDataEvent]:
        """Messages up to and including the first satisfying `predicate` (None = stream ended)."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            msg = self.received.get(timeout=max(0.01, deadline - time.monotonic()))
            out.append(msg)
            if msg is None or predicate(msg):
                return out

    def drain(self, seconds: float) -> list[cdcpb_pb2.ChangeDataEvent]:
        out = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                out.append(self.received.get(timeout=left))
            except queue.Empty:
                break
        return out

    def close(self) -> None:
        self.close_send()
        self._call.cancel()
        self.channel.close()


def rows(msgs, region_id: int | None = None, request_id: int | None = None) -> list[cdcpb_pb2.Event.Row]:
    return [r for e in events(msgs, region_id, request_id) if e.HasField("entries") for r in e.entries.entries]


def events(msgs, region_id: int | None = None, request_id: int | None = None) -> list[cdcpb_pb2.Event]:
    return [e for m in msgs if m is not None for e in m.events
            if (region_id is None or e.region_id == region_id) and (request_id is None or e.request_id == request_id)]


def has_initialized(msg) -> bool:
    return msg is not None and any(
        r.type == cdcpb_pb2.Event.LogType.INITIALIZED for e in msg.events for r in e.entries.entries)


def has_resolved(msg, min_ts: int = 0) -> bool:
    return msg is not None and msg.HasField("resolved_ts") and msg.resolved_ts.ts >= min_ts


def has_error(msg) -> bool:
    return msg is not None and any(e.HasField("error") for e in msg.events)
