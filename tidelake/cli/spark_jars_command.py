"""`tidelake spark-jars DIR`: the jars of the Spark jobs, resolved once into a folder.

A cluster deployment fills DIR on every node that runs a driver or an executor (the Airflow
workers and the Spark workers: an image layer or a shared mount) and names DIR in the `spark_jars_dir`
extra of Airflow's Spark connection, so no job resolves packages or copies the jars per application
(tidelake.spark.cluster_jars). Owner: `tidelake spark-jars`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tidelake.spark.cluster_jars import MANIFEST, class_path, install_jars
from tidelake.spark.s3a import hadoop_aws_package
from tidelake.spark.spark_session import delta_package


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("spark-jars", help="resolve the Spark jobs' jars into a folder (a Spark connection's spark_jars_dir)")
    parser.add_argument("folder", type=Path, help="where the jars go (created; refilled when its packages differ)")
    parser.add_argument("--no-s3", action="store_true", help="leave out hadoop-aws and the AWS SDK (lakes on a filesystem)")
    parser.add_argument("--package", action="append", default=[], metavar="G:A:V",
                        help="an extra Maven package (repeatable), as in a Spark connection's spark_packages extra")
    parser.set_defaults(handler=_spark_jars)


def _spark_jars(args: argparse.Namespace) -> int:
    packages = [delta_package(), *([] if args.no_s3 else [hadoop_aws_package()]), *args.package]
    folder = args.folder.resolve()
    jars = install_jars(packages, folder)
    size = sum(jar.stat().st_size for jar in jars)
    print(f"{len(jars)} jars ({size / 2**20:.0f} MiB) of {', '.join(packages)} in {folder} "
          f"(listed in {MANIFEST}); classpath entry {class_path(folder)}")
    return 0
