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


def test_a_restart_ends_every_session_and_keeps_the_data_and_the_port(tmp_path):
    """`make integration` restarts the server under Airflow: sessions end, the data and URL stay."""
    import pytest

    postgres = Postgres(tmp_path / "pg")
    try:
        postgres.start()
        before = postgres.pid()
        engine = sqlalchemy.create_engine(postgres.url)
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text("create table kept (x int)"))
            conn.execute(sqlalchemy.text("insert into kept values (7)"))
        session = engine.connect()
        postgres.restart()
        assert postgres.pid() not in (None, before)
        with pytest.raises(sqlalchemy.exc.OperationalError):
            session.execute(sqlalchemy.text("select 1"))
        session.invalidate()
        with engine.connect() as conn:
            assert conn.execute(sqlalchemy.text("select x from kept")).scalar_one() == 7
        engine.dispose()
    finally:
        postgres.remove()
