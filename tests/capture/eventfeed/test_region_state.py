import pytest

from tidelake.capture.eventfeed.prewrites import PrewriteBudget
from tidelake.capture.eventfeed.region_state import RegionFeedState
from tidelake.capture.puller_errors import PrewriteNotMatchError, ProtocolViolationError
from tidelake.codec.keys import record_key, table_record_span_encoded
from tidelake.kvproto import cdcpb_pb2

E = cdcpb_pb2.Event
Row = E.Row
TABLE = 61
START_TS = 100


def key(handle: int, table: int = TABLE) -> bytes:
    return record_key(table, handle)


def prewrite(h, start_ts, value=b"v", old=b"", op=Row.PUT, generation=0):
    return Row(type=E.PREWRITE, start_ts=start_ts, key=key(h), value=value, old_value=old, op_type=op,
               generation=generation)


def commit(h, start_ts, commit_ts, op=Row.PUT, value=b""):
    return Row(type=E.COMMIT, start_ts=start_ts, commit_ts=commit_ts, key=key(h), op_type=op, value=value)


def committed(h, start_ts, commit_ts, value=b"v", old=b"", op=Row.PUT, table=TABLE):
    return Row(type=E.COMMITTED, start_ts=start_ts, commit_ts=commit_ts, key=key(h, table), value=value,
               old_value=old, op_type=op)


def rollback(h, start_ts):
    return Row(type=E.ROLLBACK, start_ts=start_ts, key=key(h), op_type=Row.UNKNOWN)


INIT = Row(type=E.INITIALIZED)


_BUDGET: list[PrewriteBudget | None] = [None]


@pytest.fixture(autouse=True, params=["memory", "spilled"])
def prewrites_where(request):
    """Every test twice: waiting prewrites in memory, and all of them in the spill file."""
    _BUDGET[0] = None if request.param == "memory" else PrewriteBudget(0)
    yield request.param
    if _BUDGET[0] is not None:
        _BUDGET[0].close()


def state(checkpoint=START_TS, span=None):
    return RegionFeedState(1, 7, span or table_record_span_encoded(TABLE), START_TS, checkpoint, _BUDGET[0])


def summary(changes):
    return [(c.key, c.start_ts, c.commit_ts, c.op, c.value, c.old_value) for c in changes]


def test_prewrite_then_commit_after_initialized_carries_prewrite_value_and_old_value():
    s = state()
    assert s.handle_rows([INIT]) == []
    assert s.handle_rows([prewrite(1, 110, b"new", b"old")]) == []
    out = s.handle_rows([commit(1, 110, 120)])
    assert summary(out) == [(key(1), 110, 120, "put", b"new", b"old")]
    assert out[0].table_id == TABLE and out[0].region_id == 7
    assert s.unmatched_count == 0


def test_matched_commit_takes_the_prewrite_bytes_and_leaves_the_commit_message_as_received():
    # The value goes from the waiting prewrite to the RowChange as is: written into the COMMIT
    # message and read back, each value was copied twice more (a wide row's cost, bench_puller).
    new, old = b"n" * 2048, b"o" * 2048
    after_init = state()
    after_init.handle_rows([INIT, prewrite(1, 110, new, old)])
    row = commit(1, 110, 120)
    assert summary(after_init.handle_rows([row])) == [(key(1), 110, 120, "put", new, old)]
    assert row.value == b"" and row.old_value == b""
    scanning = state()  # the COMMIT overtakes the scan's PREWRITE: cached, matched at INITIALIZED
    row = commit(1, 110, 120)
    assert scanning.handle_rows([row, prewrite(1, 110, new, old)]) == []
    assert summary(scanning.handle_rows([INIT])) == [(key(1), 110, 120, "put", new, old)]
    assert row.value == b"" and row.old_value == b""


def test_delete_commit_matches_empty_value_prewrite_after_initialized():
    s = state()
    s.handle_rows([INIT, prewrite(2, 110, b"", b"old", op=Row.DELETE)])
    assert summary(s.handle_rows([commit(2, 110, 111, op=Row.DELETE)])) == [
        (key(2), 110, 111, "delete", b"", b"old")
    ]


def test_commit_before_prewrite_during_scan_is_cached_and_matched_at_initialized():
    s = state()
    assert s.handle_rows([commit(1, 110, 120)]) == []  # realtime commit overtakes the scan's prewrite
    assert s.handle_rows([prewrite(1, 110, b"val", b"prev")]) == []
    out = s.handle_rows([INIT])
    assert summary(out) == [(key(1), 110, 120, "put", b"val", b"prev")]


def test_cached_commit_without_prewrite_is_dropped_when_scan_delivered_it_committed():
    s = state()
    out = s.handle_rows([commit(1, 110, 120), committed(1, 110, 120, b"val")])
    assert summary(out) == [(key(1), 110, 120, "put", b"val", b"")]
    assert s.handle_rows([INIT]) == []  # the cached COMMIT is not emitted a second time


def test_commit_without_prewrite_after_initialized_is_fatal():
    s = state()
    s.handle_rows([INIT])
    with pytest.raises(PrewriteNotMatchError, match="region 7"):
        s.handle_rows([commit(3, 110, 120)])


def test_commit_before_initialized_does_not_match_fake_empty_prewrite_until_scan_ends():
    s = state()
    s.handle_rows([prewrite(1, 110, b"", b"")])  # lock rewritten without a value (heartbeat)
    assert s.handle_rows([commit(1, 110, 120)]) == []  # cached, not matched with the empty value
    s.handle_rows([prewrite(1, 110, b"real")])  # the scan's prewrite replaces the fake one
    assert summary(s.handle_rows([INIT])) == [(key(1), 110, 120, "put", b"real", b"")]


def test_fake_empty_prewrite_does_not_overwrite_real_one():
    s = state()
    s.handle_rows([INIT, prewrite(1, 110, b"real", b"o"), prewrite(1, 110, b"", b"o")])
    assert summary(s.handle_rows([commit(1, 110, 120)])) == [(key(1), 110, 120, "put", b"real", b"o")]


def test_lower_generation_prewrite_keeps_newer():
    s = state()
    s.handle_rows([INIT, prewrite(1, 110, b"gen2", generation=2), prewrite(1, 110, b"gen1", generation=1)])
    assert s.handle_rows([commit(1, 110, 120)])[0].value == b"gen2"


def test_rollback_removes_prewrite_after_initialized_so_a_later_commit_is_fatal():
    s = state()
    s.handle_rows([INIT, prewrite(1, 110), rollback(1, 110)])
    assert s.unmatched_count == 0
    with pytest.raises(PrewriteNotMatchError):
        s.handle_rows([commit(1, 110, 120)])


def test_rollback_before_initialized_is_applied_after_cached_commits():
    s = state()
    s.handle_rows([prewrite(1, 110), rollback(1, 110), prewrite(2, 111, b"b")])
    assert s.unmatched_count == 2  # rollback cached until INITIALIZED
    s.handle_rows([INIT])
    assert s.unmatched_count == 1
    assert summary(s.handle_rows([commit(2, 111, 130)])) == [(key(2), 111, 130, "put", b"b", b"")]


def test_stale_commit_at_or_below_table_start_ts_is_dropped_silently():
    s = state()
    s.handle_rows([INIT, prewrite(1, 90), prewrite(2, 95)])
    assert s.handle_rows([commit(1, 90, START_TS)]) == []
    assert s.unmatched_count == 1  # matched (consumed) even though stale
    assert len(s.handle_rows([commit(2, 95, START_TS + 1)])) == 1


def test_commit_at_or_below_last_resolved_ts_is_a_protocol_violation():
    s = state()
    s.handle_rows([INIT, prewrite(1, 110)])
    assert s.handle_resolved(150)
    with pytest.raises(ProtocolViolationError, match=r"region 7.*commit_ts 150 <= resolved ts 150"):
        s.handle_rows([commit(1, 110, 150)])


def test_committed_at_or_below_checkpoint_is_a_protocol_violation():
    s = state(checkpoint=200)
    with pytest.raises(ProtocolViolationError, match="commit_ts 200"):
        s.handle_rows([committed(1, 150, 200)])


def test_committed_rows_are_emitted_as_is_in_every_state():
    s = state()
    assert len(s.handle_rows([committed(1, 101, 102, b"a")])) == 1
    s.handle_rows([INIT])
    assert summary(s.handle_rows([committed(2, 103, 104, b"b", b"old", Row.DELETE)])) == [
        (key(2), 103, 104, "delete", b"b", b"old")
    ]


def test_resolved_ts_ignored_before_initialized_and_when_lower():
    s = state()
    assert not s.handle_resolved(500)
    assert s.last_resolved_ts == START_TS
    s.handle_rows([INIT])
    assert s.handle_resolved(500)
    assert not s.handle_resolved(400)
    assert s.handle_resolved(500)  # equal is accepted (monotonic, not strictly)
    s.stopped = True
    assert not s.handle_resolved(600)
    assert s.last_resolved_ts == 500


def test_rows_outside_the_region_sub_span_are_dropped():
    from tidelake.codec.memcomparable_bytes import encode_bytes

    span = (encode_bytes(key(10)), encode_bytes(key(20)))
    s = state(span=span)
    out = s.handle_rows([INIT, committed(9, 101, 102), committed(10, 101, 102), committed(19, 101, 102),
                         committed(20, 101, 102), committed(10, 101, 102, table=TABLE + 1)])
    assert [c.key for c in out] == [key(10), key(19)]


def test_committed_row_with_unknown_op_is_a_protocol_violation():
    s = state()
    with pytest.raises(ProtocolViolationError, match="op_type 0"):
        s.handle_rows([committed(1, 101, 102, op=Row.UNKNOWN)])


@pytest.mark.parametrize("suffix", [b"", b"\x01"])  # b"\x01": an end that is not one full encoding
def test_span_filter_matches_encoded_order_whether_bounds_decode_or_not(suffix):
    from tidelake.codec.memcomparable_bytes import encode_bytes

    span = (encode_bytes(key(8)[:-1]), encode_bytes(key(16)) + suffix)  # start: a prefix of key 8
    keys = [key(h) for h in range(0, 24)] + [key(8)[:-1], key(16) + b"\x00", key(3, TABLE + 1)]
    rows = [Row(type=E.COMMITTED, start_ts=101, commit_ts=102, key=k, value=b"v", op_type=Row.PUT) for k in keys]
    out = state(span=span).handle_rows([INIT, *rows])
    inside = [k for k in keys if span[0] <= encode_bytes(k) < span[1]]
    assert [c.key for c in out] == inside and len(inside) > 2


def test_rows_of_two_tables_in_one_span_keep_their_own_table_ids():
    from tidelake.codec.keys import table_prefix

    s = state(span=(b"", b""))
    out = s.handle_rows([INIT, committed(1, 101, 102), committed(1, 101, 102, table=TABLE + 1),
                         committed(2, 101, 102), committed(2, 101, 102, table=TABLE + 1)])
    assert [c.table_id for c in out] == [TABLE, TABLE + 1, TABLE, TABLE + 1]
    with pytest.raises(Exception, match="not a table key"):
        s.handle_rows([Row(type=E.COMMITTED, start_ts=101, commit_ts=103, key=table_prefix(TABLE)[:5],
                           value=b"v", op_type=Row.PUT)])
