"""What a Spark application on a standalone cluster pays for its jars: `--packages` against a
spark_jars_dir folder (tidelake.spark.cluster_jars), in the same run on the same cluster.

A master and a worker as `make integration` starts them (tidelake.demos.spark_cluster); each
application is submitted with the SparkSubmitOperator kwargs of the DAGs
(tidelake.orchestration.spark_submit.spark_submit_kwargs, an s3 lake: Delta and hadoop-aws) and
writes --rows rows into a Delta table on its executors, then reads them back. Per application:
the spark-submit's wall time, and the bytes its executor left in the worker's work folder.
Ceiling: the same application on local[1] with the jar folder (no executor process, nothing
fetched): what the cluster adds besides the jars.

    .venv/bin/python bench/bench_cluster_jars.py [--apps 2] [--rows 1000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import print_environment

from tidelake.spark.s3a import hadoop_aws_package
from tidelake.spark.spark_session import delta_package
from tidelake.spark.cluster_jars import install_jars
from tidelake.spark.connect_server import spark_submit
from tidelake.config import LakeConfig
from tidelake.demos.spark_cluster import SparkCluster
from tidelake.orchestration.spark_submit import SparkSettings, build_package_zip, spark_submit_kwargs

APP = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
path, rows = sys.argv[1], int(sys.argv[2])
spark.range(rows).repartition(2).write.format("delta").mode("overwrite").save(path)
assert spark.read.format("delta").load(path).count() == rows
spark.stop()
"""
CLUSTER_CONFS = {"spark.executor.memory": "1g", "spark.cores.max": "2", "spark.ui.enabled": "false",
                 "spark.driver.host": "127.0.0.1"}


def command(kwargs: dict, master: str, args: list[str]) -> list[str]:
    """The spark-submit command SparkSubmitHook builds from these kwargs."""
    cmd = [str(spark_submit()), "--master", master, "--name", kwargs["name"], "--deploy-mode", kwargs["deploy_mode"]]
    for key, value in kwargs["conf"].items():
        cmd += ["--conf", f"{key}={value}"]
    if "packages" in kwargs:
        cmd += ["--packages", kwargs["packages"]]
    return [*cmd, "--py-files", kwargs["py_files"], kwargs["application"], *args]


def work_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=2, help="applications per way (default 2)")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    env = print_environment()
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-cluster-jars-") as tmp:
        tmp_path = Path(tmp)
        app = tmp_path / "delta_app.py"
        app.write_text(APP)
        started = time.monotonic()
        jars = install_jars([delta_package(), hadoop_aws_package()], tmp_path / "jars")
        results["install_s"] = round(time.monotonic() - started, 1)
        results["jar_folder_bytes"] = sum(j.stat().st_size for j in jars)
        lake = LakeConfig(root="s3://bench/lake")
        package = build_package_zip(tmp_path / "py-files")
        ways = {"packages": SparkSettings(python=sys.executable, extra_conf=CLUSTER_CONFS),
                "jars_dir": SparkSettings(python=sys.executable, extra_conf=CLUSTER_CONFS, jars_dir=tmp_path / "jars")}
        cluster = SparkCluster(tmp_path / "spark")
        cluster.start()
        try:
            for way, settings in ways.items():
                seconds, left = [], []
                for i in range(args.apps):
                    kwargs = spark_submit_kwargs(settings, job="x", app_name=f"bench-{way}-{i}", lake=lake)
                    kwargs.update(application=str(app), py_files=str(package))
                    before = {p.name for p in (tmp_path / "spark" / "work").glob("app-*")}
                    t0 = time.monotonic()
                    subprocess.run(command(kwargs, cluster.url, [str(tmp_path / f"t-{way}-{i}"), str(args.rows)]),
                                   check=True, capture_output=True, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
                    seconds.append(round(time.monotonic() - t0, 1))
                    new = [p for p in (tmp_path / "spark" / "work").glob("app-*") if p.name not in before]
                    left.append(sum(work_bytes(p) for p in new))
                results[way] = {"app_s": seconds, "work_bytes": left}
            kwargs = spark_submit_kwargs(ways["jars_dir"], job="x", app_name="bench-local", lake=lake)
            kwargs.update(application=str(app), py_files=str(package))
            t0 = time.monotonic()
            subprocess.run(command(kwargs, "local[1]", [str(tmp_path / "t-local"), str(args.rows)]), check=True,
                           capture_output=True, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
            results["ceiling_local_s"] = round(time.monotonic() - t0, 1)
            results["vs_ceiling"] = {way: round(statistics.median(results[way]["app_s"]) / results["ceiling_local_s"], 2)
                                     for way in ways}
        finally:
            cluster.stop()
    print("| way | seconds per application | median vs ceiling | bytes left in the worker's work folder per application |")
    print("|---|---|---|---|")
    for way in ways:
        print(f"| {way} | {results[way]['app_s']} | {results['vs_ceiling'][way]} | {results[way]['work_bytes']} |")
    print(f"| local[1] ceiling (jar folder) | {results['ceiling_local_s']} | 1.00 | - |")
    print(f"jar folder: {results['jar_folder_bytes']} bytes, filled in {results['install_s']}s")
    if args.json is not None:
        args.json.write_text(json.dumps({"environment": env, "results": results}, indent=2))


if __name__ == "__main__":
    main()
