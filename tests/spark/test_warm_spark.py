"""The warm Spark (docs/operations.md#warm-spark): `tidelake spark-server` and merges as Spark Connect clients.

The server is the run's `connect_server` fixture, started through tidelake.spark.connect_server
as `tidelake spark-server start` starts it. Replicas are compared with the upstream replay of
the fed lake (lake_fixtures.FedLake.expected_rows), as the local merge tests do.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake, replica_rows

from tidelake.lake.checkpoint import CHECKPOINT_METADATA_KEY, checkpoint_metadata, read_checkpoint
from tidelake.lake.lease import LEASE_METADATA_KEY
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.schema_history import SchemaHistory
from tidelake.merge.txn_confs import TXN_VERSION_CONF, txn_confs
from tidelake.spark.spark_session import connect_session

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]


def test_two_clients_at_once_keep_their_own_txn_confs(connect_server, connect_mode, tmp_path):
    """Two merges at once, as two Airflow tasks would be: each client's Delta txn (the replica
    checkpoint) is set in its own server-side session, so both are set at the same moment and
    each commit records its own version, never the other's."""
    clients = [connect_session(connect_server.url) for _ in range(2)]
    paths = [str(tmp_path / f"replica{i}") for i in range(2)]
    versions = [1_000, 2_000]
    both_set = threading.Barrier(2, timeout=120)
    seen: dict[int, str] = {}
    errors: list[BaseException] = []

    def merge(i: int) -> None:
        spark = clients[i]
        try:
            spark.sql(f"CREATE TABLE delta.`{paths[i]}` (id BIGINT, v STRING) USING delta").collect()
            with txn_confs(spark, versions[i]):
                both_set.wait()  # the other client's txn confs are set now too
                seen[i] = spark.conf.get(TXN_VERSION_CONF)
                both_set.wait()
                spark.sql(f"INSERT INTO delta.`{paths[i]}` VALUES ({i}, 'from client {i}')").collect()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread below
            errors.append(exc)
            both_set.abort()

    threads = [threading.Thread(target=merge, args=(i,)) for i in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for client in clients:
            client.stop()  # a Connect session left open keeps the test process alive
    assert not errors, errors
    assert seen == {0: "1000", 1: "2000"}
    for i, path in enumerate(paths):
        assert read_checkpoint(path) == versions[i]
        (commit,) = [c for c in DeltaTable(path).history() if c["operation"] == "WRITE"]
        assert commit["userMetadata"] == checkpoint_metadata(versions[i])
        assert DeltaTable(path).to_pyarrow_table().to_pylist() == [{"id": i, "v": f"from client {i}"}]


def test_a_client_killed_mid_merge_leaves_nothing_applied_twice(connect_server, connect_mode, tmp_path):
    """`tidelake merge --remote` is SIGKILLed right after its first window committed (the
    merge.after_commit failpoint, armed from its environment); the rerun completes, the replica
    equals the upstream, and every checkpoint the replica's log records was committed once."""
    spark = connect_mode
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    for i in range(1, 13):
        with lake.txn() as t:
            t.put("shop", "orders", {"id": i % 5, "note": f"v{i}"})
            if i % 4 == 0:
                t.delete("shop", "orders", {"id": (i + 1) % 5, "note": ""})
    upper = lake.resolve()
    lake.close()
    # Short leases: the killed client's lease is taken over seconds later, its replica held till then.
    config = tmp_path / "changefeed.toml"
    config.write_text(f'[changefeed]\nid = "cf"\n[upstream]\npd = ["127.0.0.1:2379"]\n[lake]\nroot = "{lake.layout.root}"\n'
                      'lease_ttl = "4s"\nlease_renew = "1s"\nlease_wait = "1m"\n')
    merge = [sys.executable, "-m", "tidelake", "merge", "--config", str(config), "--remote", connect_server.url,
             "--max-chunk-rows", "2"]

    def replica_path() -> str | None:
        key = SchemaHistory.load(lake.layout).find("shop", "orders")
        entry = ReplicaCatalog(lake.layout).get(key)
        return entry.path if entry is not None else None

    history = SchemaHistory.load(lake.layout)
    created_at = history.ddl_events(history.find("shop", "orders"))[0].commit_ts
    env = {**os.environ, "TIDELAKE_FAILPOINTS": "merge.after_commit=kill"}
    killed = subprocess.run(merge, env=env, capture_output=True, text=True, timeout=900)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    killed_at = read_checkpoint(replica_path())
    assert killed_at is not None and created_at < killed_at < upper, (created_at, killed_at, upper)

    rerun = subprocess.run(merge, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    path = replica_path()
    assert read_checkpoint(path) == upper
    assert replica_rows(spark, path) == lake.expected_rows("shop", "orders", upper)
    merges = [json.loads(c["userMetadata"]) for c in DeltaTable(path).history() if c["operation"] == "MERGE"]
    checkpoints = [m[CHECKPOINT_METADATA_KEY] for m in merges]
    assert len(checkpoints) == len(set(checkpoints)) and upper in checkpoints
    assert any(m.get(LEASE_METADATA_KEY) == 2 for m in merges)  # the rerun took the killed client's lease over
