"""The generated servicers and stubs talk to each other over loopback gRPC (sync server, threads)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from tidelake.kvproto import (
    cdcpb_pb2,
    cdcpb_pb2_grpc,
    kvrpcpb_pb2,
    pdpb_pb2,
    pdpb_pb2_grpc,
    tikvpb_pb2_grpc,
)

FEATURE = "stream-multiplexing"  # docs/wire.md#connection-setup


class EchoChangeData(cdcpb_pb2_grpc.ChangeDataServicer):
    """Answers each registration with one INITIALIZED row, like the end of an incremental scan."""

    def EventFeed(
        self, request_iterator: Iterator[cdcpb_pb2.ChangeDataRequest], context: grpc.ServicerContext
    ) -> Iterator[cdcpb_pb2.ChangeDataEvent]:
        for request in request_iterator:
            row = cdcpb_pb2.Event.Row(type=cdcpb_pb2.Event.INITIALIZED)
            event = cdcpb_pb2.Event(
                region_id=request.region_id,
                request_id=request.request_id,
                entries=cdcpb_pb2.Event.Entries(entries=[row]),
            )
            yield cdcpb_pb2.ChangeDataEvent(events=[event])

    def EventFeedV2(
        self, request_iterator: Iterator[cdcpb_pb2.ChangeDataRequest], context: grpc.ServicerContext
    ) -> Iterator[cdcpb_pb2.ChangeDataEvent]:
        features = dict(context.invocation_metadata()).get("features", "")
        unknown = [f for f in features.split(",") if f and f != FEATURE]
        if unknown:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, ",".join(unknown))
        yield from self.EventFeed(request_iterator, context)


class FixedTso(pdpb_pb2_grpc.PDServicer):
    def Tso(
        self, request_iterator: Iterator[pdpb_pb2.TsoRequest], context: grpc.ServicerContext
    ) -> Iterator[pdpb_pb2.TsoResponse]:
        for request in request_iterator:
            timestamp = pdpb_pb2.Timestamp(physical=1_700_000_000_000, logical=request.count)
            yield pdpb_pb2.TsoResponse(count=request.count, timestamp=timestamp)


class OneKeyTikv(tikvpb_pb2_grpc.TikvServicer):
    def KvGet(self, request: kvrpcpb_pb2.GetRequest, context: grpc.ServicerContext) -> kvrpcpb_pb2.GetResponse:
        if request.key == b"k":
            return kvrpcpb_pb2.GetResponse(value=b"v", commit_ts=request.version - 1)
        return kvrpcpb_pb2.GetResponse(not_found=True)


@pytest.fixture(scope="module")
def channel() -> Iterator[grpc.Channel]:
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    cdcpb_pb2_grpc.add_ChangeDataServicer_to_server(EchoChangeData(), server)
    pdpb_pb2_grpc.add_PDServicer_to_server(FixedTso(), server)
    tikvpb_pb2_grpc.add_TikvServicer_to_server(OneKeyTikv(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as chan:
        yield chan
    server.stop(grace=None)


def _requests() -> list[cdcpb_pb2.ChangeDataRequest]:
    return [cdcpb_pb2.ChangeDataRequest(region_id=r, request_id=7, checkpoint_ts=10) for r in (2, 3)]


def test_event_feed_round_trip(channel: grpc.Channel) -> None:
    stub = cdcpb_pb2_grpc.ChangeDataStub(channel)
    events = list(stub.EventFeed(iter(_requests()), timeout=10))
    assert [(e.events[0].region_id, e.events[0].request_id) for e in events] == [(2, 7), (3, 7)]
    assert all(e.events[0].entries.entries[0].type == cdcpb_pb2.Event.INITIALIZED for e in events)


def test_event_feed_v2_carries_features_metadata(channel: grpc.Channel) -> None:
    stub = cdcpb_pb2_grpc.ChangeDataStub(channel)
    events = list(stub.EventFeedV2(iter(_requests()), metadata=[("features", FEATURE)], timeout=10))
    assert len(events) == 2
    with pytest.raises(grpc.RpcError) as failure:
        list(stub.EventFeedV2(iter(_requests()), metadata=[("features", "bogus")], timeout=10))
    assert failure.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_unimplemented_method_reports_unimplemented(channel: grpc.Channel) -> None:
    stub = pdpb_pb2_grpc.PDStub(channel)
    with pytest.raises(grpc.RpcError) as failure:
        stub.GetMembers(pdpb_pb2.GetMembersRequest(), timeout=10)
    assert failure.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_tso_stream_and_unary_kv_get(channel: grpc.Channel) -> None:
    tso = list(pdpb_pb2_grpc.PDStub(channel).Tso(iter([pdpb_pb2.TsoRequest(count=3)]), timeout=10))
    assert [(r.count, r.timestamp.logical) for r in tso] == [(3, 3)]
    tikv = tikvpb_pb2_grpc.TikvStub(channel)
    assert tikv.KvGet(kvrpcpb_pb2.GetRequest(key=b"k", version=50), timeout=10).commit_ts == 49
    assert tikv.KvGet(kvrpcpb_pb2.GetRequest(key=b"x", version=50), timeout=10).not_found
