"""Column-mapped replicas (name mode) written on the driver by the window rewrite
(tidelake.merge.writers.file_rewrite): the same windows merged into twin lakes, one on the driver,
one by Spark, read back by Spark equal each other and the upstream replay after every window
(appends, updates, deletes, an update of a key whose file holds other keys, a window without
changes, a RENAME COLUMN and a DROP COLUMN applied in place, then a driver window rewriting a file
that still holds the dropped column, one the rewrite refuses, which goes to Spark, not to delta-rs'
MERGE, and a driver window rewriting Spark's file), their change data feeds
(table_changes) equal, DuckDB reads the driver's as Spark does, and the driver's files store
physical names and field ids as Spark's do.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F
from consumers.delta_readers import assert_same_rows, duckdb_read
from merge.lake_fixtures import FedLake, by_driver, by_rewrite, replica_rows, sorted_rows

from tidelake.lake.checkpoint import MERGE_APP_ID
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.merge import table_merge
from tidelake.merge.merge_run import run_merge
from tidelake.merge.writers import delta_rs_writer, file_rewrite
from tidelake.merge.writers.driver_features import driver_protocol

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

NOTE = "my note"  # a space: the replica is created with column mapping
_TWIN = "_tidelake_twin"


def _lake(tmp_path: Path, name: str) -> FedLake:
    lake = FedLake(str(tmp_path / name))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), (NOTE, "varchar(20)"),
                                                      ("qty", "int")]))
    return lake


def _path(lake: FedLake) -> str:
    return ReplicaCatalog(lake.layout).find("shop", "orders").path


def _files(path: str, commit: dict) -> list[tuple[str, dict]]:
    """The (path, parsed stats) of the data files commit `commit` added, as its log entry holds them."""
    return [(e["add"]["path"], json.loads(e["add"]["stats"])) for e in _log(path, commit) if "add" in e]


def _log(path: str, commit: dict) -> list[dict]:
    """The actions of commit `commit` (a DeltaTable.history() entry), as its log entry holds them."""
    with open(f"{path}/_delta_log/{commit['version']:020d}.json") as f:
        return [json.loads(line) for line in f]


def _changes(spark, path: str, versions: tuple[int, int]) -> list[tuple]:
    """The change data feed of `versions` (inclusive), without its version and timestamp columns."""
    rows = spark.sql(f"SELECT * FROM table_changes_by_path('{path}', {versions[0]}, {versions[1]})").collect()
    return sorted(tuple(sorted((k, repr(v)) for k, v in r.asDict().items() if k not in
                               ("_commit_version", "_commit_timestamp"))) for r in rows)


def _read_twins(spark, paths: dict[str, str]) -> dict[str, list[dict]]:
    """Each named replica's rows read back by Spark, all in one job."""
    frames = [spark.read.format("delta").load(path).withColumn(_TWIN, F.lit(name)) for name, path in paths.items()]
    rows = [r.asDict() for r in functools.reduce(lambda a, b: a.unionByName(b), frames).collect()]
    return {name: sorted_rows([{k: v for k, v in r.items() if k != _TWIN} for r in rows if r[_TWIN] == name])
            for name in paths}


def _altered_at(path: str, operation: str) -> int:
    """The version of the replica's one commit of `operation` (an ALTER TABLE's)."""
    (version,) = [c["version"] for c in DeltaTable(path).history() if c["operation"] == operation]
    return version


def test_column_mapped_windows_on_the_driver_read_back_by_spark_as_spark_merges_them(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(delta_rs_writer, "CHECKPOINT_INTERVAL", 4)  # a delta-rs checkpoint Spark reads back
    lakes = {"driver": _lake(tmp_path, "driver"), "spark": _lake(tmp_path, "spark")}

    def merge(writer: str | None) -> None:
        """One merge of each twin (the Spark one with no driver window); both equal the upstream.
        `writer`: who made the driver twin's last commit, the rewrite, delta-rs or Spark (None: not checked)."""
        uppers = {}
        for name, lake in lakes.items():
            uppers[name] = lake.resolve()
            with monkeypatch.context() as m:
                if name == "spark":
                    m.setattr(table_merge, "DRIVER_WINDOW_MAX_ROWS", -1)
                (result,) = run_merge(spark, lake.layout).tables
            path = _path(lake)
            assert result.checkpoint_after == uppers[name] == DeltaTable(path).transaction_version(MERGE_APP_ID)
            last = DeltaTable(path).history(1)[0]
            if name == "spark":
                assert not by_driver(last)
            elif writer is not None:
                assert writer == ("rewrite" if by_rewrite(last) else "delta-rs" if by_driver(last) else "spark"), last
        read = _read_twins(spark, {name: _path(lake) for name, lake in lakes.items()})
        for name, lake in lakes.items():
            assert read[name] == lake.expected_rows("shop", "orders", uppers[name]), name

    def both(*changes) -> None:
        """The same upstream txn in both twins (their clocks and ids advance alike)."""
        for lake in lakes.values():
            with lake.txn() as t:
                for kind, values in changes:
                    getattr(t, kind)("shop", "orders", values)

    row = lambda i, note, qty=1: {"id": i, NOTE: f"{note}{i}", "qty": qty}  # noqa: E731

    merge(None)  # the replicas are created (by Spark: column mapping)
    driver_path, spark_path = _path(lakes["driver"]), _path(lakes["spark"])
    assert DeltaTable(driver_path).metadata().configuration["delta.columnMapping.mode"] == "name"
    assert driver_protocol(DeltaTable(driver_path), column_mapping=True)
    assert not driver_protocol(DeltaTable(driver_path))

    both(*[("put", row(i, "a", i)) for i in range(1, 9)])
    merge("rewrite")  # new keys only: an append, the rewrite of no file
    # 1 and 2 share their file with 3..8
    both(("put", row(1, "u", 10)), ("delete", row(2, "")), ("put", row(9, "n")))
    merge("rewrite")
    both(("delete", row(3, "")))  # deletes only
    merge("rewrite")
    merge("delta-rs")  # no change: the txn alone (delta-rs' commit of no action)

    qty = DeltaTable(driver_path).schema().to_arrow().field("qty").metadata[b"delta.columnMapping.physicalName"]
    for lake in lakes.values():
        lake.ddl(lake.up.rename_column("shop", "orders", NOTE, "the note"))
        lake.ddl(lake.up.drop_column("shop", "orders", "qty"))
    merge(None)  # the RENAME and the DROP in place (Spark's ALTER TABLE), no rows rewritten
    for path in (driver_path, spark_path):
        assert {"the note", "qty"} & set(DeltaTable(path).schema().to_arrow().names) == {"the note"}
    assert all(qty.decode() in pq.ParquetFile(f"{driver_path}/{file}").schema_arrow.names
               for file in DeltaTable(driver_path).get_add_actions().column("path").to_pylist())

    # 4 is in a file written before the drop, holding its column; 10 is new
    both(("put", {"id": 4, "the note": "r4"}), ("put", {"id": 10, "the note": "r10"}))
    merge("rewrite")

    with monkeypatch.context() as m:  # a window the rewrite refuses (too much to read): Spark's, not delta-rs'
        m.setattr(file_rewrite, "REWRITE_MAX_BYTES", 0)
        both(("put", {"id": 5, "the note": "s5"}))
        merge("spark")
    by_spark = {file for commit in DeltaTable(driver_path).history() if not by_driver(commit)
                for file, _ in _files(driver_path, commit)}
    both(("put", {"id": 7, "the note": "d7"}), ("delete", {"id": 8, "the note": ""}),
         ("put", {"id": 11, "the note": "d11"}))
    merge("rewrite")  # the driver goes on from Spark's files
    removed = {e["remove"]["path"] for e in _log(driver_path, DeltaTable(driver_path).history(1)[0]) if "remove" in e}
    assert removed and removed <= by_spark, (removed, by_spark)

    # The driver's last data file: physical names with the mapping ids as Parquet field ids, and
    # statistics keyed by physical name over the same columns as Spark's, as the Delta schema says.
    for path, commit in ((driver_path, DeltaTable(driver_path).history(1)[0]),
                         (spark_path, DeltaTable(spark_path).history(1)[0])):
        fields = {f.name: f.metadata for f in DeltaTable(path).schema().to_arrow()}
        physical = {m[b"delta.columnMapping.physicalName"].decode(): int(m[b"delta.columnMapping.id"])
                    for m in fields.values()}
        for file, stats in _files(path, commit):
            stored = pq.ParquetFile(f"{path}/{file}").schema_arrow
            ids = {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in stored if f.name in physical}
            assert ids == physical, path
            assert set(stats["nullCount"]) == set(physical), path
            assert stats["numRecords"] == pq.ParquetFile(f"{path}/{file}").metadata.num_rows
    assert any(f.name.endswith(".checkpoint.parquet") for f in Path(driver_path, "_delta_log").iterdir())
    # `tidelake duckdb` (deltalake refuses column mapping) reads the driver's replica as Spark does
    driver = lakes["driver"]
    assert_same_rows(duckdb_read(driver.layout, "shop.orders", DeltaTable(driver_path).version()),
                     replica_rows(spark, driver_path), "duckdb")

    # The change data feeds before the rename and after the drop (Spark reads none across either):
    # 4's, 5's and 7's pre- and postimages, 10's and 11's inserts, 8's delete after it.
    spans = {path: ((1, _altered_at(path, "RENAME COLUMN") - 1),
                    (_altered_at(path, "DROP COLUMNS") + 1, DeltaTable(path).version()))
             for path in (driver_path, spark_path)}
    for i, count in enumerate((None, 9)):
        driver_changes = _changes(spark, driver_path, spans[driver_path][i])
        assert driver_changes == _changes(spark, spark_path, spans[spark_path][i]), spans
        assert count is None or len(driver_changes) == count, driver_changes
    for lake in lakes.values():
        lake.close()
