"""`make integration`'s Airflow as a user installs it: a wheel built from the working tree, a fresh
virtualenv holding `tidelake[airflow]` from that wheel, and a DAGs folder holding only the DAG file
a user writes (DAG_FILE). The Airflow processes run from that venv, with the repository on no path:
tidelake must import from the venv's site-packages (check_installed), and the provider must be
listed by Airflow itself (check_provider).
Owner: tidelake.demos.integration.

More: docs/internals.md#installed_airflow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tidelake.demos.supervisor import StageFailed

REPO = Path(__file__).resolve().parents[2]
# What a wheel is built from: the project file, the README it names, the package (nothing else of
# the repository reaches an install).
WHEEL_SOURCES = ("pyproject.toml", "README.md", "tidelake")
DAG_FILE_NAME = "tidelake_dags.py"
# The whole DAG file of a deployment: the factory builds the changefeed's DAGs from its config file.
DAG_FILE = """from tidelake.orchestration.airflow.dag_factory import changefeed_dags

changefeed_dags({arguments})
"""


def write_dag_file(folder: Path, changefeed_id: str, config_path: Path, **settings: str) -> Path:
    """DAG_FILE in `folder` (created), for the changefeed in `config_path`, with the factory's
    keyword `settings`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / DAG_FILE_NAME
    # JSON strings are Python string literals in double quotes
    keywords = {"config_path": str(config_path), **settings}
    arguments = ", ".join([json.dumps(changefeed_id), *(f"{k}={json.dumps(v)}" for k, v in keywords.items())])
    path.write_text(DAG_FILE.format(arguments=arguments))
    return path
# Run by the venv's Python with the Airflow processes' environment and working directory.
PROBE = ("import json, os, pyspark, tidelake; print(json.dumps({'tidelake': tidelake.__file__, "
         "'pyspark_jars': os.path.isdir(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))}))")


@dataclass(frozen=True)
class InstalledAirflow:
    """The installed venv and the folders its Airflow runs with, all under `root`."""

    root: Path

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def bin_dir(self) -> Path:
        return self.venv / "bin"

    @property
    def python(self) -> Path:
        return self.bin_dir / "python"

    @property
    def dags_folder(self) -> Path:
        return self.root / "dags"

    @property
    def plugins_folder(self) -> Path:
        return self.root / "plugins"

    @property
    def cwd(self) -> Path:
        """The Airflow processes' working directory: empty, so `python -m` finds nothing in it."""
        return self.root / "cwd"

    @property
    def dag_file(self) -> Path:
        return self.dags_folder / DAG_FILE_NAME

    def write_dag_file(self, changefeed_id: str, config_path: Path, **settings: str) -> Path:
        return write_dag_file(self.dags_folder, changefeed_id, config_path, **settings)

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        """`base` for a process of the venv: its bin first on PATH, the driver's venv and any
        PYTHONPATH gone."""
        driver_bin = str(Path(sys.executable).parent)
        env = {k: v for k, v in base.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != driver_bin]
        env["PATH"] = os.pathsep.join([str(self.bin_dir), *path])
        env["VIRTUAL_ENV"] = str(self.venv)
        return env


@dataclass(frozen=True)
class InstallTimes:
    wheel_s: float
    venv_s: float
    install_s: float


def install(root: Path) -> tuple[InstalledAirflow, Path, InstallTimes]:
    """Build the wheel, create the venv, install `tidelake[airflow]` from the wheel into it; the
    previous run's venv, wheel and folders under `root` are replaced."""
    installed = InstalledAirflow(root)
    for name in ("venv", "dist", "source", "dags", "plugins", "cwd"):
        shutil.rmtree(root / name, ignore_errors=True)
    for folder in (installed.dags_folder, installed.plugins_folder, installed.cwd):
        folder.mkdir(parents=True)
    log = root / "install.log"
    log.write_text("")
    started = time.monotonic()
    wheel = build_wheel(root, log)
    built = time.monotonic()
    _run("venv", [sys.executable, "-m", "venv", str(installed.venv)], log, root)
    created = time.monotonic()
    _run("install", [str(installed.python), "-m", "pip", "install", "--quiet", f"tidelake[airflow] @ {wheel.as_uri()}"],
         log, installed.cwd, installed.environment(dict(os.environ)))
    return installed, wheel, InstallTimes(built - started, created - built, time.monotonic() - created)


def build_wheel(root: Path, log: Path) -> Path:
    """A wheel of the working tree (uncommitted edits included), built from a copy of what a wheel
    holds, so no stale build/ folder of the repository leaks files into it."""
    source = root / "source"
    for name in WHEEL_SOURCES:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, source / name)
    _run("wheel", [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(root / "dist"),
                   str(source)], log, root)
    wheels = sorted((root / "dist").glob("tidelake-*.whl"))
    if len(wheels) != 1:
        raise StageFailed("wheel", f"expected one tidelake wheel in {root / 'dist'}, found {len(wheels)}", log)
    return wheels[0]


def check_installed(installed: InstalledAirflow, env: dict[str, str]) -> str:
    """tidelake imports from the venv (not the repository) with the Airflow processes' environment
    and working directory, and pyspark is the full one (its jars; pyspark-client has none)."""
    probe = json.loads(_output("installed package", [str(installed.python), "-c", PROBE], env, installed.cwd))
    if not Path(probe["tidelake"]).resolve().is_relative_to(installed.venv.resolve()):
        raise StageFailed("installed package", f"tidelake imports from {probe['tidelake']}, not the venv {installed.venv}")
    if not probe["pyspark_jars"]:
        raise StageFailed("installed package", f"pyspark in {installed.venv} has no jars: pyspark-client replaced it")
    return probe["tidelake"]


def check_provider(installed: InstalledAirflow, env: dict[str, str]) -> dict[str, str]:
    """`airflow providers list` of the venv names tidelake; its row."""
    rows = json.loads(_output("providers list", [str(installed.bin_dir / "airflow"), "providers", "list", "--output",
                                                 "json"], env, installed.cwd))
    found = [row for row in rows if row.get("package_name") == "tidelake"]
    if not found:
        raise StageFailed("providers list", "`airflow providers list` names no tidelake: "
                          + ", ".join(row.get("package_name", "?") for row in rows))
    return found[0]


def _run(stage: str, command: list[str], log: Path, cwd: Path, env: dict[str, str] | None = None) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env).returncode
    if code != 0:
        raise StageFailed(stage, f"{command[0]} {command[1] if len(command) > 1 else ''} exited with code {code}", log)


def _output(stage: str, command: list[str], env: dict[str, str], cwd: Path) -> str:
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        raise StageFailed(stage, f"{' '.join(command[-4:])} exited with code {result.returncode}: "
                          f"{lines[-1] if lines else 'no output'}")
    return result.stdout
