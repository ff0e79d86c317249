"""Replicas as tables of a Hive metastore, so Spark SQL users query `db.table` instead of paths.

Spark ships an embedded Hive metastore (the spark-hive jars of the pyspark package) that keeps
its catalog in an Apache Derby database in a folder: `[catalog] metastore_dir` names that folder,
and `metastore_confs` are the Spark confs that open it. Any Spark session started with them sees
the registered replicas, with Delta's time travel (`SELECT ... FROM db.t VERSION AS OF v`).
Derby in embedded mode admits one JVM at a time: run `tidelake catalog sync` while no other
session holds the metastore, or point the confs at a shared metastore (Spark's
`spark.hadoop.javax.jdo.option.*`, not tested here).

The replica catalog (tidelake.lake.replica_catalog) is the truth; `sync_catalog` makes the
metastore follow it. Each replica is an external table whose LOCATION is its folder, which never
moves (a RENAME TABLE changes only the names), so the folder identifies a registered replica:
a table whose upstream name changed is unregistered under the old name and registered under the
new one (Hive's own rename works only within a database), and a dropped table is unregistered
while its folder stays. Hive lowercases names, so `Shop.Orders` is `shop.orders` there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaState
from tidelake.lake.status import replica_entries

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def metastore_confs(metastore_dir: str) -> dict[str, str]:
    """Spark confs (static: set them when the session starts) for the Derby metastore in the folder."""
    folder = Path(metastore_dir).resolve()
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true",
        "spark.sql.warehouse.dir": str(folder / "warehouse"),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={folder}",
    }


@dataclass
class CatalogSync:
    """What one sync changed, by qualified metastore name."""

    registered: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    unregistered: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    conflicts: dict[str, str] = field(default_factory=dict)  # name -> why it was left alone


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _qualified(db: str, name: str) -> str:
    return f"{_quote(db)}.{_quote(name)}"


def _string(text: str) -> str:
    """A Spark SQL string literal (a replica folder is named after upstream names, which may hold ')."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _normal_location(location: str) -> str:
    """Metastore locations come back as URIs (file:/a/b); replica paths may be plain paths."""
    for prefix in ("file://", "file:"):
        if location.startswith(prefix):
            location = location[len(prefix):]
            break
    return location.rstrip("/")


def registered_tables(spark: SparkSession) -> dict[str, tuple[str, str]]:
    """Location -> (db, table) of every external table in the metastore."""
    found: dict[str, tuple[str, str]] = {}
    for db in spark.catalog.listDatabases():
        for table in spark.catalog.listTables(db.name):
            if table.tableType != "EXTERNAL":
                continue
            rows = spark.sql(f"DESCRIBE TABLE EXTENDED {_qualified(db.name, table.name)}").collect()
            location = next((r.data_type for r in rows if r.col_name == "Location"), None)
            if location:
                found[_normal_location(location)] = (db.name, table.name)
    return found


def sync_catalog(spark: SparkSession, layout: LakeLayout) -> CatalogSync:
    """Register and unregister replicas so the metastore matches the replica catalog.

    Two passes, so that names freed in this sync can be taken in it (a dropped table's name
    reused, two tables swapping names): first every replica registered under a name it no
    longer has is unregistered, then every replica without a registration is registered. A
    rename is that pair (external tables: only metadata moves, never files)."""
    result = CatalogSync()
    registered = registered_tables(spark)
    wanted: dict[str, tuple[str, str] | None] = {}
    entries = sorted(replica_entries(layout).values(), key=lambda e: e.table_key)
    for entry in entries:
        name = None if entry.state == ReplicaState.DROPPED else (entry.db.lower(), entry.name.lower())
        wanted[_normal_location(entry.path)] = name
    moved: dict[str, str] = {}
    for location, name in wanted.items():
        current = registered.get(location)
        if current is None or current == name:
            continue
        spark.sql(f"DROP TABLE {_qualified(*current)}")
        del registered[location]
        if name is None:
            result.unregistered.append(".".join(current))
        else:
            moved[location] = ".".join(current)
    holders = {names: location for location, names in registered.items()}
    for entry in entries:
        location = _normal_location(entry.path)
        name = wanted[location]
        if name is None:
            continue
        qualified = ".".join(name)
        if registered.get(location) == name:
            result.unchanged.append(qualified)
            continue
        holder = holders.get(name)
        if holder is not None:
            result.conflicts[qualified] = f"the name is registered for {holder}, not for the replica at {entry.path}"
            continue
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {_quote(name[0])}")
        spark.sql(f"CREATE TABLE {_qualified(*name)} USING delta LOCATION {_string(entry.path)}")
        holders[name] = location
        if location in moved:
            result.renamed.append((moved[location], qualified))
        else:
            result.registered.append(qualified)
    return result
