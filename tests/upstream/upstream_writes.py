"""Writes into the simulated cluster's MVCC store for the upstream tests (2PC with TSO timestamps)."""

from __future__ import annotations

from tidelake.codec.keys import record_key
from tidelake.sim.cluster import SimCluster
from tidelake.sim.mvcc import CommitTsExpiredError


def commit(cluster: SimCluster, mutations: dict[bytes, bytes | None]) -> int:
    """One committed transaction (None = delete); returns its commit ts."""
    start = cluster.tso.next()
    ops = [("delete", k, b"") if v is None else ("put", k, v) for k, v in mutations.items()]
    keys = list(mutations)
    cluster.mvcc.prewrite(ops, keys[0], start, 3000)
    while True:
        commit_ts = cluster.tso.next()
        try:
            cluster.mvcc.commit(keys, start, commit_ts)
            return commit_ts
        except CommitTsExpiredError:
            continue  # a reader pushed min_commit_ts: TiDB retries with a fresh commit ts


def rows(table_id: int, handles, tag: str = "v") -> dict[bytes, bytes]:
    return {record_key(table_id, h): f"{tag}{h}".encode() for h in handles}
