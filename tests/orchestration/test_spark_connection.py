"""The Spark of a task is its connection's type: `spark` (spark-submit) or `spark_connect`; a missing
connection means local[*] for the task, never the provider's silent YARN; any other type is one line."""

from __future__ import annotations

import json
import os

import pytest

from tidelake.errors import InputError
from tidelake.orchestration.airflow.spark_operator import spark_connection
from tidelake.orchestration.spark_submit import LOCAL_MASTER_CONNECTION

VARIABLE = "AIRFLOW_CONN_TIDELAKE_TEST_SPARK"


def test_missing_connection_becomes_local(monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)  # restored to absent after the test
    assert spark_connection("tidelake_test_spark") == ("spark", {})
    assert json.loads(os.environ[VARIABLE]) == LOCAL_MASTER_CONNECTION


def test_defined_connections_are_kept_with_their_extras(monkeypatch):
    monkeypatch.setenv(VARIABLE, "spark://spark-master:7077")
    assert spark_connection("tidelake_test_spark") == ("spark", {})
    assert os.environ[VARIABLE] == "spark://spark-master:7077"
    monkeypatch.setenv(VARIABLE, json.dumps({"conn_type": "spark", "host": "spark://m:7077",
                                             "extra": {"spark_jars_dir": "/opt/jars"}}))
    assert spark_connection("tidelake_test_spark") == ("spark", {"spark_jars_dir": "/opt/jars"})
    monkeypatch.setenv(VARIABLE, json.dumps({"conn_type": "spark_connect", "host": "sc://warm", "port": 15002}))
    assert spark_connection("tidelake_test_spark")[0] == "spark_connect"


def test_another_type_is_one_line(monkeypatch):
    monkeypatch.setenv(VARIABLE, json.dumps({"conn_type": "postgres", "host": "db"}))
    with pytest.raises(InputError) as err:
        spark_connection("tidelake_test_spark")
    assert str(err.value) == ("Spark connection 'tidelake_test_spark': conn_type: is 'postgres', expected 'spark' "
                              "(spark-submit) or 'spark_connect' (Spark Connect)")
