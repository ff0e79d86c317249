"""Replicas registered in Spark's embedded Hive metastore follow RENAME and DROP TABLE, and a
fresh Spark session (another process, another JVM) queries them by name with time travel.

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
from lake_fixtures import FedLake

pytestmark = pytest.mark.spark

QUERY = """
import json, sys
from tidelake.apply.session import get_session
spark = get_session("fresh-reader", master="local[1]", extra_confs=json.loads(sys.argv[1]))
tables = sorted(f"{t.namespace[0]}.{t.name}" for db in spark.catalog.listDatabases()
                for t in spark.catalog.listTables(db.name))
count = lambda sql: spark.sql(sql).first()[0]
print(json.dumps({"tables": tables,
                  "orders_v2": count("SELECT count(*) FROM shop.orders_v2"),
                  "orders_v2_at": count(f"SELECT count(*) FROM shop.orders_v2 VERSION AS OF {sys.argv[2]}"),
                  "items": count("SELECT count(*) FROM archive.items")}))
"""


def tidelake(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tidelake", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})


def test_catalog_follows_renames_and_drops_and_a_fresh_session_reads_by_name(spark, tmp_path):
    from deltalake import DeltaTable

    from tidelake.apply.merge_job import run_merge

    lake = FedLake(str(tmp_path / "lake"))
    config = tmp_path / "cf.toml"
    config.write_text(f'[changefeed]\nid = "cat"\n[upstream]\npd = ["127.0.0.1:2379"]\n'
                      f'[lake]\nroot = "{lake.layout.root}"\n[catalog]\nmetastore_dir = "meta"\n')
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_schema("archive"))
    for name in ("orders", "items", "tmp"):
        lake.ddl(lake.up.create_table("shop", name, [("id", "bigint", "pk"), ("v", "int")]))
    with lake.txn() as t:
        for i in range(5):
            t.put("shop", "orders", {"id": i, "v": i})
            t.put("shop", "items", {"id": i, "v": -i})
            t.put("shop", "tmp", {"id": i, "v": 0})
    first = lake.resolve()
    assert not run_merge(spark, lake.layout, write_log=False).failed

    synced = tidelake("catalog", "sync", "--config", str(config))
    assert synced.returncode == 0, synced.stderr[-2000:]
    assert synced.stdout.count("registered   shop.") == 3, synced.stdout

    lake.ddl(lake.up.rename_table("shop", "orders", "shop", "orders_v2"))
    lake.ddl(lake.up.rename_table("shop", "items", "archive", "items"))
    tmp_path_of_tmp = lake.layout.replica_path("shop", "tmp")
    tmp_id = lake.up.table("shop", "tmp").id
    lake.ddl(lake.up.drop_table("shop", "tmp"))
    with lake.txn() as t:
        t.delete("shop", "orders_v2", {"id": 0, "v": 0})
        t.put("shop", "orders_v2", {"id": 9, "v": 9})
        t.put("shop", "orders_v2", {"id": 10, "v": 10})
    last = lake.up.tick()
    lake.lander.resolve(tmp_id, last)  # TiKV still resolves a dropped table's key range
    lake.resolve(last)
    assert not run_merge(spark, lake.layout, write_log=False).failed

    synced = tidelake("catalog", "sync", "--config", str(config))
    assert synced.returncode == 0, synced.stderr[-2000:]
    assert "renamed      shop.orders -> shop.orders_v2" in synced.stdout
    assert "renamed      shop.items -> archive.items" in synced.stdout
    assert "unregistered shop.tmp" in synced.stdout
    assert Path(tmp_path_of_tmp).is_dir()  # unregistering keeps the replica's files

    confs = tidelake("catalog", "confs", "--config", str(config), "--json")
    assert confs.returncode == 0, confs.stderr
    orders_path = lake.layout.replica_path("shop", "orders")  # the folder keeps its first name
    from tidelake.lake.checkpoint import version_at_checkpoint

    before_rename = version_at_checkpoint(orders_path, first)
    query = subprocess.run([sys.executable, "-c", QUERY, confs.stdout, str(before_rename)], capture_output=True,
                           text=True, timeout=600, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert query.returncode == 0, query.stderr[-2000:]
    seen = json.loads(query.stdout.strip().splitlines()[-1])
    assert seen["tables"] == ["archive.items", "shop.orders_v2"]
    assert seen["orders_v2"] == len(lake.expected_rows("shop", "orders_v2", last)) == 6
    assert seen["orders_v2_at"] == len(lake.expected_rows("shop", "orders_v2", first)) == 5
    assert seen["orders_v2_at"] == DeltaTable(orders_path, version=before_rename).to_pyarrow_table().num_rows
    assert seen["items"] == len(lake.expected_rows("archive", "items", last))


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
