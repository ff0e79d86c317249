"""RANGE and HASH partitioning on one integer column: PartitionInfo JSON and row routing.

Each partition is its own physical table id in row keys (docs/encoding.md#record-row-key), so the
simulator must route rows exactly as TiDB does: RANGE = first partition whose LESS THAN bound
exceeds the value, HASH = |value mod num| (TiDB `locateHashPartition`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tidelake.codec.schema import PartitionDefinition, PartitionInfo, TableInfo
from tidelake.errors import InputError

# docs/encoding.md#schema-json PartitionInfo.type
RANGE, HASH = 1, 2
MAXVALUE = "MAXVALUE"


def definition(part_id: int, name: str, less_than: int | str | None = None) -> PartitionDefinition:
    """One definition in TiDB's JSON shape: RANGE keeps its bound text in `less_than`."""
    bound = [] if less_than is None else [str(less_than)]
    return PartitionDefinition(id=part_id, name=name, raw={
        "id": part_id, "name": None, "less_than": bound, "in_values": None, "policy_ref_info": None})


def build_partition(spec: dict, ids: Sequence[int]) -> PartitionInfo:
    """`{"type": "range", "column": c, "bounds": [(name, less_than), ...]}` or
    `{"type": "hash", "column": c, "count": n}` -> PartitionInfo using the given physical ids."""
    kind, column = spec.get("type"), spec.get("column")
    if not isinstance(column, str):
        raise InputError(f"partition spec {spec!r}: needs a 'column' name")
    if kind == "range":
        bounds = [(str(n), b) for n, b in spec.get("bounds", ())]
        if not bounds:
            raise InputError(f"partition spec {spec!r}: RANGE needs at least one (name, less_than) bound")
        check_range_bounds([b for _, b in bounds])
        defs = [definition(pid, name, bound) for pid, (name, bound) in zip(ids, bounds)]
        ptype, num = RANGE, 0
    elif kind == "hash":
        count = spec.get("count")
        if not isinstance(count, int) or count < 1:
            raise InputError(f"partition spec {spec!r}: HASH needs a positive 'count'")
        defs = [definition(pid, f"p{i}") for i, pid in enumerate(ids[:count])]
        ptype, num = HASH, count
    else:
        raise InputError(f"partition spec {spec!r}: type must be 'range' or 'hash'")
    info = PartitionInfo(type=ptype, expr=f"`{column}`", definitions=defs)
    info.raw = {**info.to_json(), "num": num}
    return info


def count_of(spec: dict) -> int:
    """How many physical ids a spec needs."""
    return len(spec.get("bounds", ())) if spec.get("type") == "range" else int(spec.get("count") or 0)


def check_range_bounds(bounds: Sequence[Any]) -> None:
    numeric = [b for b in bounds if b != MAXVALUE]
    if any(not isinstance(b, int) for b in numeric) or numeric != sorted(set(numeric)):
        raise InputError(f"RANGE bounds {list(bounds)} must be strictly increasing integers")
    if MAXVALUE in bounds and bounds[-1] != MAXVALUE:
        raise InputError("RANGE bound MAXVALUE can only be the last partition")


def bound_of(defn: PartitionDefinition) -> int | str:
    text = (defn.raw.get("less_than") or [MAXVALUE])[0]
    return MAXVALUE if text == MAXVALUE else int(text)


def partition_column(table: TableInfo) -> str:
    return table.partition.expr.strip("`") if table.partition else ""


def locate(table: TableInfo, row: dict) -> int:
    """Physical id a row of `table` lives in (the table id when not partitioned)."""
    info = table.partition
    if info is None:
        return table.id
    column = partition_column(table)
    value = row.get(column)
    if not isinstance(value, int):
        raise InputError(f"{table.name}: partition column {column!r} needs an int value, got {value!r}")
    if info.type == HASH:
        return info.definitions[abs(value) % len(info.definitions)].id  # == |Go's truncated val % num|
    for defn in info.definitions:
        bound = bound_of(defn)
        if bound == MAXVALUE or value < bound:
            return defn.id
    raise InputError(f"{table.name}: table has no partition for value {value}")
