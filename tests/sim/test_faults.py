"""Fault injection: each named fault changes the cluster as it says; profiles draw only their kinds."""

from __future__ import annotations

import time

import pytest

from tidelake.errors import InputError
from tidelake.sim.faults import (
    FAULT_KINDS,
    PROFILES,
    FaultInjector,
    FaultProfile,
    _is_table_boundary,
    get_profile,
)
from tidelake.sim.workload import WorkloadRunner


@pytest.fixture
def loaded(sim_cluster):
    from tidelake.sim.tidb.session import SimTiDB

    WorkloadRunner(SimTiDB(sim_cluster), "smoke", seed=1).run_ops(60)
    return sim_cluster


def test_each_fault_kind_applies(loaded):
    injector = FaultInjector(loaded, FaultProfile("t", "", 1.0, (), window_s=30, store_down_s=30), seed=4)
    regions_before = len(loaded.regions.all())
    assert injector.apply("split")
    assert len(loaded.regions.all()) == regions_before + 1
    assert injector.apply("merge")
    assert len(loaded.regions.all()) == regions_before
    leaders = {r.id: r.leader_store_id for r in loaded.regions.all()}
    assert injector.apply("transfer_leader")
    assert leaders != {r.id: r.leader_store_id for r in loaded.regions.all()}
    injector.apply("server_busy")
    assert any(loaded.faults.busy_remaining_ms(s) > 0 for s in loaded.store_addresses)
    injector.apply("slow_store")
    assert any(loaded.faults.slow_delay_ms(s) > 0 for s in loaded.store_addresses)
    injector.apply("commit_before_prewrite")
    injector.apply("duplicate_delivery")
    assert loaded.faults.commit_before_prewrite and loaded.faults.duplicate_delivery
    injector.apply("restart_store")
    assert sum(loaded.store_is_up(s) for s in loaded.store_addresses) == 2
    assert injector.apply("restart_store") is None  # one store down at a time
    assert injector.apply("reset_streams")
    assert injector.apply("pd_unavailable") and not loaded.pd_is_up
    assert injector.apply("pd_unavailable") is None  # already down
    injector.stop()  # undoes every temporary fault now
    assert all(loaded.store_is_up(s) for s in loaded.store_addresses) and loaded.pd_is_up
    assert not loaded.faults.commit_before_prewrite and not loaded.faults.duplicate_delivery
    assert all(loaded.faults.slow_delay_ms(s) == 0 for s in loaded.store_addresses)
    assert set(injector.applied) == set(FAULT_KINDS)


def test_merge_never_crosses_a_table_boundary(loaded):
    injector = FaultInjector(loaded, "none", seed=1)
    while injector.apply("merge"):
        pass
    boundaries = [r.start_key for r in loaded.regions.all() if r.start_key]
    assert boundaries and all(_is_table_boundary(k) for k in boundaries)


def test_profile_scheduler_draws_only_its_kinds(loaded):
    profile = FaultProfile("fast", "", 0.02, (("split", 1), ("transfer_leader", 1)))
    injector = FaultInjector(loaded, profile, seed=9)
    injector.start()
    time.sleep(0.6)
    injector.stop()
    assert sum(injector.applied.values()) >= 3
    assert set(injector.applied) <= {"split", "transfer_leader"}


def test_named_profiles_exist_and_unknown_names_are_input_errors(loaded):
    assert {"none", "light", "tour", "chaos"} <= set(PROFILES)
    assert all(k in FAULT_KINDS for p in PROFILES.values() for k, _ in p.weights)
    with pytest.raises(InputError):
        get_profile("meltdown")
    with pytest.raises(InputError):
        FaultInjector(loaded).apply("meteor")
