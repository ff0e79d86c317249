"""Airflow test fixtures: a changefeed config with a lake folder, and a migrated metadata DB
for the tests marked `airflow` (airflow_test_env sets AIRFLOW_HOME before Airflow is imported)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from airflow_test_env import AIRFLOW_HOME, write_changefeed


@pytest.fixture
def changefeed(tmp_path, monkeypatch) -> Path:
    path = write_changefeed(tmp_path)
    monkeypatch.setenv("TIDELAKE_CONFIG", str(path))
    return path


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """`airflow db migrate` once per run into the throwaway AIRFLOW_HOME."""
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True,
                   env=os.environ.copy(), timeout=300)
    return AIRFLOW_HOME
