"""The signed integer of one column of a TiDB row v2 value, read without tidelake.codec.

The bank check sums balances out of landed row values; decoding them with the codec the merge
uses would let one bug hide another, so this reads them with the checker's own row v2 reader
(tidelake.nemesis.row_values; pingcap/tidb pkg/util/rowcodec/row.go fromBytes, encoder.go
encodeInt): a signed int is 1, 2, 4 or 8 bytes LE.
"""

from __future__ import annotations

from tidelake.nemesis.row_values import compact_int, row_columns
from tidelake.nemesis.value_errors import RowFormatError

__all__ = ["RowFormatError", "int_column"]


def int_column(value: bytes, column_id: int) -> int | None:
    """The signed integer stored for `column_id`; None when the column is NULL or absent."""
    columns, _nulls = row_columns(value)
    data = columns.get(column_id)
    if data is None:
        return None
    try:
        return compact_int(data, signed=True)
    except RowFormatError as err:
        raise RowFormatError(f"column {column_id}: {err}") from None
