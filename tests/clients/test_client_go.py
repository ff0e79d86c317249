"""tikv/client-go, TiDB's own TiKV client, against the simulator while our puller captures.

The Go program (clientgo/main.go beside this file) is built into a temporary folder at test time with the
Go toolchain and its module proxy; nothing fetched is kept in the repository. With client-go's
defaults every RPC travels over BatchCommands, and it polls PD's etcd for the GC safepoint
(docs/wire.md#what-other-tikv-clients-need-from-a-store, docs/wire.md#pds-etcd-kv). It writes transactions of every kind TiDB uses (optimistic and
pessimistic, each as 2PC, async commit and 1PC), with row values encoded as TiDB writes them for
tidb_writes' table. The oracles are the simulator's own MVCC records, never typed expectations: every
commit lands exactly once, and the landed changes, replayed, equal a snapshot read at the durable
watermark; the replica merged from them matches the upstream under `tidelake verify`; a client-go
snapshot read equals the simulator's scan; etcd's own Go client (clientv3) creates a key on PD's etcd
with its create-if-absent Txn exactly once.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.capture.pull_harness import changelog, make_config, oracle, sim, start_ts, wait_resolved, watermarks  # noqa: F401
from tests.capture.tidb_writes import TiDBWrites
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.codec.keys import record_key, table_record_span
from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.kvproto import etcdserverpb_pb2
from tidelake.lake.layout import LakeLayout
from tidelake.sim.kv_service import KvService
from tidelake.sim.mvcc import MvccStore

HERE = Path(__file__).resolve().parent / "clientgo"
SHOP, ORDERS = 2, 110
KINDS = 6 * 3  # txn kinds x rounds, as main.go writes them
# main.go writes kind i at handles 10i+1..10i+3: splits at 12 and 42 put the primary and a secondary of
# "optimistic async commit" and "pessimistic async commit" in different regions (on different stores)
SPLIT_HANDLES = (12, 42)


def split_orders(sim) -> None:
    for handle in SPLIT_HANDLES:
        key = encode_bytes(record_key(ORDERS, handle))
        sim.split_region(sim.regions.locate(key).id, key)


@pytest.fixture(scope="module")
def clientgo(tmp_path_factory) -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.skip("the Go toolchain is not installed")
    build = tmp_path_factory.mktemp("clientgo")
    for name in ("main.go", "go.mod"):
        shutil.copy(HERE / name, build / name)
    for args in ([go, "mod", "tidy"], [go, "build", "-o", "clientgo", "."]):
        done = subprocess.run(args, cwd=build, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "GOFLAGS": "-mod=mod"})
        assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return build / "clientgo"


@pytest.fixture
def calls(monkeypatch):
    """What the client really asked for: prewrite modes, pessimistic locks, batched streams."""
    seen: collections.Counter = collections.Counter()
    prewrite, lock, batch = MvccStore.prewrite, MvccStore.pessimistic_lock, KvService.BatchCommands

    def spy_prewrite(self, mutations, *args, **kw):
        result = prewrite(self, mutations, *args, **kw)
        seen["one_pc"] += bool(result.one_pc_commit_ts)
        seen["async_commit"] += bool(result.min_commit_ts)
        here = {key for _, key, _ in mutations}
        seen["async_secondary_in_another_region"] += bool(result.min_commit_ts and set(kw.get("secondaries", ())) - here)
        seen["pessimistic_prewrite"] += bool(kw.get("for_update_ts"))
        return result

    def spy_lock(self, *args, **kw):
        seen["pessimistic_lock"] += 1
        return lock(self, *args, **kw)

    def spy_batch(self, request_iterator, context):
        seen["batch_streams"] += 1
        return batch(self, request_iterator, context)

    monkeypatch.setattr(MvccStore, "prewrite", spy_prewrite)
    monkeypatch.setattr(MvccStore, "pessimistic_lock", spy_lock)
    monkeypatch.setattr(KvService, "BatchCommands", spy_batch)
    return seen


def run(clientgo: Path, *args: str) -> list[str]:
    done = subprocess.run([str(clientgo), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"clientgo {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return [line for line in done.stdout.splitlines() if not line.startswith("[")]  # client-go logs on stdout


def test_client_go_transactions_land_exactly_once_and_match_a_snapshot(clientgo, calls, sim, tmp_path):
    lake = tmp_path / "lake"
    tidb = TiDBWrites(sim)
    tidb.create_db(SHOP, "shop")
    tidb.create_table(SHOP, ORDERS, "orders")
    split_orders(sim)
    with PullerThread(make_config(sim, lake)) as runner:
        start = start_ts(lake, runner)
        committed = run(clientgo, "write", sim.pd_address, str(ORDERS))
        assert len([line for line in committed if line.startswith("committed ")]) == KINDS
        wait_resolved(lake, {ORDERS: sim.tso.next()}, 0, runner)
    assert runner.error is None
    assert calls["one_pc"] and calls["async_commit"] and calls["pessimistic_prewrite"] and calls["pessimistic_lock"]
    assert calls["batch_streams"] and calls["async_secondary_in_another_region"]

    mark = watermarks(lake).table_resolved[ORDERS]
    landed = [r for r in changelog(lake) if r[0] == ORDERS]
    assert max(collections.Counter(landed).values()) == 1  # exactly once
    assert {r for r in landed if r[2] <= mark} == {r for r in oracle(sim, ORDERS, start) if r[2] <= mark}
    replayed: dict[bytes, tuple[int, str, bytes]] = {}
    for _, key, commit_ts, op, value in sorted((r for r in landed if r[2] <= mark), key=lambda r: r[2]):
        replayed[key] = (commit_ts, op, value)
    lo, hi = table_record_span(ORDERS)
    snapshot = dict(sim.mvcc.scan(lo, hi, mark, None))
    assert {k: v for k, (_, op, v) in replayed.items() if op == "put"} == snapshot
    assert len(snapshot) == KINDS // 3 * 2  # each kind's three keys, the middle one deleted in the last round


@pytest.mark.spark
def test_client_go_transactions_merge_into_a_replica_verify_matches(clientgo, sim, tmp_path, spark):
    """Created after the puller started, so the replica replays from its CREATE (no bootstrap)."""
    from tidelake.merge.merge_run import run_merge
    from tidelake.upstream.kv_snapshot import SnapshotReader
    from tidelake.upstream.pd_client import PDClient
    from tidelake.verify.verifier import Verdict, Verifier

    lake = tmp_path / "lake"
    with PullerThread(make_config(sim, lake)) as runner:
        wait_resolved(lake, {}, 1, runner)
        tidb = TiDBWrites(sim)
        tidb.create_db(SHOP, "shop")
        tidb.create_table(SHOP, ORDERS, "orders")
        split_orders(sim)
        run(clientgo, "write", sim.pd_address, str(ORDERS))
        final = sim.tso.next()
        wait_resolved(lake, {ORDERS: final}, final, runner)
    assert runner.error is None
    layout = LakeLayout(str(lake))
    merged = run_merge(spark, layout, until_ts=final)
    assert not merged.failed, merged.failed
    pd = PDClient([sim.pd_address])
    try:
        with SnapshotReader(pd) as reader:
            report = Verifier(spark, layout, reader).run()
    finally:
        pd.close()
    [table] = report.tables
    assert table.status == Verdict.MATCH, table
    assert table.checkpoint == final and table.replica_rows == table.upstream_rows == KINDS // 3 * 2


def test_client_go_snapshot_read_through_batch_commands(clientgo, calls, sim):
    tidb = TiDBWrites(sim)
    tidb.create_db(SHOP, "shop")
    tidb.create_table(SHOP, ORDERS, "orders")
    split_orders(sim)
    run(clientgo, "write", sim.pd_address, str(ORDERS))
    ts_line, *rows = run(clientgo, "read", sim.pd_address, str(ORDERS))
    lo, hi = table_record_span(ORDERS)
    expected = sim.mvcc.scan(lo, hi, int(ts_line), None)
    assert [(bytes.fromhex(k), bytes.fromhex(v)) for k, v in (r.split(" ") for r in rows)] == expected
    assert expected and calls["batch_streams"]


def test_etcds_own_go_client_creates_a_key_once_on_pd(clientgo, sim):
    """clientv3 (etcd's Go client, which client-go uses for PD's etcd) runs its create-if-absent Txn
    on PD (docs/wire.md#pds-etcd-kv): the first call creates, the second reads the first's value."""
    first = run(clientgo, "etcd-create", sim.pd_address, "/tidelake/test/lake", "lake-a")
    second = run(clientgo, "etcd-create", sim.pd_address, "/tidelake/test/lake", "lake-b")
    assert len(first) == 1 and first[0].startswith("created ")
    assert second == [f"exists {first[0].split()[1]} lake-a"]
    kvs, _ = sim.etcd.range(etcdserverpb_pb2.RangeRequest(key=b"/tidelake/test/lake"))
    assert [(kv.value, kv.version) for kv in kvs] == [(b"lake-a", 1)]
