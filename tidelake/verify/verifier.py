"""`tidelake verify`: does each replica at its checkpoint c equal upstream at c (docs/design.md
invariant 6)? Both sides are read independently of everything the pipeline wrote: upstream by a
snapshot read at c (KvScan, as against a real TiKV), the replica by time travel to the Delta
version recording c; rows compared by digest. Owner: `tidelake verify` and the demos.

More: docs/internals.md#verifier.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from pyspark.sql import functions as F

from tidelake.codec.keys import decode_record_key
from tidelake.codec.row import EXTRA_HANDLE_NAME, decode_row
from tidelake.codec.schema import TableInfo
from tidelake.codec.spark_types import spark_type, spark_value
from tidelake.errors import InputError
from tidelake.lake.checkpoint import MERGE_APP_ID
from tidelake.lake.history_table import HISTORY_APP_ID, SINCE_PROPERTY, history_path
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaEntry, ReplicaState, read_entries
from tidelake.lake.schema_history import SchemaHistory
from tidelake.merge.replica_schema import (
    DELETED_COLUMN,
    HIDDEN_COLUMNS,
    PARTITION_ID_COLUMN,
    ROWID_COLUMN,
    has_rowid,
    is_partitioned,
    key_columns,
    stored_columns,
)
from tidelake.merge.scd2_history import CURRENT_COLUMN, VALID_FROM_COLUMN, VALID_TO_COLUMN
from tidelake.upstream.schema_snapshot import SchemaSnapshot, load_schema
from tidelake.upstream.upstream_errors import BelowGCSafepointError, UpstreamError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tidelake.upstream.kv_snapshot import SnapshotReader


def as_held(info: TableInfo) -> TableInfo:
    """The table as its rows stand at the schema `info` was read at, which is what a replica whose
    checkpoint is there was built from. A partitioning job lists the partitions it adds under
    `adding_definitions` and those it removes under `dropping_definitions`, their rows intact until
    the job is done: DROP PARTITION from delete only on; REORGANIZE PARTITION, PARTITION BY and
    REMOVE PARTITIONING put the new ones in `definitions` at delete reorganization, when the
    replaced ones still hold every row, TiDB writing to both (pingcap/tidb pkg/ddl/partition.go
    `onDropTablePartition`, `onReorganizePartition`; docs/design/2022-09-29-reorganize-partition.md).
    A table partitioned for the first time is one stand-in partition with the table's own id
    ("pFullTable", `getPartitionInfoTypeNone`) until then: it is read as not partitioned."""
    partition = info.partition
    if partition is None:
        return info
    adding = {d.id for d in partition.adding_definitions}
    held = [d for d in partition.definitions if d.id not in adding]
    held += [d for d in partition.dropping_definitions if d.id not in {h.id for h in held}]
    if [d.id for d in held] == [info.id]:
        return replace(info, partition=None)
    return replace(info, partition=replace(partition, definitions=held, adding_definitions=[], dropping_definitions=[]))


class Verdict(StrEnum):
    """What verify concluded for one table."""

    MATCH = "match"
    MISMATCH = "mismatch"
    SKIPPED = "skipped"  # nothing to compare yet (no replica, dropped): reported, not failed
    ERROR = "error"  # could not be compared (GC'd versions, upstream unreachable): fails the run


MISSING = "missing"  # upstream row absent from the replica
EXTRA = "extra"  # replica row absent upstream
DIFFERENT = "different"  # same key, other values

# Verify reads each replica once, at one version. Delta keeps every table it opened in a JVM-wide
# DeltaLog cache (delta-io/delta DeltaSQLConf DELTA_LOG_CACHE_SIZE and its default), each with its
# snapshot and that snapshot's plans, so the driver's heap would grow with the lake's
# table count until it ran out (bench/README.md#sql-corpus-runs). A few cached logs suffice. The
# cache is sized when the JVM first opens a Delta table: a session that already did keeps its own.
SPARK_CONFS = {"spark.databricks.delta.delta.log.cacheSize": "8"}
PROGRESS_EVERY_ROWS = 10_000
HISTORY_POINTS = 20  # upstream ts a history table is compared at: its checkpoint and latest changes

Row = dict[str, Any]
Progress = Callable[[str, str, int], None]  # (table, phase 'upstream'|'replica', rows so far)


@dataclass(frozen=True)
class RowDiff:
    kind: str
    key: tuple
    upstream: Row | None
    replica: Row | None


@dataclass
class TableVerdict:
    """The outcome for one replica; `diffs` holds the first differing keys with both values."""

    table: str
    path: str
    status: str
    checkpoint: int | None = None
    delta_version: int | None = None
    upstream_rows: int = 0
    replica_rows: int = 0
    missing: int = 0
    extra: int = 0
    different: int = 0
    schema_problems: list[str] = field(default_factory=list)
    diffs: list[RowDiff] = field(default_factory=list)
    note: str | None = None
    soft_deleted: int | None = None  # rows flagged _tidb_deleted (None: no soft deletes)
    deleted_but_upstream: int = 0  # of those, keys upstream still holds at the checkpoint


@dataclass
class HistoryVerdict:
    """The outcome for one SCD2 history table: compared at `points` upstream ts."""

    table: str
    path: str
    status: str
    checkpoint: int | None = None
    points: int = 0
    rows: int = 0  # upstream rows compared over all points
    gc_skipped: int = 0  # points below the GC safepoint, not readable upstream
    mismatched: list[tuple[int, int, int, int]] = field(default_factory=list)  # (ts, missing, extra, different)
    note: str | None = None


@dataclass
class VerifyReport:
    tables: list[TableVerdict]
    histories: list[HistoryVerdict] = field(default_factory=list)

    @property
    def compared(self) -> list[TableVerdict]:
        """The tables whose rows were really compared (matching or not)."""
        return [t for t in self.tables if t.status in (Verdict.MATCH, Verdict.MISMATCH)]

    @property
    def ok(self) -> bool:
        """At least one table compared, and every table matched or had nothing to compare yet:
        a gate that compared nothing proves nothing, so it fails."""
        return bool(self.compared) and all(t.status in (Verdict.MATCH, Verdict.SKIPPED)
                                           for t in [*self.tables, *self.histories])


# --- value normalisation ------------------------------------------------------------------


def _float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def normalize(value: Any, spark_sql_type: str) -> Any:
    """One comparable form per Spark type: FLOAT columns hold float32, TIMESTAMP is a UTC instant."""
    if value is None:
        return None
    if spark_sql_type == "FLOAT":
        return _float32(value)
    if spark_sql_type == "ARRAY<FLOAT>":
        return tuple(_float32(v) for v in value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(timezone.utc)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def _canonical(value: Any) -> str:
    """Text that is equal exactly when the normalised values are equal (digest input)."""
    if isinstance(value, Decimal):
        return "d" + format(value.normalize(), "f") if value else "d0"
    if isinstance(value, datetime):
        return ("z" if value.tzinfo else "n") + value.replace(tzinfo=None).isoformat()
    return type(value).__name__[0] + repr(value)


def _digest(values: Iterable[Any]) -> bytes:
    return hashlib.blake2b("\x1f".join(_canonical(v) for v in values).encode(), digest_size=16).digest()


# --- the compared shape of a table ---------------------------------------------------------


@dataclass(frozen=True)
class ComparedShape:
    """Columns compared for one table (upstream names) with their Spark types, and the key columns."""

    columns: tuple[str, ...]
    types: tuple[str, ...]
    key: tuple[str, ...]

    @classmethod
    def of(cls, info: TableInfo) -> ComparedShape:
        columns = [(c.name, spark_type(c.field_type)) for c in stored_columns(info)]
        if has_rowid(info):
            columns.append((ROWID_COLUMN, "BIGINT"))
        if is_partitioned(info):
            columns.append((PARTITION_ID_COLUMN, "BIGINT"))
        names, types = zip(*columns) if columns else ((), ())
        return cls(tuple(names), tuple(types), tuple(key_columns(info)))

    def normalized(self, row: Row) -> tuple:
        return tuple(normalize(row.get(c), t) for c, t in zip(self.columns, self.types))

    def key_of(self, values: tuple) -> tuple:
        index = {c: i for i, c in enumerate(self.columns)}
        return tuple(values[index[k]] for k in self.key)


def upstream_row(key: bytes, value: bytes, info: TableInfo) -> Row:
    """One upstream row as the replica should hold it (replica column names, Spark values)."""
    physical_id, handle = decode_record_key(key)
    decoded = decode_row(value, info, handle)
    row: Row = {}
    for column in stored_columns(info):
        row[column.name] = spark_value(decoded.get(column.name), column.field_type)
    if has_rowid(info):
        row[ROWID_COLUMN] = decoded.get(EXTRA_HANDLE_NAME, handle)
    if is_partitioned(info):
        row[PARTITION_ID_COLUMN] = physical_id
    return row


# --- comparison -----------------------------------------------------------------------------


class RowComparison:
    """Multiset comparison: load the upstream side (digests), then stream the replica against it."""

    def __init__(self, shape: ComparedShape, max_diffs: int) -> None:
        self.shape = shape
        self.max_diffs = max_diffs
        self._upstream: dict[tuple, list[tuple[bytes, bytes]]] = {}
        self.upstream_rows = self.replica_rows = 0
        self.counts = {MISSING: 0, EXTRA: 0, DIFFERENT: 0}
        self.diffs: list[tuple[str, tuple, bytes | None, Row | None]] = []  # kind, key, raw key, replica row

    def add_upstream(self, raw_key: bytes, row: Row) -> None:
        values = self.shape.normalized(row)
        self._upstream.setdefault(self.shape.key_of(values), []).append((_digest(values), raw_key))
        self.upstream_rows += 1

    def add_replica(self, row: Row) -> None:
        values = self.shape.normalized(row)
        key = self.shape.key_of(values)
        self.replica_rows += 1
        candidates = self._upstream.get(key)
        if not candidates:
            self._record(EXTRA, key, None, row)
            return
        digest = _digest(values)
        for i, (upstream_digest, _) in enumerate(candidates):
            if upstream_digest == digest:
                del candidates[i]
                break
        else:
            _, raw_key = candidates.pop(0)
            self._record(DIFFERENT, key, raw_key, row)
        if not candidates:
            del self._upstream[key]

    def holds(self, row: Row) -> bool:
        """Whether the upstream side (not yet claimed) has a row with `row`'s key."""
        return bool(self._upstream.get(self.shape.key_of(self.shape.normalized(row))))

    def finish(self) -> None:
        """Everything upstream that no replica row claimed is missing."""
        for key, rest in self._upstream.items():
            for _, raw_key in rest:
                self._record(MISSING, key, raw_key, None)
        self._upstream.clear()

    def _record(self, kind: str, key: tuple, raw_key: bytes | None, replica: Row | None) -> None:
        self.counts[kind] += 1
        if len(self.diffs) < self.max_diffs:
            self.diffs.append((kind, key, raw_key, replica))


# --- reading both sides -------------------------------------------------------------------


def replica_snapshot(path: str, storage_options: dict[str, str] | None = None) -> tuple[int, int | None] | None:
    """(Delta version, checkpoint recorded in that same version) of the newest replica snapshot:
    what readers of the replica see, so a commit made after the checkpoint (a tampering write) is
    compared too."""
    try:
        table = DeltaTable(path, storage_options=storage_options)
    except TableNotFoundError:
        return None
    return table.version(), table.transaction_version(MERGE_APP_ID)


def read_replica(spark: SparkSession, path: str, version: int, columns: Iterable[str],
                 where: str | None = None) -> Iterator[Row]:
    """Rows of the replica at `version` (Spark time travel), only `columns`, via Arrow batches;
    `where` is a SQL filter over the table's columns."""
    df = spark.read.format("delta").option("versionAsOf", version).load(path)
    if where is not None:
        df = df.where(where)
    present = {c.lower(): c for c in df.columns}
    selected = [F.col(f"`{present[c.lower()]}`").alias(c) for c in columns if c.lower() in present]
    table = df.select(*selected).toArrow()
    for batch in table.to_batches():
        yield from batch.to_pylist()


def replica_types(spark: SparkSession, path: str, version: int) -> dict[str, str]:
    """Lower-cased column name -> Spark simpleString type of the replica at `version`."""
    schema = spark.read.format("delta").option("versionAsOf", version).load(path).schema
    return {f.name.lower(): f.dataType.simpleString() for f in schema.fields}


def schema_problems(shape: ComparedShape, replica: dict[str, str]) -> list[str]:
    """Columns the replica lacks, holds beyond upstream (a missed DROP COLUMN), or types differently
    from the mapping table (a missed MODIFY COLUMN); values are still compared where possible."""
    problems = []
    expected = {c.lower(): (c, t) for c, t in zip(shape.columns, shape.types)}
    for lowered, (name, spark_sql_type) in expected.items():
        actual = replica.get(lowered)
        if actual is None:
            problems.append(f"replica lacks column {name!r}")
        elif actual != spark_sql_type.lower():
            problems.append(f"column {name!r} is {actual} in the replica, upstream maps to {spark_sql_type.lower()}")
    hidden = {h.lower() for h in HIDDEN_COLUMNS}
    problems += [f"replica has column {c!r} that upstream lacks" for c in replica if c not in expected and c not in hidden]
    return problems


class Verifier:
    """Verifies replicas of one lake against one upstream; reuses schema snapshots per ts."""

    def __init__(
        self,
        spark: SparkSession,
        layout: LakeLayout,
        reader: SnapshotReader,
        max_diffs: int = 10,
        progress: Progress | None = None,
        history_points: int = HISTORY_POINTS,
    ) -> None:
        self.spark = spark
        self.layout = layout
        self.reader = reader
        self.max_diffs = max_diffs
        self.progress = progress
        self.history_points = history_points
        self._schemas: dict[int, SchemaSnapshot] = {}

    def run(self, tables: Iterable[str] = ()) -> VerifyReport:
        history = SchemaHistory.load(self.layout)
        entries = read_entries(self.layout)
        wanted = tables_to_verify(entries, history, list(tables))
        verdicts, histories = [], []
        for key in wanted:
            entry = entries.get(key)
            if entry is None:
                db, name = history.current_name(key)
                verdicts.append(TableVerdict(f"{db}.{name}", "", Verdict.SKIPPED, note="no replica yet (not merged)"))
            else:
                verdicts.append(self.verify_entry(entry, history))
                if DeltaTable.is_deltatable(history_path(self.layout, entry.path), self.layout.storage_options):
                    histories.append(self.verify_history(entry, history))
        return VerifyReport(verdicts, histories)

    def verify_entry(self, entry: ReplicaEntry, history: SchemaHistory) -> TableVerdict:
        name = f"{entry.db}.{entry.name}"
        if entry.state == ReplicaState.DROPPED:
            return TableVerdict(name, entry.path, Verdict.SKIPPED, note=entry.reason or "dropped upstream")
        snapshot = replica_snapshot(entry.path, self.layout.storage_options)
        if snapshot is None or snapshot[1] is None:
            return TableVerdict(name, entry.path, Verdict.SKIPPED, note="no replica yet (not merged)")
        version, checkpoint = snapshot
        verdict = TableVerdict(name, entry.path, Verdict.MATCH, checkpoint, version)
        ours = history.table_info_at(entry.table_key, checkpoint)
        if ours is None:
            verdict.status, verdict.note = Verdict.ERROR, f"the DDL history has no schema for the table at {checkpoint}"
            return verdict
        try:
            info = self._upstream_info(ours.id, checkpoint)
            if info is None:
                verdict.status = Verdict.MISMATCH
                verdict.note = f"upstream has no table with id {ours.id} at ts {checkpoint}"
                return verdict
            self._compare(verdict, info)
        except UpstreamError as exc:
            verdict.status, verdict.note = Verdict.ERROR, str(exc)
        return verdict

    def _upstream_info(self, table_id: int, ts: int) -> TableInfo | None:
        schema = self._schemas.get(ts)
        if schema is None:
            schema = self._schemas[ts] = load_schema(self.reader, ts)
        return next((as_held(t) for _, t in schema.tables_with_rows() if t.id == table_id), None)

    def _compare(self, verdict: TableVerdict, info: TableInfo) -> None:
        shape = ComparedShape.of(info)
        types = replica_types(self.spark, verdict.path, verdict.delta_version)
        verdict.schema_problems = schema_problems(shape, types)
        comparison = RowComparison(shape, self.max_diffs)
        scan = self.reader.scan_table(info.physical_ids(), verdict.checkpoint)
        for raw_key, value in self._tick(verdict.table, "upstream", scan):
            comparison.add_upstream(raw_key, upstream_row(raw_key, value, info))
        live = None
        if DELETED_COLUMN in types:  # soft deletes: flagged rows must be gone upstream
            flag = f"coalesce(`{DELETED_COLUMN}`, false)"
            live = f"NOT {flag}"
            flagged = list(read_replica(self.spark, verdict.path, verdict.delta_version, shape.key, flag))
            verdict.soft_deleted = len(flagged)
            verdict.deleted_but_upstream = sum(comparison.holds(row) for row in flagged)
        rows = read_replica(self.spark, verdict.path, verdict.delta_version, shape.columns, live)
        for row in self._tick(verdict.table, "replica", rows):
            comparison.add_replica(row)
        comparison.finish()
        verdict.upstream_rows, verdict.replica_rows = comparison.upstream_rows, comparison.replica_rows
        verdict.missing = comparison.counts[MISSING]
        verdict.extra = comparison.counts[EXTRA]
        verdict.different = comparison.counts[DIFFERENT]
        verdict.diffs = self._diff_values(comparison, info, verdict.checkpoint)
        if verdict.missing or verdict.extra or verdict.different or verdict.schema_problems \
                or verdict.deleted_but_upstream:
            verdict.status = Verdict.MISMATCH

    def verify_history(self, entry: ReplicaEntry, history: SchemaHistory) -> HistoryVerdict:
        """The entry's history table at its checkpoint c, at c and the latest change ts up to it."""
        name = f"{entry.db}.{entry.name}"
        path = history_path(self.layout, entry.path)
        table = DeltaTable(path, storage_options=self.layout.storage_options)
        version, checkpoint = table.version(), table.transaction_version(HISTORY_APP_ID)
        verdict = HistoryVerdict(name, path, Verdict.MATCH, checkpoint)
        if checkpoint is None:
            verdict.status, verdict.note = Verdict.ERROR, "the history table records no checkpoint"
            return verdict
        since = int(table.metadata().configuration.get(SINCE_PROPERTY) or checkpoint)
        types = replica_types(self.spark, path, version)
        flags = self.spark.read.format("delta").option("versionAsOf", version).load(path).where(
            f"`{CURRENT_COLUMN}` IS DISTINCT FROM (`{VALID_TO_COLUMN}` IS NULL)").count()
        if flags:
            verdict.status, verdict.note = Verdict.MISMATCH, f"{flags} rows whose current flag disagrees with valid_to"
        for ts in self._history_points(path, version, since, checkpoint):
            ours = history.table_info_at(entry.table_key, ts)
            try:
                info = self._upstream_info(ours.id, ts) if ours is not None else None
                if info is None:
                    continue  # dropped or not created yet at ts: nothing valid to compare
                counts = self._compare_history_at(verdict, path, version, types, info, ts)
            except BelowGCSafepointError:
                verdict.gc_skipped += 1
                continue
            except UpstreamError as exc:
                verdict.status, verdict.note = Verdict.ERROR, f"at {ts}: {exc}"
                return verdict
            verdict.points += 1
            if any(counts):
                verdict.mismatched.append((ts, *counts))
        if verdict.mismatched:
            verdict.status = Verdict.MISMATCH
        elif not verdict.points and verdict.status == Verdict.MATCH:
            verdict.status, verdict.note = Verdict.SKIPPED, "no point above the GC safepoint to compare"
        return verdict

    def _history_points(self, path: str, version: int, since: int, checkpoint: int) -> list[int]:
        """The checkpoint and the latest change ts (valid_from / valid_to values) in [since, checkpoint]."""
        df = self.spark.read.format("delta").option("versionAsOf", version).load(path)
        changes = df.selectExpr(f"`{VALID_FROM_COLUMN}` AS ts").union(
            df.where(f"`{VALID_TO_COLUMN}` IS NOT NULL").selectExpr(f"`{VALID_TO_COLUMN}` AS ts"))
        latest = changes.where(f"ts >= {since} AND ts < {checkpoint}").distinct().orderBy("ts", ascending=False)
        return [checkpoint, *(int(r["ts"]) for r in latest.limit(max(self.history_points - 1, 0)).collect())]

    def _compare_history_at(self, verdict: HistoryVerdict, path: str, version: int, types: dict[str, str],
                            info: TableInfo, ts: int) -> tuple[int, int, int]:
        full = ComparedShape.of(info)
        kept = [(c, t) for c, t in zip(full.columns, full.types) if types.get(c.lower()) == t.lower()]
        key = full.key
        if PARTITION_ID_COLUMN in key and PARTITION_ID_COLUMN.lower() not in types:
            # REMOVE PARTITIONING took the column out of the history; TiDB copied each row under
            # its handle, which is therefore one row across the partitions at `ts`.
            key = tuple(k for k in key if k != PARTITION_ID_COLUMN)
        shape = ComparedShape(tuple(c for c, _ in kept), tuple(t for _, t in kept), key)
        if not set(shape.key) <= set(shape.columns):
            raise UpstreamError(f"the history table lacks key columns {list(full.key)}")
        comparison = RowComparison(shape, 0)
        for raw_key, value in self.reader.scan_table(info.physical_ids(), ts):
            comparison.add_upstream(raw_key, upstream_row(raw_key, value, info))
        valid = (f"`{VALID_FROM_COLUMN}` <= {ts} AND (`{VALID_TO_COLUMN}` IS NULL OR {ts} < `{VALID_TO_COLUMN}`)")
        for row in read_replica(self.spark, path, version, shape.columns, valid):
            comparison.add_replica(row)
        comparison.finish()
        verdict.rows += comparison.upstream_rows
        return comparison.counts[MISSING], comparison.counts[EXTRA], comparison.counts[DIFFERENT]

    def _diff_values(self, comparison: RowComparison, info: TableInfo, ts: int) -> list[RowDiff]:
        """Both values of the first differing keys: upstream re-read by point gets at `ts`."""
        raw_keys = [raw for _, _, raw, _ in comparison.diffs if raw is not None]
        upstream = self.reader.batch_get(raw_keys, ts) if raw_keys else {}
        out = []
        for kind, key, raw, replica in comparison.diffs:
            value = upstream.get(raw) if raw is not None else None
            row = upstream_row(raw, value, info) if value is not None else None
            out.append(RowDiff(kind, key, row, _pick(replica, comparison.shape.columns)))
        return out

    def _tick(self, table: str, phase: str, rows: Iterable[Any]) -> Iterator[Any]:
        n = 0
        for n, row in enumerate(rows, 1):
            if self.progress is not None and n % PROGRESS_EVERY_ROWS == 0:
                self.progress(table, phase, n)
            yield row
        if self.progress is not None:
            self.progress(table, phase, n)


def _pick(row: Row | None, columns: Iterable[str]) -> Row | None:
    return None if row is None else {c: row.get(c) for c in columns}


def tables_to_verify(entries: dict[int, ReplicaEntry], history: SchemaHistory, names: list[str]) -> list[int]:
    """Table keys to verify: all replicated tables (catalog + live history), or the named ones."""
    keys = list(dict.fromkeys([*entries, *history.live_tables()]))
    if not names:
        return keys

    def current(key: int) -> tuple[str, str]:
        entry = entries.get(key)
        return (entry.db, entry.name) if entry is not None else history.current_name(key)

    chosen = []
    for wanted in names:
        db, sep, table = wanted.partition(".")
        if not sep or not db or not table:
            raise InputError(f"--table {wanted!r}: expected DB.TABLE")
        matches = [k for k in keys if tuple(s.lower() for s in current(k)) == (db.lower(), table.lower())]
        if not matches:
            raise InputError(f"--table {wanted!r}: no replicated table has that name")
        chosen.extend(m for m in matches if m not in chosen)
    return chosen
