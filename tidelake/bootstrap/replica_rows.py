"""Snapshot rows -> replica rows as Arrow batches, in the replica's own schema.

The columns are tidelake.merge.replica_schema's (upstream columns by name and mapped type, then
the hidden `_tidb_commit_ts`, `_tidb_rowid`, `_tidb_partition_id`). A snapshot read at T does not
return each row's commit ts, so bootstrapped rows carry T: an upper bound of their last change
and below every change the feed delivers afterwards (docs/metadata.md#boundary-semantics), which is
what merge compares it with. Owner: bootstrap.
"""

from __future__ import annotations

import pyarrow as pa

from tidelake.codec.compiled_row import CompiledRowDecoder
from tidelake.codec.keys import decode_record_key
from tidelake.codec.schema import TableInfo
from tidelake.errors import InputError
from tidelake.merge.replica_schema import (
    COMMIT_TS_COLUMN,
    PARTITION_ID_COLUMN,
    ROWID_COLUMN,
    quote,
    replica_columns,
    stored_columns,
)

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
    """Decodes (raw record key, row value) pairs of one table into replica-shaped Arrow batches:
    a row per pair (CompiledRowDecoder), then one Arrow array per column and batch."""

    def __init__(self, info: TableInfo, commit_ts: int) -> None:
        self.info = info
        self.schema = replica_arrow_schema(info)
        stored = stored_columns(info)
        self.rows = CompiledRowDecoder(info, stored)
        self._hidden = [name for name, _, _ in replica_columns(info)][len(stored):]
        self._commit_ts = commit_ts

    def batch(self, pairs: list[tuple[bytes, bytes]]) -> pa.RecordBatch:
        spark_row = self.rows.spark_row
        rows: list[list] = []
        handles: list[int | bytes] = []
        physical_ids: list[int] = []
        for key, value in pairs:
            try:
                physical_id, handle = decode_record_key(key)
                rows.append(spark_row(value, handle))
            except InputError as exc:
                raise InputError(f"table {self.info.name} row {key.hex()}: {exc}") from None
            handles.append(handle)
            physical_ids.append(physical_id)
        hidden = {COMMIT_TS_COLUMN: [self._commit_ts] * len(rows), ROWID_COLUMN: handles,
                  PARTITION_ID_COLUMN: physical_ids}
        columns = [*zip(*rows)] if rows else [[] for _ in self.rows.columns]
        columns += [hidden[name] for name in self._hidden]
        arrays = [pa.array(col, type=f.type) for col, f in zip(columns, self.schema)]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
