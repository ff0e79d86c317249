"""Table builders for the row/key/CLI tests (TableInfo built in code, one column per type)."""

from __future__ import annotations

import pytest

from tidelake.codec import mysql_types as mt
from tidelake.codec.schema import ColumnInfo, FieldType, IndexColumn, IndexInfo, TableInfo

BIN = {"charset": "binary", "collate": "binary"}
UTF8 = {"charset": "utf8mb4", "collate": "utf8mb4_bin"}


def ft(tp: int, flag: int = 0, flen: int = -1, decimal: int = -1, elems=None, **cs) -> FieldType:
    charset = cs or (UTF8 if tp in mt.STRING_TYPES or tp in (mt.TYPE_ENUM, mt.TYPE_SET) else BIN)
    return FieldType(tp, flag, flen, decimal, charset["charset"], charset["collate"], elems)


def make_table(columns: list[tuple[str, FieldType]], table_id: int = 100, **kw) -> TableInfo:
    cols = [ColumnInfo(i + 1, name, i, f) for i, (name, f) in enumerate(columns)]
    primary = kw.pop("primary", None)
    indices = []
    if primary is not None:
        idx_cols = []
        for item in primary:
            name, length = item if isinstance(item, tuple) else (item, -1)
            col = next(c for c in cols if c.name == name)
            idx_cols.append(IndexColumn(name, col.offset, length))
        indices.append(IndexInfo(1, "PRIMARY", idx_cols, unique=True, primary=True))
    return TableInfo(table_id, "t", columns=cols, indices=indices, max_col_id=len(cols), **kw)


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
