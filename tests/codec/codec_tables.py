"""TableInfo builders for the codec row/key/CLI tests (tables built in code, not JSON)."""

from __future__ import annotations

from tidelake.codec import mysql_types as mt
from tidelake.codec.schema import (
    ColumnInfo,
    FieldType,
    IndexColumn,
    IndexInfo,
    TableInfo,
)

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


