"""The checker's own row v2 integer reader agrees with what the sim's writer encodes, small and
large rows, every compact width, NULL and absent columns; anything else is a RowFormatError."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelake.codec.row_v2 import encode_row_v2
from tidelake.codec.row_value import encode_compact_int
from tidelake.nemesis.row_int import RowFormatError, int_column

INT64 = st.integers(-(2**63), 2**63 - 1)


@given(st.dictionaries(st.integers(1, 300), st.one_of(st.none(), INT64), min_size=1, max_size=8), st.data())
def test_reads_back_what_the_writer_encoded(columns, data):
    value = encode_row_v2({cid: None if v is None else encode_compact_int(v) for cid, v in columns.items()})
    for cid, v in columns.items():
        assert int_column(value, cid) == v
    absent = data.draw(st.integers(1, 400).filter(lambda c: c not in columns))
    assert int_column(value, absent) is None


@pytest.mark.parametrize("value", [b"", b"\x08\x02", b"\x80\x00\x02\x00\x00\x00\x01", b"\x80\x00\x01\x00\x00\x00\x07\x03\x00ab"])
def test_what_is_no_row_v2_int_is_refused(value):
    with pytest.raises(RowFormatError):
        int_column(value, 7)
