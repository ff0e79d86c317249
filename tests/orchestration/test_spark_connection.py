"""A missing Spark connection means local[*] for the task, never the provider's silent YARN."""

from __future__ import annotations

import json
import os

from tidelake.orchestration.airflow.spark_operator import ensure_spark_connection
from tidelake.orchestration.spark_submit import LOCAL_MASTER_CONNECTION

VARIABLE = "AIRFLOW_CONN_TIDELAKE_TEST_SPARK"


def test_missing_connection_becomes_local(monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)  # restored to absent after the test
    ensure_spark_connection("tidelake_test_spark")
    assert json.loads(os.environ[VARIABLE]) == LOCAL_MASTER_CONNECTION


def test_defined_connection_is_kept(monkeypatch):
    monkeypatch.setenv(VARIABLE, "spark://spark-master:7077")
    ensure_spark_connection("tidelake_test_spark")
    assert os.environ[VARIABLE] == "spark://spark-master:7077"
