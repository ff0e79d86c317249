"""`make integration`'s installed Airflow, without installing it: the wheel holds what the package
needs at run time, the DAG file is the three lines a user writes, and the Airflow processes get the
venv's folders and no path to the checkout. The install itself runs in `make integration`."""

from __future__ import annotations

import ast
import os
import sys
import zipfile
from pathlib import Path

import pytest

from tidelake.demos.installed_airflow import InstalledAirflow, build_wheel
from tidelake.demos.on_airflow import AirflowDemoOptions, DemoDags, DemoPaths, airflow_env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    root = tmp_path_factory.mktemp("wheel")
    with zipfile.ZipFile(build_wheel(root, root / "build.log")) as archive:
        yield archive


def test_the_wheel_holds_the_spark_entry_points_package_data_and_the_provider(wheel):
    names = set(wheel.namelist())
    for job in ("merge", "syncpoint", "maintenance", "bootstrap"):
        assert f"tidelake/orchestration/spark_jobs/{job}_job.py" in names
    for data in ("tidelake/orchestration/templates/replication.html", "tidelake/spark/ivysettings.xml",
                 "tidelake/status/status_report.schema.json", "tidelake/kvproto/cdcpb_pb2.pyi"):
        assert data in names
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points).decode()
    assert "[apache_airflow_provider]" in text
    assert "tidelake.orchestration.airflow.provider_info:get_provider_info" in text
    assert "[airflow.plugins]" in text
    assert "tidelake.orchestration.airflow.replication_plugin:TidelakeReplicationPlugin" in text


def test_the_dag_file_is_three_lines_calling_the_factory(tmp_path):
    installed = InstalledAirflow(tmp_path)
    installed.dags_folder.mkdir()
    config = tmp_path / "a dir" / "changefeed.toml"
    text = installed.write_dag_file("demo", config, merge_schedule="1m").read_text()
    assert len(text.splitlines()) == 3
    call = ast.parse(text).body[-1].value
    assert call.func.id == "changefeed_dags"
    assert [arg.value for arg in call.args] == ["demo"]
    assert {kw.arg: kw.value.value for kw in call.keywords} == {"config_path": str(config), "merge_schedule": "1m"}
    assert DemoDags.of(AirflowDemoOptions(installed=installed)).all() == (
        "tidelake_puller__demo", "tidelake_merge__demo", "tidelake_bootstrap__demo", "tidelake_maintenance__demo")


def test_airflow_runs_from_the_venv_with_no_path_to_the_checkout(tmp_path):
    installed = InstalledAirflow(tmp_path / "installed")
    driver_bin = str(Path(sys.executable).parent)
    base = {"PATH": os.pathsep.join([driver_bin, "/usr/bin"]), "PYTHONPATH": "/checkout",
            "VIRTUAL_ENV": str(Path(sys.executable).parent.parent)}
    env = airflow_env(DemoPaths(tmp_path / "demo"), 8181, base=base, installed=installed)
    assert env["PATH"].split(os.pathsep) == [str(installed.bin_dir), "/usr/bin"]
    assert "PYTHONPATH" not in env and env["VIRTUAL_ENV"] == str(installed.venv)
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == str(installed.dags_folder)
    assert env["AIRFLOW__CORE__PLUGINS_FOLDER"] == str(installed.plugins_folder)
    assert env["PYSPARK_PYTHON"] == str(installed.python)
    # the DAG file names the changefeed's config; the Replication page reads it from the serialized DAGs
    assert "TIDELAKE_CONFIG" not in env
    assert not any(installed.plugins_folder.glob("*"))  # the plugin comes from the wheel's entry point
