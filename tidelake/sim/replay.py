"""Replay recorded CDC streams at full speed, for puller benchmarks.

`tidelake sim --record DIR` (SIM-CDC's StreamRecorder, format in cdc_recorder.py) writes every
ChangeDataEvent the stores send. Here each recorded region's history (its entries and resolved
ts, from the subscription that carried the most) is served to whoever subscribes that region
again, with the new request_id, batched and without pacing, so the simulator is never the
bottleneck. Error events are not replayed (a replayed subscription ends after its history); the
recorded regions (`recorded_regions`) tell a benchmark what to subscribe.
"""

from __future__ import annotations

import queue
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from tidelake.kvproto import cdcpb_pb2, cdcpb_pb2_grpc
from tidelake.sim.cdc_recorder import RecordKind, read_records
from tidelake.sim.cluster import SERVER_OPTIONS

# Events per ChangeDataEvent when replaying (TiKV batches events per message too, docs/wire.md#batching).
BATCH_EVENTS = 256
_END = object()


@dataclass
class RegionHistory:
    """What one subscription of a region received: event batches and resolved ts, in order."""

    region_id: int
    request: cdcpb_pb2.ChangeDataRequest
    items: list[Any] = field(default_factory=list)  # cdcpb Event (entries) or int (resolved ts)

    @property
    def size(self) -> int:
        return len(self.items)


def load_histories(paths: Iterable[str | Path]) -> dict[int, RegionHistory]:
    """Per region id, the recorded subscription with the longest history."""
    # One subscription is (conn, request id, region id): a multiplexed request id covers many regions.
    by_region_of_conn: dict[int, dict[int, int]] = defaultdict(dict)  # conn -> region -> request id
    histories: dict[tuple[int, int, int], RegionHistory] = {}
    failed: set[tuple[int, int, int]] = set()
    for path in paths:
        for record in read_records(path):
            if record.kind == RecordKind.REQUEST:
                req = cdcpb_pb2.ChangeDataRequest.FromString(record.payload)
                if req.WhichOneof("request") in (None, "register"):
                    key = (record.conn_id, req.request_id, req.region_id)
                    by_region_of_conn[record.conn_id][req.region_id] = req.request_id
                    histories[key] = RegionHistory(req.region_id, req)
                    failed.discard(key)
            elif record.kind == RecordKind.EVENT:
                _add_event(record.conn_id, cdcpb_pb2.ChangeDataEvent.FromString(record.payload),
                           histories, by_region_of_conn, failed)
    best: dict[int, RegionHistory] = {}
    for history in histories.values():
        current = best.get(history.region_id)
        if current is None or history.size > current.size:
            best[history.region_id] = history
    return best


def _add_event(conn_id: int, message: cdcpb_pb2.ChangeDataEvent, histories: dict, by_region: dict,
               failed: set) -> None:
    for event in message.events:
        request_id = event.request_id or by_region[conn_id].get(event.region_id, 0)
        key = (conn_id, request_id, event.region_id)
        if key not in histories or key in failed:
            continue
        if event.WhichOneof("event") == "error":
            failed.add(key)
        elif event.WhichOneof("event") == "entries":
            histories[key].items.append(event)
    if message.HasField("resolved_ts"):
        resolved = message.resolved_ts
        for region_id in resolved.regions:
            request_id = resolved.request_id or by_region[conn_id].get(region_id, 0)
            key = (conn_id, request_id, region_id)
            if key in histories and key not in failed:
                histories[key].items.append(resolved.ts)


def recorded_regions(paths: Iterable[str | Path]) -> list[cdcpb_pb2.ChangeDataRequest]:
    """The recorded subscription requests (region id, epoch, encoded span, checkpoint) per region."""
    return [h.request for h in load_histories(paths).values()]


class ReplayService(cdcpb_pb2_grpc.ChangeDataServicer):
    """ChangeData servicer answering every registration with the region's recorded history."""

    def __init__(self, histories: dict[int, RegionHistory]) -> None:
        self._histories = histories

    @property
    def region_count(self) -> int:
        return len(self._histories)

    def EventFeed(self, request_iterator, context):  # noqa: N802 - gRPC method name
        return self._serve(request_iterator, context, multiplexed=False)

    def EventFeedV2(self, request_iterator, context):  # noqa: N802 - gRPC method name
        return self._serve(request_iterator, context, multiplexed=True)

    def _serve(self, requests: Iterator, context: Any, multiplexed: bool) -> Iterator[cdcpb_pb2.ChangeDataEvent]:
        out: queue.Queue = queue.Queue(maxsize=64)

        def receive() -> None:
            try:
                for req in requests:
                    if req.WhichOneof("request") in (None, "register"):
                        history = self._histories.get(req.region_id)
                        if history is not None:
                            for message in _messages(history, req.request_id, multiplexed):
                                out.put(message)
            finally:
                out.put(_END)

        threading.Thread(target=receive, name="replay-recv", daemon=True).start()
        while context.is_active():
            message = out.get()
            if message is _END:
                return
            yield message


def _messages(history: RegionHistory, request_id: int, multiplexed: bool) -> Iterator[cdcpb_pb2.ChangeDataEvent]:
    batch: list[cdcpb_pb2.Event] = []
    for item in history.items:
        if isinstance(item, int):
            if batch:
                yield cdcpb_pb2.ChangeDataEvent(events=batch)
                batch = []
            # docs/wire.md#resolvedts-framing: ResolvedTs alone; request_id only on multiplexed streams
            yield cdcpb_pb2.ChangeDataEvent(resolved_ts=cdcpb_pb2.ResolvedTs(
                regions=[history.region_id], ts=item, request_id=request_id if multiplexed else 0))
            continue
        event = cdcpb_pb2.Event()
        event.CopyFrom(item)
        event.request_id = request_id
        batch.append(event)
        if len(batch) >= BATCH_EVENTS:
            yield cdcpb_pb2.ChangeDataEvent(events=batch)
            batch = []
    if batch:
        yield cdcpb_pb2.ChangeDataEvent(events=batch)


def serve_replay(paths: Iterable[str | Path], port: int = 0, host: str = "127.0.0.1",
                 workers: int = 16) -> tuple[grpc.Server, int, ReplayService]:
    """Start a gRPC server with the ReplayService; returns (server, bound port, service)."""
    service = ReplayService(load_histories(paths))
    server = grpc.server(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="replay"), options=SERVER_OPTIONS)
    cdcpb_pb2_grpc.add_ChangeDataServicer_to_server(service, server)
    bound = server.add_insecure_port(f"{host}:{port}")
    server.start()
    return server, bound, service


def record_options(directory: str | Path) -> dict[str, Any]:
    """`cdc_options` for SimCluster that record every store's streams into `directory`."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    return {"record_path": str(Path(directory) / "streams.tlcdc")}
