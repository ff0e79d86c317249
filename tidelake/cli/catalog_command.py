"""`tidelake catalog sync|confs --config FILE`: the replicas as tables of a Hive metastore
(tidelake.consumers.metastore).

`sync` registers, renames and unregisters replicas to match the replica catalog, and the newest
syncpoints as snapshot databases; run it after merges (it is idempotent). `confs` prints the Spark confs that open the same metastore, for
`pyspark`/`spark-submit --conf` or a SparkSession builder, so users query `db.table`.
Owner: `tidelake catalog`.
"""

from __future__ import annotations

import argparse
import json
import shlex

from tidelake.cli.target import resolve_target
from tidelake.config import CatalogConfig, load_config
from tidelake.consumers.metastore import metastore_confs, sync_catalog, sync_syncpoints
from tidelake.errors import InputError
from tidelake.spark.spark_session import get_session


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("catalog", help="register replicas as tables of a Hive metastore")
    actions = parser.add_subparsers(dest="catalog_action", metavar="ACTION", required=True)
    sync = actions.add_parser("sync", help="make the metastore match the replica catalog (local Spark)")
    sync.add_argument("--config", metavar="FILE", required=True, help="changefeed TOML with a [catalog] section")
    sync.set_defaults(handler=_sync, lake=None)
    confs = actions.add_parser("confs", help="print the Spark confs that open the metastore")
    confs.add_argument("--config", metavar="FILE", required=True, help="changefeed TOML with a [catalog] section")
    confs.add_argument("--json", action="store_true", help="print a JSON object instead of --conf lines")
    confs.set_defaults(handler=_confs, lake=None)


def _catalog(args: argparse.Namespace) -> CatalogConfig:
    config = load_config(args.config)
    if config.catalog.metastore_dir is None:
        raise InputError(f"{args.config}: [catalog].metastore_dir is not set: no metastore to register replicas in")
    return config.catalog


def _confs(args: argparse.Namespace) -> int:
    confs = metastore_confs(_catalog(args).metastore_dir)
    if args.json:
        print(json.dumps(confs, indent=2))
    else:
        for key, value in confs.items():
            print(f"--conf {shlex.quote(f'{key}={value}')}")
    return 0


def _sync(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    folder = catalog.metastore_dir
    layout = resolve_target(args).layout
    spark = get_session("tidelake-catalog", extra_confs=metastore_confs(folder))
    try:
        result = sync_catalog(spark, layout)
        snapshots = sync_syncpoints(spark, layout, catalog.syncpoints)
    except Exception as exc:
        # Derby error XSDB6: another JVM (a reader session, a second sync) holds the metastore.
        if "XSDB6" in str(exc) or "Another instance of Derby" in str(exc):
            raise InputError(f"metastore {folder} is open in another Spark session; embedded Derby "
                             "admits one JVM at a time: stop it and sync again") from None
        raise
    finally:
        spark.stop()
    for name in result.registered:
        print(f"registered   {name}")
    for old, new in result.renamed:
        print(f"renamed      {old} -> {new}")
    for name in result.unregistered:
        print(f"unregistered {name} (its replica folder stays)")
    for name, why in result.conflicts.items():
        print(f"left alone   {name}: {why}")
    for name in snapshots.created:
        print(f"snapshot     {name}")
    for name in snapshots.dropped:
        print(f"dropped      {name} (an older syncpoint than the newest {catalog.syncpoints})")
    print(f"metastore {folder}: {len(result.registered)} registered, {len(result.renamed)} renamed, "
          f"{len(result.unregistered)} unregistered, {len(result.unchanged)} unchanged, "
          f"{len(result.conflicts)} conflicts; syncpoint snapshot databases: {len(snapshots.created)} created, "
          f"{len(snapshots.dropped)} dropped, {len(snapshots.unchanged)} unchanged")
    return 1 if result.conflicts else 0
