"""How tidelake's Spark jobs are submitted from Airflow through a `spark` connection
(`spark_submit_kwargs`): the Delta jars and confs, the executors' Python and the tidelake package
shipped as a zip built at task time. Deployment knobs are that connection's extras (`SPARK_EXTRAS`,
read at task time: `SparkSettings.from_extras`; docs/operations.md#spark-cluster). A `spark_connect`
connection runs the jobs in the task instead (tidelake.orchestration.airflow.spark_operator).
Owner: the DAGs' Spark tasks (tidelake.orchestration.airflow.spark_operator).

More: docs/internals.md#spark_submit.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tidelake
from tidelake.config import LakeConfig
from tidelake.errors import InputError
from tidelake.lake.layout import LakeLayout
from tidelake.spark.cluster_jars import class_path, installed_packages
from tidelake.spark.s3a import lake_packages, s3a_confs
from tidelake.spark.spark_session import DELTA_CONFS, IVY_SETTINGS, delta_package

DEFAULT_CONN_ID = "spark_default"
SUBMIT_CONN_TYPE = "spark"  # the Spark provider's SparkSubmitHook
CONNECT_CONN_TYPE = "spark_connect"  # the Spark provider's SparkConnectHook
LOCAL_MASTER_CONNECTION = {"conn_type": SUBMIT_CONN_TYPE, "host": "local[*]"}
JOBS_DIR = Path(__file__).resolve().parent / "spark_jobs"  # the installed package's own entry points
# Extras of a `spark` connection that tidelake reads (SparkSubmitHook reads its own and ignores these).
SPARK_EXTRAS = ("spark_conf", "spark_packages", "spark_python", "spark_jars_dir")


@dataclass(frozen=True)
class SparkSettings:
    """How tidelake's Spark jobs are submitted: the `spark` connection's extras, read at task time."""

    python: str = sys.executable
    extra_conf: dict[str, str] = field(default_factory=dict)
    extra_packages: tuple[str, ...] = ()
    jobs_dir: Path = JOBS_DIR
    jars_dir: Path | None = None

    @classmethod
    def from_extras(cls, conn_id: str, extras: Mapping[str, Any]) -> SparkSettings:
        """`spark_conf` (a JSON object of Spark confs), `spark_packages` (Maven coordinates, a list or
        comma-separated), `spark_python` (the executors' and driver's Python), `spark_jars_dir` (a
        `tidelake spark-jars` folder at the same path on every node). A bad one is one InputError line."""
        where = f"{SUBMIT_CONN_TYPE} connection {conn_id!r}"
        conf = extras.get("spark_conf") or {}
        if isinstance(conf, str):
            try:
                conf = json.loads(conf)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: spark_conf: not a JSON object: {exc}") from None
        if not isinstance(conf, Mapping):
            raise InputError(f"{where}: spark_conf: expected a JSON object of confs, got {conf!r}")
        packages = extras.get("spark_packages") or ()
        if isinstance(packages, str):
            packages = packages.split(",")
        if not isinstance(packages, (list, tuple)) or not all(isinstance(p, str) for p in packages):
            raise InputError(f"{where}: spark_packages: expected Maven coordinates, got {packages!r}")
        for name in ("spark_python", "spark_jars_dir"):
            if extras.get(name) is not None and not isinstance(extras[name], str):
                raise InputError(f"{where}: {name}: expected a path, got {extras[name]!r}")
        return cls(
            python=(extras.get("spark_python") or "").strip() or sys.executable,
            extra_conf={str(k): str(v) for k, v in conf.items()},
            extra_packages=tuple(p.strip() for p in packages if p.strip()),
            jars_dir=Path(jars) if (jars := (extras.get("spark_jars_dir") or "").strip()) else None,
        )


def packages_for(lake: LakeLayout, settings: SparkSettings) -> list[str]:
    """Maven packages a job on this lake needs: Delta, hadoop-aws for s3 lakes, extras."""
    packages = [delta_package(), *lake_packages(lake)]
    packages.extend(p for p in settings.extra_packages if p not in packages)
    return packages


def spark_submit_kwargs(
    settings: SparkSettings,
    *,
    job: str,
    app_name: str,
    lake: LakeConfig,
    application_args: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Keyword arguments of SparkSubmitOperator for spark_jobs/<job>_job.py (client deploy mode:
    the driver runs on the Airflow worker, which holds the changefeed config it reads). An s3
    lake gets the s3a confs of its storage options (tidelake.spark.s3a) without credentials:
    these kwargs are the spark-submit command line, so s3a reads the task's AWS_* variables and
    the job sets the lake's keys at start (tidelake.spark.spark_session.apply_s3a_confs)."""
    application = settings.jobs_dir / f"{job}_job.py"
    layout = LakeLayout.from_config(lake)
    packages = packages_for(layout, settings)
    conf = {
        **DELTA_CONFS,
        **s3a_confs(layout, credentials=False),
        **(_jar_confs(settings.jars_dir, packages) if settings.jars_dir is not None
           else {"spark.jars.ivySettings": str(IVY_SETTINGS)}),
        "spark.pyspark.python": settings.python,
        "spark.pyspark.driver.python": settings.python,
        **settings.extra_conf,
    }
    kwargs: dict[str, Any] = {
        "application": str(application),
        "name": app_name,
        "conf": conf,
        "env_vars": {"PYSPARK_PYTHON": settings.python, "PYSPARK_DRIVER_PYTHON": settings.python},
        "deploy_mode": "client",
    }
    if settings.jars_dir is None:
        kwargs["packages"] = ",".join(packages)
    if application_args is not None:
        kwargs["application_args"] = list(application_args)
    return kwargs


def _jar_confs(folder: Path, packages: list[str]) -> dict[str, str]:
    """The classpath confs of a `spark_jars_dir` folder, which must hold every package the job
    needs (checked on the Airflow worker, where the driver runs; the Spark nodes are expected
    to hold the same folder)."""
    missing = [p for p in packages if p not in installed_packages(folder)]
    if missing:
        raise InputError(f"spark_jars_dir {folder}: holds no jars of {', '.join(missing)} "
                         f"(fill it with `tidelake spark-jars {folder}`)")
    return {"spark.driver.extraClassPath": class_path(folder), "spark.executor.extraClassPath": class_path(folder)}


def build_package_zip(dest_dir: str | Path) -> Path:
    """Zip the installed tidelake package (sources and package data) for --py-files.

    The name carries a hash of the content, so a rebuilt zip never shadows another version in
    a cluster's file cache and an unchanged package is not rebuilt.
    """
    package_dir = Path(tidelake.__file__).resolve().parent
    files = sorted(
        p for p in package_dir.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    )
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(package_dir.parent).as_posix().encode())
        digest.update(path.read_bytes())
    dest = Path(dest_dir) / f"tidelake-{tidelake.__version__}-{digest.hexdigest()[:12]}.zip"
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, path.relative_to(package_dir.parent).as_posix())
    partial.replace(dest)
    return dest
