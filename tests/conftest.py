"""Shared fixtures: one Spark session per test run (a JVM start costs more than most tests), a fresh
lake folder, and a factory of raw row changes."""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import settings

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
    from tidelake.apply.session import get_session

    session = get_session("tidelake-tests", master="local[2]")
    yield session
    session.stop()


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
