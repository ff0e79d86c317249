"""Mounting: raw changelog rows (key, value bytes) -> replica columns, in Spark (mapInArrow, one
decoder per schema per worker) and on the driver (mount_arrow), the same code.

A put decodes with its window's one schema; a delete needs only its key columns (from the handle,
or its old value for a common handle); a common handle's row is matched on its PK as it was at
lo (tidelake.merge.window_spec.match_columns). Owner: the writers.

More: docs/internals.md#mount.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from cachetools import LRUCache
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from tidelake.codec import mysql_types as mt
from tidelake.codec.common_handle import decode_common_handle
from tidelake.codec.compiled_row import CompiledRowDecoder
from tidelake.codec.keys import decode_record_key
from tidelake.codec.row import decode_row
from tidelake.codec.schema import ColumnInfo, TableInfo
from tidelake.codec.spark_types import spark_converter
from tidelake.errors import InputError
from tidelake.lake.row_change import OP_DELETE, OP_PUT
from tidelake.merge.replica_schema import COMMIT_TS_COLUMN, PARTITION_ID_COLUMN, ROWID_COLUMN
from tidelake.merge.window_spec import OP_COLUMN, match_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

MOUNT_INPUT_COLUMNS = ("table_id", "commit_ts", "op", "key", "value", "old_value")
_U64 = (1 << 64) - 1


def key_values(table: TableInfo, handle: int | bytes) -> dict[str, Any]:
    """Values of the key columns a record key's handle holds (`DecodeHandleToDatumMap`, docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns)."""
    if table.is_common_handle:
        if not isinstance(handle, bytes):
            raise InputError(f"table {table.name!r} has a common handle, the key holds int {handle}")
        return decode_common_handle(table, handle)
    if not isinstance(handle, int):
        raise InputError(f"table {table.name!r} has int handles, the key holds {len(handle)} handle bytes")
    pk = table.handle_column()
    if pk is None:
        return {ROWID_COLUMN: handle}
    return {pk.name: handle & _U64 if mt.is_unsigned(pk.field_type.flag) else handle}


@dataclass(frozen=True)
class _Target:
    """How one output column is filled."""

    name: str
    arrow_type: pa.DataType
    column: ColumnInfo | None  # upstream column, None for tidelake's own columns
    match: bool = False  # the column's value before the window (MATCH_PREFIX)


class RowMounter:
    """Decodes changelog batches of one table into replica rows; picklable, cheap to ship."""

    def __init__(self, table_json: str, output_schema: pa.Schema, carried: tuple[str, ...] = ()) -> None:
        self.table_json = table_json
        self.output_schema = output_schema
        self.carried = carried

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        decoder = _decoder(self)
        for batch in batches:
            yield decoder.decode(batch)


_DECODERS: dict[tuple[str, str], _BatchDecoder] = {}


def _decoder(mounter: RowMounter) -> _BatchDecoder:
    """One decoder per (schema, output) per Python worker: Spark reuses workers across tasks."""
    cache_key = (mounter.table_json, mounter.output_schema.to_string())
    decoder = _DECODERS.get(cache_key)
    if decoder is None:
        decoder = _BatchDecoder(TableInfo.from_json(mounter.table_json), mounter.output_schema, mounter.carried)
        _DECODERS[cache_key] = decoder
    return decoder


class _BatchDecoder:
    def __init__(self, table: TableInfo, output_schema: pa.Schema, carried: tuple[str, ...] = ()) -> None:
        self.table = table
        self.schema = output_schema
        self.carried = carried
        self.targets = []
        matched = {m: k for k, m in match_columns(table).items()}
        for f in output_schema:
            if f.name in carried:
                continue
            if f.name in matched:
                self.targets.append(_Target(f.name, f.type, table.column_by_name(matched[f.name]), match=True))
                continue
            column = table.column_by_name(f.name)
            special = f.name in (COMMIT_TS_COLUMN, OP_COLUMN, ROWID_COLUMN, PARTITION_ID_COLUMN)
            if column is None and not special:
                raise InputError(f"replica column {f.name!r} is not a column of table {table.name!r} in this window")
            self.targets.append(_Target(f.name, f.type, None if special else column))
        self.upstream = [t.column for t in self.targets if t.column is not None and not t.match]
        self.puts = CompiledRowDecoder(table, self.upstream)  # puts are most rows: the compiled decoder
        self.to_spark = [spark_converter(c.field_type) for c in self.upstream]
        self.has_match = any(t.match for t in self.targets)
        self.has_rowid = not table.is_common_handle and table.handle_column() is None  # as decode_row (docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns)

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        data = batch.to_pydict()
        upstream: list[list[Any]] = []
        before: list[dict[str, Any]] = []
        rowids: list[Any] = []
        spark_row = self.puts.spark_row
        for table_id, commit_ts, op, key, value, old_value in zip(*(data[c] for c in MOUNT_INPUT_COLUMNS)):
            try:
                _, handle = decode_record_key(key)
                if op == OP_PUT:
                    upstream.append(spark_row(value, handle))
                else:
                    upstream.append(self._spark_row(self._deleted(op, handle, old_value)))
                if self.has_match:
                    before.append(self._before(handle, old_value, value if op == OP_PUT else None))
            except InputError as exc:
                raise InputError(
                    f"table {self.table.name!r} (physical id {table_id}) change at commit ts {commit_ts}, "
                    f"key {key.hex()}: {exc}"
                ) from None
            rowids.append(handle if self.has_rowid else None)
        columns = iter([*zip(*upstream)] if upstream else [[] for _ in self.upstream])
        arrays = []
        for target in self.targets:
            if target.match:
                col, conv = target.column, spark_converter(target.column.field_type)
                values = [None if (v := b.get(col.name)) is None else conv(v) for b in before]
            elif target.column is not None:
                values = next(columns)
            elif target.name == COMMIT_TS_COLUMN:
                values = data["commit_ts"]
            elif target.name == OP_COLUMN:
                values = data["op"]
            elif target.name == PARTITION_ID_COLUMN:
                values = data["table_id"]
            else:
                values = rowids
            arrays.append(pa.array(values, type=target.arrow_type))
        arrays += [batch.column(name).cast(self.schema.field(name).type) for name in self.carried]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _spark_row(self, values: dict[str, Any]) -> list[Any]:
        return [None if (v := values.get(c.name)) is None else conv(v) for c, conv in zip(self.upstream, self.to_spark)]

    def _deleted(self, op: str, handle: int | bytes, old_value: bytes) -> dict[str, Any]:
        """A delete's values: its key columns (from the old value for a common handle, see module doc)."""
        if op != OP_DELETE:
            raise InputError(f"op {op!r} is neither put nor delete")
        if old_value and self.table.is_common_handle:
            try:
                return decode_row(old_value, self.table, handle)
            except InputError:
                pass  # an old value written before a DDL; the handle still names the row
        return key_values(self.table, handle)

    def _before(self, handle: int | bytes, old_value: bytes, put_value: bytes | None) -> dict[str, Any]:
        """Key column values of the row the key held before the window (see module doc)."""
        if old_value:
            try:
                return decode_row(old_value, self.table, handle)
            except InputError:
                pass  # an old value written before a DDL; the row's own key values still name it
        if put_value is not None:
            return decode_row(put_value, self.table, handle)
        return self._deleted(OP_DELETE, handle, old_value)


def mount_schema(replica_schema: StructType, table: TableInfo | None = None) -> StructType:
    """Schema mount() produces: the replica's columns (all nullable: a delete fills only its key
    columns), OP_COLUMN, and the match columns of `table`'s key (see module doc)."""
    fields = [StructField(f.name, f.dataType, True) for f in replica_schema.fields]
    types = {f.name: f.dataType for f in replica_schema.fields}
    matches = match_columns(table).items() if table is not None else ()
    extra = [StructField(m, types[k], True) for k, m in matches]
    return StructType([*fields, StructField(OP_COLUMN, StringType(), True), *extra])


def mount(
    changes: DataFrame,
    table: TableInfo,
    replica_schema: StructType,
    carried: tuple[str, ...] = (),
) -> DataFrame:
    """Decode `changes` (changelog columns MOUNT_INPUT_COLUMNS) of one table, one window.
    `carried` columns of `changes` are passed through unchanged, after the mounted ones."""

    extra = [changes.schema[name] for name in carried]
    schema = StructType([*mount_schema(replica_schema, table).fields, *extra])
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    mounter = RowMounter(json.dumps(table.to_json()), arrow_schema, tuple(carried))
    return changes.select(*MOUNT_INPUT_COLUMNS, *carried).mapInArrow(mounter, schema)


def mount_arrow(changes: pa.Table, table: TableInfo, replica_schema: StructType) -> pa.Table:
    """mount() on the driver: the same decoder over an Arrow table of MOUNT_INPUT_COLUMNS (a small
    window applied with delta-rs, tidelake.merge.writers.delta_rs_writer)."""
    schema = to_arrow_schema(mount_schema(replica_schema, table), timezone="UTC")
    decoder = _driver_decoder(table, schema)
    batches = [decoder.decode(b) for b in changes.select(list(MOUNT_INPUT_COLUMNS)).combine_chunks().to_batches()]
    return pa.Table.from_batches(batches, schema=schema)


DRIVER_DECODERS_MAX = 4096  # decoders kept on the driver, the least recently used dropped first
# A cachetools cache is not thread-safe: every access holds _DRIVER_DECODERS_LOCK (a merge
# follower's table threads mount at once).
_DRIVER_DECODERS: LRUCache[tuple[int, pa.Schema], tuple[TableInfo, _BatchDecoder]] = LRUCache(
    maxsize=DRIVER_DECODERS_MAX)
_DRIVER_DECODERS_LOCK = threading.Lock()


def _driver_decoder(table: TableInfo, schema: pa.Schema) -> _BatchDecoder:
    """One decoder per (schema object, output) on the driver: a merge follower's passes get the same
    TableInfo from the shared SchemaHistory (tidelake.lake.schema_history), so a table's decoder and
    its compiled row plans are made once, not per window. The entry holds `table`, so its id is not
    reused while kept."""
    key = (id(table), schema)
    with _DRIVER_DECODERS_LOCK:
        kept = _DRIVER_DECODERS.get(key)  # a hit is made the most recently used
        if kept is not None and kept[0] is table:
            return kept[1]
    decoder = _BatchDecoder(table, schema)
    with _DRIVER_DECODERS_LOCK:
        _DRIVER_DECODERS[key] = (table, decoder)
    return decoder
