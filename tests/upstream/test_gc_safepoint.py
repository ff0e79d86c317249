"""GCSafepointKeeper against the simulated PD's classic service-safepoint rules (docs/metadata.md#pd-gc-safepoint)."""

from __future__ import annotations

import time

import pytest

from tidelake.upstream.gc_safepoint import GCSafepointKeeper
from tidelake.upstream.upstream_errors import BelowGCSafepointError


def held(sim, service_id: str):
    return next((s for s in sim.gc_safe_points.services() if s.service_id == service_id), None)


def test_holds_ts_minus_one_and_advances_only_upwards(sim, pd):
    keeper = GCSafepointKeeper(pd, "tidelake-cf1", ttl_s=600)
    ts = pd.get_ts()
    keeper.ensure_not_below_gc(ts)
    assert held(sim, "tidelake-cf1").safe_point == ts - 1
    later = pd.get_ts()
    keeper.advance(later)
    assert held(sim, "tidelake-cf1").safe_point == later - 1
    keeper.advance(ts)  # a lower checkpoint never moves the safepoint down
    assert held(sim, "tidelake-cf1").safe_point == later - 1
    assert keeper.checkpoint == later


def test_start_ts_below_another_service_safepoint_is_refused(sim, pd):
    old = pd.get_ts()
    newer = pd.get_ts()
    pd.update_service_gc_safepoint("someone-else", 600, newer)
    # gc_worker is the minimum until it is raised (as TiDB's GC leader does with its life time)
    pd.update_service_gc_safepoint("gc_worker", 2**63 - 1, newer)
    keeper = GCSafepointKeeper(pd, "tidelake-cf2", ttl_s=600)
    with pytest.raises(BelowGCSafepointError, match=f"start ts {old} is below the GC safepoint {newer}"):
        keeper.ensure_not_below_gc(old)
    assert held(sim, "tidelake-cf2") is None


def test_start_ts_below_cluster_gc_safepoint_is_refused(sim, pd):
    old = pd.get_ts()
    sim.gc_safe_points.advance_gc_safe_point(pd.get_ts())
    with pytest.raises(BelowGCSafepointError, match=f"start ts {old} is below the GC safepoint"):
        GCSafepointKeeper(pd, "tidelake-cf3", ttl_s=600).ensure_not_below_gc(old)


def test_background_refresh_extends_the_ttl_and_release_removes_it(sim, pd):
    keeper = GCSafepointKeeper(pd, "tidelake-cf4", ttl_s=3)
    assert keeper.refresh_s == 1.0
    keeper.ensure_not_below_gc(pd.get_ts())
    first_expiry = held(sim, "tidelake-cf4").expire_at
    keeper.start()
    try:
        deadline = time.monotonic() + 5
        while held(sim, "tidelake-cf4").expire_at == first_expiry and time.monotonic() < deadline:
            time.sleep(0.1)
        assert held(sim, "tidelake-cf4").expire_at > first_expiry
        assert keeper.last_error is None
    finally:
        keeper.stop()
    assert held(sim, "tidelake-cf4") is not None  # stop keeps protecting a restart
    keeper.release()
    assert held(sim, "tidelake-cf4") is None
