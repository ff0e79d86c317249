"""The window semantics (tidelake.merge.window_spec) run by both writers give the same replica,
row for row, and the upstream's: a type-zoo table's landed changes are cut into random windows
(lo, hi] and written window by window, by Spark into one copy of the replica and by delta-rs into
another. The changes hold re-landed flushes (duplicates), a delete and a put of one key at one
commit ts, two transactions at one commit ts, NULLs in every zoo column, keys deleted and
inserted again, and a first run of new keys only (the append). The oracle is FedLake's replay of
the upstream commits, not either writer.

Every zoo type goes through delta-rs here, wide decimals too: what keeps those off delta-rs in a
run is file stats for filtered readers (tidelake.merge.writers.delta_rs_writer.writable), not the
rows, which this test compares by full reads.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass, field
from datetime import timezone

import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st
from merge.lake_fixtures import FedLake, by_driver, sorted_rows
from pyspark.sql.types import StructType, TimestampType

from tidelake.lake.checkpoint import MERGE_APP_ID
from tidelake.lake.delta_read import read_delta
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
KEYS = 16  # a small key space, so keys are changed again and again
SLOW_WINDOWS = 500  # what the slow variant must drive through both writers, counted


@dataclass
class Tally:
    windows: int = 0  # windows both writers committed and the test compared
    operations: dict[str, set[str]] = field(default_factory=dict)  # writer -> Delta operations seen


def zoo_row(rng: random.Random, key: int) -> dict:
    row = {"id": key}
    for name, spec in COLUMNS:
        row[name] = None if rng.random() < 0.2 else random_value(parse_field_type(spec), rng)
    return row


def land(lake: FedLake, rng: random.Random, fresh_txns: int, mixed_txns: int) -> tuple[list[int], list[int]]:
    """A run of transactions of new keys only, then transactions over the whole key space, some
    flushes landed twice; (commit ts of the first run, commit ts of the rest)."""
    fresh_ts, mixed_ts, live = [], [], set()
    for i in range(fresh_txns):
        with lake.txn() as t:
            for key in range(3 * i + 1, 3 * i + 1 + rng.randint(1, 3)):
                t.put("app", "zoo", zoo_row(rng, key))
                live.add(key)
        fresh_ts.append(t.commit_ts)
    previous: set[int] = set()
    for i in range(mixed_txns):
        shared = mixed_ts[-1] if mixed_ts and rng.random() < 0.15 else None  # 1PC/async commit share a ts
        free = [k for k in range(1, KEYS + 1) if shared is None or k not in previous]
        keys = rng.sample(free, min(len(free), rng.randint(1, 3)))
        if i == 0:  # an update of a key every later window holds: the MERGE path
            keys = [1, *[k for k in keys if k != 1]]
        start = len(lake.committed)
        with lake.txn(shared) as t:
            for key in keys:
                kind = rng.random()
                if key in live and kind < 0.2 and not (i == 0 and key == 1):
                    t.delete("app", "zoo", {"id": key})
                    live.discard(key)
                    continue
                if key in live and kind < 0.35:  # a delete and a put of one key at one commit ts
                    t.delete("app", "zoo", {"id": key})
                t.put("app", "zoo", zoo_row(rng, key))
                live.add(key)
        mixed_ts.append(t.commit_ts)
        previous = set(keys) | (previous if shared is not None else set())
        if rng.random() < 0.2:  # a replayed puller lands what it already landed
            lake.reland(lake.committed[max(0, start - rng.randint(0, 6)):])
    return fresh_ts, mixed_ts


def write(writer, path: str, lake: FedLake, snapshot: ChangelogSnapshot, lo: int, hi: int) -> None:
    replica = DeltaTable(path)
    info = lake.up.table("app", "zoo")
    ids = tuple(info.physical_ids())
    target = StructType.fromJson(json.loads(replica.schema().to_json()))
    writer.write(ReplicaWindow(path, replica, target, info, ids, lo, hi, snapshot.file_stats(ids, lo, hi)))


def replica_rows(spark, path: str) -> list[dict]:
    """The replica's rows as Spark reads them, TIMESTAMP values as the aware UTC instants the
    upstream replay gives (Spark hands them out naive, in the local time zone)."""
    frame = spark.read.format("delta").load(path)
    instants = [f.name for f in frame.schema.fields if isinstance(f.dataType, TimestampType)]
    rows = [r.asDict() for r in frame.collect()]
    for row in rows:
        for name in instants:
            if row[name] is not None:
                row[name] = row[name].astimezone(timezone.utc)
    return sorted_rows(rows)


def delta_rs_rows(path: str) -> list[dict]:
    """The replica's rows as delta-rs reads them: a reader independent of Spark, and cheap
    enough to read both copies after every window."""
    return sorted_rows(read_delta(DeltaTable(path)).to_pylist())


def run_windows(spark, tmp_path, seed: int, windows: int, data: st.DataObject, tally: Tally) -> None:
    """Land, cut into `windows` random windows, write each with both writers and compare."""
    rng = random.Random(seed)
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("app"))
    lake.ddl(lake.up.create_table("app", "zoo", [("id", "bigint", "pk"), *COLUMNS]))
    created = lake.resolve()
    run_merge(spark, lake.layout, write_log=False)  # creates the replica, at `created`
    by_spark = ReplicaCatalog(lake.layout).find("app", "zoo").path
    by_delta_rs = str(tmp_path / "by_delta_rs")
    shutil.copytree(by_spark, by_delta_rs)
    fresh_ts, mixed_ts = land(lake, rng, rng.randint(1, 3), rng.randint(2 * windows, 3 * windows))
    upper = lake.resolve()
    # The first window ends inside the run of new keys; the others end anywhere after it, at a
    # commit ts or just past one (a window with no change when two such ends meet).
    first = data.draw(st.sampled_from(fresh_ts), label="first window's hi")
    ends = data.draw(st.lists(st.sampled_from(sorted({ts + d for ts in mixed_ts for d in (0, 1)})),
                              min_size=windows - 2, max_size=windows - 2, unique=True), label="window ends")
    bounds = [created, first, *sorted(ends), upper]
    snapshot = ChangelogSnapshot(lake.layout)
    writers = [("spark", by_spark, SparkWriter(spark, lake.layout, snapshot)),
               ("delta-rs", by_delta_rs, DeltaRsWriter(snapshot))]
    for lo, hi in zip(bounds, bounds[1:]):
        for name, path, writer in writers:
            write(writer, path, lake, snapshot, lo, hi)
            replica = DeltaTable(path)
            assert replica.transaction_version(MERGE_APP_ID) == hi, (name, lo, hi)
            commit = replica.history(1)[0]
            assert name == "spark" or by_driver(commit)
            tally.operations.setdefault(name, set()).add(commit["operation"])
        rows = delta_rs_rows(by_spark)
        assert rows == delta_rs_rows(by_delta_rs), f"window ({lo}, {hi}]"
        assert rows == lake.expected_rows("app", "zoo", hi), f"window ({lo}, {hi}]"
        tally.windows += 1
    assert replica_rows(spark, by_spark) == replica_rows(spark, by_delta_rs) == rows  # Spark reads them alike
    lake.close()


def drive(spark, tmp_path_factory, examples: int, windows: tuple[int, int]) -> Tally:
    """`examples` random lakes, each cut into a number of windows within `windows`."""
    tally = Tally()

    @settings(max_examples=examples, deadline=None, database=None)
    @given(seed=st.integers(0, 2**32 - 1), count=st.integers(*windows), data=st.data())
    def one_lake(seed, count, data):
        run_windows(spark, tmp_path_factory.mktemp("two-writers"), seed, count, data, tally)

    one_lake()
    # both writers took both paths: the append of new keys only, and the MERGE
    assert all({"WRITE", "MERGE"} <= ops for ops in tally.operations.values()), tally.operations
    assert len(tally.operations) == 2
    return tally


def test_both_writers_give_the_upstream_row_for_row(spark, tmp_path_factory):
    assert drive(spark, tmp_path_factory, examples=1, windows=(4, 6)).windows >= 4


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_both_writers_give_the_upstream_row_for_row_over_many_windows(spark, tmp_path_factory):
    tally = drive(spark, tmp_path_factory, examples=20, windows=(25, 30))
    assert tally.windows >= SLOW_WINDOWS, f"{tally.windows} windows compared, the claim is {SLOW_WINDOWS}"
