"""The window semantics (tidelake.merge.window_spec) run by both writers give the same replica,
row for row, and the upstream's: random windows of a type-zoo table, each lane of keys its own
window (the semantics are per key, so lanes never meet and one commit per writer serves a round
of lanes), with duplicates in and across transactions, a delete and a put of one key at one
commit ts, re-landed changes, NULLs, keys deleted and inserted again, and rounds of new keys
only (the append). The oracle is FedLake's replay of the upstream commits, not either writer.

Every zoo type goes through delta-rs here, wide decimals too: what keeps those off delta-rs in a
run is file stats for filtered readers (tidelake.merge.writers.delta_rs_writer.writable), not the
rows, which this test compares by full reads.
"""

from __future__ import annotations

import json
import random
import shutil
from datetime import timezone

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from merge.lake_fixtures import FedLake, sorted_rows
from pyspark.sql.types import StructType, TimestampType

from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.merge.changelog_snapshot import ChangelogSnapshot
from tidelake.merge.merge_run import run_merge
from tidelake.merge.writers.delta_rs_writer import DeltaRsWriter
from tidelake.merge.writers.replica_window import ReplicaWindow
from tidelake.merge.writers.spark_writer import SparkWriter
from tidelake.sim.tidb.types import parse_field_type
from tidelake.sim.tidb.values import random_value
from tidelake.sim.workload import ZOO_TYPES

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]

COLUMNS = [(f"c_{i}", spec) for i, spec in enumerate(ZOO_TYPES)]
LANES, ROUNDS = 100, 5  # 500 windows
KEYS_PER_LANE = 6  # few keys a round, so a lane's keys are changed again and again


def zoo_row(rng: random.Random, key: int) -> dict:
    row = {"id": key}
    for name, spec in COLUMNS:
        row[name] = None if rng.random() < 0.2 else random_value(parse_field_type(spec), rng)
    return row


def land_round(lake: FedLake, rng: random.Random, pools: list[list[int]], fresh: int | None) -> None:
    """One window per lane, landed: a few transactions over the lane's keys, or in an append round
    (`fresh`) one transaction of new keys only; then some of the round's changes landed again."""
    start = len(lake.committed)
    for lane, pool in enumerate(pools):
        if fresh is not None:
            new = [lane * 1000 + 100 + fresh * KEYS_PER_LANE + k for k in range(rng.randint(1, KEYS_PER_LANE))]
            with lake.txn() as t:
                for key in new:
                    t.put("app", "zoo", zoo_row(rng, key))
            pool += new
            continue
        for _ in range(rng.randint(1, 4)):
            with lake.txn() as t:
                for key in rng.sample(pool, min(len(pool), rng.randint(1, 3))):
                    kind = rng.random()
                    if kind < 0.2:
                        t.delete("app", "zoo", {"id": key})
                    elif kind < 0.35:  # a delete and a put of one key at one commit ts
                        t.delete("app", "zoo", {"id": key})
                        t.put("app", "zoo", zoo_row(rng, key))
                    else:
                        t.put("app", "zoo", zoo_row(rng, key))
    round_changes = lake.committed[start:]
    lake.reland(rng.sample(round_changes, len(round_changes) // 5))


def write(writer, spark, path: str, lake: FedLake, snapshot: ChangelogSnapshot, lo: int, hi: int):
    replica = DeltaTable(path)
    info = lake.up.table("app", "zoo")
    ids = tuple(info.physical_ids())
    target = StructType.fromJson(json.loads(replica.schema().to_json()))
    return writer.write(ReplicaWindow(path, replica, target, info, ids, lo, hi, snapshot.file_stats(ids, lo, hi)))


def replica_rows(spark, path: str) -> list[dict]:
    """The replica's rows, TIMESTAMP values as the aware UTC instants the upstream replay gives
    (Spark hands them out naive, in the local time zone)."""
    frame = spark.read.format("delta").load(path)
    instants = [f.name for f in frame.schema.fields if isinstance(f.dataType, TimestampType)]
    rows = [r.asDict() for r in frame.collect()]
    for row in rows:
        for name in instants:
            if row[name] is not None:
                row[name] = row[name].astimezone(timezone.utc)
    return sorted_rows(rows)


def run_rounds(spark, tmp_path, seed: int, append_rounds: list[bool]) -> None:
    rng = random.Random(seed)
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("app"))
    lake.ddl(lake.up.create_table("app", "zoo", [("id", "bigint", "pk"), *COLUMNS]))
    lo = lake.resolve()
    run_merge(spark, lake.layout, write_log=False)  # creates the replica, at lo
    by_spark = ReplicaCatalog(lake.layout).find("app", "zoo").path
    by_delta_rs = str(tmp_path / "by_delta_rs")
    shutil.copytree(by_spark, by_delta_rs)
    engines = {}
    pools = [[lane * 1000 + k for k in range(KEYS_PER_LANE)] for lane in range(LANES)]  # keys never written yet
    for round_no, fresh in enumerate(append_rounds):
        land_round(lake, rng, pools, round_no if fresh else None)
        hi = lake.resolve()
        snapshot = ChangelogSnapshot(lake.layout)
        write(SparkWriter(spark, lake.layout, snapshot), spark, by_spark, lake, snapshot, lo, hi)
        write(DeltaRsWriter(snapshot), spark, by_delta_rs, lake, snapshot, lo, hi)
        expected = lake.expected_rows("app", "zoo", hi)
        assert replica_rows(spark, by_spark) == replica_rows(spark, by_delta_rs), f"round {round_no}"
        assert replica_rows(spark, by_spark) == expected, f"round {round_no}"
        for path in (by_spark, by_delta_rs):
            commit = DeltaTable(path).history(1)[0]
            assert DeltaTable(path).transaction_version("tidelake-merge") == hi
            engines.setdefault(path, set()).add((commit["operation"], commit.get("engineInfo", "")[:8]))
        lo = hi
    # both writers took both paths: the append of a round of new keys, and the MERGE
    assert {op for op, _ in engines[by_spark]} == {"WRITE", "MERGE"}
    assert {op for op, _ in engines[by_delta_rs]} == {"WRITE", "MERGE"}
    assert {engine for _, engine in engines[by_delta_rs]} == {"delta-rs"}
    lake.close()


rounds = st.lists(st.booleans(), min_size=ROUNDS - 1, max_size=ROUNDS - 1).map(lambda rest: [True, *rest])


@settings(max_examples=1, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), append_rounds=rounds.filter(lambda r: not all(r)))
def test_both_writers_give_the_upstream_row_for_row(spark, tmp_path_factory, seed, append_rounds):
    run_rounds(spark, tmp_path_factory.mktemp("two-writers"), seed, append_rounds)


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), append_rounds=rounds.filter(lambda r: not all(r)))
def test_both_writers_give_the_upstream_row_for_row_over_many_runs(spark, tmp_path_factory, seed, append_rounds):
    run_rounds(spark, tmp_path_factory.mktemp("two-writers"), seed, append_rounds)
