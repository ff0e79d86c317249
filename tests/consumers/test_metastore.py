"""Replicas registered in Spark's embedded Hive metastore follow RENAME and DROP TABLE, syncpoints
are registered as snapshot databases, and a fresh Spark session (another process, another JVM)
queries them by name with time travel.

Counts are checked against the fixture's own replay of the upstream commits (FedLake) and the
replica's Delta log read with delta-rs, not against what the metastore code did.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from consumers.delta_readers import assert_duckdb_reads_as_deltalake
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake

from tidelake.consumers.duckdb_lake import open_lake
from tidelake.lake.replica_catalog import ReplicaState, read_entries
from tidelake.syncpoint.records import read_syncpoints

pytestmark = pytest.mark.spark

QUERY = """
import json, sys
from tidelake.spark.spark_session import get_session
spark = get_session("fresh-reader", master="local[1]", extra_confs=json.loads(sys.argv[1]))
tables = sorted(f"{t.namespace[0]}.{t.name}" for db in spark.catalog.listDatabases()
                for t in spark.catalog.listTables(db.name))
count = lambda sql: spark.sql(sql).first()[0]
counts = {t: count(f"SELECT count(*) FROM {t}") for t in tables}
print(json.dumps({"tables": tables, "counts": counts,
                  "orders_v2_at": count(f"SELECT count(*) FROM shop.orders_v2 VERSION AS OF {sys.argv[2]}")}))
"""


def tidelake(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tidelake", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})


def test_catalog_follows_renames_swaps_and_drops_and_a_fresh_session_reads_by_name(spark, tmp_path):
    from tidelake import tso
    from tidelake.lake.checkpoint import version_at_checkpoint
    from tidelake.merge.merge_run import run_merge
    from tidelake.syncpoint.cut import run_syncpoint

    lake = FedLake(str(tmp_path / "lake"))
    config = tmp_path / "cf.toml"
    config.write_text(f'[changefeed]\nid = "cat"\n[upstream]\npd = ["127.0.0.1:2379"]\n'
                      f'[lake]\nroot = "{lake.layout.root}"\n[catalog]\nmetastore_dir = "meta"\n')
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_schema("archive"))
    names = ("orders", "items", "tmp", "a", "b")
    for name in names:
        lake.ddl(lake.up.create_table("shop", name, [("id", "bigint", "pk"), ("v", "int")]))
    with lake.txn() as t:
        for i, name in enumerate(names):
            for row in range(i + 1):  # a different row count per table tells them apart
                t.put("shop", name, {"id": row, "v": i})
    lake.up.ts = tso.compose(2_000)  # a whole second: the 1 s syncpoint boundary S1
    first = lake.resolve(lake.up.ts)
    assert not run_merge(spark, lake.layout, write_log=False).failed
    assert run_syncpoint(spark, lake.layout, 1).ts == first
    at_first = {f"shop__sp_{first}.{name}": len(lake.expected_rows("shop", name, first)) for name in names}

    synced = tidelake("catalog", "sync", "--config", str(config))
    assert synced.returncode == 0, synced.stderr[-2000:]
    assert synced.stdout.count("registered   shop.") == len(names), synced.stdout

    lake.ddl(lake.up.rename_table("shop", "orders", "shop", "orders_v2"))  # within a database
    lake.ddl(lake.up.rename_table("shop", "items", "archive", "items"))  # across databases
    for old, new in (("a", "swap"), ("b", "a"), ("swap", "b")):  # a and b swap names
        lake.ddl(lake.up.rename_table("shop", old, "shop", new))
    old_tmp = lake.up.table("shop", "tmp").id
    lake.ddl(lake.up.drop_table("shop", "tmp"))
    lake.ddl(lake.up.create_table("shop", "tmp", [("id", "bigint", "pk"), ("v", "int")]))  # the name reused
    with lake.txn() as t:
        t.delete("shop", "orders_v2", {"id": 0, "v": 0})
        for row in (9, 10):
            t.put("shop", "orders_v2", {"id": row, "v": 9})
        t.put("shop", "tmp", {"id": 1, "v": 1})
    lake.up.ts = tso.compose(3_000)  # the next syncpoint S2
    last = lake.up.ts
    lake.lander.resolve(old_tmp, last)  # TiKV still resolves a dropped table's key range
    lake.resolve(last)
    assert not run_merge(spark, lake.layout, write_log=False).failed
    assert run_syncpoint(spark, lake.layout, 1).ts == last

    synced = tidelake("catalog", "sync", "--config", str(config))
    assert synced.returncode == 0, synced.stdout + synced.stderr[-2000:]
    for line in ("renamed      shop.orders -> shop.orders_v2", "renamed      shop.items -> archive.items",
                 "renamed      shop.a -> shop.b", "renamed      shop.b -> shop.a", "unregistered shop.tmp",
                 "registered   shop.tmp", f"snapshot     shop__sp_{last}", f"snapshot     archive__sp_{last}",
                 "snapshot     shop__sp_latest", "snapshot     archive__sp_latest"):
        assert line in synced.stdout, synced.stdout
    assert Path(lake.layout.replica_path("shop", "tmp")).is_dir()  # unregistering keeps the dropped replica's files

    confs = tidelake("catalog", "confs", "--config", str(config), "--json")
    assert confs.returncode == 0, confs.stderr
    orders_path = lake.layout.replica_path("shop", "orders")  # the folder keeps its first name
    before_rename = version_at_checkpoint(orders_path, first)
    query = subprocess.run([sys.executable, "-c", QUERY, confs.stdout, str(before_rename)], capture_output=True,
                           text=True, timeout=600, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert query.returncode == 0, query.stderr[-2000:]
    seen = json.loads(query.stdout.strip().splitlines()[-1])
    upstream = {"shop.orders_v2": ("shop", "orders_v2"), "archive.items": ("archive", "items"),
                "shop.a": ("shop", "a"), "shop.b": ("shop", "b"), "shop.tmp": ("shop", "tmp")}
    now = {name: len(lake.expected_rows(db, t, last)) for name, (db, t) in upstream.items()}
    # the newest syncpoint is S2 = last: its snapshots and `latest` show upstream as of it
    snapshots = {f"{db}__sp_{label}.{t}": now[name] for name, (db, t) in upstream.items() for label in (last, "latest")}
    snapshots |= at_first  # S1: the names and rows before the renames, the swap and the drop
    assert seen["tables"] == sorted(upstream | snapshots)
    assert seen["counts"] == now | snapshots
    for sp in read_syncpoints(lake.layout):  # the replica at the cut's version, read with delta-rs
        for replica in sp.replicas:
            rows = DeltaTable(replica.path, version=replica.version).to_pyarrow_table().num_rows
            assert rows == seen["counts"][f"{replica.db}__sp_{sp.ts}.{replica.name}"]
    assert seen["counts"]["shop.a"] == 5 and seen["counts"]["shop.b"] == 4  # swapped: b held 5 rows, a 4
    _duckdb_reads_the_same_cuts(lake.layout, first)
    assert seen["orders_v2_at"] == len(lake.expected_rows("shop", "orders_v2", first)) == 1
    assert seen["orders_v2_at"] == DeltaTable(orders_path, version=before_rename).to_pyarrow_table().num_rows

    config.write_text(config.read_text() + "syncpoints = 1\n")  # keep only the newest syncpoint
    synced = tidelake("catalog", "sync", "--config", str(config))
    assert synced.returncode == 0, synced.stdout + synced.stderr[-2000:]
    assert f"dropped      shop__sp_{first} " in synced.stdout, synced.stdout
    assert "0 registered, 0 renamed, 0 unregistered, 5 unchanged, 0 conflicts; syncpoint snapshot databases: " \
           "0 created, 1 dropped, 4 unchanged" in synced.stdout, synced.stdout


def test_catalog_commands_need_a_catalog_section(tmp_path):
    from tidelake.cli import main

    config = tmp_path / "cf.toml"
    config.write_text(f'[changefeed]\nid = "cat"\n[upstream]\npd = ["127.0.0.1:2379"]\n[lake]\nroot = "{tmp_path}"\n')
    assert main(["catalog", "confs", "--config", str(config)]) == 2


def test_metastore_dir_must_be_a_folder(tmp_path):
    from tidelake.config import load_config
    from tidelake.errors import InputError

    (tmp_path / "afile").write_text("")
    config = tmp_path / "cf.toml"
    config.write_text(f'[changefeed]\nid = "cat"\n[upstream]\npd = ["127.0.0.1:2379"]\n[lake]\nroot = "{tmp_path}"\n'
                      '[catalog]\nmetastore_dir = "afile"\n')
    with pytest.raises(InputError, match=r"\[catalog\]\.metastore_dir: expected a folder"):
        load_config(config)
    config.write_text(config.read_text().replace('"afile"', '"meta"'))
    assert load_config(config).catalog.metastore_dir == str(tmp_path / "meta")


def test_catalog_syncpoints_is_a_count(tmp_path):
    from tidelake.config import load_config
    from tidelake.errors import InputError

    config = tmp_path / "cf.toml"
    base = f'[changefeed]\nid = "cat"\n[upstream]\npd = ["127.0.0.1:2379"]\n[lake]\nroot = "{tmp_path}"\n[catalog]\n'
    config.write_text(base)
    assert load_config(config).catalog.syncpoints == 12
    config.write_text(base + "syncpoints = 0\n")
    assert load_config(config).catalog.syncpoints == 0
    for bad in ("-1", '"3"', "true"):
        config.write_text(base + f"syncpoints = {bad}\n")
        with pytest.raises(InputError, match=r"\[catalog\]\.syncpoints: expected an integer >= 0"):
            load_config(config)


def _duckdb_reads_the_same_cuts(layout, first: int) -> None:
    """`tidelake duckdb`'s views: every replica now, and every cut (under the names the tables
    had at it) at its Delta version, as delta-rs reads them; `latest` is the newest cut."""
    con = open_lake(layout, [first])
    for entry in read_entries(layout).values():
        if entry.state != ReplicaState.DROPPED:
            got = con.sql(f'SELECT * FROM "{entry.db}"."{entry.name}"').to_arrow_table()
            assert_duckdb_reads_as_deltalake(got, entry.path, DeltaTable(entry.path).version(), entry.name)
    cuts = read_syncpoints(layout)
    for sp, label in [(cuts[0], first), (cuts[-1], "latest")]:
        for replica in sp.replicas:
            got = con.sql(f'SELECT * FROM "{replica.db}__sp_{label}"."{replica.name}"').to_arrow_table()
            assert_duckdb_reads_as_deltalake(got, replica.path, replica.version, f"{replica.qualified_name} at {label}")
