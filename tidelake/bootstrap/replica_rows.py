"""Snapshot rows -> replica rows as Arrow batches, in the replica's own schema.

The columns are tidelake.apply.replica_schema's (upstream columns by name and mapped type, then
the hidden `_tidb_commit_ts`, `_tidb_rowid`, `_tidb_partition_id`). A snapshot read at T does not
return each row's commit ts, so bootstrapped rows carry T: an upper bound of their last change
and below every change the feed delivers afterwards (docs/metadata.md §4.2), which is
what merge compares it with.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from tidelake.apply.replica_schema import (
    COMMIT_TS_COLUMN,
    PARTITION_ID_COLUMN,
    ROWID_COLUMN,
    quote,
    replica_columns,
    stored_columns,
)
from tidelake.codec.keys import decode_record_key
from tidelake.codec.row import decode_row
from tidelake.codec.schema import TableInfo
from tidelake.codec.spark_types import spark_value
from tidelake.errors import InputError

_ARROW = {
    "BOOLEAN": pa.bool_(), "TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(),
    "BIGINT": pa.int64(), "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "STRING": pa.string(),
    "BINARY": pa.binary(), "DATE": pa.date32(), "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "TIMESTAMP_NTZ": pa.timestamp("us"), "ARRAY<FLOAT>": pa.list_(pa.float32()),
}  # fmt: skip


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
    return pa.schema([pa.field(name, arrow_type(tp)) for name, tp, _ in replica_columns(info)])


def replica_ddl(info: TableInfo) -> str:
    """The replica's columns as a Spark DDL string (mapInArrow output schema)."""
    return ", ".join(f"{quote(name)} {tp}" for name, tp, _ in replica_columns(info))


class RowDecoder:
    """Decodes (raw record key, row value) pairs of one table into replica-shaped Arrow batches."""

    def __init__(self, info: TableInfo, commit_ts: int) -> None:
        self.info = info
        self.schema = replica_arrow_schema(info)
        self._stored = stored_columns(info)
        self._hidden = [name for name, _, _ in replica_columns(info)][len(self._stored):]
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
        n = len(self._stored)
        for key, value in pairs:
            try:
                physical_id, handle = decode_record_key(key)
                row = decode_row(value, self.info, handle)
                for i, column in enumerate(self._stored):
                    values[i].append(spark_value(row.get(column.name), column.field_type))
            except InputError as exc:
                raise InputError(f"table {self.info.name} row {key.hex()}: {exc}") from None
            hidden = {COMMIT_TS_COLUMN: self._commit_ts, ROWID_COLUMN: handle, PARTITION_ID_COLUMN: physical_id}
            for j, name in enumerate(self._hidden):
                values[n + j].append(hidden[name])
        arrays = [pa.array(col, type=f.type) for col, f in zip(values, self.schema)]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
