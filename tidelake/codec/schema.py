"""TiDB schema metadata (TableInfo, ColumnInfo, IndexInfo, DBInfo) read from and written as TiDB's JSON.

The JSON keys are exactly those Go marshals from pingcap/tidb `pkg/meta/model` and
`pkg/parser/types` (docs/encoding.md#schema-json, docs/wire.md#modeljob-json). Keys this model does not
interpret are kept in `raw` and written back unchanged, so parse -> serialise loses nothing.
Owner: the codec.
"""

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from tidelake.codec.mysql_types import PRI_KEY_FLAG
from tidelake.errors import InputError

# docs/encoding.md#schema-json — SchemaState
STATE_NONE = 0
STATE_PUBLIC = 5
UNSPECIFIED_LENGTH = -1

JSONInput = dict | str | bytes


def load_json_object(obj: JSONInput, what: str) -> dict:
    """Accept a parsed dict or JSON text/bytes; anything else is an InputError naming `what`."""
    if isinstance(obj, (str, bytes, bytearray)):
        try:
            obj = json.loads(obj)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(f"{what}: not valid JSON ({exc})") from exc
    if not isinstance(obj, dict):
        raise InputError(f"{what}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _require(obj: dict, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if key not in obj:
        raise InputError(f"{what}: missing key {key!r} (not TiDB schema JSON?)")
    return _typed(obj, key, kind, what)


def _typed(obj: dict, key: str, kind: type | tuple[type, ...], what: str, default: Any = None) -> Any:
    value = obj.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) and kind is int:
        raise InputError(f"{what}: key {key!r} must be a number, got {value!r}")
    if not isinstance(value, kind):
        raise InputError(f"{what}: key {key!r} has {type(value).__name__} {value!r}, expected {_kind_name(kind)}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _cistr(obj: dict, key: str, what: str) -> str:
    """CIStr `{"O": original, "L": lowercase}` (docs/encoding.md#schema-json); the original spelling is what we expose."""
    if key not in obj:
        raise InputError(f"{what}: missing key {key!r} (not TiDB schema JSON?)")
    value = obj[key]
    original = value.get("O") if isinstance(value, dict) else None
    if not isinstance(original, str):
        raise InputError(f"{what}: key {key!r} must be a CIStr object with a string 'O', got {value!r}")
    return original


def _cistr_json(name: str) -> dict:
    return {"O": name, "L": name.lower()}


def _b64_bytes(obj: dict, key: str, what: str) -> bytes | None:
    """Go marshals []byte as base64 (ColumnInfo origin_default_bit/default_bit)."""
    value = _typed(obj, key, str, what)
    if value is None:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise InputError(f"{what}: key {key!r} is not base64 ({exc})") from exc


def _b64_json(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode("ascii")


def _list_of(obj: dict, key: str, what: str) -> list:
    return _typed(obj, key, list, what, default=[])


def _list_json(items: list[dict], raw: dict, key: str) -> list[dict] | None:
    """Go writes a nil slice as null and an empty one as []; keep whichever the source JSON had."""
    if items:
        return items
    return raw.get(key) if raw.get(key) == [] else None


@dataclass
class FieldType:
    """A column's type: MySQL type code, flags, length, decimals/fsp, charset, collation, ENUM/SET elements."""

    tp: int
    flag: int = 0
    flen: int = UNSPECIFIED_LENGTH
    decimal: int = UNSPECIFIED_LENGTH
    charset: str = ""
    collate: str = ""
    elems: list[str] | None = None
    elems_is_binary_lit: list[bool] | None = None
    array: bool = False

    @classmethod
    def from_json(cls, obj: dict, what: str = "FieldType") -> "FieldType":
        # docs/encoding.md#schema-json: untagged Go field names, capitalised
        obj = load_json_object(obj, what)
        return cls(
            tp=_require(obj, "Tp", int, what),
            flag=_typed(obj, "Flag", int, what, 0),
            flen=_typed(obj, "Flen", int, what, UNSPECIFIED_LENGTH),
            decimal=_typed(obj, "Decimal", int, what, UNSPECIFIED_LENGTH),
            charset=_typed(obj, "Charset", str, what, ""),
            collate=_typed(obj, "Collate", str, what, ""),
            elems=_typed(obj, "Elems", list, what),
            elems_is_binary_lit=_typed(obj, "ElemsIsBinaryLit", list, what),
            array=_typed(obj, "Array", bool, what, False),
        )

    def to_json(self) -> dict:
        return {
            "Tp": self.tp,
            "Flag": self.flag,
            "Flen": self.flen,
            "Decimal": self.decimal,
            "Charset": self.charset,
            "Collate": self.collate,
            "Elems": self.elems,
            "ElemsIsBinaryLit": self.elems_is_binary_lit,
            "Array": self.array,
        }


@dataclass
class ColumnInfo:
    """One column of a table (docs/encoding.md#schema-json ColumnInfo). `id` is what row values are keyed by, not `offset`."""

    id: int
    name: str
    offset: int
    field_type: FieldType
    origin_default: Any = None
    origin_default_bit: bytes | None = None
    default: Any = None
    default_bit: bytes | None = None
    state: int = STATE_PUBLIC
    generated_expr_string: str = ""
    generated_stored: bool = False
    hidden: bool = False
    comment: str = ""
    version: int = 2
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: dict, what: str = "ColumnInfo") -> "ColumnInfo":
        obj = load_json_object(obj, what)
        name = _cistr(obj, "name", what)
        what = f"{what} {name!r}"
        return cls(
            id=_require(obj, "id", int, what),
            name=name,
            offset=_require(obj, "offset", int, what),
            field_type=FieldType.from_json(_require(obj, "type", dict, what), f"{what} type"),
            origin_default=obj.get("origin_default"),
            origin_default_bit=_b64_bytes(obj, "origin_default_bit", what),
            default=obj.get("default"),
            default_bit=_b64_bytes(obj, "default_bit", what),
            state=_typed(obj, "state", int, what, STATE_NONE),
            generated_expr_string=_typed(obj, "generated_expr_string", str, what, ""),
            generated_stored=_typed(obj, "generated_stored", bool, what, False),
            hidden=_typed(obj, "hidden", bool, what, False),
            comment=_typed(obj, "comment", str, what, ""),
            version=_typed(obj, "version", int, what, 0),
            raw=obj,
        )

    def to_json(self) -> dict:
        # Go field order of pkg/meta/model/column.go
        base = self.raw or {
            "id": None,
            "name": None,
            "offset": None,
            "origin_default": None,
            "origin_default_bit": None,
            "default": None,
            "default_bit": None,
            "default_is_expr": False,
            "generated_expr_string": "",
            "generated_stored": False,
            "dependences": None,
            "type": None,
            "state": None,
            "comment": "",
            "hidden": False,
            "change_state_info": None,
            "version": None,
        }
        return {
            **base,
            "id": self.id,
            "name": _cistr_json(self.name),
            "offset": self.offset,
            "origin_default": self.origin_default,
            "origin_default_bit": _b64_json(self.origin_default_bit),
            "default": self.default,
            "default_bit": _b64_json(self.default_bit),
            "generated_expr_string": self.generated_expr_string,
            "generated_stored": self.generated_stored,
            "type": self.field_type.to_json(),
            "state": self.state,
            "comment": self.comment,
            "hidden": self.hidden,
            "version": self.version,
        }

    @property
    def is_generated(self) -> bool:
        return bool(self.generated_expr_string)


@dataclass
class IndexColumn:
    """A column of an index: table column name, its offset in `cols`, prefix length (-1 = whole value)."""

    name: str
    offset: int
    length: int = UNSPECIFIED_LENGTH

    @classmethod
    def from_json(cls, obj: dict, what: str) -> "IndexColumn":
        obj = load_json_object(obj, what)
        return cls(
            name=_cistr(obj, "name", what),
            offset=_require(obj, "offset", int, what),
            length=_typed(obj, "length", int, what, UNSPECIFIED_LENGTH),
        )

    def to_json(self) -> dict:
        return {"name": _cistr_json(self.name), "offset": self.offset, "length": self.length}


@dataclass
class IndexInfo:
    """An index (docs/encoding.md#schema-json IndexInfo). An int primary key that is the row handle has no IndexInfo."""

    id: int
    name: str
    columns: list[IndexColumn]
    unique: bool = False
    primary: bool = False
    state: int = STATE_PUBLIC
    table_name: str = ""
    comment: str = ""
    index_type: int = 1
    invisible: bool = False
    is_global: bool = False
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: dict, what: str = "IndexInfo") -> "IndexInfo":
        obj = load_json_object(obj, what)
        name = _cistr(obj, "idx_name", what)
        what = f"{what} {name!r}"
        return cls(
            id=_require(obj, "id", int, what),
            name=name,
            columns=[IndexColumn.from_json(c, f"{what} idx_cols[{i}]") for i, c in enumerate(_list_of(obj, "idx_cols", what))],
            unique=_typed(obj, "is_unique", bool, what, False),
            primary=_typed(obj, "is_primary", bool, what, False),
            state=_typed(obj, "state", int, what, STATE_NONE),
            table_name=_cistr(obj, "tbl_name", what) if obj.get("tbl_name") is not None else "",
            comment=_typed(obj, "comment", str, what, ""),
            index_type=_typed(obj, "index_type", int, what, 0),
            invisible=_typed(obj, "is_invisible", bool, what, False),
            is_global=_typed(obj, "is_global", bool, what, False),
            raw=obj,
        )

    def to_json(self) -> dict:
        # Go field order of pkg/meta/model/index.go
        base = self.raw or {
            "id": None,
            "idx_name": None,
            "tbl_name": None,
            "idx_cols": None,
            "state": None,
            "backfill_state": 0,
            "comment": "",
            "index_type": None,
            "is_unique": False,
            "is_primary": False,
            "is_invisible": False,
            "is_global": False,
            "mv_index": False,
            "vector_index": None,
        }
        return {
            **base,
            "id": self.id,
            "idx_name": _cistr_json(self.name),
            "tbl_name": _cistr_json(self.table_name),
            "idx_cols": _list_json([c.to_json() for c in self.columns], self.raw, "idx_cols"),
            "state": self.state,
            "comment": self.comment,
            "index_type": self.index_type,
            "is_unique": self.unique,
            "is_primary": self.primary,
            "is_invisible": self.invisible,
            "is_global": self.is_global,
        }


@dataclass
class PartitionDefinition:
    """One partition: its physical table id (the id in its row keys) and name."""

    id: int
    name: str
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: dict, what: str) -> "PartitionDefinition":
        obj = load_json_object(obj, what)
        return cls(id=_require(obj, "id", int, what), name=_cistr(obj, "name", what), raw=obj)

    def to_json(self) -> dict:
        base = self.raw or {"id": None, "name": None, "less_than": None, "in_values": None, "policy_ref_info": None}
        return {**base, "id": self.id, "name": _cistr_json(self.name)}


# docs/encoding.md#schema-json PartitionInfo.type
PARTITION_TYPE_NAMES = {0: "none", 1: "range", 2: "hash", 3: "list", 4: "key", 5: "system_time"}


@dataclass
class PartitionInfo:
    """Partitioning of a table; every definition is a separate physical table id in TiKV."""

    type: int
    expr: str = ""
    columns: list[str] = field(default_factory=list)
    enable: bool = True
    definitions: list[PartitionDefinition] = field(default_factory=list)
    adding_definitions: list[PartitionDefinition] = field(default_factory=list)
    dropping_definitions: list[PartitionDefinition] = field(default_factory=list)
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: dict, what: str = "PartitionInfo") -> "PartitionInfo":
        obj = load_json_object(obj, what)

        def defs(key: str) -> list[PartitionDefinition]:
            return [PartitionDefinition.from_json(d, f"{what} {key}[{i}]") for i, d in enumerate(_list_of(obj, key, what))]

        columns = []
        for i, col in enumerate(_list_of(obj, "columns", what)):
            if not isinstance(col, dict) or not isinstance(col.get("O"), str):
                raise InputError(f"{what}: columns[{i}] must be a CIStr object, got {col!r}")
            columns.append(col["O"])
        return cls(
            type=_require(obj, "type", int, what),
            expr=_typed(obj, "expr", str, what, ""),
            columns=columns,
            enable=_typed(obj, "enable", bool, what, False),
            definitions=defs("definitions"),
            adding_definitions=defs("adding_definitions"),
            dropping_definitions=defs("dropping_definitions"),
            raw=obj,
        )

    def to_json(self) -> dict:
        base = self.raw or {
            "type": None,
            "expr": None,
            "columns": None,
            "enable": None,
            "is_empty_columns": False,
            "definitions": None,
            "adding_definitions": None,
            "dropping_definitions": None,
            "NewPartitionIDs": None,
            "states": None,
            "num": 0,
            "ddl_state": 0,
            "new_table_id": 0,
            "ddl_type": 0,
            "ddl_expr": "",
            "ddl_columns": None,
            "ddl_update_indexes": None,
        }

        def defs(items: list[PartitionDefinition], key: str) -> list[dict] | None:
            return _list_json([d.to_json() for d in items], self.raw, key)

        return {
            **base,
            "type": self.type,
            "expr": self.expr,
            "columns": _list_json([_cistr_json(c) for c in self.columns], self.raw, "columns"),
            "enable": self.enable,
            "definitions": defs(self.definitions, "definitions"),
            "adding_definitions": defs(self.adding_definitions, "adding_definitions"),
            "dropping_definitions": defs(self.dropping_definitions, "dropping_definitions"),
        }


# Go field order of pkg/meta/model/table.go TableInfo, with zero values, for tables built in Python.
_TABLE_DEFAULTS: dict[str, Any] = {
    "id": None,
    "name": None,
    "charset": "",
    "collate": "",
    "cols": None,
    "index_info": None,
    "constraint_info": None,
    "fk_info": None,
    "state": None,
    "pk_is_handle": False,
    "is_common_handle": False,
    "common_handle_version": 0,
    "comment": "",
    "auto_inc_id": 0,
    "auto_id_cache": 0,
    "auto_rand_id": 0,
    "max_col_id": 0,
    "max_idx_id": 0,
    "max_fk_id": 0,
    "max_cst_id": 0,
    "update_timestamp": 0,
    "ShardRowIDBits": 0,
    "max_shard_row_id_bits": 0,
    "auto_random_bits": 0,
    "auto_random_range_bits": 0,
    "pre_split_regions": 0,
    "partition": None,
    "compression": "",
    "view": None,
    "sequence": None,
    "Lock": None,
    "version": 5,
    "tiflash_replica": None,
    "is_columnar": False,
    "temp_table_type": 0,
    "cache_table_status": 0,
    "policy_ref_info": None,
    "stats_options": None,
    "exchange_partition_info": None,
    "ttl_info": None,
    "revision": 0,
}


@dataclass
class TableInfo:
    """A table's schema as TiDB stores it under `DB:<id>/Table:<id>` and in DDL jobs (docs/encoding.md#schema-json)."""

    id: int
    name: str
    charset: str = "utf8mb4"
    collate: str = "utf8mb4_bin"
    columns: list[ColumnInfo] = field(default_factory=list)
    indices: list[IndexInfo] = field(default_factory=list)
    pk_is_handle: bool = False
    is_common_handle: bool = False
    common_handle_version: int = 0
    partition: PartitionInfo | None = None
    max_col_id: int = 0
    max_idx_id: int = 0
    state: int = STATE_PUBLIC
    comment: str = ""
    update_timestamp: int = 0
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: JSONInput) -> "TableInfo":
        what = "TableInfo"
        obj = load_json_object(obj, what)
        name = _cistr(obj, "name", what)
        what = f"TableInfo {name!r}"
        if "cols" not in obj:
            raise InputError(f"{what}: missing key 'cols' (not TiDB table JSON?)")
        partition = obj.get("partition")
        return cls(
            id=_require(obj, "id", int, what),
            name=name,
            charset=_typed(obj, "charset", str, what, ""),
            collate=_typed(obj, "collate", str, what, ""),
            columns=[ColumnInfo.from_json(c, f"{what} cols[{i}]") for i, c in enumerate(_list_of(obj, "cols", what))],
            indices=[IndexInfo.from_json(x, f"{what} index_info[{i}]") for i, x in enumerate(_list_of(obj, "index_info", what))],
            pk_is_handle=_typed(obj, "pk_is_handle", bool, what, False),
            is_common_handle=_typed(obj, "is_common_handle", bool, what, False),
            common_handle_version=_typed(obj, "common_handle_version", int, what, 0),
            partition=PartitionInfo.from_json(partition, f"{what} partition") if partition is not None else None,
            max_col_id=_typed(obj, "max_col_id", int, what, 0),
            max_idx_id=_typed(obj, "max_idx_id", int, what, 0),
            state=_typed(obj, "state", int, what, STATE_NONE),
            comment=_typed(obj, "comment", str, what, ""),
            update_timestamp=_typed(obj, "update_timestamp", int, what, 0),
            raw=obj,
        )

    def to_json(self) -> dict:
        base = self.raw or _TABLE_DEFAULTS
        return {
            **base,
            "id": self.id,
            "name": _cistr_json(self.name),
            "charset": self.charset,
            "collate": self.collate,
            "cols": _list_json([c.to_json() for c in self.columns], self.raw, "cols"),
            "index_info": _list_json([i.to_json() for i in self.indices], self.raw, "index_info"),
            "state": self.state,
            "pk_is_handle": self.pk_is_handle,
            "is_common_handle": self.is_common_handle,
            "common_handle_version": self.common_handle_version,
            "comment": self.comment,
            "max_col_id": self.max_col_id,
            "max_idx_id": self.max_idx_id,
            "update_timestamp": self.update_timestamp,
            "partition": self.partition.to_json() if self.partition is not None else None,
        }

    def handle_column(self) -> ColumnInfo | None:
        """The integer PK column whose value is the row handle (pk_is_handle), else None."""
        if not self.pk_is_handle:
            return None
        for col in self.columns:
            if col.field_type.flag & PRI_KEY_FLAG:
                return col
        return None

    def primary_index(self) -> IndexInfo | None:
        """The explicit PRIMARY KEY index (a clustered common handle's column order), if stored."""
        return next((idx for idx in self.indices if idx.primary), None)

    def column_by_id(self, column_id: int) -> ColumnInfo | None:
        return next((c for c in self.columns if c.id == column_id), None)

    def column_by_name(self, name: str) -> ColumnInfo | None:
        """Case-insensitive, as TiDB compares column names by their lowercase form."""
        lowered = name.lower()
        return next((c for c in self.columns if c.name.lower() == lowered), None)

    def public_columns(self) -> list[ColumnInfo]:
        """User-visible columns in table order: public state, not hidden."""
        visible = [c for c in self.columns if c.state == STATE_PUBLIC and not c.hidden]
        return sorted(visible, key=lambda c: c.offset)

    def physical_ids(self) -> list[int]:
        """Ids used in row keys: one per partition for an enabled partitioned table, else the table id."""
        if self.partition is not None and self.partition.enable and self.partition.definitions:
            return [d.id for d in self.partition.definitions]
        return [self.id]


@dataclass
class DBInfo:
    """A database (schema) as stored under `DB:<id>` (docs/encoding.md#schema-json DBInfo); tables are not embedded."""

    id: int
    name: str
    charset: str = "utf8mb4"
    collate: str = "utf8mb4_bin"
    state: int = STATE_PUBLIC
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: JSONInput) -> "DBInfo":
        what = "DBInfo"
        obj = load_json_object(obj, what)
        name = _cistr(obj, "db_name", what)
        what = f"DBInfo {name!r}"
        return cls(
            id=_require(obj, "id", int, what),
            name=name,
            charset=_typed(obj, "charset", str, what, ""),
            collate=_typed(obj, "collate", str, what, ""),
            state=_typed(obj, "state", int, what, STATE_NONE),
            raw=obj,
        )

    def to_json(self) -> dict:
        base = self.raw or {
            "id": None,
            "db_name": None,
            "charset": None,
            "collate": None,
            "state": None,
            "policy_ref_info": None,
            "read_only": False,
        }
        return {
            **base,
            "id": self.id,
            "db_name": _cistr_json(self.name),
            "charset": self.charset,
            "collate": self.collate,
            "state": self.state,
        }
