"""The changefeed's lake registered in PD's etcd (docs/operations.md#moving-or-re-creating-a-lake):
a first start registers, a restart on the same lake goes on, the same changefeed id on another
lake root is refused in one line before anything lands or its GC safepoint moves, a lake from
before the registration adopts it, and a PD without etcd's API is warned about."""

from __future__ import annotations

import json
import logging
import random
import threading

import grpc
import pytest

from tests.capture.changefeed.test_puller_runner import shop, some_rows
from tests.capture.pull_harness import config_doc, make_config, sim, wait_resolved  # noqa: F401 (sim is a fixture)
from tidelake.capture.changefeed import puller_runner
from tidelake.capture.changefeed.lake_registration import register_lake
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.cli import main
from tidelake.config_writer import write_config
from tidelake.errors import InputError
from tidelake.kvproto import etcdserverpb_pb2 as pb
from tidelake.kvproto import etcdserverpb_pb2_grpc
from tidelake.lake.layout import LakeLayout
from tidelake.sim.etcd_kv import EtcdKvService
from tidelake.upstream.pd_client import PDClient


def registered(sim):
    """The registration of changefeed cf1, read with etcd's own stub: (value as JSON, KeyValue) or None."""
    key = f"/tidelake/changefeed/{sim.cluster_id}/cf1/lake".encode()
    with grpc.insecure_channel(sim.pd_address) as channel:
        kvs = etcdserverpb_pb2_grpc.KVStub(channel).Range(pb.RangeRequest(key=key)).kvs
    return (json.loads(kvs[0].value), kvs[0]) if kvs else None


def pull_some(sim, tidb, lake, seed: int) -> None:
    with PullerThread(make_config(sim, lake)) as puller:
        wait_resolved(lake, {110: some_rows(tidb, random.Random(seed), 110)}, runner=puller)


def safepoint(sim) -> int:
    return next(s.safe_point for s in sim.gc_safe_points.services() if s.service_id == "tidelake-cf1")


def test_first_start_registers_and_a_restart_on_the_same_lake_goes_on(sim, tmp_path):
    lake = tmp_path / "lake"
    tidb = shop(sim, 110)
    pull_some(sim, tidb, lake, 1)
    record, kv = registered(sim)
    assert record["lake"] == str(lake) and record["registered_at"]
    pull_some(sim, tidb, lake, 2)
    assert registered(sim)[1] == kv  # not rewritten


def test_the_same_changefeed_on_another_lake_is_refused_in_one_line(sim, tmp_path, capsys):
    first, second = tmp_path / "lake", tmp_path / "elsewhere"
    tidb = shop(sim, 110)
    pull_some(sim, tidb, first, 1)
    held, (record, _) = safepoint(sim), registered(sim)
    some_rows(tidb, random.Random(2), 110)
    capsys.readouterr()

    path = write_config(tmp_path / "cf.toml", config_doc(sim, second))
    assert main(["pull", "--config", str(path), "--max-run-seconds", "5"]) == 2
    err = capsys.readouterr().err.strip()
    key = f"/tidelake/changefeed/{sim.cluster_id}/cf1/lake"
    assert "\n" not in err and "Traceback" not in err
    assert f"{path}: changefeed 'cf1' is registered to the lake at {first} since {record['registered_at']} " in err
    assert (f"(PD's etcd key {key}), not {second}: both lakes would share GC service safepoint tidelake-cf1. "
            f"Give this lake a new [changefeed] id, or, if the lake really moved here (copied from there), remove "
            f"the registration with `etcdctl --endpoints {sim.pd_address} del {key}` and start again") in err
    assert not second.exists()  # nothing landed, not even a lease
    assert safepoint(sim) == held and registered(sim)[0]["lake"] == str(first)


def test_a_lake_from_before_the_registration_adopts_it(sim, tmp_path, monkeypatch):
    lake = tmp_path / "lake"
    tidb = shop(sim, 110)
    with monkeypatch.context() as before:
        before.setattr(puller_runner, "register_lake", lambda pd, config, layout: None)
        pull_some(sim, tidb, lake, 1)
    assert registered(sim) is None
    pull_some(sim, tidb, lake, 2)  # resumes, and registers silently
    assert registered(sim)[0]["lake"] == str(lake)


def test_a_pd_without_etcds_api_is_warned_about_and_the_puller_goes_on(sim, tmp_path, monkeypatch, caplog):
    def unimplemented(self, request, context):
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")

    sim.stop_pd()
    monkeypatch.setattr(EtcdKvService, "Txn", unimplemented)
    sim.start_pd()  # its handlers bind the servicer's methods when PD starts
    config = make_config(sim, tmp_path / "lake")
    with PDClient([sim.pd_address]) as pd, caplog.at_level(logging.WARNING):
        register_lake(pd, config, LakeLayout.from_config(config.lake))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        f"changefeed cf1 is not registered in PD's etcd (PD {sim.pd_address} does not serve etcd's KV/Txn: "
        "UNIMPLEMENTED: Method not found!): another lake started with this changefeed id would not be refused"]
    assert registered(sim) is None


def test_concurrent_shards_of_one_lake_all_go_on(sim, tmp_path):
    """Every shard registers: of racing creates one wins and the others find their own lake."""
    config = make_config(sim, tmp_path / "lake")
    layout = LakeLayout.from_config(config.lake)
    errors: list[BaseException] = []

    def register() -> None:
        try:
            with PDClient([sim.pd_address]) as pd:
                register_lake(pd, config, layout)
        except BaseException as exc:  # noqa: BLE001 (collected for the assert)
            errors.append(exc)

    threads = [threading.Thread(target=register) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and registered(sim)[0]["lake"] == str(tmp_path / "lake")


@pytest.mark.parametrize("value", [b"not json", b'{"lake": 3}'])
def test_a_foreign_value_at_the_key_is_refused_showing_it(sim, tmp_path, value):
    key = f"/tidelake/changefeed/{sim.cluster_id}/cf1/lake".encode()
    with grpc.insecure_channel(sim.pd_address) as channel:
        etcdserverpb_pb2_grpc.KVStub(channel).Put(pb.PutRequest(key=key, value=value))
    config = make_config(sim, tmp_path / "lake")
    with PDClient([sim.pd_address]) as pd, pytest.raises(InputError, match="is registered to the lake at " + value.decode()):
        register_lake(pd, config, LakeLayout.from_config(config.lake))
