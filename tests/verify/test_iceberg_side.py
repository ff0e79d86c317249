"""`tidelake verify` of the Iceberg side (tidelake.verify.iceberg_side): published replicas match
their Delta version at the newest syncpoint; a tag published from the wrong Delta version and a
snapshot that lost a data file are caught as mismatches with their counts; a replica not
published yet, or not yet at the newest syncpoint, says so and fails nothing.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from rich.console import Console

from tidelake import tso
from tidelake.cli.verify_command import iceberg_line, print_report
from tidelake.config import IcebergConfig
from tidelake.consumers.iceberg.iceberg_catalog import open_catalog
from tidelake.consumers.iceberg.publish import publish_replica, syncpoint_tag
from tidelake.consumers.iceberg.sync import sync_iceberg
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.syncpoint.records import ReplicaAt, Syncpoint, record_syncpoint
from tidelake.verify.iceberg_side import iceberg_ok, verify_iceberg
from tidelake.verify.verifier import TableVerdict, Verdict, VerifyReport

pytestmark = pytest.mark.spark  # the Delta side is read with Spark, as verify reads it

FIRST, SECOND, THIRD = (tso.compose(1_800_000_000_000 + 60_000 * n) for n in range(3))
TABLES = ("orders", "items", "users")


def _rows(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "note": [f"n{i}" for i in ids],
                     "tags": pa.array([[f"t{i}", None] for i in ids], pa.list_(pa.string())),
                     "score": pa.array([float("nan") if i % 2 else i / 3 for i in ids], pa.float64())})


def _cut(layout: LakeLayout, ts: int) -> Syncpoint:
    paths = {name: ReplicaCatalog(layout).get(key).path for key, name in enumerate(TABLES, 1)}
    syncpoint = Syncpoint(ts, [ReplicaAt(key, "shop", name, paths[name], DeltaTable(paths[name]).version())
                               for key, name in enumerate(TABLES, 1)])
    assert record_syncpoint(layout, syncpoint)
    return syncpoint


@pytest.fixture
def lake(tmp_path) -> LakeLayout:
    """Three replicas published at FIRST; then each gets rows and a DELETE, and SECOND is cut."""
    layout = LakeLayout(str(tmp_path / "lake"))
    for key, name in enumerate(TABLES, 1):
        write_deltalake(ReplicaCatalog(layout).assign(key, "shop", name, FIRST - 10).path, _rows(range(3 * key)))
    _cut(layout, FIRST)
    sync_iceberg(open_catalog(layout, IcebergConfig()), layout)
    for key, _ in enumerate(TABLES, 1):
        path = ReplicaCatalog(layout).get(key).path
        write_deltalake(path, _rows(range(100, 100 + key)), mode="append")
        DeltaTable(path).delete("id = 1")
    return layout


def test_published_replicas_match_and_a_table_behind_says_so(spark, lake):
    second = _cut(lake, SECOND)
    catalog = open_catalog(lake, IcebergConfig())
    sync_iceberg(catalog, lake)
    verdicts = verify_iceberg(spark, catalog, lake)
    assert [(v.table, v.status, v.ts, v.delta_version) for v in verdicts] == [
        (r.qualified_name, Verdict.MATCH, SECOND, r.version) for r in second.replicas]
    assert [v.iceberg_rows for v in verdicts] == [3 * key - 1 + key for key in (1, 2, 3)]
    assert iceberg_ok(verdicts)
    _cut(lake, THIRD)  # not published yet
    (behind,) = verify_iceberg(spark, catalog, lake, ["SHOP.items"])
    assert (behind.status, behind.note) == (Verdict.SKIPPED,
                                            f"not published at {syncpoint_tag(THIRD)} yet (newest tag: "
                                            f"{syncpoint_tag(SECOND)})")


def test_a_wrong_version_and_a_lost_data_file_are_mismatches(spark, lake, capsys):
    second = _cut(lake, SECOND)
    catalog = open_catalog(lake, IcebergConfig())
    orders, items, users = second.replicas
    # orders: tagged at SECOND with the files of its version at FIRST (the publisher read the wrong version)
    publish_replica(catalog, lake, ReplicaAt(orders.table_key, orders.db, orders.name, orders.path, 0), SECOND)
    publish_replica(catalog, lake, items, SECOND)
    # items: the snapshot its tag points at lost a data file reference
    table = catalog.load_table(("shop", "items"))
    tag = syncpoint_tag(SECOND)
    victim = next(iter(table.scan(snapshot_id=table.refs()[tag].snapshot_id).plan_files())).file
    with table.transaction() as tx, tx.update_snapshot().overwrite() as change:
        change.delete_data_file(victim)
    table = catalog.load_table(("shop", "items"))
    table.manage_snapshots().remove_tag(tag).create_tag(table.current_snapshot().snapshot_id, tag).commit()
    # users: never published at SECOND, and its Iceberg table dropped: not published
    catalog.drop_table(("shop", "users"))

    wrong, lost, unpublished = verify_iceberg(spark, catalog, lake)
    # orders at version 0: ids 0..2; at SECOND: 0, 2 and 100 (id 1 deleted)
    assert (wrong.status, wrong.delta_rows, wrong.iceberg_rows, wrong.missing, wrong.extra) == (
        Verdict.MISMATCH, 3, 3, 1, 1)
    assert lost.status == Verdict.MISMATCH and lost.missing == victim.record_count > 0 and lost.extra == 0
    assert (unpublished.status, unpublished.note) == (Verdict.SKIPPED, "not published as Iceberg yet")
    assert not iceberg_ok([wrong, lost, unpublished])
    assert iceberg_line(wrong) == (f"shop.orders Iceberg at {tag} (Delta version {orders.version}): ✗ mismatch "
                                   f"(snapshot {wrong.snapshot_id}: 3 Delta rows, 3 Iceberg rows, 1 missing, 1 extra)"
                                   .replace("✗ mismatch", "[red]✗ mismatch[/]"))
    replicas_match = VerifyReport([TableVerdict("shop.orders", orders.path, Verdict.MATCH, upstream_rows=3)])
    print_report(replicas_match, Console(width=300, force_terminal=False), [wrong, lost, unpublished])
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == "verify failed: an Iceberg table differs from its replica (1 of 1 tables compared, 3 upstream rows)"
    assert out[-2] == "shop.users Iceberg at syncpoint-{} (Delta version {}): – skipped (not published as Iceberg yet)".format(
        SECOND, users.version)
