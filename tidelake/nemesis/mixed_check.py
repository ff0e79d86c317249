"""The apply level's check of the mixed workload: every replica at every Delta version that records
a checkpoint, and every syncpoint, against the simulator's MVCC, every column of every row. It
imports nothing of tidelake.merge, tidelake.lake or the codec (tests/nemesis/test_apply_check.py).

More: docs/internals.md#mixed_check.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from deltalake import DeltaTable

from tidelake.nemesis.apply_check import MERGE_APP_ID, SYNCPOINTS_DIR
from tidelake.nemesis.handle_key import common_handle, int_handle
from tidelake.nemesis.landing_check import Anomaly, record_span
from tidelake.nemesis.row_values import (
    BIT,
    JSON,
    LONGLONG,
    NEWDECIMAL,
    STRINGS,
    TIMESTAMP,
    UNSIGNED_FLAG,
    column_value,
    missing_value,
    row_columns,
)
from tidelake.nemesis.upstream_schema import UpstreamSchema, UpstreamTable
from tidelake.nemesis.value_errors import Unchecked

HIDDEN_PREFIX = "_tidb_"  # _tidb_commit_ts, _tidb_rowid, _tidb_partition_id, _tidb_deleted
PARTITION_ID = "_tidb_partition_id"
LAKE_DIR = "_tidelake"
_VERSION_COLUMN = "__checked_version"  # tags each version's rows in a union of several (_read_and_compare)
_SUFFIX = re.compile(r"^(.*)__(\d+)$")


@dataclass
class MixedReport:
    anomalies: list[Anomaly] = field(default_factory=list)
    checkpoints: int = 0  # replica versions compared with the upstream at their checkpoint
    values: int = 0  # column values compared
    syncpoints: list[int] = field(default_factory=list)
    unchecked: Counter[str] = field(default_factory=Counter)  # what was not compared, by reason


class _Upstream:
    """The MVCC read at a ts, cached: the tables, and a table's rows as identity -> column values."""

    def __init__(self, mvcc: Any) -> None:
        self.mvcc = mvcc
        self.schema = UpstreamSchema(mvcc)
        self._tables: dict[int, dict[int, UpstreamTable]] = {}

    def tables(self, ts: int) -> dict[int, UpstreamTable]:
        if ts not in self._tables:
            self._tables[ts] = self.schema.tables_at(ts)
        return self._tables[ts]

    def rows(self, table: UpstreamTable, ts: int, report: MixedReport) -> dict[Any, dict[str, Any]]:
        keys = set(table.key_columns)
        columns = [c for c in table.columns if c["name"]["O"] not in keys]
        rows = {}
        for pid in table.physical_ids:
            for key, value in self.mvcc.scan(*record_span(pid), ts, None):
                identity = common_handle(key) if table.handle == "common" else int_handle(key)
                stored, nulls = row_columns(value)
                row: dict[str, Any] = {PARTITION_ID: pid} if table.partitioned else {}
                for column in columns:
                    try:
                        if column["id"] in stored:
                            row[column["name"]["O"]] = column_value(stored[column["id"]], column)
                        elif column["id"] in nulls:
                            row[column["name"]["O"]] = None
                        else:
                            row[column["name"]["O"]] = missing_value(column)
                    except Unchecked as why:
                        report.unchecked[f"value: {why}"] += 1
                rows[identity] = row
        return rows


def check_mixed_replicas(spark: Any, root: str, mvcc: Any, databases: str, final_ts: int) -> MixedReport:
    """Every replica under `root` (of the databases whose names start with `databases`) at every
    checkpoint it recorded, the last one at least `final_ts` unless its table was dropped; every
    upstream table at `final_ts` has a replica; every syncpoint's versions equal the upstream at S."""
    report = MixedReport()
    upstream = _Upstream(mvcc)
    followed: dict[str, list[int]] = {}  # replica path -> the table ids it was
    for path in _replicas(root, databases):
        followed[path] = _check_checkpoints(spark, path, upstream, final_ts, report)
    seen = {tid for ids in followed.values() for tid in ids}
    for table in upstream.tables(final_ts).values():
        if table.db.startswith(databases) and table.id not in seen:
            report.anomalies.append(Anomaly("replica_lost", table.id, final_ts,
                                            f"{table.db}.{table.name} has no replica"))
    _check_syncpoints(spark, root, upstream, followed, databases, report)
    return report


def _replicas(root: str, databases: str) -> list[str]:
    found = []
    for db in sorted(os.listdir(root)):
        if db == LAKE_DIR or not db.startswith(databases) or not os.path.isdir(os.path.join(root, db)):
            continue
        for name in sorted(os.listdir(os.path.join(root, db))):
            if os.path.isdir(os.path.join(root, db, name, "_delta_log")):
                found.append(os.path.join(root, db, name))
    return found


def _first_table(path: str, tables: dict[int, UpstreamTable]) -> UpstreamTable | None:
    db, folder = path.rstrip("/").split("/")[-2:]
    suffix = _SUFFIX.match(folder)
    if suffix and int(suffix.group(2)) in tables:
        return tables[int(suffix.group(2))]
    name = suffix.group(1) if suffix else folder
    return next((t for t in tables.values() if (t.db, t.name) == (db, name)), None)


def _follow(current: UpstreamTable, tables: dict[int, UpstreamTable]) -> UpstreamTable | None:
    """The table at a later ts: the same id (renamed or not), or the one TRUNCATE made under its name."""
    if current.id in tables:
        return tables[current.id]
    return next((t for t in tables.values() if (t.db_id, t.name) == (current.db_id, current.name)), None)


def _check_checkpoints(spark: Any, path: str, upstream: _Upstream, final_ts: int, report: MixedReport) -> list[int]:
    delta = DeltaTable(path)
    table: UpstreamTable | None = None
    ids: list[int] = []
    changes: set[int] = set()
    pending: list[_Version] = []
    last = None
    for version in range(delta.version() + 1):
        delta.load_as_version(version)
        checkpoint = delta.transaction_version(MERGE_APP_ID)
        if checkpoint is None:
            continue
        tables = upstream.tables(checkpoint)
        now = _first_table(path, tables) if table is None else _follow(table, tables)
        if now is not None and now.id not in ids:
            ids.append(now.id)
            changes.update(upstream.schema.changes(now.db_id, now.id))
        if last is not None and checkpoint < last:
            report.anomalies.append(Anomaly("checkpoint_regressed", ids[-1] if ids else 0, checkpoint,
                                            f"{path} v{version} records {checkpoint} after {last}"))
        kept = checkpoint == last
        last = checkpoint
        if kept and checkpoint + 1 in changes:
            report.unchecked["ddl_in_flight"] += 1
            continue
        at, what = checkpoint, f"{_short(path)} v{version} at checkpoint {checkpoint}"
        if now is None and table is not None and table.id in upstream.tables(checkpoint - 1):
            at = checkpoint - 1  # dropped at the checkpoint: the replica keeps the rows as of the drop
            now, what = upstream.tables(at)[table.id], f"{what} (table dropped: as of {at})"
        if now is None:
            report.unchecked["no upstream table"] += 1
            continue
        table = now
        pending.append(_Version(version, table, at, what))
        report.checkpoints += 1
    _compare_versions(spark, path, pending, upstream, report)
    if table is not None and _follow(table, upstream.tables(final_ts)) is not None and (last or 0) < final_ts:
        report.anomalies.append(Anomaly("replica_behind", table.id, final_ts,
                                        f"{_short(path)} is at checkpoint {last}, the last merge went to {final_ts}"))
    return ids


def _short(path: str) -> str:
    return "/".join(path.rstrip("/").split("/")[-2:])


@dataclass(frozen=True)
class _Version:
    """A replica version to compare with the upstream `table` as of `ts`; `what` names it."""

    version: int
    table: UpstreamTable
    ts: int
    what: str


def _compare_versions(spark: Any, path: str, versions: list[_Version], upstream: _Upstream,
                      report: MixedReport) -> None:
    """Each version against the upstream. Consecutive versions that select the same columns of
    the same types are read in one Spark job (a union tagged by version): a job per version cost
    more than the reading."""
    batch: list[tuple[_Version, list[str], Any]] = []
    for v in versions:
        frame = spark.read.format("delta").option("versionAsOf", v.version).load(path)
        planned = _plan_read(frame, v, report)
        if planned is None:
            continue
        wanted, select = planned
        if batch and (batch[0][1], batch[0][2].schema) != (wanted, select.schema):
            _read_and_compare(batch, upstream, report)
            batch = []
        batch.append((v, wanted, select))
    if batch:
        _read_and_compare(batch, upstream, report)


def _compare_version(spark: Any, path: str, version: int, table: UpstreamTable, ts: int, what: str,
                     upstream: _Upstream, report: MixedReport) -> None:
    _compare_versions(spark, path, [_Version(version, table, ts, what)], upstream, report)


def _plan_read(frame: Any, v: _Version, report: MixedReport) -> tuple[list[str], Any] | None:
    """The columns to read of the version and its projection; None (an anomaly said why) when
    the replica lacks a key or partition column."""
    table, ts, what = v.table, v.ts, v.what
    types = {f.name: f.dataType.typeName() for f in frame.schema.fields}
    visible = [n for n in types if not n.startswith(HIDDEN_PREFIX)]
    columns = {c["name"]["O"]: c for c in table.columns}
    missing, extra = sorted(set(columns) - set(visible)), sorted(set(visible) - set(columns))
    if missing or extra:
        report.anomalies.append(Anomaly("replica_schema", table.id, ts, f"{what}: columns missing {missing}, "
                                        f"not upstream {extra}"))
    keys = table.key_columns
    compared = [n for n in visible if n in columns and n not in keys]
    wanted = [*dict.fromkeys([*keys, *compared, *([PARTITION_ID] if table.partitioned else [])])]
    if not set(wanted) <= set(types):
        report.anomalies.append(Anomaly("replica_schema", table.id, ts, f"{what}: no key or partition column "
                                        f"{sorted(set(wanted) - set(types))}"))
        return None
    select = [f"unix_micros(`{n}`) AS `{n}`" if types[n] == "timestamp" else f"`{n}`" for n in wanted]
    return wanted, frame.selectExpr(*select)


def _read_and_compare(batch: list[tuple[_Version, list[str], Any]], upstream: _Upstream, report: MixedReport) -> None:
    tagged = [select.selectExpr("*", f"{index} AS {_VERSION_COLUMN}") for index, (_, _, select) in enumerate(batch)]
    union = tagged[0]
    for frame in tagged[1:]:
        union = union.unionByName(frame)
    rows: list[list[Any]] = [[] for _ in batch]
    for row in union.collect():
        rows[row[_VERSION_COLUMN]].append(row)
    for (v, wanted, _), read in zip(batch, rows):
        _compare_rows(v, wanted, read, upstream, report)


def _compare_rows(v: _Version, wanted: list[str], read: list[Any], upstream: _Upstream, report: MixedReport) -> None:
    table, ts, what = v.table, v.ts, v.what
    columns = {c["name"]["O"]: c for c in table.columns}
    keys = table.key_columns
    got: dict[Any, dict[str, Any]] = {}
    twice = []
    for row in read:
        identity = tuple(row[k] for k in keys) if table.handle == "common" else row[keys[0]]
        if identity in got:
            twice.append(identity)
        got[identity] = {n: _replica_value(row[n], columns.get(n)) for n in wanted if n not in keys}
    want = upstream.rows(table, ts, report)
    for identity in sorted(set(got) | set(want), key=repr):
        if identity not in got:
            report.anomalies.append(Anomaly("replica_lost", table.id, ts, f"{what}: row {identity} missing"))
        elif identity not in want:
            report.anomalies.append(Anomaly("replica_phantom", table.id, ts, f"{what}: row {identity} absent upstream"))
        else:
            _compare_row(what, table, ts, identity, got[identity], want[identity], report)
    for identity in twice:
        report.anomalies.append(Anomaly("replica_duplicate", table.id, ts, f"{what}: row {identity} twice"))


def _compare_row(what: str, table: UpstreamTable, ts: int, identity: Any, got: dict[str, Any],
                 want: dict[str, Any], report: MixedReport) -> None:
    for name, value in want.items():
        if name not in got:
            continue  # the column is missing from the replica: replica_schema said so
        report.values += 1
        if not same_value(got[name], value):
            report.anomalies.append(Anomaly("replica_wrong_value", table.id, ts, f"{what}: row {identity} column "
                                            f"{name} is {got[name]!r:.80}, upstream {value!r:.80}"))


def same_value(got: Any, want: Any) -> bool:
    """Equal AND of the same kind, through JSON's nesting: Python's == takes True for 1, 1 for 1.0
    and Decimal(1) for 1, which would let a decoder that mixes JSON literals and numbers, or
    integers and doubles, pass."""
    if type(got) is not type(want):
        return False
    if isinstance(got, dict):
        return got.keys() == want.keys() and all(same_value(got[k], want[k]) for k in got)
    if isinstance(got, list):
        return len(got) == len(want) and all(same_value(a, b) for a, b in zip(got, want))
    return bool(got == want)


def _replica_value(value: Any, column: dict | None) -> Any:
    """A Spark value in row_values' canonical form for the upstream column's type (docs/design.md#lake-layout
    mapping: unsigned BIGINT and BIT(64) as DECIMAL(20,0), DECIMAL above 38 digits and JSON as
    text, binary strings as bytes; TIMESTAMP was selected as unix_micros)."""
    if value is None or column is None:
        return value
    ft = column["type"]
    tp = ft["Tp"]
    if tp == NEWDECIMAL:  # a Spark DECIMAL, or text above 38 digits; a double would have lost digits
        return Decimal(value) if isinstance(value, (Decimal, str)) else value
    if (tp == LONGLONG and ft.get("Flag", 0) & UNSIGNED_FLAG) or tp == BIT:  # DECIMAL(20,0)
        return int(value) if isinstance(value, Decimal) and value == value.to_integral_value() else value
    if tp == JSON:
        return json.loads(value)
    if tp in STRINGS and ft.get("Charset") == "binary":
        return bytes(value)
    if tp == TIMESTAMP:
        return int(value)
    return value


def _check_syncpoints(spark: Any, root: str, upstream: _Upstream, followed: dict[str, list[int]], databases: str,
                      report: MixedReport) -> None:
    """Each replica a syncpoint lists, at the version it lists, equals the upstream at S; a table
    the upstream had at S with no entry is `syncpoint_incomplete`."""
    path = os.path.join(root, SYNCPOINTS_DIR)
    if not DeltaTable.is_deltatable(path):
        report.anomalies.append(Anomaly("syncpoint_incomplete", 0, 0, "no syncpoint was recorded"))
        return
    for row in DeltaTable(path).to_pyarrow_table(columns=["ts", "replicas"]).to_pylist():
        ts = row["ts"]
        listed = set()
        for entry in json.loads(row["replicas"]):
            # by its folder under the lake: a copied lake's syncpoints still name the original paths
            replica = next((p for p in followed if _short(p) == _short(entry["path"])), entry["path"])
            ids = followed.get(replica)
            table = next((upstream.tables(ts)[i] for i in reversed(ids or []) if i in upstream.tables(ts)), None)
            if table is None:
                report.unchecked["syncpoint entry without an upstream table at S"] += 1
                continue
            listed.add(table.id)
            _compare_version(spark, replica, entry["version"], table, ts, f"{_short(replica)} at syncpoint {ts}",
                             upstream, report)
        for table in upstream.tables(ts).values():  # also tables whose replica is gone since (dropped)
            if table.db.startswith(databases) and table.id not in listed:
                report.anomalies.append(Anomaly("syncpoint_incomplete", table.id, ts,
                                                f"{table.db}.{table.name} is not in the syncpoint at {ts}"))
        report.syncpoints.append(ts)
