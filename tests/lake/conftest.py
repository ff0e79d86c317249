"""Fixtures of the object-store lake tests."""

from __future__ import annotations

import pytest

from tests.lake.s3_fault_proxy import FaultClient


@pytest.fixture
def proxy(s3_server, tmp_path):
    """A fault-injecting proxy in front of the module's S3 server (tests/lake/s3_fault_proxy.py)."""
    fault_proxy = FaultClient(s3_server.port, tmp_path / "proxy.log")
    yield fault_proxy
    fault_proxy.close()
