"""The apply check of the mixed workload: a small mixed lake (every table kind, the 25 types of
type_zoo, a TRUNCATE, an ADD COLUMN of a DATETIME with a default over existing rows, a DROP
PARTITION) merged with a crash after a DDL's apply, equals the upstream at every checkpoint and the
syncpoint, every column of every row; replicas changed behind the merge's back are named, each anomaly kind on the
table and version that shows it, a damaged value on each damaged column."""

from __future__ import annotations

import dataclasses
import shutil
import time
from datetime import datetime
from decimal import Decimal

import pytest
from deltalake import DeltaTable

from tests.capture.pull_harness import make_config, small_sim, wait_resolved
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.nemesis.merge_cycles import merge_cycles
from tidelake.nemesis.mixed_check import _replica_value, check_mixed_replicas, same_value
from tidelake.nemesis.plan import MergeFault
from tidelake.nemesis.schedule import workload_preset
from tidelake.sim.tidb.session import SimTiDB
from tidelake.sim.workload import DdlOp, TxnOp, WorkloadPlanner, WorkloadRunner
from tidelake.table_filter import TableFilter

pytestmark = pytest.mark.spark

DB = "shop"
RULES = ("shop*.*",)
SEED = 465
SETUP_OPS, TRAFFIC_OPS = 8, 48
# The preset's traffic without DDL of its own nor scratch tables; these DDL come at traffic ops 15, 30
# and 45: TRUNCATE accounts, ADD COLUMN events.added_1 DATETIME(3) DEFAULT ... (the first DATETIME
# column of events: Delta's timestampNtz feature turned on by the DDL), DROP PARTITION metrics p0.
PRESET = dataclasses.replace(workload_preset("mixed"), ddl_every=0, scratch_setup=False)
DDL = {
    15: DdlOp("truncate_table", {"db": DB, "name": "accounts"}),
    30: DdlOp("add_column", {"db": DB, "table": "events",
                             "column": ("added_1", "datetime(3)", {"default": datetime(2024, 5, 6, 7, 8, 9, 123000)})}),
    45: DdlOp("drop_partition", {"db": DB, "table": "metrics", "name": "p0"}),
}


def planned_ops() -> list:
    """Setup, then the traffic with DDL inserted before traffic ops 15, 30 and 45."""
    ops = WorkloadPlanner(PRESET, SEED, DB).take(SETUP_OPS + TRAFFIC_OPS)
    traffic = []
    for index, op in enumerate(ops[SETUP_OPS:]):
        traffic += [DDL[index]] if index in DDL else []
        traffic.append(op)
    return ops[:SETUP_OPS] + traffic


@pytest.fixture(scope="module")
def mixed(spark, tmp_path_factory):
    """(cluster, lake, final ts, check report) of the merged mixed lake; the cluster stays up."""
    lake = tmp_path_factory.mktemp("mixed") / "lake"
    with small_sim() as cluster:
        tidb = SimTiDB(cluster)
        workload = WorkloadRunner(tidb, PRESET, seed=SEED, database=DB)
        ops = planned_ops()
        with PullerThread(make_config(cluster, lake, rules=RULES)) as puller:
            wait_resolved(lake, {}, 1, puller)
            for op in ops[:SETUP_OPS]:
                workload._execute(op)
            created = cluster.tso.next()
            for op in ops[SETUP_OPS:]:
                workload._execute(op)
            workload.stop()  # the lock-holding txns commit
            # The syncpoint (merge_cycles, 1 s interval) needs a whole second between the mid merge and
            # the final ts, or it has no cut to take: the traffic alone may take under a second.
            time.sleep(2.2)
            final = cluster.tso.next()
            ids = tidb.physical_ids(TableFilter.parse(RULES))
            wait_resolved(lake, {pid: final for pid in ids}, final, puller)
        assert workload.counters.errors == 0, workload.counters.last_error
        crash = MergeFault("merge_mid", "merge.after_ddl", 2)  # after the second CREATE's apply
        merged = merge_cycles(spark, str(lake), (created + final) // 2, final, [crash])
        assert merged.failures == [] and merged.struck == {"merge.after_ddl": 1}
        yield cluster, lake, final, check_mixed_replicas(spark, str(lake), cluster.mvcc, DB, final)


def test_the_plan_holds_the_ddl_this_test_is_about():
    ops = planned_ops()[SETUP_OPS:]
    assert [op.method for op in ops if isinstance(op, DdlOp)] == ["truncate_table", "add_column", "drop_partition"]
    assert sum(isinstance(op, TxnOp) and any(r.table == "events" for r in op.rows) for op in ops[31:]) > 0


def test_merged_mixed_replicas_equal_the_upstream_column_by_column(mixed):
    _, _, _, report = mixed
    assert report.anomalies == []
    # 7 tables, each checked at its CREATE and at least at the two merges' ends
    assert report.checkpoints >= 21 and len(report.syncpoints) == 1
    assert report.values > 1000
    assert set(report.unchecked) <= {"ddl_in_flight"}, report.unchecked


def test_damaged_replicas_are_named_by_kind_table_and_column(spark, mixed, tmp_path):
    cluster, lake, final, _ = mixed
    copy = tmp_path / "lake"
    shutil.copytree(lake, copy)
    path = {name: str(copy / DB / name) for name in ("type_zoo", "orders", "accounts", "sessions", "metrics")}
    zoo_id = spark.sql(f"SELECT min(id) FROM delta.`{path['type_zoo']}`").first()[0]
    assert zoo_id is not None
    damaged = {"c_5": "7", "c_6": "0.5", "c_8": "0.25", "c_9": "DATE'1999-09-09'",
               "c_11": "TIMESTAMP_NTZ'1999-09-09 09:09:09.123456'", "c_12": "TIMESTAMP'1999-09-09 09:09:09.123Z'",
               "c_13": "1", "c_15": "4095", "c_16": "'{\"damaged\": true}'", "c_19": "X'DEADBEEF'",
               "c_23": "'purple'", "c_24": "'z'"}
    spark.sql(f"UPDATE delta.`{path['type_zoo']}` SET {', '.join(f'{c} = {v}' for c, v in damaged.items())} "
              f"WHERE id = {zoo_id}")
    order_id = spark.sql(f"SELECT min(id) FROM delta.`{path['orders']}`").first()[0]
    spark.sql(f"DELETE FROM delta.`{path['orders']}` WHERE id = {order_id}")
    spark.sql(f"INSERT INTO delta.`{path['accounts']}` SELECT * FROM delta.`{path['accounts']}` LIMIT 1")
    spark.sql(f"INSERT INTO delta.`{path['sessions']}` SELECT id + 1000000000, * EXCEPT (id) "
              f"FROM delta.`{path['sessions']}` LIMIT 1")
    spark.sql(f"ALTER TABLE delta.`{path['metrics']}` ADD COLUMNS (extra INT)")
    report = check_mixed_replicas(spark, str(copy), cluster.mvcc, DB, final)
    named = {}
    for anomaly in report.anomalies:
        table = anomaly.detail.split(" ")[0].split("/")[-1]
        named.setdefault((anomaly.kind, table), []).append(anomaly)
    assert set(named) == {("replica_wrong_value", "type_zoo"), ("replica_lost", "orders"),
                          ("replica_duplicate", "accounts"), ("replica_phantom", "sessions"),
                          ("replica_schema", "metrics")}, report.anomalies[:5]
    wrong = {a.detail.split(" column ")[1].split(" ")[0] for a in named[("replica_wrong_value", "type_zoo")]}
    assert wrong == set(damaged)
    for (_, table), anomalies in named.items():  # only the damaging version shows it, at the checkpoint it keeps
        assert {a.ts for a in anomalies} == {DeltaTable(path[table]).transaction_version("tidelake-merge")}


def test_values_must_match_in_kind_not_only_under_python_equality():
    assert same_value({"a": [1, 2.5, None, "x"]}, {"a": [1, 2.5, None, "x"]})
    assert not same_value(True, 1) and not same_value(1, 1.0) and not same_value(Decimal(1), 1)
    assert not same_value({"a": [True]}, {"a": [1]})  # a JSON literal read as a number, deep inside
    assert not same_value([1.0], [1])
    unsigned = {"type": {"Tp": 8, "Flag": 32}}  # BIGINT UNSIGNED, a DECIMAL(20,0) in the replica
    assert _replica_value(Decimal(18446744073709551615), unsigned) == 18446744073709551615
    assert not same_value(_replica_value(1.0, unsigned), 1)  # a replica that turned it into a double
    decimal = {"type": {"Tp": 246, "Flag": 0}}
    assert not same_value(_replica_value(1.5, decimal), Decimal("1.5"))
    assert same_value(_replica_value(Decimal("1.50"), decimal), Decimal("1.5"))
