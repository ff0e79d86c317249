"""`tidelake iceberg sync` and the syncpoint job's publish (tidelake.consumers.iceberg.sync): a
crash between two tables' publishes leaves the rest at the previous syncpoint and the next sync
catches up; an unreachable catalog fails in one line (exit 75) without touching the Delta side;
bad input is one line and exit 2; a refused replica is one line and the others are published.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from consumers.iceberg_readers import assert_iceberg_reads_the_cut
from deltalake import DeltaTable, write_deltalake

from tidelake import tso
from tidelake.cli import main
from tidelake.config import IcebergConfig, load_config
from tidelake.consumers.iceberg.iceberg_catalog import CATALOG_FILE, iceberg_root, open_catalog
from tidelake.consumers.iceberg.publish import PUBLISHED_TS, syncpoint_tag
from tidelake.consumers.iceberg.sync import ICEBERG_FAILPOINTS, sync_iceberg
from tidelake.errors import InputError
from tidelake.failpoints import armed
from tidelake.lake.layout import WATERMARKS_SCHEMA, LakeLayout, open_or_create
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.orchestration import job_entry
from tidelake.orchestration.job_spec import SyncpointJob
from tidelake.syncpoint.cut import SyncpointOutcome, SyncpointResult
from tidelake.syncpoint.records import ReplicaAt, Syncpoint, read_syncpoints, record_syncpoint

CUTS = [tso.compose(1_800_000_000_000 + 60_000 * n) for n in range(3)]
TABLES = ("orders", "items", "users")


class Crash(Exception):
    pass


def _rows(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "note": [f"n{i}" for i in ids]})


def _cut(layout: LakeLayout, ts: int) -> Syncpoint:
    paths = {name: ReplicaCatalog(layout).get(key).path for key, name in enumerate(TABLES, 1)}
    replicas = [ReplicaAt(key, "shop", name, paths[name], DeltaTable(paths[name]).version())
                for key, name in enumerate(TABLES, 1)]
    assert record_syncpoint(layout, Syncpoint(ts, replicas))
    return Syncpoint(ts, replicas)


def _advance(layout: LakeLayout, n: int) -> None:
    for key, _ in enumerate(TABLES, 1):
        path = ReplicaCatalog(layout).get(key).path
        write_deltalake(path, _rows(range(10 * n, 10 * n + key)), mode="append")
        DeltaTable(path).delete(f"id = {10 * (n - 1)}")


@pytest.fixture
def lake(tmp_path) -> LakeLayout:
    layout = LakeLayout(str(tmp_path / "lake"))
    open_or_create(layout, layout.watermarks, WATERMARKS_SCHEMA)
    for key, name in enumerate(TABLES, 1):
        write_deltalake(ReplicaCatalog(layout).assign(key, "shop", name, CUTS[0] - 10).path, _rows(range(key)))
    _cut(layout, CUTS[0])
    return layout


def _marks(layout: LakeLayout) -> dict[str, int]:
    catalog = open_catalog(layout, IcebergConfig())
    return {name: int(catalog.load_table(("shop", name)).properties[PUBLISHED_TS]) for name in TABLES}


def test_a_crash_between_two_tables_leaves_the_rest_at_the_previous_syncpoint_and_the_next_sync_catches_up(lake):
    catalog = open_catalog(lake, IcebergConfig())
    sync_iceberg(catalog, lake)
    _advance(lake, 1)
    _cut(lake, CUTS[1])
    _advance(lake, 2)
    _cut(lake, CUTS[2])

    def crash_at_items(_name, table):
        if table == "shop.items":
            raise Crash(table)

    with armed(ICEBERG_FAILPOINTS, crash_at_items), pytest.raises(Crash):
        sync_iceberg(catalog, lake)
    # cut by cut: orders published the second cut before the crash; items and users are at the first
    assert _marks(lake) == {"orders": CUTS[1], "items": CUTS[0], "users": CUTS[0]}
    for table in ("items", "users"):
        assert syncpoint_tag(CUTS[1]) not in open_catalog(lake, IcebergConfig()).load_table(("shop", table)).refs()
    report = sync_iceberg(open_catalog(lake, IcebergConfig()), lake)
    assert [(p.table, p.ts) for p in report.published] == [
        ("shop.items", CUTS[1]), ("shop.users", CUTS[1]), ("shop.orders", CUTS[2]), ("shop.items", CUTS[2]),
        ("shop.users", CUTS[2])]
    assert _marks(lake) == dict.fromkeys(TABLES, CUTS[2])
    for cut in read_syncpoints(lake):
        assert_iceberg_reads_the_cut(open_catalog(lake, IcebergConfig()), cut)


def test_cli_publishes_once_and_prints_a_line_per_snapshot(lake, capsys):
    assert main(["iceberg", "sync", "--lake", lake.root]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [f"shop.{t}: Delta version 0 -> Iceberg snapshot {s} ({syncpoint_tag(CUTS[0])}, +1 -0 files)"
                       for t, s in zip(TABLES, _snapshots(lake), strict=True)]
    assert out[3] == "3 snapshots published, 0 tables were current, 0 refused"
    assert (Path(iceberg_root(lake)) / CATALOG_FILE).is_file()
    assert main(["iceberg", "sync", "--lake", lake.root]) == 0
    assert capsys.readouterr().out == "0 snapshots published, 3 tables were current, 0 refused\n"


def _snapshots(layout: LakeLayout) -> list[int]:
    catalog = open_catalog(layout, IcebergConfig())
    return [catalog.load_table(("shop", t)).current_snapshot().snapshot_id for t in TABLES]


def _delta_versions(layout: LakeLayout) -> dict[str, int]:
    return {p.name: DeltaTable(str(p)).version() for p in Path(layout.root, "shop").iterdir()}


def test_an_unreachable_catalog_is_one_line_exit_75_and_touches_nothing(lake, capsys):
    before = _delta_versions(lake), read_syncpoints(lake)
    uri = "postgresql+psycopg2://tidelake:s3cret@127.0.0.1:9/catalog?connect_timeout=2"
    assert main(["iceberg", "sync", "--lake", lake.root, "--catalog-uri", uri]) == 75
    err = capsys.readouterr().err
    shown = "tidelake: error: Iceberg catalog postgresql+psycopg2://tidelake:***@127.0.0.1:9/"
    assert err.count("\n") == 1 and err.startswith(shown), err
    assert "s3cret" not in err
    assert (_delta_versions(lake), read_syncpoints(lake)) == before
    assert not Path(iceberg_root(lake)).exists()


@pytest.mark.parametrize(("uri", "expected"), [
    ("not a url", "Iceberg catalog URL 'not a url' is not a SQLAlchemy URL"),
    ("nosuchdb://host/x", "Iceberg catalog nosuchdb://host/x: NoSuchModuleError: Can't load plugin: sqlalchemy.dialects:nosuchdb"),
])
def test_a_bad_catalog_url_is_one_line_exit_2(lake, capsys, uri, expected):
    assert main(["iceberg", "sync", "--lake", lake.root, "--catalog-uri", uri]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err, err


def test_an_object_store_lake_needs_a_catalog_url():
    with pytest.raises(InputError, match=r"s3://bucket/lake: an object-store lake needs \[iceberg\].catalog_uri"):
        open_catalog(LakeLayout("s3://bucket/lake", {}), IcebergConfig())


def test_a_refused_replica_is_one_line_exit_1_and_the_others_are_published(lake, capsys):
    nested = ReplicaCatalog(lake).assign(4, "shop", "nested", CUTS[0]).path
    write_deltalake(nested, pa.table({"id": [1], "s": pa.array([{"a": 1}], pa.struct([("a", pa.int64())]))}))
    cut = _cut(lake, CUTS[1])
    assert record_syncpoint(lake, Syncpoint(CUTS[2], [*cut.replicas, ReplicaAt(4, "shop", "nested", nested, 0)]))
    assert main(["iceberg", "sync", "--lake", lake.root]) == 1
    captured = capsys.readouterr()
    assert captured.err == ("tidelake: error: shop.nested: not published as Iceberg: column 's' is of Delta type struct, "
                            "which tidelake does not publish\n")
    assert captured.out.endswith("3 snapshots published, 0 tables were current, 1 refused\n")
    assert _marks(lake) == dict.fromkeys(TABLES, CUTS[2])
    assert not open_catalog(lake, IcebergConfig()).table_exists(("shop", "nested"))


@pytest.mark.parametrize("outcome", [SyncpointOutcome.ALREADY_RECORDED, SyncpointOutcome.HELD])
def test_the_syncpoint_job_publishes_after_its_cut_when_iceberg_is_enabled(lake, tmp_path, monkeypatch, outcome):
    """The job's stage call (tidelake.orchestration.job_entry.run_job), the cut itself stubbed: the
    Delta side is tests/syncpoint's; here only what follows it. A cut another writer put off still
    publishes the cuts recorded before it, as `tidelake syncpoint` does."""
    cuts = []
    monkeypatch.setattr(job_entry, "run_syncpoint", lambda _spark, layout, interval: cuts.append(layout.root)
                        or SyncpointResult(CUTS[0], outcome, None if outcome is SyncpointOutcome.ALREADY_RECORDED
                                           else "replica of shop.a is being written by `tidelake merge`"))
    text = (f'[changefeed]\nid = "cf"\n[upstream]\npd = ["127.0.0.1:2379"]\n[lake]\nroot = "{lake.root}"\n'
            '[merge]\nsyncpoint_interval = "1m"\n')
    for enabled in (False, True):
        config_file = tmp_path / "changefeed.toml"
        config_file.write_text(text + f"[iceberg]\nenabled = {str(enabled).lower()}\n")
        job_entry.run_job(SyncpointJob(str(config_file)), load_config(config_file), spark=None)
        assert Path(iceberg_root(lake)).exists() is enabled
    assert cuts == [lake.root, lake.root]
    assert _marks(lake) == dict.fromkeys(TABLES, CUTS[0])


def test_a_table_whose_ids_change_source_is_refused_not_mixed(lake):
    """An Iceberg table's field ids come from Delta's column mapping or from names, for good: the
    same name published from a column-mapped table later is refused, its snapshots kept."""
    catalog = open_catalog(lake, IcebergConfig())
    sync_iceberg(catalog, lake)
    mapped = ReplicaCatalog(lake).assign(5, "shop", "orders2", CUTS[1]).path
    write_deltalake(mapped, _rows(range(3)), configuration={"delta.columnMapping.mode": "name",
                                                           "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"})
    cut = _cut(lake, CUTS[1])
    swapped = [ReplicaAt(5, "shop", "orders", mapped, 0) if r.name == "orders" else r for r in cut.replicas]
    assert record_syncpoint(lake, Syncpoint(CUTS[2], swapped))
    report = sync_iceberg(catalog, lake)
    assert report.refused == {"shop.orders": "shop.orders: not published as Iceberg: its field ids were published "
                              "by-name and the replica now has column-mapping ids (column mapping changed); drop its "
                              "Iceberg table to publish it anew"}
    assert _marks(lake) == {"orders": CUTS[1], "items": CUTS[2], "users": CUTS[2]}
