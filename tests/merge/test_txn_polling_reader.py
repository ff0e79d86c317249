"""A reader polling a replica while it is merged never sees part of a transaction (issue #31:
transactions of any size).

The simulator commits small transactions around one big one; the real puller lands them under a
small memory quota, so the big transaction's prewrites wait in the puller's spill file and its
rows reach the changelog over several flushes. The big transaction is also larger than a merge
chunk (max_chunk_rows). Merges (delta-rs on the driver, as windows this size are written) run back
to back while it lands, and a reader thread polls the replica's newest Delta version meanwhile,
as a consumer would: every version it sees must hold each transaction wholly or not at all and
equal the simulator's MVCC snapshot at the checkpoint that version records; every version of the
log is read again afterwards (a poll can fall between two quick commits). A merge that ran past the
table's resolved ts, or wrote one window in several commits, would show part of a transaction.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest
from deltalake import DeltaTable
from merge.txn_harness import COLUMNS, HOLD_S, changelog_counts, insert_txn, spilled_rows, spilling_puller

from tests.capture.pull_harness import wait_resolved
from tidelake.lake.checkpoint import MERGE_APP_ID, read_checkpoint
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import run_merge
from tidelake.sim.tidb.session import SimTiDB

pytestmark = pytest.mark.timeout(300)

DB, TABLE = "shop", "t"
BIG_ROWS = 3000
SMALL_TXNS = 4  # before and after the big one
SMALL_ROWS = 50
QUOTA = "128KiB"  # the big transaction is ~0.7 MiB
CHUNK_ROWS = 400  # a merge chunk is smaller than the big transaction

Seen = dict[int, tuple[int | None, list[tuple[int, str]]]]  # version -> (its checkpoint, its (id, txn) rows)


class PollingReader(threading.Thread):
    """Reads the replica's newest version again and again until stopped, keeping each version it saw."""

    def __init__(self, layout: LakeLayout) -> None:
        super().__init__(daemon=True)
        self.layout = layout
        self.seen: Seen = {}
        self.error: BaseException | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                entry = ReplicaCatalog(self.layout).find(DB, TABLE)
                if entry is not None and DeltaTable.is_deltatable(entry.path):
                    table = DeltaTable(entry.path)
                    if table.version() not in self.seen:
                        rows = table.to_pyarrow_table(columns=["id", "txn"]).to_pylist()
                        self.seen[table.version()] = (table.transaction_version(MERGE_APP_ID),
                                                      [(r["id"], r["txn"]) for r in rows])
                time.sleep(0.01)
        except BaseException as exc:  # handed to the test's thread
            self.error = exc


def _write_the_rest(tidb: SimTiDB, txns: dict[str, tuple[int, set[int]]], first_id: int) -> None:
    """The big transaction (held prewritten for HOLD_S), then the small ones after it; "final": a ts
    after all of them."""
    next_id = first_id
    for n, (kind, rows) in enumerate([("big", BIG_ROWS)] + [("after", SMALL_ROWS)] * SMALL_TXNS, start=SMALL_TXNS):
        label, ids = f"{kind}{n}", range(next_id, next_id + rows)
        txns[label] = (insert_txn(tidb, DB, [TABLE], label, ids, HOLD_S if kind == "big" else 0.0), set(ids))
        next_id += rows
    txns["final"] = (tidb.cluster.tso.next(), set())


def test_a_polling_reader_sees_each_transaction_wholly_or_not_at_all(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="tidelake.capture.eventfeed.prewrites")
    layout = LakeLayout(str(tmp_path / "lake"))
    reader = PollingReader(layout)
    with spilling_puller(tmp_path / "lake", DB, QUOTA) as (cluster, puller):
        tidb = SimTiDB(cluster)
        tidb.create_database(DB)
        tidb.create_table(DB, TABLE, COLUMNS, primary_key=["id"])
        txns: dict[str, tuple[int, set[int]]] = {}  # label -> (commit ts, ids)
        for n in range(SMALL_TXNS):  # the replica exists, at the small ones, before the big one begins
            label, ids = f"before{n}", range(1 + n * SMALL_ROWS, 1 + (n + 1) * SMALL_ROWS)
            txns[label] = (insert_txn(tidb, DB, [TABLE], label, ids), set(ids))
        table_ids = tidb.table_info(DB, TABLE).physical_ids()
        wait_resolved(layout.root, dict.fromkeys(table_ids, txns[label][0]), txns[label][0], puller)
        (result,) = run_merge(None, layout, tables=[f"{DB}.{TABLE}"], max_chunk_rows=CHUNK_ROWS).tables
        assert result.status == MergeStatus.MERGED, result
        replica = ReplicaCatalog(layout).find(DB, TABLE).path
        reader.start()
        writer = threading.Thread(target=_write_the_rest, args=(tidb, txns, 1 + SMALL_TXNS * SMALL_ROWS),
                                  daemon=True)
        writer.start()  # merges run back to back while the big one is written, held, committed and landed
        deadline = time.monotonic() + 120
        while writer.is_alive() or (read_checkpoint(replica) or 0) < txns.get("final", (0,))[0]:
            assert writer.is_alive() or "final" in txns, "the writer thread failed (its traceback is above)"
            assert time.monotonic() < deadline, f"{TABLE} did not reach the last commit"
            (result,) = run_merge(None, layout, tables=[f"{DB}.{TABLE}"], max_chunk_rows=CHUNK_ROWS).tables
            assert result.status not in (MergeStatus.ERROR, MergeStatus.STOPPED), result.reason
        final = txns.pop("final")[0]
        time.sleep(0.5)  # the reader's last polls see the last version
        reader.stopping.set()
        reader.join(30)
        assert reader.error is None, reader.error

        big_ts = txns[f"big{SMALL_TXNS}"][0]
        spilled = spilled_rows(caplog.records)
        assert max(spilled, default=0) > BIG_ROWS // 2, spilled  # most of its prewrites waited in the spill file
        assert len(changelog_counts(layout, big_ts) - {0, BIG_ROWS}) > 0  # the changelog held part of it

        checkpoints = {checkpoint for checkpoint, _ in reader.seen.values()}
        assert any(c is not None and c < big_ts for c in checkpoints), checkpoints  # seen before it ...
        assert any(c is not None and c >= final for c in checkpoints), checkpoints  # ... and at the end
        for version, (checkpoint, rows) in sorted(reader.seen.items()):
            _check_version(tidb, txns, version, checkpoint, rows, "the polling reader")
        # a poll may fall between two quick commits (a window's chunks): every version, read afterwards
        for version in range(DeltaTable(replica).version() + 1):
            table = DeltaTable(replica, version=version)
            rows = [(r["id"], r["txn"]) for r in table.to_pyarrow_table(columns=["id", "txn"]).to_pylist()]
            _check_version(tidb, txns, version, table.transaction_version(MERGE_APP_ID), rows, "a reader afterwards")
        assert sorted(reader.seen[max(reader.seen)][1]) == sorted((i, label) for label, (_, ids) in txns.items()
                                                                  for i in ids)


def _check_version(tidb: SimTiDB, txns: dict[str, tuple[int, set[int]]], version: int, checkpoint: int | None,
                   rows: list[tuple[int, str]], who: str) -> None:
    """Each transaction wholly or not at all in the version, and its rows the upstream's at its checkpoint."""
    labels = [label for _, label in rows]
    for label, (_, ids) in txns.items():
        assert labels.count(label) in (0, len(ids)), \
            f"{who} saw version {version} holding {labels.count(label)} of the {len(ids)} rows of {label}"
    upstream = sorted((r["id"], r["txn"]) for r in tidb.select_all(DB, TABLE, ts=checkpoint))
    assert sorted(rows) == upstream, f"{who} saw version {version} differ from the upstream at {checkpoint}"
