"""The apply level's check (bank workload): every replica at every checkpoint it recorded, and
every syncpoint, against the simulator's MVCC, after the merges of tidelake.nemesis.merge_cycles.
It imports nothing of tidelake.merge or tidelake.lake (tests/nemesis/test_apply_check.py).

More: docs/internals.md#apply_check.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from deltalake import DeltaTable

from tidelake.nemesis.handle_key import common_handle, int_handle
from tidelake.nemesis.landing_check import Anomaly, record_span
from tidelake.nemesis.row_int import int_column

MERGE_APP_ID = "tidelake-merge"
SYNCPOINTS_DIR = "_tidelake/syncpoints"


@dataclass(frozen=True)
class BankTable:
    db: str
    name: str
    physical_ids: tuple[int, ...]
    balance_column: int
    identity: tuple[str, ...]  # replica columns naming a row: the PK columns, or _tidb_rowid

    @property
    def common_handle(self) -> bool:
        return len(self.identity) > 1


@dataclass
class ApplyReport:
    anomalies: list[Anomaly]
    checkpoints: int = 0
    syncpoints: list[int] = field(default_factory=list)  # the ts of each syncpoint checked


def check_replicas(spark: Any, root: str, mvcc: Any, tables: list[BankTable], total: int, funded_ts: int,
                   final_ts: int) -> ApplyReport:
    """Every version of every bank replica at the checkpoint it records (the last one at least
    `final_ts`), and every syncpoint."""
    report = ApplyReport([])
    for table in tables:
        _check_checkpoints(spark, root, mvcc, table, final_ts, report)
    _check_syncpoints(spark, root, mvcc, tables, total, funded_ts, report)
    return report


def _upstream(mvcc: Any, table: BankTable, ts: int) -> dict[Any, int]:
    rows = {}
    for pid in table.physical_ids:
        for key, value in mvcc.scan(*record_span(pid), ts, None):
            handle = common_handle(key) if table.common_handle else int_handle(key)
            rows[handle] = int_column(value, table.balance_column)
    return rows


def _replica(spark: Any, path: str, version: int, table: BankTable) -> tuple[dict[Any, int], list[Any]]:
    """(identity -> balance, identities seen twice) of the replica at Delta `version`."""
    frame = spark.read.format("delta").option("versionAsOf", version).load(path)
    rows, twice = {}, []
    for row in frame.select(*table.identity, "balance").collect():
        identity = tuple(row[c] for c in table.identity) if table.common_handle else row[table.identity[0]]
        if identity in rows:
            twice.append(identity)
        rows[identity] = row["balance"]
    return rows, twice


def _compare(what: str, table: BankTable, ts: int, got: dict[Any, int], want: dict[Any, int], twice: list[Any],
             report: ApplyReport) -> None:
    for identity in sorted(set(got) | set(want), key=repr):
        if identity not in got:
            report.anomalies.append(Anomaly("replica_lost", table.physical_ids[0], ts, f"{what}: row {identity} missing"))
        elif identity not in want:
            report.anomalies.append(Anomaly("replica_phantom", table.physical_ids[0], ts,
                                            f"{what}: row {identity} absent upstream"))
        elif got[identity] != want[identity]:
            report.anomalies.append(Anomaly("replica_wrong_value", table.physical_ids[0], ts,
                                            f"{what}: row {identity} balance {got[identity]}, upstream {want[identity]}"))
    for identity in twice:
        report.anomalies.append(Anomaly("replica_duplicate", table.physical_ids[0], ts, f"{what}: row {identity} twice"))


def _check_checkpoints(spark: Any, root: str, mvcc: Any, table: BankTable, final_ts: int,
                       report: ApplyReport) -> None:
    path = os.path.join(root, table.db, table.name)
    pid = table.physical_ids[0]
    if not DeltaTable.is_deltatable(path):
        report.anomalies.append(Anomaly("replica_lost", pid, 0, f"no replica at {path}"))
        return
    delta = DeltaTable(path)
    last = None
    for version in range(delta.version() + 1):  # every version, also those that keep a checkpoint
        delta.load_as_version(version)
        checkpoint = delta.transaction_version(MERGE_APP_ID)
        if checkpoint is None:
            continue
        if last is not None and checkpoint < last:
            report.anomalies.append(Anomaly("checkpoint_regressed", pid, checkpoint,
                                            f"{table.name} v{version} records {checkpoint} after {last}"))
        last = checkpoint
        got, twice = _replica(spark, path, version, table)
        _compare(f"{table.name} v{version} at checkpoint {checkpoint}", table, checkpoint, got,
                 _upstream(mvcc, table, checkpoint), twice, report)
        report.checkpoints += 1
    if last is None or last < final_ts:
        report.anomalies.append(Anomaly("replica_behind", pid, final_ts,
                                        f"{table.name} is at checkpoint {last}, the last merge went to {final_ts}"))


def _check_syncpoints(spark: Any, root: str, mvcc: Any, tables: list[BankTable], total: int, funded_ts: int,
                      report: ApplyReport) -> None:
    path = os.path.join(root, SYNCPOINTS_DIR)
    if not DeltaTable.is_deltatable(path):
        report.anomalies.append(Anomaly("syncpoint_incomplete", 0, 0, "no syncpoint was recorded"))
        return
    for row in DeltaTable(path).to_pyarrow_table(columns=["ts", "replicas"]).to_pylist():
        ts, cut = row["ts"], {(r["db"], r["name"]): r for r in json.loads(row["replicas"])}
        balances = 0
        for table in tables:
            entry = cut.get((table.db, table.name))
            if entry is None and ts < funded_ts:
                continue  # a cut before the funding txn may predate the table itself
            if entry is None:
                report.anomalies.append(Anomaly("syncpoint_incomplete", table.physical_ids[0], ts,
                                                f"{table.name} is not in the syncpoint at {ts}"))
                continue
            got, twice = _replica(spark, entry["path"], entry["version"], table)
            _compare(f"{table.name} at syncpoint {ts}", table, ts, got, _upstream(mvcc, table, ts), twice, report)
            balances += sum(v for v in got.values() if v is not None)
        expected = total if ts >= funded_ts else 0
        if balances != expected:
            report.anomalies.append(Anomaly("syncpoint_total", 0, ts, f"bank tables at syncpoint {ts} sum to "
                                            f"{balances}, not {expected}"))
        report.syncpoints.append(ts)
