"""The `tidelake` commands that dial PD read [upstream].connection (a tidb_pd Airflow connection,
here an AIRFLOW_CONN_* variable) as the puller task does; a missing one is one line."""

from __future__ import annotations

import json
from pathlib import Path

from tidelake.cli import main
from tidelake.config import load_config

CERT = "-----BEGIN CERTIFICATE-----\nY2xpZW50IGNlcnQ=\n-----END CERTIFICATE-----\n"


def by_connection(tmp_path: Path, conn_id: str) -> Path:
    path = tmp_path / "changefeed.toml"
    path.write_text(f'[changefeed]\nid = "cf1"\n[upstream]\nconnection = "{conn_id}"\ngc_ttl = "2h"\n'
                    f'[lake]\nroot = "{tmp_path / "lake"}"\n')
    return path


def test_a_command_gets_the_connections_endpoints_and_tls_for_its_lifetime(tmp_path, monkeypatch):
    from tidelake.cli.upstream_connection import with_connection

    monkeypatch.setenv("AIRFLOW_CONN_TIDELAKE_TEST_CLI_PD", json.dumps(
        {"conn_type": "tidb_pd", "host": "pd-0.pd", "port": 2379, "extra": {"pd_endpoints": "pd-1.pd:2379",
                                                                            "tls_ca": CERT}}))
    upstream = with_connection(load_config(by_connection(tmp_path, "tidelake_test_cli_pd"))).upstream
    assert (upstream.pd, upstream.connection, upstream.gc_ttl_s) == (("pd-0.pd:2379", "pd-1.pd:2379"), None, 7200)
    assert Path(upstream.tls.ca).read_text() == CERT  # the PEM file lives until the command exits


def test_pull_with_an_undefined_connection_fails_in_one_line_naming_it(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("AIRFLOW_CONN_TIDELAKE_TEST_ABSENT", raising=False)
    assert main(["pull", "--config", str(by_connection(tmp_path, "tidelake_test_absent"))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tidelake: error: tidb_pd connection 'tidelake_test_absent': not defined") and \
        err.count("\n") == 1, err
