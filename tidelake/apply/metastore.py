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
a table whose upstream name changed is renamed (within a database) or dropped and registered
again (across databases; Hive renames only within one), and a dropped table is unregistered
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
    """Register, rename and unregister replicas so the metastore matches the replica catalog."""
    result = CatalogSync()
    registered = registered_tables(spark)
    by_name = {names: location for location, names in registered.items()}
    for entry in sorted(replica_entries(layout).values(), key=lambda e: e.table_key):
        location = _normal_location(entry.path)
        current = registered.get(location)
        if entry.state == ReplicaState.DROPPED:
            if current is not None:
                spark.sql(f"DROP TABLE {_qualified(*current)}")
                result.unregistered.append(".".join(current))
            continue
        wanted = (entry.db.lower(), entry.name.lower())
        name = ".".join(wanted)
        if current == wanted:
            result.unchanged.append(name)
            continue
        holder = by_name.get(wanted)
        if holder is not None and holder != location:
            result.conflicts[name] = f"the name is registered for {holder}, not for the replica at {entry.path}"
            continue
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {_quote(wanted[0])}")
        if current is not None and current[0] == wanted[0]:
            spark.sql(f"ALTER TABLE {_qualified(*current)} RENAME TO {_qualified(*wanted)}")
        else:
            if current is not None:
                spark.sql(f"DROP TABLE {_qualified(*current)}")
            spark.sql(f"CREATE TABLE {_qualified(*wanted)} USING delta LOCATION {_string(entry.path)}")
        if current is None:
            result.registered.append(name)
        else:
            result.renamed.append((".".join(current), name))
        by_name.pop(current, None)
        by_name[wanted] = location
    return result
