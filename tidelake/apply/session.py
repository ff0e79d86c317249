"""One place that knows how to build a Delta-enabled SparkSession (docs/stack.md §10).

Local runs (CLI, tests, the embedded demo) get `local[*]` with the Delta jars resolved from
Maven Central through `spark.jars.packages`; under spark-submit the master and packages come
from the submit command and are left alone.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The Python package is delta-spark 4.4.1, but Maven Central serves the Spark 4.2 jar only as
# 4.4.0 (io/delta/delta-spark_4.2_2.13/maven-metadata.xml lists no 4.4.1, checked 2026-11-21).
DELTA_JAR_VERSION = "4.4.0"
SCALA_VERSION = "2.13"

IVY_SETTINGS = Path(__file__).with_name("ivysettings.xml")

# Confs every tidelake session needs; cluster deployments pass the same through spark-submit.
DELTA_CONFS: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.databricks.delta.schema.autoMerge.enabled": "false",
}


def delta_package() -> str:
    """Maven coordinate of the Delta jar matching the installed pyspark (docs/stack.md §0.2)."""
    import pyspark

    major_minor = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{major_minor}_{SCALA_VERSION}:{DELTA_JAR_VERSION}"


def get_session(
    app_name: str = "tidelake",
    master: str | None = None,
    extra_confs: dict[str, str] | None = None,
    local: bool = True,
) -> SparkSession:
    """Return the active session or build one with Delta enabled.

    `local=False` is for spark-submit entry points: master and jars come from the submit command.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if local:
        builder = builder.master(master or os.environ.get("TIDELAKE_SPARK_MASTER", "local[*]"))
        builder = builder.config("spark.jars.packages", delta_package())
        builder = builder.config("spark.jars.ivySettings", str(IVY_SETTINGS))
        builder = builder.config("spark.ui.enabled", "false")
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        builder = builder.config("spark.sql.shuffle.partitions", "4")
        # Delta rebuilds table state from the log with 50 tasks by default: pure overhead locally.
        builder = builder.config("spark.databricks.delta.snapshotPartitions", "2")
    for key, value in {**DELTA_CONFS, **(extra_confs or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
