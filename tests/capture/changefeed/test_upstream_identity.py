"""A restarted puller refuses an upstream that is not the one its lake was fed from: another
cluster, or the same cluster id wiped and re-created (empty stores), before it lands anything."""

from __future__ import annotations

import random

import pytest

from tests.capture.changefeed.test_puller_runner import shop, some_rows
from tests.capture.pull_harness import changelog, ddl_rows, make_config, sim, wait_resolved  # noqa: F401
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.capture.changefeed.upstream_identity import (
    UpstreamChangedError,
    check_cluster,
    check_schema_version,
    recorded_cluster_id,
    remember_cluster,
)
from tidelake.lake.layout import LakeLayout
from tidelake.sim.cluster import SimCluster


def _fed_once(sim, lake) -> int:
    tidb = shop(sim, 110)
    with PullerThread(make_config(sim, lake)) as run:
        last = some_rows(tidb, random.Random(4), 110, 3)
        wait_resolved(lake, {110: last}, last, run)
    assert recorded_cluster_id(LakeLayout(str(lake)), "cf1") == sim.cluster_id
    return last


def _refused(other, lake) -> str:
    before = (len(changelog(lake)), len(ddl_rows(lake)))
    run = PullerThread(make_config(other, lake)).start()
    run.thread.join(60)
    assert isinstance(run.error, UpstreamChangedError), run.error
    assert (len(changelog(lake)), len(ddl_rows(lake))) == before  # nothing landed changes
    return str(run.error)


def test_a_wiped_cluster_with_the_same_id_is_refused(sim, tmp_path):
    lake = tmp_path / "lake"
    _fed_once(sim, lake)
    with SimCluster(n_stores=1, cluster_id=sim.cluster_id) as wiped:
        message = _refused(wiped, lake)
    assert "schema version" in message and "wiped or restored" in message and "new lake" in message


def test_another_cluster_is_refused(sim, tmp_path):
    lake = tmp_path / "lake"
    _fed_once(sim, lake)
    with SimCluster(n_stores=1, cluster_id=sim.cluster_id + 1) as other:
        message = _refused(other, lake)
    assert f"is cluster {sim.cluster_id + 1}, but changefeed cf1 was fed from cluster {sim.cluster_id}" in message


def test_a_tso_or_schema_version_gone_back_is_refused(tmp_path):
    layout = LakeLayout(str(tmp_path / "lake"))
    check_cluster(layout, "cf1", "pd:2379", 7, 1000, 0)  # nothing recorded yet: any cluster
    remember_cluster(layout, "cf1", 7, 1000)
    remember_cluster(layout, "cf1", 8, 2000)  # the first record stays
    assert recorded_cluster_id(layout, "cf1") == 7
    remember_cluster(layout, "cf2", 2**64 - 5, 1)  # PD cluster ids are uint64
    assert recorded_cluster_id(layout, "cf2") == 2**64 - 5
    with pytest.raises(UpstreamChangedError, match="went back in time"):
        check_cluster(layout, "cf1", "pd:2379", 7, 900, 950)
    with pytest.raises(UpstreamChangedError, match="is cluster 8, but changefeed cf1 was fed from cluster 7"):
        check_cluster(layout, "cf1", "pd:2379", 8, 1000, 950)
    with pytest.raises(UpstreamChangedError, match="schema version at ts 950 is 4, but the lake recorded 5"):
        check_schema_version(layout, 7, 950, 4, 5)
    check_cluster(layout, "cf1", "pd:2379", 7, 1000, 950)  # the same cluster goes on
    check_schema_version(layout, 7, 950, 5, 5)
    check_schema_version(layout, 7, 950, 1, None)  # nothing recorded at or below the ts
    assert recorded_cluster_id(layout, "cf1") == 7
    remember_cluster(layout, "cf2", 2**64 - 5, 1)  # PD cluster ids are uint64
    assert recorded_cluster_id(layout, "cf2") == 2**64 - 5
