"""The apply check's own row v2 reader against tidelake.codec's encoder as the oracle: every column
type the mixed workload writes (type_zoo's 25 and the ones its DDL adds), round trips of random
values through whole rows (small and large, NULLs, absent columns), DECIMALs of every shape, and
bad bytes as one clear error. The codec is the oracle here, in a test; the checker never uses it."""

from __future__ import annotations

import random
import struct
from datetime import date, datetime, timedelta
from decimal import Context, Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelake.codec.json_binary import encode_json_binary
from tidelake.codec.row_v2 import encode_row_v2
from tidelake.codec.row_value import encode_value
from tidelake.codec.schema import ColumnInfo, FieldType
from tidelake.nemesis.json_value import json_value
from tidelake.nemesis.row_values import column_value, epoch_micros, missing_value, row_columns
from tidelake.nemesis.value_errors import RowFormatError, Unchecked
from tidelake.sim.tidb.types import parse_field_type
from tidelake.sim.tidb.values import random_value
from tidelake.sim.workload import ADDABLE_TYPES, NO_DEFAULT_TYPES, ZOO_TYPES

TYPES = sorted(set(ZOO_TYPES) | set(ADDABLE_TYPES) | {"tinyint unsigned", "int unsigned", "bit(64)",
                                                         "decimal(65,30)", "date", "time", "timestamp"})


def column_json(ft: FieldType, name: str = "c", origin_default=None) -> dict:
    return {"name": {"O": name, "L": name}, "type": ft.to_json(), "origin_default": origin_default}


def canonical(value, ft: FieldType):
    """The reader's canonical form of a codec value (row_values' docstring)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return epoch_micros(value)
    if isinstance(value, timedelta):
        return value // timedelta(microseconds=1)
    if ft.tp == 4:  # FLOAT: narrowed to float32
        return struct.unpack("<f", struct.pack("<f", value))[0]
    return value


@pytest.mark.parametrize("spec", TYPES)
@given(rng=st.randoms(use_true_random=False))
@settings(max_examples=40, deadline=None)
def test_every_type_reads_back_what_the_codec_encoded(spec, rng):
    ft = parse_field_type(spec)
    value = random_value(ft, rng)
    assert column_value(encode_value(value, ft), column_json(ft)) == canonical(value, ft)


@given(rng=st.randoms(use_true_random=False), large=st.booleans(), data=st.data())
@settings(max_examples=60, deadline=None)
def test_whole_rows_read_back_column_by_column(rng, large, data):
    """Some columns NULL, some absent, ids above 255 (the large layout) when `large`."""
    specs = data.draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=12))
    base = 300 if large else 1
    stored, want = {}, {}
    for i, spec in enumerate(specs):
        ft = parse_field_type(spec)
        kind = rng.choice(("value", "value", "null", "absent"))
        if kind == "value":
            value = random_value(ft, rng)
            stored[base + i] = encode_value(value, ft)
            want[base + i] = canonical(value, ft)
        elif kind == "null":
            stored[base + i] = None
    row = encode_row_v2(stored)
    assert (row[1] & 1) == (large and bool(stored))
    columns, nulls = row_columns(row)
    assert nulls == {cid for cid, raw in stored.items() if raw is None}
    for i, spec in enumerate(specs):
        cid = base + i
        if cid in want:
            assert column_value(columns[cid], column_json(parse_field_type(spec))) == want[cid]
        else:
            assert cid not in columns


@given(precision=st.integers(1, 65), data=st.data())
@settings(max_examples=200, deadline=None)
def test_decimals_of_every_precision_and_scale(precision, data):
    frac = data.draw(st.integers(0, min(precision, 30)))
    unscaled = data.draw(st.integers(-(10 ** precision) + 1, 10 ** precision - 1))
    value = Decimal(unscaled).scaleb(-frac, context=Context(prec=100))
    ft = parse_field_type(f"decimal({precision},{frac})")
    assert column_value(encode_value(value, ft), column_json(ft)) == value


@given(st.recursive(st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 63) - 1) | st.text(max_size=20)
                    | st.floats(allow_nan=False, allow_infinity=False),
                    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
                    max_leaves=20))
@settings(max_examples=200, deadline=None)
def test_json_documents_read_back(document):
    assert json_value(encode_json_binary(document)) == document


def test_zero_dates_and_the_enum_set_edges():
    zero = b"\x00"
    assert column_value(zero, column_json(parse_field_type("datetime"))) is None
    assert column_value(zero, column_json(parse_field_type("date"))) is None
    enum = parse_field_type("enum('red','green','blue')")
    assert column_value(b"\x00", column_json(enum)) == ""
    assert column_value(b"\x03", column_json(enum)) == "blue"
    assert column_value(b"\x0a", column_json(parse_field_type("set('a','b','c','d')"))) == "b,d"


def test_missing_columns_read_as_their_origin_default_or_null():
    as_json = {spec: parse_field_type(spec) for spec in ("int", "decimal(12,3)", "datetime(3)", "date", "double",
                                                          "varchar(32)", "bigint unsigned")}
    assert missing_value(column_json(as_json["int"], origin_default="-7")) == -7
    assert missing_value(column_json(as_json["decimal(12,3)"], origin_default="12.500")) == Decimal("12.5")
    assert missing_value(column_json(as_json["datetime(3)"], origin_default="2001-02-03 04:05:06.789")) == datetime(
        2001, 2, 3, 4, 5, 6, 789000)
    assert missing_value(column_json(as_json["date"], origin_default="2001-02-03")) == date(2001, 2, 3)
    assert missing_value(column_json(as_json["double"], origin_default="1.5")) == 1.5
    assert missing_value(column_json(as_json["varchar(32)"], origin_default="x y")) == "x y"
    assert missing_value(column_json(as_json["bigint unsigned"], origin_default="18446744073709551615")) == (1 << 64) - 1
    assert missing_value(column_json(as_json["int"])) is None
    with pytest.raises(Unchecked):
        missing_value(column_json(parse_field_type("json"), origin_default="{}"))


def test_the_defaults_the_simulator_writes_are_read_as_the_codec_reads_them():
    """The sim's ADD COLUMN stores origin defaults as TiDB does (text; BIT as bytes); the codec's
    reader is the oracle."""
    from tidelake.codec.column_default import origin_default
    from tidelake.sim.tidb.types import build_column, column_def

    rng = random.Random(5)
    for spec in ADDABLE_TYPES:
        if spec in NO_DEFAULT_TYPES:
            continue
        for _ in range(5):
            ft = parse_field_type(spec)
            info = build_column(column_def(("c", spec, {"default": random_value(ft, rng)})), 1, 0)
            info.origin_default, info.origin_default_bit = info.default, info.default_bit
            assert missing_value(info.to_json()) == canonical(origin_default(info), ft), spec


@pytest.mark.parametrize("value", [b"", b"\x80\x00\x05\x00\x00\x00\x01", b"\x7f", b"\x80\x00\x01\x00\x00\x00\x01\x09\x00"])
def test_bad_rows_are_one_clear_error(value):
    with pytest.raises(RowFormatError):
        row_columns(value)


def test_a_type_the_reader_does_not_know_is_unchecked():
    with pytest.raises(Unchecked):
        column_value(b"\x00", {"name": {"O": "g"}, "type": {"Tp": 255}})  # GEOMETRY
    with pytest.raises(Unchecked):
        json_value(b"\x0d\xfe\x01x")  # opaque
