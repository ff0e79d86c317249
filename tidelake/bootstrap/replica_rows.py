"""Snapshot rows -> replica columns as Arrow batches.

A replica holds the upstream columns under their own names and mapped types (DESIGN.md §3,
codec/spark_types.py), `_tidb_rowid` when the table has no clustered primary key, and
`_tidb_commit_ts`. A snapshot read at T does not return each row's commit ts, so bootstrapped
rows carry T: an upper bound of their last change, and below every change the feed delivers
afterwards (facts/meta_snapshot.md §4.2), which is all merge needs from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from tidelake.codec.keys import decode_record_key
from tidelake.codec.row import EXTRA_HANDLE_NAME, decode_row
from tidelake.codec.schema import STATE_PUBLIC, ColumnInfo, TableInfo
from tidelake.codec.spark_types import spark_type, spark_value
from tidelake.errors import InputError

COMMIT_TS_COLUMN = "_tidb_commit_ts"

_ARROW = {
    "BOOLEAN": pa.bool_(), "TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(),
    "BIGINT": pa.int64(), "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "STRING": pa.string(),
    "BINARY": pa.binary(), "DATE": pa.date32(), "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "TIMESTAMP_NTZ": pa.timestamp("us"), "ARRAY<FLOAT>": pa.list_(pa.float32()),
}  # fmt: skip


def replica_columns(info: TableInfo) -> list[ColumnInfo]:
    """Upstream columns a replica holds: public, visible, stored (virtual ones are not in rows)."""
    return [
        c for c in sorted(info.columns, key=lambda c: c.offset)
        if c.state == STATE_PUBLIC and not c.hidden and not (c.is_generated and not c.generated_stored)
    ]


def has_rowid(info: TableInfo) -> bool:
    return info.handle_column() is None and not info.is_common_handle


def arrow_type(spark: str) -> pa.DataType:
    """Arrow type Spark reads as the given Spark SQL type."""
    if spark.startswith("DECIMAL("):
        precision, scale = spark[len("DECIMAL("):-1].split(",")
        return pa.decimal128(int(precision), int(scale))
    found = _ARROW.get(spark)
    if found is None:
        raise InputError(f"no Arrow type for Spark type {spark}")
    return found


def replica_arrow_schema(info: TableInfo) -> pa.Schema:
    fields = [pa.field(c.name, arrow_type(spark_type(c.field_type))) for c in replica_columns(info)]
    if has_rowid(info):
        fields.append(pa.field(EXTRA_HANDLE_NAME, pa.int64(), nullable=False))
    fields.append(pa.field(COMMIT_TS_COLUMN, pa.int64(), nullable=False))
    return pa.schema(fields)


class RowDecoder:
    """Decodes (raw record key, row value) pairs of one table into replica-shaped Arrow batches."""

    def __init__(self, info: TableInfo, commit_ts: int) -> None:
        self.info = info
        self.schema = replica_arrow_schema(info)
        self._columns = replica_columns(info)
        self._rowid = has_rowid(info)
        self._commit_ts = commit_ts

    def batches(self, pairs: Iterable[tuple[bytes, bytes]], batch_rows: int = 8192) -> Iterator[pa.RecordBatch]:
        chunk: list[tuple[bytes, bytes]] = []
        for pair in pairs:
            chunk.append(pair)
            if len(chunk) >= batch_rows:
                yield self.batch(chunk)
                chunk = []
        if chunk:
            yield self.batch(chunk)

    def batch(self, pairs: list[tuple[bytes, bytes]]) -> pa.RecordBatch:
        values: list[list] = [[] for _ in self.schema]
        for key, value in pairs:
            try:
                _, handle = decode_record_key(key)
                row = decode_row(value, self.info, handle)
                for i, column in enumerate(self._columns):
                    values[i].append(spark_value(row.get(column.name), column.field_type))
            except InputError as exc:
                raise InputError(f"table {self.info.name} row {key.hex()}: {exc}") from None
            if self._rowid:
                values[len(self._columns)].append(row[EXTRA_HANDLE_NAME])
            values[-1].append(self._commit_ts)
        arrays = [pa.array(col, type=f.type) for col, f in zip(values, self.schema)]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
