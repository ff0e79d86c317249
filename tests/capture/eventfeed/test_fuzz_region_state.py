"""Property tests for the per-region CDC state machine (docs/wire.md#row-handling-per-region, docs/wire.md#resolved-ts-handling, docs/wire.md#invariants-a-simulated-tikv-cdc-server-must-respect): a
malformed or out-of-order Entries stream gives a one-line PullerError (the feed restarts from its
checkpoint) and never a silent loss; a stream within TiKV's rules emits every commit exactly once."""

from __future__ import annotations

from fuzz_support import decodes_or_rejects
from hypothesis import given
from hypothesis import strategies as st

from tidelake.capture.eventfeed.prewrites import PrewriteBudget
from tidelake.capture.eventfeed.region_state import RegionFeedState
from tidelake.capture.puller_errors import PullerError
from tidelake.codec.keys import record_key, table_record_span_encoded
from tidelake.errors import InputError
from tidelake.kvproto import cdcpb_pb2

E = cdcpb_pb2.Event
Row = E.Row
TABLE = 61
START_TS = 100

keys = st.integers(0, 5).map(lambda h: record_key(TABLE, h)) | st.sampled_from(
    [record_key(TABLE + 1, 1), b"t", b"", b"\xff" * 20, record_key(TABLE, 1)[:11]])
rows = st.builds(
    Row,
    type=st.sampled_from([E.PREWRITE, E.COMMIT, E.COMMITTED, E.ROLLBACK, E.INITIALIZED, 9]),
    start_ts=st.integers(0, 300),
    commit_ts=st.integers(0, 300),
    key=keys,
    value=st.sampled_from([b"", b"v", b"w"]),
    old_value=st.sampled_from([b"", b"o"]),
    op_type=st.sampled_from([Row.PUT, Row.DELETE, Row.UNKNOWN, 7]),
    generation=st.integers(0, 2),
)
events = st.lists(st.lists(rows, min_size=1, max_size=4) | st.integers(0, 300), max_size=20)


def region(prewrite_memory_bytes: int | None = None) -> RegionFeedState:
    budget = None if prewrite_memory_bytes is None else PrewriteBudget(prewrite_memory_bytes)
    return RegionFeedState(1, 7, table_record_span_encoded(TABLE), START_TS, START_TS, budget)


def feed(state: RegionFeedState, stream: list) -> list:
    out = []
    for event in stream:
        if isinstance(event, int):
            state.handle_resolved(event)
        else:
            out += state.handle_rows(event)
    return out


def _outcome(state: RegionFeedState, stream: list) -> list | str:
    try:
        return [(c.key, c.start_ts, c.commit_ts, c.op, c.value, c.old_value) for c in feed(state, stream)]
    except (PullerError, InputError) as exc:
        return type(exc).__name__


@given(events)
def test_arbitrary_streams_emit_or_fail_in_one_line(stream):
    try:
        changes = feed(region(), stream)
    except (PullerError, InputError) as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert all(c.commit_ts > START_TS and c.op in ("put", "delete") for c in changes)


@given(events, st.sampled_from([0, 400, 800]))
def test_spilled_prewrites_match_as_in_memory_ones(stream, budget):
    """A prewrite budget of 0 spills every waiting prewrite to disk, 400-800 bytes a few: the
    same stream gives the same changes, or the same error, as with every prewrite in memory."""
    assert _outcome(region(budget), stream) == _outcome(region(), stream)


@given(st.data())
def test_streams_within_tikv_rules_emit_every_commit_once(data):
    """Txns prewrite then commit, interleaved at random, prewrites sometimes delivered twice,
    resolved ts only below every open txn: each committed row comes out exactly once, with the
    value of its prewrite."""
    txns = data.draw(st.lists(st.sets(st.integers(0, 5), min_size=1, max_size=3), min_size=1, max_size=8))
    start = {i: 200 + 2 * i for i in range(len(txns))}
    step = dict.fromkeys(start, 0)  # 0: not prewritten, 1: prewritten, 2: committed
    stream: list = [[Row(type=E.INITIALIZED)]]
    resolved = START_TS
    while any(s < 2 for s in step.values()):
        choice = data.draw(st.sampled_from([i for i, s in step.items() if s < 2] + ["resolved", "again"]))
        if choice == "resolved":
            resolved = max(resolved, min(start[i] for i, s in step.items() if s < 2) - 1)
            stream.append(resolved)
            continue
        if choice == "again":  # a prewrite delivered again (a retried scan or a duplicate)
            done = [i for i, s in step.items() if s == 1]
            if done:
                i = data.draw(st.sampled_from(done))
                stream.append([_prewrite(h, start[i]) for h in sorted(txns[i])])
            continue
        i = choice
        if step[i] == 0:
            stream.append([_prewrite(h, start[i]) for h in sorted(txns[i])])
        else:
            stream.append([Row(type=E.COMMIT, start_ts=start[i], commit_ts=start[i] + 1, key=record_key(TABLE, h),
                               op_type=Row.PUT) for h in sorted(txns[i])])
        step[i] += 1
    changes = decodes_or_rejects(feed, region(), stream, where=None)
    assert changes is not None
    got = sorted((c.key, c.start_ts, c.commit_ts, c.value) for c in changes)
    want = sorted((record_key(TABLE, h), start[i], start[i] + 1, b"v%d" % h) for i, hs in enumerate(txns) for h in hs)
    assert got == want


def _prewrite(handle: int, start_ts: int) -> Row:
    return Row(type=E.PREWRITE, start_ts=start_ts, key=record_key(TABLE, handle), value=b"v%d" % handle, op_type=Row.PUT)
