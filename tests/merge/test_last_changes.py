"""The collapse rule of a changelog window (tidelake.merge.window_spec), held to one reference:
the Arrow run of it (tidelake.merge.changelog_snapshot.last_changes) and the Spark run of it
(tidelake.merge.changelog_reader.collapse_last_change) must both give, for each raw
key, its last change (highest commit ts, a put over a delete at one ts, then the latest landing)
with the old value of its first change (docs/design.md invariants 5 and 6).

The reference below is plain Python over the generated rows. The rows follow the changelog's
rules: one change per (key, commit ts) landed once or more (a re-landing has a later flush_seq
and the same content), and at most a delete and a put of one key at one ts, which share the old
value (the key's value before that ts).
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelake.lake.row_change import OP_DELETE, OP_PUT
from tidelake.merge.changelog_snapshot import last_changes

_FIELDS = [("table_id", pa.int64()), ("commit_ts", pa.int64()), ("op", pa.string()), ("key", pa.binary()),
           ("value", pa.binary()), ("old_value", pa.binary()), ("flush_seq", pa.int64())]
_SCHEMA = pa.schema(_FIELDS)


@st.composite
def window_rows(draw: st.DrawFn) -> list[dict]:
    """Changelog rows of one window of one table, in landing order."""
    rows: list[dict] = []
    seq = 0
    for key in draw(st.lists(st.sampled_from([b"k0", b"k1", b"k2", b"k3"]), min_size=0, max_size=4, unique=True)):
        current = b"at lo" if draw(st.booleans()) else b""  # the key's value at lo, b"": no row
        for ts in sorted(draw(st.lists(st.integers(1, 30), min_size=1, max_size=5, unique=True))):
            old = current
            ops = draw(st.sampled_from([[OP_PUT], [OP_DELETE], [OP_DELETE, OP_PUT], [OP_PUT, OP_DELETE]]))
            for op in ops:
                value = f"{key.decode()}@{ts}".encode() if op == OP_PUT else b""
                for _ in range(draw(st.integers(1, 3))):  # landed once, or again (a duplicate)
                    rows.append({"table_id": 7, "commit_ts": ts, "op": op, "key": key, "value": value,
                                 "old_value": old, "flush_seq": seq})
                    seq += draw(st.integers(0, 2))  # one flush may hold several rows
            current = f"{key.decode()}@{ts}".encode() if OP_PUT in ops else b""  # a put wins at one ts
    order = draw(st.permutations(range(len(rows))))
    return [rows[i] for i in order]


def reference(rows: list[dict]) -> dict[bytes, tuple]:
    """key -> (commit_ts, op, value, old_value) by the rule, row by row."""
    out = {}
    for key in {r["key"] for r in rows}:
        mine = [r for r in rows if r["key"] == key]
        last = max(mine, key=lambda r: (r["commit_ts"], r["op"] == OP_PUT, r["flush_seq"]))
        first = min(mine, key=lambda r: (r["commit_ts"], r["flush_seq"]))
        out[key] = (last["commit_ts"], last["op"], last["value"], first["old_value"])
    return out


def as_dict(rows: list[dict]) -> dict[bytes, tuple]:
    got = {r["key"]: (r["commit_ts"], r["op"], r["value"], r["old_value"]) for r in rows}
    assert len(got) == len(rows), "a key came out twice"
    return got


@settings(max_examples=300, deadline=None)
@given(window_rows())
def test_arrow_collapse_follows_the_rule(rows):
    collapsed = last_changes(pa.Table.from_pylist(rows, schema=_SCHEMA))
    assert collapsed.column_names == ["table_id", "commit_ts", "op", "key", "value", "old_value"]
    assert as_dict(collapsed.to_pylist()) == reference(rows)


@settings(max_examples=300, deadline=None)
@given(window_rows())
def test_arrow_collapse_of_the_columns_that_telling_keys_apart_reads(rows):
    narrow = pa.Table.from_pylist(rows, schema=_SCHEMA).select(["key", "commit_ts", "flush_seq", "op", "old_value"])
    collapsed = last_changes(narrow)
    want = reference(rows)
    assert {r["key"]: (r["commit_ts"], r["op"], r["old_value"]) for r in collapsed.to_pylist()} == {
        k: (ts, op, old) for k, (ts, op, _value, old) in want.items()}


@settings(max_examples=15, deadline=None)
@given(window_rows())
def test_spark_collapse_follows_the_rule(spark, rows):
    from tidelake.merge.changelog_reader import collapse_last_change

    frame = spark.createDataFrame(pa.Table.from_pylist(rows, schema=_SCHEMA).to_pandas(), schema=
                                  "table_id long, commit_ts long, op string, key binary, value binary, "
                                  "old_value binary, flush_seq long")
    got = [row.asDict() for row in collapse_last_change(frame).collect()]
    for row in got:
        row["key"], row["value"], row["old_value"] = bytes(row["key"]), bytes(row["value"]), bytes(row["old_value"])
    assert as_dict(got) == reference(rows)
