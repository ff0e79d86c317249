"""A table as CREATE TABLE declares it, and the TableInfo TiDB builds from it.

Keys follow TiDB's rules (pkg/ddl `buildTableInfo`, `setColumnFlagWithConstraint`): the primary
key is the row handle when it is one integer column and clustered (`pk_is_handle`), a common
handle when clustered otherwise, else an ordinary unique index over a `_tidb_rowid` table;
PRIMARY KEY columns are NOT NULL; the first column of a key gets PRI/UNIQUE/MULTIPLE_KEY flags.
A partitioned table's unique keys must hold every partitioning column (error 1503).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.schema import _TABLE_DEFAULTS, IndexColumn, IndexInfo, TableInfo
from tidelake.sim.tidb import partition as part
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.types import DEFAULT_COLLATIONS, ColumnDef, build_column

# tidb_enable_clustered_index: TiDB's default `ON` clusters every primary key; the Python front's
# tables keep the older `INT_ONLY` (only a single integer key is the handle) unless they say so.
CLUSTER_ON, CLUSTER_INT_ONLY = "ON", "INT_ONLY"
AUTO_RANDOM_DEFAULT_SHARD_BITS = 5
AUTO_RANDOM_DEFAULT_RANGE_BITS = 64


@dataclass(frozen=True)
class IndexSpec:
    """An index: `columns` are (name, prefix length or -1)."""

    name: str
    columns: tuple[tuple[str, int], ...]
    unique: bool = False
    primary: bool = False
    invisible: bool = False
    comment: str = ""


@dataclass(frozen=True)
class TableSpec:
    """Everything CREATE TABLE decides about a table besides its ids."""

    name: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[tuple[str, int], ...] = ()
    clustered: bool | None = None  # None: the session's tidb_enable_clustered_index decides
    cluster_mode: str = CLUSTER_INT_ONLY
    indexes: tuple[IndexSpec, ...] = ()
    partition: part.PartitionSpec | None = None
    charset: str = "utf8mb4"
    collate: str = "utf8mb4_bin"
    comment: str = ""
    auto_random: tuple[int, int] | None = None  # (shard bits, range bits)
    shard_row_id_bits: int = 0
    pre_split_regions: int = 0
    auto_id_cache: int = 0
    auto_increment: int = 0
    options: dict = field(default_factory=dict)

    @property
    def id_count(self) -> int:
        """Global ids the table takes: itself and one per partition."""
        return 1 + (self.partition.size if self.partition else 0)


def from_columns(name: str, columns: Sequence[ColumnDef], primary_key: Sequence[str] | None = None,
                 clustered: bool | None = None, indexes: Sequence[tuple[str, Sequence[str], bool]] = (),
                 partition: dict | None = None) -> TableSpec:
    """The Python front's short form (`create_table(db, name, columns, ...)`)."""
    pk = primary_key if primary_key else [c.name for c in columns if c.primary_key]
    return TableSpec(
        name=name, columns=tuple(columns), primary_key=tuple((c, -1) for c in pk), clustered=clustered,
        indexes=tuple(IndexSpec(n, tuple((c, -1) for c in cols), unique=u) for n, cols, u in indexes),
        partition=part.spec_from_dict(partition) if partition else None)


def build_table_info(spec: TableSpec, table_id: int, partition_ids: Sequence[int] = ()) -> TableInfo:
    """The TableInfo of a new table (state public) with its ids."""
    defs = list(spec.columns)
    if not defs:
        raise er.sql_error(er.TABLE_MUST_HAVE_COLUMNS, "A table must have at least 1 column")
    names = [d.name.lower() for d in defs]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise er.sql_error(er.DUP_FIELDNAME, f"Duplicate column name '{defs[i].name}'")
    pk_names = [c.lower() for c, _ in spec.primary_key]
    for column in pk_names:
        if column not in names:
            raise er.sql_error(er.KEY_COLUMN_MISSING, f"Key column '{column}' doesn't exist in table")
    defs = [_with_table_charset(replace(d, primary_key=d.name.lower() in pk_names), spec) for d in defs]
    columns = [build_column(d, i + 1, i) for i, d in enumerate(defs)]
    info = TableInfo(id=table_id, name=spec.name, columns=columns, max_col_id=len(columns),
                     charset=spec.charset, collate=spec.collate, comment=spec.comment)
    info.raw = {**_TABLE_DEFAULTS, "auto_id_cache": spec.auto_id_cache, "ShardRowIDBits": spec.shard_row_id_bits,
                "max_shard_row_id_bits": spec.shard_row_id_bits, "pre_split_regions": spec.pre_split_regions,
                "auto_inc_id": spec.auto_increment}
    by_name = {c.name.lower(): c for c in columns}
    pk_cols = [by_name[n] for n in pk_names]
    if pk_cols:
        _set_primary_key(info, spec, pk_cols)
    for index in spec.indexes:
        add_index_info(info, index)
    _flag_key_columns(info)
    if spec.auto_random is not None:
        _set_auto_random(info, spec.auto_random)
    if spec.partition is not None:
        info.partition = part.build_partition(spec.partition, partition_ids)
        check_partitioning(info)
    return info


def _with_table_charset(defn: ColumnDef, spec: TableSpec) -> ColumnDef:
    if defn.charset is None and defn.collate is None and (spec.charset, spec.collate) != ("utf8mb4", "utf8mb4_bin"):
        return replace(defn, charset=spec.charset, collate=spec.collate)
    return defn


def _set_primary_key(info: TableInfo, spec: TableSpec, pk_cols: list[Any]) -> None:
    for col in pk_cols:
        col.field_type.flag |= mt.PRI_KEY_FLAG | mt.NOT_NULL_FLAG
        col.field_type.flag &= ~mt.NO_DEFAULT_VALUE_FLAG if col.default is not None else ~0
    lengths = dict((c.lower(), n) for c, n in spec.primary_key)
    single_int = len(pk_cols) == 1 and pk_cols[0].field_type.tp in mt.INTEGER_TYPES
    clustered = spec.clustered
    if clustered is None:
        clustered = spec.cluster_mode == CLUSTER_ON or single_int
    if clustered and single_int:
        info.pk_is_handle = True
        return
    if clustered:
        for col in pk_cols:  # the handle holds the collation's sort key, which the codec has only for _bin
            collate = col.field_type.collate or ""
            if col.field_type.tp in mt.STRING_TYPES and not mt.is_binary_string(col.field_type) and \
                    not collate.endswith("_bin"):
                raise er.not_supported(f"a clustered primary key on a {collate} column (the simulator encodes "
                                       f"keys for binary and _bin collations only; NONCLUSTERED works)")
        info.is_common_handle, info.common_handle_version = True, 1
    info.indices.append(IndexInfo(id=len(info.indices) + 1, name="PRIMARY", unique=True, primary=True,
                                  columns=[IndexColumn(c.name, c.offset, lengths.get(c.name.lower(), -1))
                                           for c in pk_cols]))
    info.max_idx_id = len(info.indices)


def add_index_info(info: TableInfo, index: IndexSpec) -> IndexInfo:
    """Append an IndexInfo (ids continue from max_idx_id); the caller checks name clashes."""
    columns = []
    for name, length in index.columns:
        col = info.column_by_name(name)
        if col is None:
            raise er.sql_error(er.KEY_COLUMN_MISSING, f"Key column '{name}' doesn't exist in table")
        columns.append(IndexColumn(col.name, col.offset, length))
    if any(i.name.lower() == index.name.lower() for i in info.indices):
        raise er.sql_error(er.DUP_KEYNAME, f"Duplicate key name '{index.name}'")
    created = IndexInfo(id=info.max_idx_id + 1, name=index.name, columns=columns, unique=index.unique or index.primary,
                        primary=index.primary, invisible=index.invisible, comment=index.comment)
    info.indices.append(created)
    info.max_idx_id = created.id
    return created


def index_name(info: TableInfo, columns: Sequence[str]) -> str:
    """The name TiDB gives an unnamed index: its first column, then `_2`, `_3`... (`getAnonymousIndexPrefix`)."""
    base = columns[0]
    taken = {i.name.lower() for i in info.indices}
    if base.lower() not in taken:
        return base
    n = 2
    while f"{base}_{n}".lower() in taken:
        n += 1
    return f"{base}_{n}"


def _flag_key_columns(info: TableInfo) -> None:
    """`setColumnFlagWithConstraint`: the first column of each index shows what kind of key it leads."""
    for index in info.indices:
        if index.primary:
            continue
        first = info.column_by_name(index.columns[0].name)
        if index.unique and len(index.columns) == 1:
            first.field_type.flag |= mt.UNIQUE_KEY_FLAG
        else:
            first.field_type.flag |= mt.MULTIPLE_KEY_FLAG


def _set_auto_random(info: TableInfo, bits: tuple[int, int]) -> None:
    """AUTO_RANDOM needs a clustered BIGINT primary key (pkg/ddl `checkAutoRandom`)."""
    handle = info.handle_column()
    if handle is None or handle.field_type.tp != mt.TYPE_LONGLONG:
        raise er.sql_error(er.INVALID_AUTO_RANDOM, "Invalid auto random: auto_random is only allowed on a "
                                                   "clustered bigint primary key")
    shard, range_bits = bits
    if not 1 <= shard <= 15 or not 32 <= range_bits <= 64:
        raise er.sql_error(er.INVALID_AUTO_RANDOM, f"Invalid auto random: shard bits {shard} must be 1..15 "
                                                   f"and range bits {range_bits} 32..64")
    info.raw = {**info.raw, "auto_random_bits": shard, "auto_random_range_bits": range_bits}


def check_partitioning(info: TableInfo) -> None:
    """Every unique key (primary included) holds all partitioning columns (pkg/ddl `checkPartitioningKeysConstraints`)."""
    columns = {c.lower() for c in part.partition_columns(info)}
    for name in columns:
        if info.column_by_name(name) is None:
            raise er.sql_error(er.BAD_FIELD, f"Unknown column '{name}' in 'partition function'")
    keys = [idx for idx in info.indices if idx.unique]
    handle = info.handle_column()
    key_sets = [{c.name.lower() for c in idx.columns} for idx in keys] + ([{handle.name.lower()}] if handle else [])
    for key, names in zip([*keys, handle] if handle else keys, key_sets):
        if not columns <= names:
            kind = "PRIMARY KEY" if (handle is not None and key is handle) or getattr(key, "primary", False) \
                else "UNIQUE INDEX"
            raise er.sql_error(er.UNIQUE_KEY_NEEDS_ALL_FIELDS_IN_PF,
                               f"A {kind} must include all columns in the table's partitioning function")


def renumber(info: TableInfo) -> TableInfo:
    """Offsets are positions in `cols`; index columns point at them (docs/encoding.md#schema-json)."""
    columns = [replace(c, offset=i) for i, c in enumerate(info.columns)]
    by_name = {c.name.lower(): c.offset for c in columns}
    indices = [replace(idx, columns=[replace(ic, offset=by_name[ic.name.lower()]) for ic in idx.columns])
               for idx in info.indices]
    return replace(info, columns=columns, indices=indices)


def default_collation(charset: str) -> str:
    return DEFAULT_COLLATIONS.get(charset.lower(), f"{charset.lower()}_bin")
