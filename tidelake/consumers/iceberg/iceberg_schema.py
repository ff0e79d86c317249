"""A replica's Delta schema as an Iceberg schema with stable field ids, and the name mapping that
resolves its Parquet columns. With column mapping a field's id is its delta.columnMapping.id, the
id Delta writes into the Parquet files; without it a name keeps the id it was first published
with for good (files carry names only, so one name is one id in every snapshot), and a new name
takes the next unused id. The mapping keeps every name ever published, so an older snapshot's
files still resolve (Iceberg spec "Column Projection", "Schema Evolution").
Owner: tidelake.consumers.iceberg.publish.

More: docs/operations.md#reading-replicas-as-iceberg.
"""

from __future__ import annotations

import json
import re
from itertools import count
from typing import Any

from deltalake import DeltaTable
from pyiceberg.schema import Schema
from pyiceberg.table.name_mapping import MappedField, NameMapping
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

from tidelake.consumers.iceberg.refusal import IcebergRefused
from tidelake.lake.column_mapping import FIELD_ID, NONE_MODE, PHYSICAL_NAME, mapping_mode

# delta-io/delta PROTOCOL.md "Primitive Types" -> Iceberg spec "Primitive Types"; byte and short
# are Parquet INT32, which Iceberg reads as int.
_PRIMITIVES: dict[str, IcebergType] = {
    "byte": IntegerType(), "short": IntegerType(), "integer": IntegerType(), "long": LongType(),
    "float": FloatType(), "double": DoubleType(), "string": StringType(), "binary": BinaryType(),
    "boolean": BooleanType(), "date": DateType(), "timestamp": TimestamptzType(), "timestamp_ntz": TimestampType(),
}  # fmt: skip
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_TYPE_CHANGES = "delta.typeChanges"  # delta-io/delta PROTOCOL.md "Type Change Metadata"
# Spark's Delta writes the change data feed's columns (delta-io/delta CDCReader.CDC_COLUMNS_IN_DATA:
# `_change_type`, `__is_cdc`, all null) into the data files an UPDATE or DELETE rewrites, outside
# the table schema; Delta readers ignore them, pyiceberg refuses a file column its name mapping
# lacks. They map to ids of the range Iceberg reserves (spec "Reserved Field IDs"), never a table
# field's: `_change_type` to Iceberg's own (apache/iceberg MetadataColumns.CHANGE_TYPE).
DELTA_CDC_COLUMNS = [MappedField(field_id=2**31 - 1 - 104, names=["_change_type"]),
                     MappedField(field_id=2**31 - 1 - 199, names=["__is_cdc"])]
ELEMENT = "element"  # the list element's Parquet name as Spark and delta-rs write it (Parquet LogicalTypes.md "Lists")


def has_column_mapping(delta: DeltaTable) -> bool:
    """Whether the table maps columns in either mode, name or id (PROTOCOL.md "Column Mapping"): its
    fields then carry delta.columnMapping.id, the id its Parquet files hold."""
    return mapping_mode(delta.metadata().configuration) != NONE_MODE


def iceberg_schema(table: str, delta: DeltaTable, history: list[Schema], last_column_id: int) -> Schema:
    """The Iceberg schema of `delta`'s version; `history` is the table's schemas so far, oldest
    first, and `last_column_id` the highest id it ever gave. IcebergRefused for a type Iceberg
    lacks or a type change it cannot promote."""
    mapped = has_column_mapping(delta)
    fresh = count(last_column_id + 1)
    by_id = {f.field_id: f for schema in history for f in schema.fields}  # the newest schema's last
    by_name = {f.name: f for schema in history for f in schema.fields}
    fields = []
    for column in json.loads(delta.schema().to_json())["fields"]:
        name = column["name"]
        before = by_name.get(name)
        if mapped:
            field_id = int(column["metadata"][FIELD_ID])
        else:
            field_id = before.field_id if before is not None else next(fresh)
        kind = _iceberg_type(table, name, column["type"], mapped, before, fresh)
        prior = by_id.get(field_id)
        if prior is not None:
            _check_promotion(table, name, prior.field_type, kind)
        for change in column["metadata"].get(_TYPE_CHANGES, ()):  # files may hold any type the column had
            _check_promotion(table, name, _iceberg_type(table, name, change["fromType"], mapped, None, fresh),
                             _iceberg_type(table, name, change["toType"], mapped, None, fresh))
        fields.append(NestedField(field_id, name, kind, required=not column["nullable"]))
    return Schema(*fields)


def _iceberg_type(table: str, name: str, delta_type: Any, mapped: bool, before: NestedField | None,
                  fresh: count) -> IcebergType:
    if isinstance(delta_type, str):
        if delta_type in _PRIMITIVES:
            return _PRIMITIVES[delta_type]
        decimal = _DECIMAL.fullmatch(delta_type)
        if decimal:
            return DecimalType(int(decimal.group(1)), int(decimal.group(2)))
    elif delta_type.get("type") == "array" and isinstance(delta_type["elementType"], str) and not mapped:
        element = _iceberg_type(table, name, delta_type["elementType"], mapped, None, fresh)
        known = before is not None and isinstance(before.field_type, ListType)
        return ListType(before.field_type.element_id if known else next(fresh), element,
                        element_required=not delta_type["containsNull"])
    shown = delta_type if isinstance(delta_type, str) else delta_type.get("type")
    why = " (a column-mapped replica's Parquet files carry no field id for its elements)" if mapped else ""
    raise IcebergRefused(f"{table}: not published as Iceberg: column {name!r} is of Delta type {shown}, which "
                         f"tidelake does not publish{why}")


def _check_promotion(table: str, name: str, before: IcebergType, after: IcebergType) -> None:
    """Iceberg spec "Schema Evolution": int to long, float to double, and a decimal's precision widen
    in place; Delta type widening allows more (a decimal's scale, date to timestamp_ntz)."""
    if before == after or (before, after) in ((IntegerType(), LongType()), (FloatType(), DoubleType())):
        return
    if isinstance(before, DecimalType) and isinstance(after, DecimalType) and before.scale == after.scale \
            and after.precision >= before.precision:
        return
    raise IcebergRefused(f"{table}: not published as Iceberg: column {name!r} changed from {before} to {after}, "
                         "a change Iceberg cannot apply to the files already written")


def name_mapping(delta: DeltaTable, schema: Schema, previous: NameMapping | None) -> NameMapping:
    """Parquet column name -> field id, for files that carry no field ids: the physical name under
    column mapping (a column's name when the mapping was turned on), the name otherwise; then the
    `previous` mapping's fields that `schema` no longer has, for the files of older snapshots."""
    physical = {c["name"]: c["metadata"].get(PHYSICAL_NAME, c["name"]) for c in json.loads(delta.schema().to_json())["fields"]}
    mapped = []
    for field in schema.fields:
        nested = [MappedField(field_id=field.field_type.element_id, names=[ELEMENT])] \
            if isinstance(field.field_type, ListType) else []
        mapped.append(MappedField(field_id=field.field_id, names=[physical[field.name]], fields=nested))
    mapped += DELTA_CDC_COLUMNS
    ids, names = {f.field_id for f in mapped}, {n for f in mapped for n in f.names}
    older = [f for f in (previous or ()) if f.field_id not in ids and not names & set(f.names)]
    return NameMapping(mapped + older)
