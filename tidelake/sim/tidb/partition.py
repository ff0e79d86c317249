"""Partitioned tables: TiDB's PartitionInfo JSON and the routing of a row to its partition.

Each partition is its own physical table id in row keys (docs/encoding.md#record-row-key), so rows
are routed exactly as TiDB routes them (pingcap/tidb `pkg/table/tables/partition.go`): RANGE
[COLUMNS], LIST [COLUMNS], HASH and KEY. Bounds and values are kept as TiDB keeps them, as the
text of each expression, evaluated with the front's expression evaluator.

More: docs/internals.md#partition.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.row_value import collation_key
from tidelake.codec.schema import PartitionDefinition, PartitionInfo, TableInfo
from tidelake.errors import InputError
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.coerce import to_type, value_text
from tidelake.sim.tidb.expr import Row, compare, compile_text

# docs/encoding.md#schema-json PartitionInfo.type (NONE: a table being partitioned, pkg/ddl `getPartitionInfoTypeNone`)
NONE, RANGE, HASH, LIST, KEY = 0, 1, 2, 3, 4
TYPES = {"range": RANGE, "hash": HASH, "list": LIST, "key": KEY}
TYPE_NAMES = {v: k.upper() for k, v in TYPES.items()}
MAXVALUE = "MAXVALUE"


def definition(part_id: int, name: str, less_than: Sequence[str] | int | str | None = None,
               in_values: Sequence[Sequence[str]] | None = None) -> PartitionDefinition:
    """One definition in TiDB's JSON shape: bounds and values are expression texts."""
    if less_than is None:
        bound = []
    elif isinstance(less_than, (list, tuple)):
        bound = [str(b) for b in less_than]
    else:
        bound = [str(less_than)]
    values = [[str(v) for v in group] for group in in_values] if in_values is not None else None
    return PartitionDefinition(id=part_id, name=name, raw={
        "id": part_id, "name": None, "less_than": bound, "in_values": values, "policy_ref_info": None})


@dataclass(frozen=True)
class PartitionSpec:
    """A partitioning as DDL declares it, before ids are allocated.

    `expr` is the partition expression text (RANGE/LIST/HASH); `columns` the COLUMNS list or KEY
    columns; `definitions` are (name, less_than texts) for RANGE, (name, in_values groups) for
    LIST, names for HASH/KEY (`count` partitions named p0.. when none are given)."""

    type: int
    expr: str = ""
    columns: tuple[str, ...] = ()
    definitions: tuple[tuple[str, Any], ...] = ()
    count: int = 0

    @property
    def size(self) -> int:
        return len(self.definitions) if self.definitions else self.count


def spec_from_dict(spec: dict) -> PartitionSpec:
    """The Python front's short forms: `{"type": "range", "column": c, "bounds": [(name, less_than)]}`,
    `{"type": "hash", "column": c, "count": n}`."""
    kind, column = spec.get("type"), spec.get("column")
    if not isinstance(column, str):
        raise InputError(f"partition spec {spec!r}: needs a 'column' name")
    if kind == "range":
        bounds = [(str(n), b) for n, b in spec.get("bounds", ())]
        if not bounds:
            raise InputError(f"partition spec {spec!r}: RANGE needs at least one (name, less_than) bound")
        check_range_bounds([b for _, b in bounds])
        return PartitionSpec(RANGE, expr=quote(column), definitions=tuple((n, [str(b)]) for n, b in bounds))
    if kind == "hash":
        count = spec.get("count")
        if not isinstance(count, int) or count < 1:
            raise InputError(f"partition spec {spec!r}: HASH needs a positive 'count'")
        return PartitionSpec(HASH, expr=quote(column), count=count)
    raise InputError(f"partition spec {spec!r}: type must be 'range' or 'hash'")


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def build_partition(spec: PartitionSpec | dict, ids: Sequence[int]) -> PartitionInfo:
    """PartitionInfo JSON for `spec` using the given physical ids, one per partition."""
    if isinstance(spec, dict):
        spec = spec_from_dict(spec)
    if spec.size < 1:
        raise er.sql_error(er.UNKNOWN, "Number of partitions must be a positive integer")
    defs = []
    if spec.type in (HASH, KEY):
        names = [n for n, _ in spec.definitions] or [f"p{i}" for i in range(spec.count)]
        defs = [definition(pid, name) for pid, name in zip(ids, names)]
    elif spec.type == RANGE:
        defs = [definition(pid, name, less_than=list(bound)) for pid, (name, bound) in zip(ids, spec.definitions)]
    else:
        defs = [definition(pid, name, in_values=groups) for pid, (name, groups) in zip(ids, spec.definitions)]
    check_unique_names([d.name for d in defs])
    info = PartitionInfo(type=spec.type, expr=spec.expr, columns=list(spec.columns), definitions=defs)
    info.raw = {**info.to_json(), "num": len(defs) if spec.type in (HASH, KEY) else 0}
    return info


def with_definitions(info: PartitionInfo, defs: list[PartitionDefinition], **changes: Any) -> PartitionInfo:
    """A copy of `info` with other definitions (and `num` kept in step for HASH/KEY)."""
    out = PartitionInfo(type=info.type, expr=info.expr, columns=list(info.columns), enable=info.enable,
                        definitions=defs, adding_definitions=changes.get("adding", list(info.adding_definitions)),
                        dropping_definitions=changes.get("dropping", list(info.dropping_definitions)),
                        raw=dict(info.raw))
    if info.type in (HASH, KEY):
        out.raw["num"] = len(defs)
    return out


def check_unique_names(names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            raise er.sql_error(er.SAME_NAME_PARTITION, f"Duplicate partition name {name}")
        seen.add(name.lower())


def count_of(spec: PartitionSpec | dict) -> int:
    """How many physical ids a spec needs."""
    return (spec_from_dict(spec) if isinstance(spec, dict) else spec).size


def check_range_bounds(bounds: Sequence[Any]) -> None:
    numeric = [b for b in bounds if b != MAXVALUE]
    if any(not isinstance(b, int) for b in numeric) or numeric != sorted(set(numeric)):
        raise er.sql_error(er.RANGE_NOT_INCREASING,
                           "VALUES LESS THAN value must be strictly increasing for each partition")
    if MAXVALUE in bounds and bounds[-1] != MAXVALUE:
        raise er.sql_error(er.RANGE_NOT_INCREASING, "MAXVALUE can only be used in last partition definition")


def bound_of(defn: PartitionDefinition) -> int | str:
    """A single-column RANGE bound as an int (or MAXVALUE), for the Python front's short form."""
    text = (defn.raw.get("less_than") or [MAXVALUE])[0]
    return MAXVALUE if text.upper() == MAXVALUE else int(text)


def partition_columns(table: TableInfo) -> list[str]:
    """Columns the partitioning reads: the COLUMNS/KEY list, else those named in the expression."""
    info = table.partition
    if info is None:
        return []
    if info.columns:
        return list(info.columns)
    return list(router(table).expr.columns) if info.expr else []


def partition_column(table: TableInfo) -> str:
    """The single column of a simple partitioning (the Python front's RANGE/HASH on one column)."""
    columns = partition_columns(table)
    return columns[0] if len(columns) == 1 else ""


# ---- routing --------------------------------------------------------------------------------------


class _Router:
    """Compiled bounds of one PartitionInfo version."""

    def __init__(self, table: TableInfo) -> None:
        info = table.partition
        self.info = info
        self.table = table
        self.defs = list(info.definitions)
        self.expr = compile_text(info.expr) if info.expr and not info.columns else None
        self.column_types = [table.column_by_name(c).field_type for c in info.columns] if info.columns else []
        if info.type == RANGE:
            self.bounds = [[self._bound(text, i) for i, text in enumerate(d.raw.get("less_than") or [])]
                           for d in self.defs]
        elif info.type == LIST:
            self.values = [[[self._bound(text, i) for i, text in enumerate(group)] for group in d.raw.get("in_values") or []]
                           for d in self.defs]

    def _bound(self, text: str, position: int) -> Any:
        if text.upper() == MAXVALUE:
            return MAXVALUE
        value = compile_text(text).evaluate({})
        if self.column_types and value is not None:
            return to_type(value, self.column_types[position])
        return value

    def key(self, row: Row) -> list[Any]:
        if self.expr is not None:
            return [self.expr.evaluate(row)]
        return [to_type(row[c], ft) if row[c] is not None else None for c, ft in zip(self.info.columns, self.column_types)]

    def locate(self, row: Row) -> PartitionDefinition:
        kind = self.info.type
        if kind == NONE:  # a table being partitioned: one pseudo partition with the table's id
            return self.defs[0]
        key = self.key(row)
        if kind == HASH:
            value = key[0]
            if value is None:
                return self.defs[0]
            return self.defs[abs(int(value)) % len(self.defs)]
        if kind == KEY:
            return self.defs[_key_hash(key, self.column_types) % len(self.defs)]
        if kind == RANGE:
            for defn, bound in zip(self.defs, self.bounds):
                if _less_than(key, bound):
                    return defn
        else:
            for defn, groups in zip(self.defs, self.values):
                if any(same_values(key, group) for group in groups):
                    return defn
        shown = ", ".join("NULL" if k is None else value_text(k) for k in key)
        raise er.sql_error(er.NO_PARTITION_FOR_VALUE, f"Table has no partition for value {shown}")


def bound_below(lower: list[Any], upper: list[Any]) -> bool:
    """Whether RANGE bound tuple `lower` sorts strictly below `upper` (MAXVALUE above everything)."""
    for a, b in zip(lower, upper):
        if a == MAXVALUE and b == MAXVALUE:
            continue
        if a == MAXVALUE:
            return False
        if b == MAXVALUE:
            return True
        order = compare(a, b)
        if order != 0:
            return order < 0
    return False


def _less_than(key: list[Any], bound: list[Any]) -> bool:
    """Tuple comparison as RANGE [COLUMNS] does it; NULL sorts below every value."""
    for value, limit in zip(key, bound):
        if limit == MAXVALUE:
            return True
        if value is None:
            return True
        order = compare(value, limit)
        if order != 0:
            return order < 0
    return False


def same_values(key: list[Any], group: list[Any]) -> bool:
    return all((a is None and b is None) or (a is not None and b is not None and compare(a, b) == 0)
               for a, b in zip(key, group))


def _key_hash(key: list[Any], types: list[Any]) -> int:
    """CRC32 of `Datum.ToHashKey` of each KEY column: the collation key of its text, 0x00 for NULL."""
    crc = 0
    for value, ft in zip(key, types):
        if value is None:
            data = b"\0"
        elif isinstance(value, (bytes, bytearray)):
            data = bytes(value)
        elif ft.tp in mt.STRING_TYPES:
            data = collation_key(value_text(value).encode("utf-8"), ft, True)
        else:
            data = value_text(value).encode("utf-8")
        crc = zlib.crc32(data, crc)
    return crc


_ROUTERS: dict[int, tuple[PartitionInfo, _Router]] = {}


def router(table: TableInfo) -> _Router:
    entry = _ROUTERS.get(id(table.partition))
    if entry is None or entry[0] is not table.partition:
        if len(_ROUTERS) > 512:
            _ROUTERS.clear()
        entry = (table.partition, _Router(table))
        _ROUTERS[id(table.partition)] = entry
    return entry[1]


def locate_definition(table: TableInfo, row: Mapping[str, Any]) -> PartitionDefinition:
    return router(table).locate(row if isinstance(row, Row) else Row(row))


def locate(table: TableInfo, row: Mapping[str, Any]) -> int:
    """Physical id a row of `table` lives in (the table id when not partitioned)."""
    if table.partition is None:
        return table.id
    return locate_definition(table, row).id


def partition_type_name(info: PartitionInfo) -> str:
    name = TYPE_NAMES.get(info.type, str(info.type))
    return f"{name} COLUMNS" if info.columns and info.type in (RANGE, LIST) else name
