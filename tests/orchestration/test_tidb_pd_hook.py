"""TiDBPDHook reads a tidb_pd connection as Airflow resolves it (here an AIRFLOW_CONN_* variable):
the upstream config while its block runs, one line for a missing or wrong connection, and the
private key's text and the password nowhere in its repr, logs, summary or Airflow's masked output."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tidelake.errors import InputError
from tidelake.orchestration.airflow.hooks.tidb_pd import TiDBPDHook

KEY_BODY = "dGlkZWxha2UtdGVzdC1wcml2YXRlLWtleS0xMjM0NQ=="
KEY = f"-----BEGIN PRIVATE KEY-----\n{KEY_BODY}\n-----END PRIVATE KEY-----\n"
CERT = "-----BEGIN CERTIFICATE-----\nY2xpZW50IGNlcnQ=\n-----END CERTIFICATE-----\n"
PASSWORD = "tidelake-test-password-9876"


def define(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def test_upstream_from_connection_keeps_secrets_out(monkeypatch, caplog, tmp_path):
    from airflow.sdk._shared.secrets_masker import redact

    define(monkeypatch, "tidelake_test_pd", conn_type="tidb_pd", host="pd-0.pd", port=2379, password=PASSWORD,
           extra={"pd_endpoints": "pd-1.pd:2379", "cluster": "prod", "tls_ca": CERT, "tls_cert": CERT,
                  "tls_private_key": KEY})
    hook = TiDBPDHook(tidb_pd_conn_id="tidelake_test_pd")
    caplog.set_level(logging.DEBUG)
    with hook.upstream(gc_ttl_s=3600.0) as upstream:
        assert upstream.pd == ("pd-0.pd:2379", "pd-1.pd:2379") and upstream.gc_ttl_s == 3600.0
        key_file = Path(upstream.tls.key)
        assert key_file.read_text() == KEY
    assert not key_file.exists(), "the PEM files outlive the block"
    summary = hook.pd_connection(tmp_path).summary()
    shown = "\n".join([repr(hook), json.dumps(summary), caplog.text])
    assert "pd-0.pd:2379" in caplog.text  # the hook did log the connection it used
    for secret in (KEY_BODY, PASSWORD):
        assert secret not in shown
        assert secret not in redact(f"a task log line quoting {secret}")  # Airflow masks it in task logs


def test_missing_connection_is_one_line_naming_it(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_TIDELAKE_TEST_MISSING", raising=False)
    with pytest.raises(InputError, match=r"^tidb_pd connection 'tidelake_test_missing': not defined") as caught:
        with TiDBPDHook(tidb_pd_conn_id="tidelake_test_missing").upstream():
            pass
    assert "\n" not in str(caught.value)


def test_connection_of_another_type_is_refused(monkeypatch):
    define(monkeypatch, "tidelake_test_mysql", conn_type="mysql", host="tidb", port=4000)
    with pytest.raises(InputError, match=r"^tidb_pd connection 'tidelake_test_mysql': conn_type: is 'mysql'"):
        with TiDBPDHook(tidb_pd_conn_id="tidelake_test_mysql").upstream():
            pass


def test_bad_field_names_connection_and_field(monkeypatch):
    define(monkeypatch, "tidelake_test_pd", conn_type="tidb_pd", host="pd-0", port=2379,
           extra={"tls_ca": "/no/such/ca.pem"})
    with pytest.raises(InputError, match=r"^tidb_pd connection 'tidelake_test_pd': tls_ca: "):
        with TiDBPDHook(tidb_pd_conn_id="tidelake_test_pd").upstream():
            pass


def test_connection_as_uri(monkeypatch):
    """A connection URI spells the type `tidb-pd://` (a URI scheme cannot hold `_`)."""
    monkeypatch.setenv("AIRFLOW_CONN_TIDELAKE_TEST_URI", "tidb-pd://pd-0.pd:2379?pd_endpoints=pd-1.pd%3A2379&cluster=prod")
    with TiDBPDHook(tidb_pd_conn_id="tidelake_test_uri").upstream() as upstream:
        assert upstream.pd == ("pd-0.pd:2379", "pd-1.pd:2379") and upstream.tls is None


def test_example_connections_file_imports_and_reads(monkeypatch):
    """examples/connections.yaml parses as `airflow connections import` reads it, and the hook accepts it."""
    from airflow.secrets.local_filesystem import load_connections_dict
    from airflow_test_env import REPO

    connections = load_connections_dict(str(REPO / "examples" / "connections.yaml"))
    connection = connections[TiDBPDHook.default_conn_name]
    monkeypatch.setenv(f"AIRFLOW_CONN_{TiDBPDHook.default_conn_name.upper()}", connection.as_json())
    with TiDBPDHook().upstream() as upstream:
        assert upstream.pd == ("127.0.0.1:2379",) and upstream.tls is None


def test_example_lake_and_spark_connections_read_as_the_tasks_read_them(monkeypatch):
    """The aws and Spark connections of examples/connections.yaml give the lake's settings, the
    spark-submit extras and a Spark Connect URL."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
    from airflow.secrets.local_filesystem import load_connections_dict
    from airflow_test_env import REPO

    from tidelake.config import LakeConfig
    from tidelake.orchestration.airflow.hooks.aws_lake import lake_settings
    from tidelake.orchestration.airflow.spark_operator import spark_connection
    from tidelake.orchestration.spark_submit import SparkSettings

    connections = load_connections_dict(str(REPO / "examples" / "connections.yaml"))
    for conn_id in ("tidelake_lake", "spark_default", "spark_warm"):
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", connections[conn_id].as_json())
    lake = lake_settings("tidelake_lake", LakeConfig(root="s3://lake/x", aws_conn_id="tidelake_lake"))
    assert lake.values == {"access_key_id": "tidelake", "secret_access_key": "tidelake-secret",
                           "endpoint": "http://127.0.0.1:9000", "region": "us-east-1"}
    kind, extras = spark_connection("spark_default")
    assert kind == "spark" and SparkSettings.from_extras("spark_default", extras).extra_conf == {
        "spark.executor.memory": "1g", "spark.sql.shuffle.partitions": "4"}
    assert spark_connection("spark_warm")[0] == "spark_connect"
    assert SparkConnectHook("spark_warm").get_connection_url() == "sc://127.0.0.1:15002/"
