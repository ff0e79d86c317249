"""Replicas as tables of a Hive metastore, so Spark SQL users query `db.table` instead of paths,
and syncpoints as snapshot databases (`<db>__sp_<S>`, `<db>__sp_latest`) of views at one TSO.
The replica catalog is the truth; `sync_catalog` makes the metastore follow it. Owner: `tidelake
catalog sync`.

More: docs/internals.md#metastore.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaState, read_entries
from tidelake.syncpoint.records import ReplicaAt, Syncpoint, read_syncpoints

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
    entries = sorted(read_entries(layout).values(), key=lambda e: e.table_key)
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


SNAPSHOT_SUFFIX = "__sp_"
LATEST = "latest"
_SNAPSHOT_COMMENT = re.compile(r"^tidelake syncpoint (\d+)$")


@dataclass
class SnapshotSync:
    """What one sync did to the syncpoint snapshot databases, by database name."""

    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def snapshot_database(db: str, ts: int | None) -> str:
    """`shop__sp_<ts>`, or `shop__sp_latest` for ts None (Hive lowercases names)."""
    return f"{db.lower()}{SNAPSHOT_SUFFIX}{LATEST if ts is None else ts}"


def _snapshot_databases(spark: SparkSession) -> dict[str, int]:
    """Database name -> syncpoint ts of every snapshot database a sync created."""
    found = {}
    for db in spark.catalog.listDatabases():
        shown = _SNAPSHOT_COMMENT.match(db.description or "")
        if shown and SNAPSHOT_SUFFIX in db.name:
            found[db.name] = int(shown.group(1))
    return found


def _views(spark: SparkSession, database: str) -> set[str]:
    return {t.name for t in spark.catalog.listTables(database)}


def _wanted_snapshots(recorded: list[Syncpoint], keep: int) -> dict[str, tuple[int, list[ReplicaAt]]]:
    """Database name -> (syncpoint ts, its replicas in that upstream database), for the newest
    `keep` syncpoints and `latest`."""
    newest = recorded[-keep:] if keep else []
    wanted: dict[str, tuple[int, list[ReplicaAt]]] = {}
    shown = [(sp, sp.ts) for sp in newest] + [(newest[-1], None)] * bool(newest)
    for sp, label in shown:
        for replica in sp.replicas:
            wanted.setdefault(snapshot_database(replica.db, label), (sp.ts, []))[1].append(replica)
    return wanted


def sync_syncpoints(spark: SparkSession, layout: LakeLayout, keep: int) -> SnapshotSync:
    """Create the snapshot databases of the newest `keep` syncpoints, drop those of older ones."""
    result = SnapshotSync()
    wanted = _wanted_snapshots(read_syncpoints(layout), keep)
    for name, ts in sorted(_snapshot_databases(spark).items()):
        if name in wanted and wanted[name][0] == ts and _views(spark, name) == {r.name.lower() for r in wanted[name][1]}:
            result.unchanged.append(name)
            continue  # complete; a sync that stopped halfway left some views out and is redone
        spark.sql(f"DROP DATABASE {_quote(name)} CASCADE")  # views only: no replica file is touched
        if name not in wanted:
            result.dropped.append(name)
    for name, (ts, replicas) in sorted(wanted.items()):
        if name in result.unchanged:
            continue
        spark.sql(f"CREATE DATABASE {_quote(name)} COMMENT {_string(f'tidelake syncpoint {ts}')}")
        for replica in replicas:
            spark.sql(f"CREATE VIEW {_qualified(name, replica.name.lower())} AS SELECT * FROM "
                      f"delta.{_quote(replica.path)} VERSION AS OF {replica.version}")
        result.created.append(name)
    return result
