"""Apply one DDL to a replica at its barrier (docs/design.md invariant 4).

The replica converges to the state the job left upstream (columns matched by TiDB id, then by
name), each step doing only what is missing, so a rerun converges; the LAST commit records the
DDL's ts. A change ALTER TABLE could only make with a reader feature the replica lacks is one
rewrite instead. Unsupported DDL stops that table only. Owner: TableMerge.

More: docs/internals.md#ddl_apply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deltalake import DeltaTable
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructField, StructType

from tidelake.codec.column_default import origin_default
from tidelake.codec.ddl_job import REPARTITIONS, ActionType
from tidelake.codec.schema import ColumnInfo, TableInfo
from tidelake.codec.spark_types import spark_value
from tidelake.errors import InputError, TidelakeError
from tidelake.failpoints import failpoint
from tidelake.lake.checkpoint import read_checkpoint, rewrite_metadata
from tidelake.lake.history_table import history_checkpoint
from tidelake.lake.layout import FILTER_LEFT_BECAUSE, DdlSource, LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog, ReplicaEntry, ReplicaState
from tidelake.lake.schema_history import DdlEvent, TableKey
from tidelake.merge.decimal_stats import STATS_COLUMNS, listed_columns
from tidelake.merge.replica_schema import (
    COLUMN_MAPPING,
    DELETED_COLUMN,
    HIDDEN_COLUMNS,
    PARTITION_ID_COLUMN,
    TYPE_WIDENING,
    create_replica,
    enable_schema_features,
    is_partitioned,
    key_columns,
    quote,
    read_replica_struct,
    replica_struct,
    spark_sql_string,
    stored_columns,
)
from tidelake.merge.scd2_history import (
    CURRENT_COLUMN,
    VALID_FROM_COLUMN,
    VALID_TO_COLUMN,
    VERSION_COLUMNS,
    close_versions,
)
from tidelake.merge.soft_deletes import has_soft_deletes, live_condition
from tidelake.merge.txn_confs import fenced, writer_txn_options
from tidelake.merge.type_change import can_widen
from tidelake.merge.window_spec import SCHEMA_DIFF_ACTIONS, Removal
from tidelake.merge.writers.spark_writer import remove_rows
from tidelake.spark.temp_view import source_view

DDL_FAILPOINTS = ("ddl_apply.before_commit", "ddl_apply.after_rewrite")


class UnsupportedDDL(TidelakeError):
    """A DDL the replica cannot follow; the merge loop records it and stops only this table."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NeedsBootstrap(TidelakeError):
    """The table entered the feed holding rows (start snapshot, RENAME into the filter...): an
    empty replica would silently miss them, so its replica comes from a bootstrap instead."""


# First events after which the table is really empty upstream (or the replica already exists).
_EMPTY_STARTS = frozenset({ActionType.CREATE_TABLE, ActionType.CREATE_TABLES, ActionType.TRUNCATE_TABLE,
                           ActionType.RECOVER_TABLE})


class BarrierError(TidelakeError):
    """apply_ddl called while the replica's checkpoint is not at the DDL's barrier."""


class PartnerBehind(TidelakeError):
    """EXCHANGE PARTITION waits until the other table's replica reaches the barrier (later in the
    run, once the other table moved: tidelake.merge.merge_run; else a later run)."""


@dataclass(frozen=True)
class ExchangePartner:
    """The other replica of an EXCHANGE PARTITION as of the barrier: its Delta version whose
    checkpoint is the DDL's barrier, immutable, so either replica may apply the DDL first."""

    path: str
    version: int


_RENAMES = frozenset({ActionType.RENAME_TABLE, ActionType.RENAME_TABLES})
_PARTITION_ACTIONS = frozenset({
    ActionType.ADD_TABLE_PARTITION, ActionType.DROP_TABLE_PARTITION, ActionType.TRUNCATE_TABLE_PARTITION,
})


def apply_ddl(
    spark: SparkSession, layout: LakeLayout, table: TableKey, event: DdlEvent, catalog: ReplicaCatalog | None = None,
    finish: Callable[[str, Removal | None], None] | None = None, history: str | None = None,
    partner: ExchangePartner | None = None,
) -> None:
    """Apply `event` to the replica of `table`; afterwards read_checkpoint(replica) == event.commit_ts.

    `finish(path, removal)` makes the last commit, the one that records checkpoint event.commit_ts;
    the merge passes one that also writes the rows committed at exactly that ts (docs/design.md
    invariant 4) and removes the rows `removal` names in the same commit, and first the history
    table's commit at that ts. Without it the rows are removed, then an empty append records the
    checkpoint. `history` is the path of the replica's history table, whose steps are taken here
    too. `partner` is the other table's replica of an EXCHANGE PARTITION."""
    catalog = catalog or ReplicaCatalog(layout)
    if event.creates_table:
        _create(spark, catalog, table, event)
        return
    entry = catalog.get(table)
    if entry is None:
        raise InputError(f"table {table} ({event.db}.{event.name}) has no replica for DDL job {event.job_id}")
    checkpoint = read_checkpoint(entry.path, layout.storage_options)
    if checkpoint is not None and checkpoint >= event.commit_ts:
        _sync_catalog(catalog, entry, event)  # a crash may have come between the marker and this
        return
    if checkpoint is None or checkpoint < event.barrier:
        raise BarrierError(
            f"replica of {event.db}.{event.name} is at checkpoint {checkpoint}, DDL job {event.job_id} "
            f"({event.action_name}) needs {event.barrier}"
        )
    replica = _Replica(spark, entry.path, layout.storage_options)
    targets = [replica]
    if history is not None and (history_checkpoint(history, layout.storage_options) or -1) < event.commit_ts:
        targets.append(_Replica(spark, history, layout.storage_options, is_history=True))
    removal: Removal | None = None
    if not event.drops_table and event.table_info_after is not None:
        for target in targets:
            _release_stats_columns(target, event.table_info_before, event.table_info_after)
    if event.drops_table:
        pass  # the replica (and its history) keeps its rows as of the drop; the catalog marks it dropped
    elif event.action == ActionType.TRUNCATE_TABLE or event.action in _PARTITION_ACTIONS:
        _check_same_columns(event)
        removal = _physical_ids_removal(event)
    elif event.action == ActionType.EXCHANGE_TABLE_PARTITION:
        _check_same_columns(event)
        if partner is None:  # the other table is not replicated: the received rows arrive with the last commit
            removal = _exchange_removal(event)
        else:
            for target in targets:
                _exchange_rows(target, event, partner)
    elif event.action in REPARTITIONS:
        # A history table closes the replaced rows' versions and opens their copies' at the DDL's
        # ts, like any removal and put, after taking `_tidb_partition_id` as the replica does.
        removal = _repartition(replica, event)
        for target in targets[1:]:
            _repartition(target, event)
    elif event.action == ActionType.REMOVE_PARTITIONING:
        for target in targets:  # a history's versions of one handle in two partitions never overlap
            _collapse_partitions(target, event)
    elif event.action in _RENAMES or event.action in SCHEMA_DIFF_ACTIONS:
        for target in targets:
            _converge_schema(target, event)
        if event.copied_physical_ids:
            removal = Removal(event.commit_ts)  # TiDB's copies of every row arrive with the last commit
    else:
        raise UnsupportedDDL(f"{event.action_name} (action {event.action}) of {event.db}.{event.name} "
                             f"at {event.commit_ts}: {event.query or 'no query'}")
    if removal is not None:
        for target in targets[1:]:  # the history table closes the versions before its own last commit
            target.remove(removal)
    _sync_catalog(catalog, entry, event)
    failpoint("ddl_apply.before_commit", entry.path)
    if finish is not None:
        finish(entry.path, removal)
        return
    if removal is not None:
        replica.remove(removal)
    record_checkpoint(spark, entry.path, event.commit_ts, layout.storage_options)


def record_checkpoint(
    spark: SparkSession, path: str, ts: int, storage_options: dict[str, str] | None = None
) -> None:
    """An empty append whose commit records checkpoint `ts` (skipped by Delta if already recorded).
    It takes the replica's own current schema, so it fits whatever state the replica is in."""
    schema = StructType([StructField(f.name, f.dataType, True) for f in read_replica_struct(path, storage_options).fields])
    writer = spark.createDataFrame([], schema).write.format("delta").mode("append")
    for key, value in writer_txn_options(ts).items():
        writer = writer.option(key, value)
    writer.save(path)


def _create(spark: SparkSession, catalog: ReplicaCatalog, table: TableKey, event: DdlEvent) -> None:
    if event.source == DdlSource.SNAPSHOT or event.action not in _EMPTY_STARTS:
        raise NeedsBootstrap(f"{event.db}.{event.name} joined at {event.commit_ts} ({event.action_name}) with "
                             f"its existing rows: bootstrap its replica (tidelake bootstrap)")
    entry = catalog.assign(table, event.db, event.name, event.commit_ts)
    failpoint("ddl_apply.before_commit", entry.path)
    if entry.state == ReplicaState.DROPPED and event.action == ActionType.RECOVER_TABLE:
        # RECOVER/FLASHBACK TABLE restores the rows the table had at its drop, which the replica kept.
        _converge_schema(_Replica(spark, entry.path, catalog.layout.storage_options), event)
        catalog.mark_active(table, event.commit_ts)
        record_checkpoint(spark, entry.path, event.commit_ts, catalog.layout.storage_options)
        return
    create_replica(spark, entry.path, event.table_info_after, event.commit_ts, catalog.layout.storage_options)


def _sync_catalog(catalog: ReplicaCatalog, entry: ReplicaEntry, event: DdlEvent) -> None:
    if event.drops_table:
        left = f"left the changefeed at {event.commit_ts}: {FILTER_LEFT_BECAUSE}"
        catalog.mark_dropped(entry.table_key, event.commit_ts, left if event.source == DdlSource.FILTER else None)
    elif (entry.db, entry.name) != (event.db, event.name):
        catalog.rename(entry.table_key, event.db, event.name, event.commit_ts)


def _release_stats_columns(replica: _Replica, before: TableInfo | None, after: TableInfo) -> None:
    """Delta refuses a rewrite or ALTER that drops or renames a column `delta.dataSkippingStatsColumns`
    names (DELTA_COLUMN_NOT_FOUND_IN_SCHEMA): the property goes first when a listed column is not
    in the schema after the DDL. Spark collects every column's statistics right meanwhile, and
    delta-rs does not write the replica without it (tidelake.merge.decimal_stats); TableMerge
    sets it again after the DDL, on its history table too. A DDL that keeps every column does not
    open the replica's log."""
    kept = {name.lower() for name in replica_struct(after).fieldNames()}
    if before is not None and {name.lower() for name in replica_struct(before).fieldNames()} <= kept:
        return
    if replica.is_history:  # its version columns stay (scd2_history.history_struct)
        kept |= set(VERSION_COLUMNS)
    listed = listed_columns(DeltaTable(replica.path, storage_options=replica.storage_options).metadata().configuration)
    if listed and not listed <= kept:
        replica.alter(f"UNSET TBLPROPERTIES ({spark_sql_string(STATS_COLUMNS)})")


# --- data-removing DDLs ------------------------------------------------------------------


def _check_same_columns(event: DdlEvent) -> None:
    before, after = event.table_info_before, event.table_info_after
    if [c.id for c in stored_columns(before)] != [c.id for c in stored_columns(after)]:
        raise UnsupportedDDL(f"{event.action_name} of {event.db}.{event.name} also changed columns")
    if key_columns(before) != key_columns(after):
        raise UnsupportedDDL(f"{event.action_name} of {event.db}.{event.name} changed the row key")


def _physical_ids_removal(event: DdlEvent) -> Removal | None:
    """TRUNCATE TABLE removes every row; DROP/TRUNCATE PARTITION exactly those partitions' rows;
    ADD PARTITION (new physical ids only) none."""
    removed = event.removed_physical_ids
    if not removed:
        return None
    if set(removed) == set(event.physical_ids_before):
        return Removal(event.commit_ts)
    if not is_partitioned(event.table_info_before):
        raise UnsupportedDDL(f"{event.action_name} of {event.db}.{event.name} removes part of a non-partitioned table")
    return Removal(event.commit_ts, tuple(int(pid) for pid in removed))


def _exchange_removal(event: DdlEvent) -> Removal:
    """The rows an EXCHANGE PARTITION removes: those of the id this table gave away (and of the id
    it received, none until then). With a table the changefeed does not replicate they leave in the
    DDL's last commit, which writes the received id's rows as the puller read them at the DDL's ts
    (tidelake.capture.changefeed.copied_rows); a rerun removes and writes the same rows."""
    gave, received = event.removed_physical_ids, event.copied_physical_ids
    if len(gave) != 1 or len(received) != 1:
        raise UnsupportedDDL(f"{event.action_name} of {event.db}.{event.name} changed physical ids "
                             f"{gave} -> {received}, not one for one")
    if not is_partitioned(event.table_info_after):
        return Removal(event.commit_ts)
    return Removal(event.commit_ts, tuple(int(pid) for pid in (*gave, *received)))


def _exchange_rows(replica: _Replica, event: DdlEvent, partner: ExchangePartner) -> None:
    """EXCHANGE PARTITION inside the lake, as no row event says rows changed table
    (docs/sql-front.md#what-the-replica-side-does). The rows of the physical id this table gave
    away leave it; the rows of the id it received
    come from the partner's replica as of the barrier, re-keyed by `_tidb_partition_id` (the
    received id). Each replica does this on its own from the partner's immutable version, so a
    crash between the two replicas' commits loses and duplicates nothing: the removal is repeated
    and the rows are MERGEd by key, so a rerun converges to the same rows. A history table closes
    the given rows' versions and takes each received row as a version from the DDL's ts, MERGEd by
    key and that ts."""
    replica.remove(_exchange_removal(event))
    (received,) = event.copied_physical_ids
    spark = replica.spark
    source = spark.read.format("delta").option("versionAsOf", partner.version).load(partner.path)
    names = {f.name.lower(): f.name for f in source.schema.fields}
    if has_soft_deletes(source.schema):
        source = source.where(live_condition())
    if PARTITION_ID_COLUMN in names:
        source = source.where(F.col(PARTITION_ID_COLUMN) == F.lit(int(received)))
    columns = []
    versions = {VALID_FROM_COLUMN: F.lit(event.commit_ts), VALID_TO_COLUMN: F.lit(None), CURRENT_COLUMN: F.lit(True)}
    for field in replica.schema().fields:
        if field.name == PARTITION_ID_COLUMN:
            value = F.lit(int(received))
        elif field.name == DELETED_COLUMN:
            value = F.lit(False)
        elif replica.is_history and field.name in versions:
            value = versions[field.name]
        elif field.name.lower() in names:
            value = F.col(quote(names[field.name.lower()]))
        else:
            raise UnsupportedDDL(f"{event.action_name} of {event.db}.{event.name}: the other table's replica "
                                 f"{partner.path} has no column {field.name!r}")
        columns.append(value.cast(field.dataType).alias(field.name))
    keys = [*key_columns(event.table_info_after), *([VALID_FROM_COLUMN] if replica.is_history else [])]
    on = " AND ".join(f"t.{quote(k)} <=> s.{quote(k)}" for k in keys)
    with source_view(source.select(*columns)) as view:
        spark.sql(f"MERGE INTO delta.{quote(replica.path)} t USING {view} s ON {on} "
                  f"WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *").collect()


def _repartition(replica: _Replica, event: DdlEvent) -> Removal | None:
    """REORGANIZE PARTITION / PARTITION BY: the rows of the replaced ids (the removal returned)
    leave the replica in the DDL's last commit, in which the copies TiDB made under the new ids
    arrive, as the puller landed them at its ts (docs/sql-front.md#what-the-replica-side-does). A
    table partitioned for the first time gets `_tidb_partition_id` first (NULL in every row, all
    of which leave). Each step is a no-op when run again."""
    before, after = event.table_info_before, event.table_info_after
    handle = [k for k in key_columns(before) if k != PARTITION_ID_COLUMN]
    if [c.id for c in stored_columns(before)] != [c.id for c in stored_columns(after)] or (
            [k for k in key_columns(after) if k != PARTITION_ID_COLUMN] != handle):
        raise UnsupportedDDL(f"{event.action_name} of {event.db}.{event.name} also changed columns or the handle")
    removal = _physical_ids_removal(event)
    schema = replica.schema()
    if is_partitioned(after) and not _has(schema, PARTITION_ID_COLUMN):
        target = replica_struct(after)
        field = target[PARTITION_ID_COLUMN]
        if replica.is_history:  # its row columns end before the version columns (scd2_history.history_struct)
            previous = schema.fieldNames()[schema.fieldNames().index(VALID_FROM_COLUMN) - 1]
        else:
            previous = target.fieldNames()[target.fieldNames().index(PARTITION_ID_COLUMN) - 1]
        replica.alter(f"ADD COLUMNS ({quote(PARTITION_ID_COLUMN)} {field.dataType.simpleString()} "
                      f"COMMENT {spark_sql_string(field.metadata.get('comment', ''))} AFTER {quote(previous)})")
    return removal


def _collapse_partitions(replica: _Replica, event: DdlEvent) -> None:
    """REMOVE PARTITIONING: TiDB copies every row into the table's new physical id under the same
    handle, so the replica keeps its rows and only `_tidb_partition_id` leaves them and the key:
    one marked overwrite, as _rewrite_replica; a rerun finds the column gone."""
    before, after = event.table_info_before, event.table_info_after
    if [c.id for c in stored_columns(before)] != [c.id for c in stored_columns(after)] or (
            key_columns(after) != [k for k in key_columns(before) if k != PARTITION_ID_COLUMN]):
        raise UnsupportedDDL(f"{event.action_name} of {event.db}.{event.name} also changed columns or the handle")
    if not _has(replica.schema(), PARTITION_ID_COLUMN):
        return
    rows = replica.spark.read.format("delta").load(replica.path).drop(PARTITION_ID_COLUMN)
    (rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
     .option("userMetadata", fenced(rewrite_metadata(event.commit_ts))).save(replica.path))
    failpoint("ddl_apply.after_rewrite", replica.path)


# --- schema convergence ------------------------------------------------------------------


def _match_columns(before: TableInfo, after: TableInfo) -> list[tuple[ColumnInfo | None, ColumnInfo | None]]:
    """Pairs (before, after) by column id, then unmatched ones by name (a reorganising MODIFY COLUMN
    gives the column a new id); (x, None) is a dropped column, (None, y) an added one."""
    old = {c.id: c for c in stored_columns(before)}
    new = {c.id: c for c in stored_columns(after)}
    pairs: list[tuple[ColumnInfo | None, ColumnInfo | None]] = [(old[i], new[i]) for i in new if i in old]
    lost = {c.name.lower(): c for i, c in old.items() if i not in new}
    for i, col in new.items():
        if i not in old:
            pairs.append((lost.pop(col.name.lower(), None), col))
    pairs += [(c, None) for c in lost.values()]
    return pairs


def _converge_schema(replica: _Replica, event: DdlEvent) -> None:
    before, after = event.table_info_before, event.table_info_after
    if key_columns(before) != key_columns(after):
        raise UnsupportedDDL(
            f"{event.action_name} of {event.db}.{event.name} changed the row key "
            f"({key_columns(before)} -> {key_columns(after)}); re-bootstrap the table"
        )
    target = replica_struct(after)
    enable_schema_features(replica.spark, replica.path, target, replica.storage_options)
    pairs = _match_columns(before, after)
    features = _features_of(replica)
    widen = TYPE_WIDENING.keys() <= features
    overwritten = _overwritten(replica, event)
    if not _features_needed(replica, pairs, target, widen) <= features:
        _rewrite_replica(replica, pairs, target, event.commit_ts, overwritten)
        return
    for old, new in pairs:
        if new is None:
            _drop_column(replica, old.name)
    for old, new in pairs:
        if old is not None and new is not None:
            _rename_column(replica, old.name, new.name)
            _change_type(replica, event, new, target[new.name].dataType, widen, overwritten)
    _add_columns(replica, after, [new for old, new in pairs if old is None], target)


def _overwritten(replica: _Replica, event: DdlEvent) -> str | None:
    """SQL: the rows a reorganising MODIFY COLUMN's copies replace (every row live at the barrier,
    removed in the DDL's last commit, which writes TiDB's converted rows:
    docs/sql-front.md#what-the-replica-side-does), whose cast therefore cannot fail the DDL; None
    without copies, or for a history table, whose versions before the DDL keep the cast."""
    if not event.copied_physical_ids or replica.is_history:
        return None
    return live_condition() if has_soft_deletes(replica.schema()) else "true"


def _cast_sql(column: str, target: DataType, overwritten: str | None) -> str:
    """Spark's ANSI CAST (a value that does not convert fails), TRY_CAST (NULL) for the rows
    `overwritten` (see _overwritten): TiDB's own converted rows replace those at the DDL's ts."""
    cast = f"CAST({column} AS {target.simpleString()})"
    if overwritten is None:
        return cast
    return f"CASE WHEN {overwritten} THEN TRY_{cast} ELSE {cast} END"


def _features_of(replica: _Replica) -> set[str]:
    """The reader-feature properties (COLUMN_MAPPING, TYPE_WIDENING) the replica has on."""
    current = DeltaTable(replica.path, storage_options=replica.storage_options).metadata().configuration
    return {k for k, v in {**COLUMN_MAPPING, **TYPE_WIDENING}.items() if current.get(k) == v}


def _features_needed(replica: _Replica, pairs: list[tuple[ColumnInfo | None, ColumnInfo | None]],
                     target: StructType, widen: bool) -> set[str]:
    """The reader-feature properties that converging in place (ALTER TABLE) needs; a type change
    is widened in place only on a replica that has type widening already (`widen`)."""
    current = replica.schema()
    needed: set[str] = set()
    for old, new in pairs:
        if new is None:
            if _has(current, old.name):
                needed |= COLUMN_MAPPING.keys()  # DROP COLUMN
        elif old is not None:
            if old.name != new.name and _has(current, old.name) and not (
                    _has(current, new.name) and old.name.lower() != new.name.lower()):
                needed |= COLUMN_MAPPING.keys()  # RENAME COLUMN
            tp = _field_type(current, new.name if _has(current, new.name) else old.name)
            if tp != target[new.name].dataType:
                in_place = widen and can_widen(tp, target[new.name].dataType)
                needed |= (TYPE_WIDENING if in_place else COLUMN_MAPPING).keys()
    return needed


def _rewrite_replica(replica: _Replica, pairs: list[tuple[ColumnInfo | None, ColumnInfo | None]],
                     target: StructType, ddl_ts: int, overwritten: str | None) -> None:
    """Converge by rewriting the replica in ONE overwrite commit instead of enabling a reader feature,
    so deltalake, Polars and other readers without column mapping or type widening keep reading it
    (docs/operations.md#who-can-read-a-replica). Columns are renamed, cast (_cast_sql: a value that does not
    convert fails the DDL) and dropped in the rewrite, and added ones take their origin default.
    The overwrite is atomic, so a rerun after a crash finds either the old schema (and rewrites)
    or the target one (and has nothing left to do); it costs a read and a write of every row. Its
    commit is marked (rewrite_metadata): its change data feed, a delete and an insert of every
    row, is a schema change, not upstream row changes."""
    current = replica.schema()
    source = {new.name: old for old, new in pairs if new is not None}
    added = {new.name: new for old, new in pairs if old is None and new is not None}
    # Hidden columns the table lacks stay out (a history table has no _tidb_commit_ts), and columns
    # that are not upstream's stay as they are, last (_tidb_deleted, a history table's versions).
    upstream_before = {old.name.lower() for old, _ in pairs if old is not None}
    fields = [f for f in target.fields if f.name not in HIDDEN_COLUMNS or _has(current, f.name)]
    fields += [f for f in current.fields if f.name.lower() not in upstream_before and not _has(target, f.name)]
    columns, casts = [], False
    for field in fields:
        old = source.get(field.name)
        if field.name in added:
            col = added[field.name]
            value = F.lit(spark_value(origin_default(col), col.field_type)).cast(field.dataType)
        else:
            name = old.name if old is not None and _has(current, old.name) else field.name
            value = F.col(quote(name))
            if _field_type(current, name) != field.dataType:
                value, casts = F.expr(_cast_sql(quote(name), field.dataType, overwritten)), True
        columns.append(value.alias(field.name, metadata=field.metadata))
    rows = replica.spark.read.format("delta").load(replica.path).select(*columns)
    try:
        (rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
         .option("userMetadata", fenced(rewrite_metadata(ddl_ts))).save(replica.path))
    except PySparkException as exc:
        if not casts:
            raise
        raise UnsupportedDDL(f"rewriting {replica.path} with its columns cast to the new types failed: {exc}") from exc
    failpoint("ddl_apply.after_rewrite", replica.path)


def _has(spark_schema: StructType, name: str) -> bool:
    return name.lower() in {f.name.lower() for f in spark_schema.fields}


def _field_type(spark_schema: StructType, name: str) -> DataType:
    return next(f.dataType for f in spark_schema.fields if f.name.lower() == name.lower())


@dataclass(frozen=True)
class _Replica:
    """A replica, or its history table: both follow the same schema steps."""

    spark: SparkSession
    path: str
    storage_options: dict[str, str] | None
    is_history: bool = False

    def schema(self) -> StructType:
        return read_replica_struct(self.path, self.storage_options)

    def alter(self, clause: str) -> None:
        self.spark.sql(f"ALTER TABLE delta.{quote(self.path)} {clause}")

    # Delta SQL DML, not delta.tables.DeltaTable, which Spark Connect lacks (tidelake.merge.writers.spark_writer).
    def remove(self, removal: Removal) -> None:
        """The rows `removal` names, gone upstream at its ts, in a commit of their own (a DDL's
        last commit removes them itself): the removal clause of the window semantics
        (tidelake.merge.window_spec.removal_clause), or their current versions closed in a
        history table. Each is a no-op when run again."""
        if self.is_history:
            close_versions(self.spark, self.path, removal.ts, removal.condition())
            return
        remove_rows(self.spark, self.path, self.schema(), removal)

    def set_column(self, name: str, expression: str) -> None:
        """Every row's `name` = the SQL `expression` over the row."""
        self.spark.sql(f"UPDATE delta.{quote(self.path)} SET {quote(name)} = {expression}").collect()

    def fill_columns(self, values: dict[str, tuple[Any, DataType]]) -> None:
        """Every row's column `name` = `value` (a Python value of Spark type `tp`) for each
        `name: (value, tp)`: a one-row MERGE, since UPDATE takes no parameters and a literal of
        every type is not worth spelling as SQL."""
        names = list(values)
        one = self.spark.createDataFrame([tuple(values[n][0] for n in names)],
                                         StructType([StructField(f"v{i}", values[n][1], True) for i, n in enumerate(names)]))
        sets = ", ".join(f"t.{quote(n)} = s.v{i}" for i, n in enumerate(names))
        with source_view(one) as view:
            self.spark.sql(f"MERGE INTO delta.{quote(self.path)} t USING {view} s ON true "
                           f"WHEN MATCHED THEN UPDATE SET {sets}").collect()


def _drop_column(replica: _Replica, name: str) -> None:
    if _has(replica.schema(), name):
        replica.alter(f"DROP COLUMN {quote(name)}")


def _rename_column(replica: _Replica, old: str, new: str) -> None:
    current = replica.schema()
    if old != new and _has(current, old) and not (_has(current, new) and old.lower() != new.lower()):
        replica.alter(f"RENAME COLUMN {quote(old)} TO {quote(new)}")


def _add_columns(replica: _Replica, after: TableInfo, cols: list[ColumnInfo], target: StructType) -> None:
    """ADD COLUMNS at their upstream positions in one ALTER, then existing rows get each column's
    origin default (what TiDB returns for rows written before the column existed; docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns) in one MERGE. Every replica row predates the columns (checkpoint == barrier), so all of them
    take the defaults; a rerun after a crash adds what is missing and sets the same values again."""
    current = replica.schema()
    order = [c.name for c in stored_columns(after)]
    clauses = []
    for col in cols:
        if _has(current, col.name):
            continue
        position = order.index(col.name)
        where = "FIRST" if position == 0 else f"AFTER {quote(order[position - 1])}"
        comment = f" COMMENT {spark_sql_string(col.comment)}" if col.comment else ""
        clauses.append(f"{quote(col.name)} {target[col.name].dataType.simpleString()}{comment} {where}")
    if clauses:
        replica.alter(f"ADD COLUMNS ({', '.join(clauses)})")
    defaults = {col.name: (spark_value(origin_default(col), col.field_type), target[col.name].dataType) for col in cols}
    defaults = {name: pair for name, pair in defaults.items() if pair[0] is not None}
    if defaults:
        replica.fill_columns(defaults)


def _change_type(replica: _Replica, event: DdlEvent, col: ColumnInfo, target: DataType, widen: bool,
                 overwritten: str | None) -> None:
    """Delta type widening where Delta allows it and the replica has it (`widen`; metadata only);
    else rewrite the column with CAST into a new column (column mapping renames it into place)."""
    name = col.name
    current_schema = replica.schema()
    tmp = f"__tidelake_retype_{event.commit_ts}_{col.id}"
    if _has(current_schema, tmp):
        _finish_retype(replica, name, tmp, target, overwritten)
        return
    current = _field_type(current_schema, name)
    if current == target:
        return
    if widen and can_widen(current, target):
        replica.alter(f"ALTER COLUMN {quote(name)} TYPE {target.simpleString()}")
        return
    replica.alter(f"ADD COLUMNS ({quote(tmp)} {target.simpleString()} AFTER {quote(name)})")
    _finish_retype(replica, name, tmp, target, overwritten)


def _finish_retype(replica: _Replica, name: str, tmp: str, target: DataType, overwritten: str | None) -> None:
    """Resume-safe tail of a retype: fill tmp from the old column (if it still exists), drop the
    old column, rename tmp into place. The cast is _cast_sql's: a value that does not convert
    fails the DDL instead of silently becoming NULL, unless TiDB's copies overwrite it."""
    if _has(replica.schema(), name):
        try:
            replica.set_column(tmp, _cast_sql(quote(name), target, overwritten))
        except PySparkException as exc:
            raise UnsupportedDDL(f"column {name!r} cannot be cast to {target.simpleString()}: {exc}") from exc
        replica.alter(f"DROP COLUMN {quote(name)}")
    replica.alter(f"RENAME COLUMN {quote(tmp)} TO {quote(name)}")

