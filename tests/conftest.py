"""Shared fixtures: one Spark session per test run (a JVM start costs more than most tests), a fresh
lake folder, an S3 API server per module, and a factory of raw row changes."""

from __future__ import annotations

import itertools
import os
import sys
import time

import pytest
from hypothesis import settings

from tidelake.demos.s3_server import S3Server
from tidelake.lake.layout import LakeLayout
from tidelake.lake.row_change import RowChange
from tidelake.tso import compose

# Property tests (tests/*/test_fuzz_*.py): a modest default keeps `make test` fast; the long
# fuzz run is `pytest --hypothesis-profile=fuzz -k fuzz tests/codec tests/config
# tests/capture/eventfeed`. No example database: inputs worth keeping become @example regressions.
settings.register_profile("tidelake", max_examples=60, deadline=None, database=None)
settings.register_profile("fuzz", max_examples=5000, deadline=None, database=None)
settings.load_profile("tidelake")


@pytest.fixture(scope="session")
def spark():
    """One Delta-enabled local Spark session for the whole run; mark tests with @pytest.mark.spark."""
    from tidelake.spark.spark_session import get_session

    session = get_session("tidelake-tests", master="local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """A warm Spark Connect server (tidelake spark-server) on a free loopback port for the run;
    yields its settings (url, pid and log files)."""
    from tidelake.demos.supervisor import free_port
    from tidelake.spark import connect_server

    settings = connect_server.ServerSettings(tmp_path_factory.mktemp("spark-server"), port=free_port(15002),
                                           master="local[2]")
    connect_server.start(settings)
    yield settings
    connect_server.stop(settings)


# pyspark's functions (F.col, ...) build Connect or classic expressions by this variable, which
# a Connect session sets for the whole process. A real process is one or the other; the tests
# hold both, so the variable is set exactly while a Connect-side test runs.
CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"


@pytest.fixture(scope="session")
def connect_spark(connect_server):
    """A Spark Connect client session of the run's server (its own server-side session)."""
    from tidelake.spark.spark_session import connect_session

    was = os.environ.get(CONNECT_MODE)
    session = connect_session(connect_server.url)
    _restore_env(CONNECT_MODE, was)
    yield session
    os.environ[CONNECT_MODE] = "1"
    session.stop()
    _restore_env(CONNECT_MODE, was)


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@pytest.fixture
def connect_mode(connect_spark, monkeypatch):
    """The Connect session, with pyspark's functions building Connect expressions for the test."""
    monkeypatch.setenv(CONNECT_MODE, "1")
    return connect_spark


@pytest.fixture(params=["local", "connect"])
def any_spark(request):
    """The run's local session, then a Spark Connect one: for the tests that must hold for both."""
    return request.getfixturevalue("spark" if request.param == "local" else "connect_mode")


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """One moto S3 server process with one bucket for a test module's object-store lakes."""
    server = S3Server(tmp_path_factory.mktemp("s3"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def layout(tmp_path) -> LakeLayout:
    return LakeLayout(str(tmp_path / "lake"))


@pytest.fixture
def base_ms() -> int:
    """A wall-clock start aligned to an hour so tests can aim at bucket boundaries."""
    now = int(time.time() * 1000)
    return now - now % 3_600_000


@pytest.fixture
def make_rows(base_ms):
    """make_rows(table_id, n, at_ms=..., op='put') -> distinct RowChange values, commit ts increasing."""
    counter = itertools.count(1)

    def make(table_id: int, n: int, at_ms: int | None = None, op: str = "put") -> list[RowChange]:
        rows = []
        for _ in range(n):
            i = next(counter)
            ms = (base_ms if at_ms is None else at_ms) + i
            rows.append(
                RowChange(
                    table_id=table_id,
                    commit_ts=compose(ms, 7),
                    start_ts=compose(ms - 1, 3),
                    op=op,
                    key=b"t%d_r%08d" % (table_id, i),
                    value=b"" if op == "delete" else b"v%d" % i * 20,
                    old_value=b"old%d" % i,
                    region_id=10 + table_id,
                )
            )
        return rows

    return make


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """End the test process with pytest's own status once every report is written, skipping the
    interpreter's finalization: after 2,607 tests passed, a native thread left by the session
    (gRPC, Spark's py4j, Arrow, delta-rs and DuckDB all run in this one process) logged to a closed
    stream during finalization and the interpreter died with SIGSEGV, failing `make test`. Product
    commands are guarded separately (tests/status/test_status_exit.py)."""
    if _EXIT_STATUS:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])
