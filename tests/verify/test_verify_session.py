"""verify's Spark driver keeps only a few Delta logs, however many replicas it reads: the session
confs it starts with (tidelake.verify.verifier.SPARK_CONFS) bound Delta's JVM-wide DeltaLog cache,
which is sized when a JVM first opens a Delta table, so this runs in a JVM of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tidelake.verify.verifier import SPARK_CONFS

pytestmark = pytest.mark.spark  # a Spark JVM of its own, in a child process

TABLES = 12
CHILD = """
import sys
import pyarrow as pa
from deltalake import write_deltalake
from tidelake.spark.spark_session import get_session
from tidelake.verify.verifier import SPARK_CONFS, read_replica, replica_types

root, tables = sys.argv[1], int(sys.argv[2])
spark = get_session("verify-cache", master="local[1]", extra_confs=SPARK_CONFS)
for i in range(tables):
    path = f"{root}/t{i}"
    write_deltalake(path, pa.table({"id": pa.array([i], pa.int64())}))
    replica_types(spark, path, 0)
    assert [r["id"] for r in read_replica(spark, path, 0, ["id"])] == [i]
delta_log = getattr(getattr(spark._jvm.org.apache.spark.sql.delta, "DeltaLog$"), "MODULE$")
print("cached", delta_log.cacheSize())
"""


def test_verify_driver_caches_a_few_delta_logs_not_every_replica(tmp_path: Path):
    bound = int(SPARK_CONFS["spark.databricks.delta.delta.log.cacheSize"])
    assert bound < TABLES
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), str(TABLES)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    cached = int(done.stdout.split("cached")[-1])
    assert 0 < cached <= bound
