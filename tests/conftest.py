"""Shared fixtures. Spark tests share one session per test run (DEVELOPERS.md quality bar)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    """One Delta-enabled local Spark session for the whole run; mark tests with @pytest.mark.spark."""
    from tidelake.spark.session import get_session

    session = get_session("tidelake-tests", master="local[2]")
    yield session
    session.stop()
