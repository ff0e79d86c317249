"""Fixtures for the codec tests."""

from __future__ import annotations

import pytest
from codec_tables import BIN, ft, make_table

from tidelake.codec import mysql_types as mt
from tidelake.codec.schema import TableInfo


@pytest.fixture
def all_types_table() -> TableInfo:
    """No clustered PK (handle = _tidb_rowid); one nullable column of every type."""
    return make_table(
        [
            ("i8", ft(mt.TYPE_TINY)),
            ("u16", ft(mt.TYPE_SHORT, flag=mt.UNSIGNED_FLAG)),
            ("i24", ft(mt.TYPE_INT24)),
            ("i32", ft(mt.TYPE_LONG)),
            ("i64", ft(mt.TYPE_LONGLONG)),
            ("u64", ft(mt.TYPE_LONGLONG, flag=mt.UNSIGNED_FLAG)),
            ("f32", ft(mt.TYPE_FLOAT)),
            ("f64", ft(mt.TYPE_DOUBLE)),
            ("dec", ft(mt.TYPE_NEWDECIMAL, flen=10, decimal=2)),
            ("dt", ft(mt.TYPE_DATE)),
            ("dtm", ft(mt.TYPE_DATETIME, decimal=6)),
            ("ts", ft(mt.TYPE_TIMESTAMP, decimal=3)),
            ("tm", ft(mt.TYPE_DURATION, decimal=0)),
            ("yr", ft(mt.TYPE_YEAR)),
            ("vc", ft(mt.TYPE_VARCHAR, flen=64)),
            ("ch", ft(mt.TYPE_STRING, flen=8)),
            ("txt", ft(mt.TYPE_BLOB)),
            ("vb", ft(mt.TYPE_VARCHAR, flag=mt.BINARY_FLAG, flen=16, **BIN)),
            ("bl", ft(mt.TYPE_BLOB, flag=mt.BINARY_FLAG, **BIN)),
            ("en", ft(mt.TYPE_ENUM, elems=["a", "b", "c"])),
            ("st", ft(mt.TYPE_SET, elems=["x", "y", "z"])),
            ("bt", ft(mt.TYPE_BIT, flen=16)),
            ("js", ft(mt.TYPE_JSON)),
        ]
    )
