"""The PyPI tikv-client (Rust's TiKV client; unary RPCs, its own transaction code) against the simulator.

It writes optimistic and pessimistic transactions into a table's rows and reads a snapshot back;
the oracle is the simulator's MVCC scan at the same ts (docs/wire.md#transactional-writes).
"""

from __future__ import annotations

import pytest

from tests.capture.pull_harness import sim  # noqa: F401 (fixture)
from tidelake.codec.keys import record_key, table_record_span
from tidelake.sim.mvcc import MvccStore

tikv_client = pytest.importorskip("tikv_client")

TABLE = 120


def test_rust_client_transactions_and_snapshot(sim, monkeypatch):
    locked = []
    lock = MvccStore.pessimistic_lock
    monkeypatch.setattr(MvccStore, "pessimistic_lock", lambda self, keys, *a, **kw: locked.extend(keys) or lock(
        self, keys, *a, **kw))
    sim.split_table(TABLE)
    client = tikv_client.TransactionClient.connect([sim.pd_address])
    for round_ in range(2):
        for pessimistic in (False, True):
            txn = client.begin(pessimistic=pessimistic)
            base = 10 if pessimistic else 0
            if pessimistic:
                txn.get_for_update(record_key(TABLE, base + 1))  # takes a pessimistic lock
            for handle in range(base + 1, base + 4):
                txn.put(record_key(TABLE, handle), f"{pessimistic}/{round_}/{handle}".encode())
            if round_:
                txn.delete(record_key(TABLE, base + 2))
            txn.commit()
    ts = client.current_timestamp()
    lo, hi = table_record_span(TABLE)
    got = client.snapshot(ts, False).scan(lo, hi, 100)
    assert [(bytes(k), bytes(v)) for k, v in got] == sim.mvcc.scan(lo, hi, ts, None)
    assert len(got) == 4 and not sim.mvcc.scan_locks(lo, hi, 2**64 - 1)
    assert record_key(TABLE, 11) in locked  # the pessimistic transactions really locked
