"""A transaction spanning many tables is in every replica of a syncpoint or in none.

The simulator commits transactions that write every table; the real puller lands them and the
real syncpoint job (its merge included: on the driver, no Spark, as windows this size are written,
or with a Spark session) cuts between them. Each recorded cut is read the way a
consumer reads it: each replica with deltalake at the Delta version the cut records, compared
with the simulator's MVCC snapshot at the cut's ts, and each spanning transaction found in all
of the cut's replicas or in none.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from deltalake import DeltaTable

from tests.capture.pull_harness import config_doc, small_sim, wait_resolved
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.config_writer import config_from_document
from tidelake.lake.layout import LakeLayout
from tidelake.sim.tidb.session import SimTiDB
from tidelake.syncpoint.cut import SyncpointOutcome, run_syncpoint
from tidelake.syncpoint.records import Syncpoint, read_syncpoints

pytestmark = pytest.mark.timeout(900)

DB = "shop"
INTERVAL_S = 1
ROWS_PER_TABLE = 2


def _cut_after(spark, layout: LakeLayout, ts: int, puller: PullerThread) -> Syncpoint:
    """Syncpoint jobs until one is recorded at or after `ts` (the boundary after it must pass first)."""
    time.sleep(INTERVAL_S * 1.1)  # a boundary after `ts` has passed
    return _cuts_until(spark, layout, puller, lambda cut: cut.ts >= ts, f"no syncpoint reached {ts}")


def _cut_while_lagging(spark, layout: LakeLayout, last: int, held_start_ts: int, puller: PullerThread) -> Syncpoint:
    """Syncpoint jobs until one is recorded after `last`: below `held_start_ts`, where the lagging
    table's resolved ts waits for its open transaction."""
    cut = _cuts_until(spark, layout, puller, lambda cut: cut.ts > last, f"no syncpoint after {last}")
    assert cut.ts < held_start_ts, (cut.ts, held_start_ts)
    return cut


def _cuts_until(spark, layout: LakeLayout, puller: PullerThread, reached: Callable[[Syncpoint], bool],
                failure: str) -> Syncpoint:
    """Syncpoint jobs until the newest recorded cut is `reached`; none may be incomplete or held."""
    deadline = time.monotonic() + 120
    while True:
        puller.check()
        result = run_syncpoint(spark, layout, INTERVAL_S)
        assert result.outcome not in (SyncpointOutcome.INCOMPLETE, SyncpointOutcome.HELD), result
        recorded = read_syncpoints(layout)
        if recorded and reached(recorded[-1]):
            return recorded[-1]
        assert time.monotonic() < deadline, f"{failure}: {result}"
        time.sleep(0.2)
        time.sleep(0.2)


# Fifty tables and one spanning transaction on the driver (seconds); with a Spark session, three
# spanning transactions over five tables, and over fifty behind slow.
@pytest.mark.parametrize("tables, spanning, engine", [
    (50, 1, "driver"),
    pytest.param(5, 3, "spark", marks=pytest.mark.spark),
    pytest.param(50, 3, "spark", marks=[pytest.mark.spark, pytest.mark.slow]),
])
def test_a_transaction_over_every_table_is_in_all_replicas_of_a_cut_or_in_none(request, tmp_path, tables, spanning,
                                                                               engine):
    spark = request.getfixturevalue("spark") if engine == "spark" else None
    layout = LakeLayout(str(tmp_path / "lake"))
    names = [f"t{i:02d}" for i in range(tables)]
    with small_sim() as cluster:
        tidb = SimTiDB(cluster)
        doc = config_doc(cluster, tmp_path / "lake", rules=(f"{DB}.*",), flush="100ms")
        with PullerThread(config_from_document(doc, "test.toml"), progress_interval_s=3600) as puller:
            wait_resolved(layout.root, {}, 1, puller)
            before = cluster.tso.next()
            tidb.create_database(DB)
            for name in names:
                tidb.create_table(DB, name, [("id", "bigint"), ("txn", "varchar(16)")], primary_key=["id"])
            created = cluster.tso.next()
            cuts = [_cut_after(spark, layout, created, puller)]  # every table, no transaction yet
            commits, wrote = {}, {}
            for k in range(spanning):
                label = f"span{k}"
                if k == 0:  # a transaction on the last table, held open: that table lags the others
                    time.sleep(INTERVAL_S * 1.1)  # a boundary between the last cut and its start ts
                    lagging = tidb.txn()
                    lagging.insert(DB, names[-1], {"id": 10**6, "txn": "held"})
                    lagging.prewrite()
                with tidb.txn() as t:
                    for name in names:
                        for r in range(ROWS_PER_TABLE):
                            t.insert(DB, name, {"id": k * ROWS_PER_TABLE + r, "txn": label})
                commits[label], wrote[label] = t.commit_ts, set(names)
                if k == 0:  # the other tables land it, the lagging one cannot yet: a cut now shows it nowhere
                    cuts.append(_cut_while_lagging(spark, layout, cuts[-1].ts, lagging.start_ts, puller))
                    commits["held"], wrote["held"] = lagging.commit(), {names[-1]}
                cuts.append(_cut_after(spark, layout, max(commits.values()), puller))

        assert len({c.ts for c in cuts}) == len(cuts)  # a cut between each two transactions
        for cut in read_syncpoints(layout):
            # _cut_after may record boundaries before or among the CREATEs on its way to `created`
            if cut.ts < before:
                assert cut.replicas == [] and not cut.excluded
                continue
            if cut.ts < created:
                assert {r.name for r in cut.replicas} <= set(names) and not cut.excluded
                continue
            assert sorted(r.name for r in cut.replicas) == names and not cut.excluded
            holding: dict[str, set[str]] = {label: set() for label in commits}
            for replica in cut.replicas:
                rows = DeltaTable(replica.path, version=replica.version).to_pyarrow_table(columns=["id", "txn"])
                rows = {(r["id"], r["txn"]) for r in rows.to_pylist()}
                upstream = {(r["id"], r["txn"]) for r in tidb.select_all(DB, replica.name, ts=cut.ts)}
                assert rows == upstream, f"{replica.name} at version {replica.version} is not the upstream at {cut.ts}"
                for _, label in rows:
                    holding[label].add(replica.name)
            for label, held in holding.items():
                assert held in (set(), wrote[label]), f"cut {cut.ts} shows {label} in {sorted(held)} only"
                assert (held == wrote[label]) == (commits[label] <= cut.ts), (cut.ts, label)
        seen = {label: {commits[label] <= c.ts for c in cuts} for label in commits}
        assert all(s == {False, True} for s in seen.values()), seen  # each one absent at a cut, then present
