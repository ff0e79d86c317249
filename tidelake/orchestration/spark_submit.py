"""How tidelake's Spark jobs run from Airflow: against a warm Spark (Spark Connect, when one is
configured: `job_remote`), else submitted through SparkSubmitOperator (`spark_submit_kwargs`):
the master, the Delta jars and confs, the executors' Python and the tidelake package shipped as a
zip built at task time. Deployment knobs are the workers' TIDELAKE_SPARK_* variables
(docs/operations.md#spark-cluster).
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
from tidelake.config import ChangefeedConfig, LakeConfig
from tidelake.errors import InputError
from tidelake.lake.layout import LakeLayout
from tidelake.spark.cluster_jars import class_path, installed_packages
from tidelake.spark.s3a import lake_packages, s3a_confs
from tidelake.spark.spark_session import DELTA_CONFS, IVY_SETTINGS, delta_package

DEFAULT_CONN_ID = "spark_default"
LOCAL_MASTER_CONNECTION = {"conn_type": "spark", "host": "local[*]"}
JOBS_DIR = Path(__file__).resolve().parent / "spark_jobs"  # the installed package's own entry points


def job_remote(config: ChangefeedConfig, env: Mapping[str, str] | None = None) -> str | None:
    """The Spark Connect server the DAG's Spark jobs use, or None for spark-submit: `[spark] remote`
    of the changefeed config, else SPARK_REMOTE. Read where the DAG file is parsed (the DAG
    processor's environment), as the DAG's shape depends on it."""
    return config.spark.remote_or_env(os.environ if env is None else env)


@dataclass(frozen=True)
class SparkSettings:
    """Where and how tidelake's Spark jobs run, read once from the worker's environment."""

    conn_id: str = DEFAULT_CONN_ID
    python: str = sys.executable
    extra_conf: dict[str, str] = field(default_factory=dict)
    extra_packages: tuple[str, ...] = ()
    jobs_dir: Path = JOBS_DIR
    jars_dir: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SparkSettings:
        env = os.environ if env is None else env
        raw_conf = env.get("TIDELAKE_SPARK_CONF", "").strip()
        try:
            extra_conf = json.loads(raw_conf) if raw_conf else {}
        except json.JSONDecodeError as exc:
            raise InputError(f"TIDELAKE_SPARK_CONF: not a JSON object: {exc}") from None
        if not isinstance(extra_conf, dict):
            raise InputError(f"TIDELAKE_SPARK_CONF: expected a JSON object of confs, got {raw_conf!r}")
        packages = tuple(p.strip() for p in env.get("TIDELAKE_SPARK_PACKAGES", "").split(",") if p.strip())
        return cls(
            conn_id=env.get("TIDELAKE_SPARK_CONN_ID", "").strip() or DEFAULT_CONN_ID,
            python=env.get("TIDELAKE_SPARK_PYTHON", "").strip() or sys.executable,
            extra_conf={str(k): str(v) for k, v in extra_conf.items()},
            extra_packages=packages,
            jobs_dir=Path(env.get("TIDELAKE_SPARK_JOBS_DIR", "").strip() or JOBS_DIR),
            jars_dir=Path(jars) if (jars := env.get("TIDELAKE_SPARK_JARS", "").strip()) else None,
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
    these kwargs are built at DAG parse into the serialized DAG and the spark-submit command
    line, so s3a reads the worker's AWS_* variables and the job sets configured keys at start
    (tidelake.spark.spark_session.apply_s3a_confs)."""
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
        "conn_id": settings.conn_id,
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
    """The classpath confs of a TIDELAKE_SPARK_JARS folder, which must hold every package the job
    needs (checked on the Airflow worker, where the driver runs; the Spark nodes are expected
    to hold the same folder)."""
    missing = [p for p in packages if p not in installed_packages(folder)]
    if missing:
        raise InputError(f"TIDELAKE_SPARK_JARS={folder}: holds no jars of {', '.join(missing)} "
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
