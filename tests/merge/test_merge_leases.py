"""Two merge runs of one lake at once: the replica's lease (tidelake.lake.lease) lets one merge it,
the other reports it blocked in one line naming the holder, and the replica equals the upstream
replay (lake_fixtures.FedLake.expected_rows). The cross-process refusal and takeover are
tests/lake/test_lease.py's; this is the merge run's side of it."""

from __future__ import annotations

import io
import json
import os

import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake, replica_rows
from rich.console import Console

from tidelake.cli.merge_command import exit_code
from tidelake.errors import EXIT_TRY_LATER
from tidelake.failpoints import armed
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.lease import LEASE_METADATA_KEY
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import run_merge

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]


def test_a_merge_started_while_another_holds_the_replica_reports_it_blocked(spark, tmp_path):
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    for i in range(1, 5):
        with lake.txn() as t:
            t.put("shop", "orders", {"id": i, "note": f"n{i}"})
    upper = lake.resolve()
    second = []

    def start_second_run(name, key):  # the first run holds the replica's lease here
        second.append(run_merge(spark, lake.layout))

    with armed(["merge.next_table"], start_second_run):
        first = run_merge(spark, lake.layout)

    (merged,) = first.tables
    (blocked,) = second[0].tables
    assert merged.status == MergeStatus.MERGED and merged.checkpoint_after == upper
    assert blocked.status == MergeStatus.BLOCKED and blocked.held
    assert blocked.reason.startswith("replica of shop.orders is being written by ")
    assert f"pid {os.getpid()}) since " in blocked.reason
    out = io.StringIO()
    assert exit_code(second[0], Console(file=out, width=2000)) == EXIT_TRY_LATER
    assert out.getvalue().count("\n") == 1 and "nothing merged: 1 of 1 tables are blocked" in out.getvalue()

    path = ReplicaCatalog(lake.layout).find("shop", "orders").path
    assert read_checkpoint(path) == upper
    assert replica_rows(spark, path) == lake.expected_rows("shop", "orders", upper)
    commit = DeltaTable(path).history(1)[0]
    assert json.loads(commit["userMetadata"])[LEASE_METADATA_KEY] == 1
    again = run_merge(spark, lake.layout)  # the lease was released: the next run takes token 2
    assert [t.status for t in again.tables] == [MergeStatus.IDLE]
