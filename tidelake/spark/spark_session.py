"""One place that knows how to build a Delta-enabled SparkSession (docs/stack.md#delta-lake-session-setup):
local (`local[*]`, Delta jars from Maven Central), under spark-submit (the submit command's), or a
Spark Connect client of a warm Spark; and the sibling sessions table threads merge in (txn confs
are per session).
Owner: every Spark stage (merge, syncpoint, maintenance, verify, catalog, bootstrap).

More: docs/internals.md#spark_session.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tidelake.errors import InputError
from tidelake.spark.s3a import lake_packages, s3a_confs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tidelake.lake.layout import LakeLayout

# The Python package is delta-spark 4.4.1, but Maven Central serves the Spark 4.2 jar only as
# 4.4.0 (io/delta/delta-spark_4.2_2.13/maven-metadata.xml lists no 4.4.1, checked 2026-11-21).
DELTA_JAR_VERSION = "4.4.0"
SCALA_VERSION = "2.13"

IVY_SETTINGS = Path(__file__).with_name("ivysettings.xml")

# Confs every tidelake session needs; cluster deployments pass the same through spark-submit.
# The first two are static (fixed when the JVM starts); the rest are session confs.
STATIC_DELTA_CONFS: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
SESSION_CONFS: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.databricks.delta.schema.autoMerge.enabled": "false",
}
DELTA_CONFS: dict[str, str] = {**STATIC_DELTA_CONFS, **SESSION_CONFS}
# What a one-machine Spark (local session or local Spark Connect server) sets besides.
LOCAL_CONFS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    # Delta rebuilds table state from the log with 50 tasks by default: pure overhead locally.
    "spark.databricks.delta.snapshotPartitions": "2",
}


def delta_package() -> str:
    """Maven coordinate of the Delta jar matching the installed pyspark (docs/stack.md#the-delta-jar-name-now-carries-the-spark-version)."""
    import pyspark  # not at the top: Airflow's DAG parsing imports this module (spark_submit) and must not load pyspark

    major_minor = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{major_minor}_{SCALA_VERSION}:{DELTA_JAR_VERSION}"


def get_session(
    app_name: str = "tidelake",
    master: str | None = None,
    extra_confs: dict[str, str] | None = None,
    local: bool = True,
    remote: str | None = None,
    lake: LakeLayout | None = None,
) -> SparkSession:
    """Return the active session or build one with Delta enabled (and, for a local one, the
    hadoop-aws package and s3a confs of an s3 `lake`, tidelake.spark.s3a).

    `local=False` is for spark-submit entry points: master and jars come from the submit command.
    `remote` (sc://host:port) makes a Spark Connect session of that server instead; only the
    commands that run over Connect pass one (tidelake.cli.spark_choice reads SPARK_REMOTE), so
    the variable never turns bootstrap or verify into a Connect client by accident. Under
    spark-submit (`local=False`) the submit command has chosen the Spark, so `remote` is not used.
    """
    from pyspark.sql import SparkSession  # see delta_package: the DAG parse imports this module

    if remote is not None and local:
        return connect_session(remote, extra_confs)
    active = SparkSession.getActiveSession()
    if active is not None:
        apply_s3a_confs(active, lake)
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if local:
        builder = builder.master(master or os.environ.get("TIDELAKE_SPARK_MASTER", "local[*]"))
        builder = builder.config("spark.jars.packages", ",".join([delta_package(), *lake_packages(lake)]))
        builder = builder.config("spark.jars.ivySettings", str(IVY_SETTINGS))
        for key, value in {**LOCAL_CONFS, **s3a_confs(lake)}.items():
            builder = builder.config(key, value)
    for key, value in {**DELTA_CONFS, **(extra_confs or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if not local:
        apply_s3a_confs(session, lake)
    return session


def apply_s3a_confs(session: SparkSession, lake: LakeLayout | None) -> None:
    """Set an s3 lake's s3a confs, credentials included, on a classic session's Hadoop conf.

    spark-submit jobs get the s3a confs of the DAG's parse without credentials
    (tidelake.orchestration.spark_submit: a conf there is in the serialized DAG and on the command
    line); the job sets the lake's own here, at job start, before its first read opens the s3a
    filesystem: its configured keys, and the endpoint, region and keys of the lake's Airflow
    connection, which reach the job in its environment (tidelake.orchestration.airflow.hooks.aws_lake).
    A Spark Connect session has no Hadoop conf of its own: its server got them in its environment."""
    jsc = getattr(session, "_jsc", None)
    if jsc is None:
        return
    hadoop = jsc.hadoopConfiguration()
    for key, value in s3a_confs(lake).items():
        hadoop.set(key.removeprefix("spark.hadoop."), value)


def connect_session(url: str, extra_confs: dict[str, str] | None = None) -> SparkSession:
    """A new server-side session of the Spark Connect server at `url` (sc://host:port), with
    tidelake's session confs. Static confs (the Delta extension and catalog) are the server's:
    a server started without them fails here with one line, not at the first MERGE."""
    # see delta_package: the DAG parse imports this module. Delta's Connect exceptions are loaded
    # so that commit races raise Delta's classes, as in classic.
    import delta.connect.exceptions  # noqa: F401
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    try:
        session = SparkSession.builder.remote(url).create()
        for key, value in {**SESSION_CONFS, **(extra_confs or {})}.items():
            session.conf.set(key, value)
        extensions = session.conf.get(_EXTENSIONS, "") or ""
    except PySparkException as exc:
        raise InputError(f"Spark Connect server {url}: {str(exc).splitlines()[0]}") from None
    if STATIC_DELTA_CONFS[_EXTENSIONS] not in extensions:
        session.stop()
        raise InputError(f"Spark Connect server {url} runs without {_EXTENSIONS}="
                         f"{STATIC_DELTA_CONFS[_EXTENSIONS]}: start it with `tidelake spark-server start`")
    return session


_EXTENSIONS = "spark.sql.extensions"


def is_remote(spark: SparkSession) -> bool:
    """True for a Spark Connect session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def sibling_session(spark: SparkSession) -> SparkSession:
    """A session sharing `spark`'s Spark application but with its own SQL conf (the txn confs of
    tidelake.merge.txn_confs are per session), starting from `spark`'s runtime confs."""
    if is_remote(spark):
        session = spark.cloneSession()  # a new server-side session with the same confs
        # pyspark 4.2's cloneSession skips __init__, which sets the flag stop() reads to release
        # the server-side session (pyspark/sql/connect/session.py)
        session.release_session_on_close = True
        return session
    session = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if spark.conf.isModifiable(key):
            session.conf.set(key, value)
    return session


def release_session(spark: SparkSession) -> None:
    """End a Spark Connect session (frees its server-side state and lets this process exit);
    a local session is left to its owner (stopping it would stop the shared SparkContext)."""
    if is_remote(spark):
        spark.stop()
