"""Writer leases (tidelake.lake.lease) on a local folder and on the S3 server: one holder at a time,
a refusal naming the holder, takeover of a SIGKILLed holder's lease with the next token, and no
commit by a writer that lost its lease. No Spark: commits are delta-rs's."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tidelake.config import LeaseSettings, load_config
from tidelake.errors import EXIT_TRY_LATER, InputError
from tidelake.lake.layout import LakeLayout
from tidelake.lake.lease import (
    LEASE_METADATA_KEY,
    Holder,
    LeaseLost,
    hold,
    live_holder,
    replica_lease,
    take,
)
from tidelake.lake.lease_store import lease_store
from tidelake.lake.object_store import lake_storage_options
from tidelake.merge.txn_confs import delta_rs_commit_properties

HOLDER_SCRIPT = Path(__file__).with_name("lease_holder.py")
_prefixes = itertools.count()
NAMES = {1: (replica_lease(1), "replica of shop.orders")}


@pytest.fixture(params=["local", "s3"])
def lake(request, tmp_path) -> LakeLayout:
    """An empty lake on a local folder or in the S3 server's bucket."""
    if request.param == "local":
        return LakeLayout(str(tmp_path / "lake"))
    s3 = request.getfixturevalue("s3_server")
    root = s3.lake_root(f"leases{next(_prefixes)}")
    return LakeLayout(root, lake_storage_options(root, s3.storage_options(), environ={}))


def timed(lake: LakeLayout, ttl_s: float, renew_s: float, wait_s: float = 0.0) -> LakeLayout:
    return LakeLayout(lake.root, lake.storage_options, LeaseSettings(ttl_s, renew_s, wait_s))


def start_holder(lake: LakeLayout, ttl_s: float, renew_s: float) -> subprocess.Popen:
    env = {**os.environ, "LEASE_ROOT": lake.root, "LEASE_OPTIONS": json.dumps(lake.storage_options or {}),
           "LEASE_TTL": str(ttl_s), "LEASE_RENEW": str(renew_s),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, str(HOLDER_SCRIPT)], stdout=subprocess.PIPE, text=True, env=env)
    line = child.stdout.readline()
    assert line.split() == ["held", "1"], f"holder said {line!r}"
    return child


def test_one_holder_at_a_time_and_the_refusal_names_it(lake):
    with hold(lake, NAMES) as first:
        assert first.held[1].token == 1 and not first.refused
        with hold(lake, NAMES) as second:
            assert not second.held
            refusal = str(second.refused[1])
    me = Holder.this_process()
    assert "\n" not in refusal
    assert refusal.startswith(f"replica of shop.orders is being written by `{me.command}` (host {me.host}, "
                              f"pid {os.getpid()}) since ")
    assert "lease replica-1 token 1 expires in" in refusal
    with hold(lake, NAMES) as third:  # released on exit: taken at once, with the next token
        assert third.held[1].token == 2


def test_a_sigkilled_holder_on_this_host_is_taken_over_at_once_with_the_next_token(lake, caplog):
    child = start_holder(lake, ttl_s=30.0, renew_s=0.3)
    try:
        with hold(timed(lake, 30.0, 0.3), NAMES) as refused:
            assert f"pid {child.pid})" in str(refused.refused[1])
            assert refused.refused[1].exit_code == EXIT_TRY_LATER
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    # Its record is still live for ~30 s, but its process is gone: no wait.
    with hold(timed(lake, 30.0, 0.3), NAMES) as leases:
        assert leases.held[1].token == 2
        assert leases.held[1].check() == 2
    assert (f"lease 1 of `lease_holder.py` (host {Holder.this_process().host}, pid {child.pid}) ended on this "
            "host without releasing it") in caplog.text


def test_a_silent_holder_on_another_host_is_taken_over_after_its_ttl(lake, caplog):
    store = lease_store(lake.leases_root, lake.storage_options)
    elsewhere = Holder("etl-elsewhere", 4242, "tidelake merge --config cf.toml", "2026-11-29T09:20:00+00:00")
    take(store, replica_lease(1), "replica of shop.orders", LeaseSettings(1.5, 0.5), elsewhere, time.monotonic())
    with hold(timed(lake, 1.5, 0.5), NAMES) as refused:  # never renewed, but not expired yet
        assert "(host etl-elsewhere, pid 4242)" in str(refused.refused[1])
    with hold(timed(lake, 1.5, 0.5, wait_s=10.0), NAMES) as leases:
        assert leases.held[1].token == 2
    assert re.search(r"waiting up to (9|10)s for replica of shop.orders is being written by `tidelake merge",
                     caplog.text)
    assert "lease 1 of `tidelake merge --config cf.toml` (host etl-elsewhere, pid 4242) expired at" in caplog.text


def test_renewal_keeps_a_lease_past_its_ttl(lake):
    with hold(timed(lake, 1.0, 0.2), NAMES) as leases:
        time.sleep(1.6)
        assert leases.held[1].check() == 1
        with hold(timed(lake, 1.0, 0.2), NAMES) as other:
            assert 1 in other.refused


def test_a_writer_that_lost_its_lease_cannot_commit(lake, tmp_path):
    table = f"{lake.root}/shop/orders"
    rows = pa.table({"id": pa.array([1], pa.int64())})
    # Renewals far apart: the lease lapses as if its holder had been paused past the TTL.
    with hold(timed(lake, 1.0, 600.0), NAMES) as leases:
        with leases.fencing(1):
            write_deltalake(table, rows, commit_properties=delta_rs_commit_properties(10),
                            storage_options=lake.storage_options)
        commit = DeltaTable(table, storage_options=lake.storage_options).history(1)[0]
        assert json.loads(commit["userMetadata"])[LEASE_METADATA_KEY] == 1
        time.sleep(1.2)
        with leases.fencing(1), pytest.raises(LeaseLost, match="expired at .* without a renewal"):
            delta_rs_commit_properties(11)
        store = lease_store(lake.leases_root, lake.storage_options)
        other = take(store, replica_lease(1), "replica of shop.orders", lake.leases, Holder.this_process(),
                     time.monotonic())
        assert other.token == 2
        with leases.fencing(1), pytest.raises(LeaseLost, match="token 1 is no longer held"):
            write_deltalake(table, rows, mode="append", commit_properties=delta_rs_commit_properties(11),
                            storage_options=lake.storage_options)
    assert DeltaTable(table, storage_options=lake.storage_options).version() == 0
    assert other.check() == 2  # the lost holder's exit released nothing of the new one's


def test_two_takers_of_one_token_one_wins(lake):
    store = lease_store(lake.leases_root, lake.storage_options)
    body = b"{}"
    assert store.create("replica-9", 1, body) is not None
    assert store.create("replica-9", 1, body) is None
    assert store.tokens("replica-9") == [1]


def test_a_file_uri_root_with_escapes_keeps_its_leases_in_the_lake_folder(tmp_path):
    """delta-rs escapes a space in a file:// root: the records go in the folder the URI names, where
    every process of the lake looks, not in a folder literally named with %20."""
    folder = tmp_path / "my lake"
    layout = LakeLayout(folder.as_uri())
    with hold(layout, NAMES) as leases:
        assert set(leases.held) == set(NAMES)
        assert any((folder / "_tidelake").rglob("*")) and not (tmp_path / "my%20lake").exists()
        assert live_holder(layout, replica_lease(1)) is not None


def test_an_object_store_without_conditional_write_is_not_fenced(caplog):
    lake = LakeLayout("gs://bucket/lake", {})
    with hold(lake, NAMES) as leases:
        assert not leases.held and not leases.refused and not leases.fenced
    assert "not fenced" in caplog.text


def test_lease_settings_from_the_config(tmp_path):
    path = tmp_path / "cf.toml"
    base = '[changefeed]\nid = "cf"\n[upstream]\npd = ["127.0.0.1:2379"]\n[lake]\nroot = "lake"\n'
    path.write_text(base)
    assert load_config(path).lake.leases == LeaseSettings()
    path.write_text(base + 'lease_ttl = "30s"\nlease_renew = "5s"\nlease_wait = "1m"\n')
    assert load_config(path).lake.leases == LeaseSettings(30.0, 5.0, 60.0)
    path.write_text(base + 'lease_ttl = "30s"\n')  # the renewal follows a short TTL
    assert load_config(path).lake.leases == LeaseSettings(30.0, 10.0, 0.0)
    path.write_text(base + 'lease_ttl = "30s"\nlease_renew = "20s"\n')
    with pytest.raises(InputError, match=r"\[lake\]\.lease_renew: expected a duration at most half of lease_ttl"):
        load_config(path)


def test_many_leases_are_taken_together_and_a_failed_take_releases_every_one_taken(lake, monkeypatch):
    """A run leases each of its replicas: the takes run side by side (tidelake.lake.lease._each);
    one held elsewhere is refused alone, and a store error on one take leaves none of the others
    held (the next run takes them at once)."""
    many = {k: (replica_lease(k), f"replica {k}") for k in range(1, 21)}
    with hold(lake, {3: many[3]}):
        with hold(lake, many) as leases:
            assert set(leases.held) == set(many) - {3} and set(leases.refused) == {3}
            assert all(lease.check() == 1 for lease in leases.held.values())
    store_type = type(lease_store(lake.leases_root, lake.storage_options))
    real_create = store_type.create

    def create(self, name, token, body):
        if name == replica_lease(17):
            raise OSError("the store went away")
        return real_create(self, name, token, body)

    monkeypatch.setattr(store_type, "create", create)
    with pytest.raises(OSError, match="the store went away"):
        with hold(lake, many):
            pass
    monkeypatch.setattr(store_type, "create", real_create)
    with hold(timed(lake, 30.0, 10.0), many) as again:  # nothing left held: every one taken at once
        assert set(again.held) == set(many) and not again.refused


def test_takes_that_may_wait_go_one_by_one_in_the_given_order(lake, monkeypatch):
    """With a lease_wait, a run takes its leases in order, one at a time, as before they were taken
    together: two runs that each took part of the other's set at once would each wait for the rest."""
    from tidelake.lake import lease as lease_module

    many = {k: (replica_lease(k), f"replica {k}") for k in range(1, 11)}
    calls: list[tuple[str, str]] = []
    real_take = lease_module.take

    def recording(store, name, *args, **kwargs):
        calls.append((name, threading.current_thread().name))
        return real_take(store, name, *args, **kwargs)

    monkeypatch.setattr(lease_module, "take", recording)
    with hold(timed(lake, 30.0, 10.0, wait_s=0.5), many) as leases:
        assert set(leases.held) == set(many)
    assert calls == [(replica_lease(k), threading.current_thread().name) for k in range(1, 11)]
    calls.clear()
    with hold(lake, many) as leases:  # no wait: side by side on the pool's threads
        assert set(leases.held) == set(many)
    assert sorted(name for name, _ in calls) == sorted(replica_lease(k) for k in range(1, 11))
    assert all(thread.startswith("tidelake-leases") for _, thread in calls)
