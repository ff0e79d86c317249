"""The Delta and hadoop-aws jars of a Spark cluster, resolved once into a folder every node reads
(a Spark connection's spark_jars_dir extra), instead of `--packages` resolving and copying them at
every submit.
Owner: `tidelake spark-jars` fills the folder; spark-submit (tidelake.orchestration.spark_submit) reads it.

More: docs/internals.md#cluster_jars.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tidelake.errors import InputError
from tidelake.spark.connect_server import spark_submit
from tidelake.spark.spark_session import IVY_SETTINGS

MANIFEST = "packages.txt"  # the Maven coordinates the folder's jars were resolved from, one a line
_JARS_LINE = "tidelake-spark-jars: "
# `[organisation]_[artifact]-[revision].jar` (Spark's Ivy retrieve pattern) and pyspark's
# `[artifact]-[revision].jar`: the artifact ends before the first "-<digit>".
_ARTIFACT = re.compile(r"^(?P<artifact>.+?)-\d[^/]*\.jar$")


def class_path(folder: Path) -> str:
    """The classpath entry of every jar in `folder` (a Java wildcard, expanded by the JVM)."""
    return f"{folder}/*"


def installed_packages(folder: Path) -> list[str]:
    """The coordinates `folder` was filled with; [] when it holds no install_jars() result."""
    manifest = folder / MANIFEST
    return manifest.read_text().split() if manifest.is_file() else []


def install_jars(packages: Sequence[str], folder: Path) -> list[Path]:
    """Resolve `packages` and put the jars pyspark lacks into `folder` (hard links into the Ivy
    cache where it is on the same filesystem, copies otherwise). A folder already filled with
    these packages is kept as it is."""
    if installed_packages(folder) == list(packages):
        return sorted(p for p in folder.glob("*.jar"))
    shipped = {_artifact(p.name) for p in _pyspark_jars().glob("*.jar")}
    jars = [jar for jar in resolve(packages) if _artifact(jar.name.split("_", 1)[-1]) not in shipped]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).unlink(missing_ok=True)
    for old in folder.glob("*.jar"):
        old.unlink()
    for jar in jars:
        try:
            os.link(jar, folder / jar.name)
        except OSError:
            shutil.copy2(jar, folder / jar.name)
    (folder / MANIFEST).write_text("".join(f"{p}\n" for p in packages))
    return sorted(folder / jar.name for jar in jars)


def resolve(packages: Sequence[str]) -> list[Path]:
    """The jar files spark-submit resolves for `packages` (its Ivy cache; Maven Central if not
    there yet)."""
    command = [str(spark_submit()), "--master", "local[1]", "--packages", ",".join(packages),
               "--conf", f"spark.jars.ivySettings={IVY_SETTINGS}", __file__]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    lines = [line for line in result.stdout.splitlines() if line.startswith(_JARS_LINE)]
    if result.returncode != 0 or not lines:
        tail = " | ".join(result.stderr.strip().splitlines()[-5:])
        raise InputError(f"resolving {', '.join(packages)} with spark-submit failed "
                         f"(exit {result.returncode}): {tail}")
    return [Path(uri.removeprefix("file:")) for uri in lines[-1][len(_JARS_LINE):].split(",") if uri]


def _artifact(name: str) -> str:
    match = _ARTIFACT.match(name)
    return match["artifact"] if match else name


def _pyspark_jars() -> Path:
    import pyspark  # not at the top: Airflow's DAG parsing imports this module (spark_submit) and must not load pyspark

    return Path(pyspark.__file__).parent / "jars"


if __name__ == "__main__":
    # Run by resolve() under spark-submit: the JVM's system properties hold the resolved jars.
    from pyspark.java_gateway import launch_gateway

    jvm = launch_gateway().jvm
    print(_JARS_LINE + (jvm.java.lang.System.getProperty("spark.jars") or ""), flush=True)
