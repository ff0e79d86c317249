"""Hand-encoded protobuf bytes (tag = field << 3 | wire type) against the generated messages.

Field numbers are the ones in docs/wire.md#cdcpb-pingcapkvproto-protocdcpbproto and docs/metadata.md#read-messages, so these
vectors are what TiKV and TiCDC put on the wire.
"""

from __future__ import annotations

from tidelake.kvproto import cdcpb_pb2, errorpb_pb2, kvrpcpb_pb2, metapb_pb2

VARINT, LEN = 0, 2


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


def length_delimited(field: int, payload: bytes) -> bytes:
    return tag(field, LEN) + varint(len(payload)) + payload


def test_varint_helper_matches_the_protobuf_spec_example() -> None:
    assert varint(150) == b"\x96\x01"
    assert varint(1) == b"\x01"


def test_change_data_request_bytes() -> None:
    """A TiCDC-style register request (docs/wire.md#request-it-sends), encoded by hand in field-number order."""
    checkpoint_ts = 1_723_715_431_987 << 18 | 1  # TSO: physical ms << 18 | logical (docs/wire.md#tso-format)
    start_key = bytes.fromhex("748000fffffffffffffe5f720000000000fa")
    end_key = bytes.fromhex("748000fffffffffffffe5f730000000000fa")
    expected = b"".join(
        [
            length_delimited(1, tag(1, VARINT) + varint(6_818_112_453_109) + length_delimited(2, b"8.5.0")),
            tag(2, VARINT) + varint(2),
            length_delimited(3, tag(1, VARINT) + varint(1) + tag(2, VARINT) + varint(5)),
            tag(4, VARINT) + varint(checkpoint_ts),
            length_delimited(5, start_key),
            length_delimited(6, end_key),
            tag(7, VARINT) + varint(3),
            tag(8, VARINT) + varint(1),
            length_delimited(9, b""),
            tag(12, VARINT) + varint(1),
            tag(14, VARINT) + varint(2),
        ]
    )
    request = cdcpb_pb2.ChangeDataRequest(
        header=cdcpb_pb2.Header(cluster_id=6_818_112_453_109, ticdc_version="8.5.0"),
        region_id=2,
        region_epoch=metapb_pb2.RegionEpoch(conf_ver=1, version=5),
        checkpoint_ts=checkpoint_ts,
        start_key=start_key,
        end_key=end_key,
        request_id=3,
        extra_op=kvrpcpb_pb2.ReadOldValue,
        register=cdcpb_pb2.ChangeDataRequest.Register(),
        kv_api=cdcpb_pb2.ChangeDataRequest.TiDB,
        filter_loop=True,
        scan_priority=cdcpb_pb2.SCAN_PRIORITY_HIGH,
    )
    assert request.SerializeToString(deterministic=True) == expected
    assert cdcpb_pb2.ChangeDataRequest.FromString(expected) == request


def test_deregister_uses_field_13_in_the_request_oneof() -> None:
    wire = tag(7, VARINT) + varint(9) + length_delimited(13, b"")
    request = cdcpb_pb2.ChangeDataRequest.FromString(wire)
    assert request.WhichOneof("request") == "deregister"
    assert request.request_id == 9 and request.region_id == 0


def test_row_generation_is_field_10() -> None:
    row = cdcpb_pb2.Event.Row(generation=1)
    assert row.SerializeToString() == b"\x50\x01"  # (10 << 3) | 0 = 0x50


def test_parse_change_data_event_with_rows() -> None:
    row = b"".join(
        [
            tag(1, VARINT) + varint(100),
            tag(2, VARINT) + varint(105),
            tag(3, VARINT) + varint(2),  # COMMIT
            tag(4, VARINT) + varint(1),  # PUT
            length_delimited(5, b"t\x80\x00\x00\x00\x00\x00\x00\x2a_r\x80\x00\x00\x00\x00\x00\x00\x01"),
            length_delimited(6, b"\x80\x00\x01\x00\x00\x00\x01\x01\x00\x07"),
            tag(9, VARINT) + varint(0),
        ]
    )
    initialized = tag(3, VARINT) + varint(5)
    event = b"".join(
        [
            tag(1, VARINT) + varint(8),
            length_delimited(3, length_delimited(1, row) + length_delimited(1, initialized)),
            tag(7, VARINT) + varint(3),
        ]
    )
    parsed = cdcpb_pb2.ChangeDataEvent.FromString(length_delimited(1, event))
    (only,) = parsed.events
    assert (only.region_id, only.request_id, only.WhichOneof("event")) == (8, 3, "entries")
    first, last = only.entries.entries
    assert (first.start_ts, first.commit_ts, first.type, first.op_type) == (
        100,
        105,
        cdcpb_pb2.Event.COMMIT,
        cdcpb_pb2.Event.Row.PUT,
    )
    assert first.key.startswith(b"t\x80") and first.value[0] == 0x80
    assert last.type == cdcpb_pb2.Event.INITIALIZED
    assert not parsed.HasField("resolved_ts")


def test_parse_batch_resolved_ts_with_packed_region_ids() -> None:
    """proto3 packs repeated uint64 (regions) into one length-delimited field, as TiKV sends it."""
    packed = varint(2) + varint(300) + varint(7)
    resolved = b"".join(
        [length_delimited(1, packed), tag(2, VARINT) + varint(449_000_000_000_000_000), tag(3, VARINT) + varint(4)]
    )
    wire = length_delimited(2, resolved)
    parsed = cdcpb_pb2.ChangeDataEvent.FromString(wire)
    assert list(parsed.resolved_ts.regions) == [2, 300, 7]
    assert (parsed.resolved_ts.ts, parsed.resolved_ts.request_id) == (449_000_000_000_000_000, 4)
    assert parsed.SerializeToString() == wire


def test_parse_region_error_event() -> None:
    epoch = length_delimited(4, tag(1, VARINT) + varint(1) + tag(2, VARINT) + varint(6))
    region = tag(1, VARINT) + varint(12) + length_delimited(2, b"a") + length_delimited(3, b"b") + epoch
    error = length_delimited(3, length_delimited(1, region))  # epoch_not_match.current_regions
    event = cdcpb_pb2.Event.FromString(tag(1, VARINT) + varint(11) + length_delimited(5, error))
    assert event.WhichOneof("event") == "error"
    (current,) = event.error.epoch_not_match.current_regions
    assert (current.id, current.start_key, current.end_key, current.region_epoch.version) == (12, b"a", b"b", 6)


def test_deprecated_per_region_resolved_ts_is_field_6() -> None:
    event = cdcpb_pb2.Event(region_id=1, resolved_ts=42)
    assert event.SerializeToString() == tag(1, VARINT) + varint(1) + tag(6, VARINT) + varint(42)
    assert event.WhichOneof("event") == "resolved_ts"


def test_fields_outside_the_subset_are_skipped_and_kept() -> None:
    """Real TiKV fills exec_details_v2.time_detail (#1) and debug_info (#100); parsing must not break."""
    locked = length_delimited(1, tag(2, VARINT) + varint(77) + length_delimited(3, b"k"))
    unknown_debug_info = length_delimited(100, length_delimited(1, length_delimited(1, b"k")))
    wire = b"".join(
        [
            length_delimited(2, locked + unknown_debug_info),
            length_delimited(3, b"v"),
            length_delimited(6, length_delimited(1, tag(1, VARINT) + varint(5))),
            tag(7, VARINT) + varint(99),
        ]
    )
    response = kvrpcpb_pb2.GetResponse.FromString(wire)
    assert (response.error.locked.key, response.error.locked.lock_version) == (b"k", 77)
    assert (response.value, response.commit_ts) == (b"v", 99)
    assert response.SerializeToString() == wire


def test_errorpb_error_store_not_match_bytes() -> None:
    error = errorpb_pb2.Error(
        message="store not match",
        store_not_match=errorpb_pb2.StoreNotMatch(request_store_id=1, actual_store_id=2),
    )
    expected = length_delimited(1, b"store not match") + length_delimited(
        8, tag(1, VARINT) + varint(1) + tag(2, VARINT) + varint(2)
    )
    assert error.SerializeToString() == expected
