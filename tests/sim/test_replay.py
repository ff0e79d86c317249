"""Replay: a recorded region history is served again to a new subscriber, request id rewritten."""

from __future__ import annotations

import grpc

from tidelake.kvproto import cdcpb_pb2, cdcpb_pb2_grpc
from tidelake.sim.cdc_recorder import StreamRecorder
from tidelake.sim.replay import load_histories, recorded_regions, serve_replay


def _entries(region_id: int, request_id: int, *rows: tuple[int, str]) -> cdcpb_pb2.Event:
    event = cdcpb_pb2.Event(region_id=region_id, request_id=request_id)
    for commit_ts, key in rows:
        event.entries.entries.add(key=key.encode(), commit_ts=commit_ts, start_ts=commit_ts - 1)
    return event


def _record(path) -> None:
    rec = StreamRecorder(path)
    rec.open_stream(1, 1, "EventFeedV2", ("stream-multiplexing",), "test")
    for request_id, region_id in ((10, 100), (11, 200)):
        rec.request(1, cdcpb_pb2.ChangeDataRequest(region_id=region_id, request_id=request_id, checkpoint_ts=5,
                                                   register=cdcpb_pb2.ChangeDataRequest.Register()).SerializeToString())
    rec.event(1, cdcpb_pb2.ChangeDataEvent(events=[_entries(100, 10, (7, "a"), (8, "b")),
                                                   _entries(200, 11, (9, "c"))]).SerializeToString())
    rec.event(1, cdcpb_pb2.ChangeDataEvent(resolved_ts=cdcpb_pb2.ResolvedTs(regions=[100], ts=20,
                                                                            request_id=10)).SerializeToString())
    error = cdcpb_pb2.Event(region_id=200, request_id=11, error=cdcpb_pb2.Error())
    rec.event(1, cdcpb_pb2.ChangeDataEvent(events=[error, _entries(200, 11, (30, "late"))]).SerializeToString())
    rec.close_stream(1, "OK")
    rec.close()


def test_histories_follow_the_recording_and_stop_at_errors(tmp_path):
    path = tmp_path / "s.tlcdc"
    _record(path)
    histories = load_histories([path])
    assert sorted(histories) == [100, 200]
    assert [len(e.entries.entries) if not isinstance(e, int) else e for e in histories[100].items] == [2, 20]
    assert [len(e.entries.entries) for e in histories[200].items] == [1]
    assert sorted(r.region_id for r in recorded_regions([path])) == [100, 200]


def test_replay_serves_a_region_with_the_new_request_id(tmp_path):
    path = tmp_path / "s.tlcdc"
    _record(path)
    server, port, service = serve_replay([path])
    try:
        assert service.region_count == 2
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = cdcpb_pb2_grpc.ChangeDataStub(channel)
            request = cdcpb_pb2.ChangeDataRequest(region_id=100, request_id=77,
                                                  register=cdcpb_pb2.ChangeDataRequest.Register())
            replies = list(stub.EventFeedV2(iter([request]), timeout=5))
        events = [e for r in replies for e in r.events]
        assert [e.request_id for e in events] == [77]
        assert [row.key for row in events[0].entries.entries] == [b"a", b"b"]
        resolved = [r.resolved_ts for r in replies if r.HasField("resolved_ts")]
        assert [(list(r.regions), r.ts, r.request_id) for r in resolved] == [([100], 20, 77)]
    finally:
        server.stop(None).wait()


def test_regions_of_one_multiplexed_request_keep_separate_histories(tmp_path):
    """TiCDC subscribes every region of a table span under one request id (docs/wire.md#request-it-sends)."""
    path = tmp_path / "one-request.tlcdc"
    rec = StreamRecorder(path)
    rec.open_stream(1, 1, "EventFeedV2", ("stream-multiplexing",), "test")
    for region_id in (100, 200):
        rec.request(1, cdcpb_pb2.ChangeDataRequest(region_id=region_id, request_id=7, checkpoint_ts=5,
                                                   register=cdcpb_pb2.ChangeDataRequest.Register()).SerializeToString())
    rec.event(1, cdcpb_pb2.ChangeDataEvent(events=[_entries(100, 7, (7, "a")),
                                                   _entries(200, 7, (8, "b"), (9, "c"))]).SerializeToString())
    rec.event(1, cdcpb_pb2.ChangeDataEvent(resolved_ts=cdcpb_pb2.ResolvedTs(regions=[100, 200], ts=20,
                                                                            request_id=7)).SerializeToString())
    rec.close_stream(1, "OK")
    rec.close()
    histories = load_histories([path])
    assert sorted(histories) == [100, 200]
    assert [[r.key for r in e.entries.entries] if not isinstance(e, int) else e
            for e in histories[100].items] == [[b"a"], 20]
    assert [[r.key for r in e.entries.entries] if not isinstance(e, int) else e
            for e in histories[200].items] == [[b"b", b"c"], 20]
