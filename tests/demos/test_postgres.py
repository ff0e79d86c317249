"""The throwaway PostgreSQL of `make integration`: it serves Airflow's driver on loopback and
stop() leaves no postmaster behind."""

from __future__ import annotations

import os

import psutil
import sqlalchemy

from tidelake.demos.postgres import Postgres


def test_a_cluster_starts_serves_the_airflow_url_and_stops_by_its_pid(tmp_path):
    postgres = Postgres(tmp_path / "pg")
    pid = None
    try:
        postgres.start()
        pid = postgres.pid()
        assert pid is not None and psutil.Process(pid).name() == "postgres"
        engine = sqlalchemy.create_engine(postgres.url)
        with engine.connect() as conn:
            assert conn.execute(sqlalchemy.text("select current_database(), inet_server_addr()::text")).one() \
                == ("airflow", "127.0.0.1/32")
        engine.dispose()
    finally:
        postgres.remove()
    assert pid is not None and not psutil.pid_exists(pid)
    assert not os.path.exists(postgres.workdir)
