"""What the transaction-visibility tests share: a simulator and the real puller under a small
memory quota (big transactions' prewrites spill and land over several flushes), tables of
(id, txn, pad) rows labelled by their transaction, and the puller's count of spilled rows."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from deltalake import DeltaTable

from tests.capture.pull_harness import config_doc, small_sim, wait_resolved
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.config_writer import config_from_document
from tidelake.lake.layout import LakeLayout
from tidelake.sim.cluster import SimCluster
from tidelake.sim.tidb.session import SimTiDB

PAD = "x" * 200  # ~250 B a row
COLUMNS = [("id", "bigint"), ("txn", "varchar(16)"), ("pad", "varchar(255)")]
HOLD_S = 1.0  # a big transaction's prewrites wait this long for its commit at the puller
_SPILLED = re.compile(r"prewrite spill drained: (\d+) rows spilled")


@contextmanager
def spilling_puller(lake: Path, db: str, quota: str) -> Iterator[tuple[SimCluster, PullerThread]]:
    """A small simulator and the puller of `db`'s tables into `lake` at memory quota `quota`,
    flushing every 100 ms, past its first flush."""
    with small_sim() as cluster:
        doc = config_doc(cluster, lake, rules=(f"{db}.*",), flush="100ms")
        doc["puller"]["memory_quota"] = quota
        with PullerThread(config_from_document(doc, "test.toml"), progress_interval_s=3600) as puller:
            wait_resolved(str(lake), {}, 1, puller)
            yield cluster, puller


def insert_txn(tidb: SimTiDB, db: str, tables: Sequence[str], label: str, ids: range, hold_s: float = 0.0) -> int:
    """One transaction writing rows `ids`, labelled `label`, into each of `tables` (held prewritten
    for `hold_s`); its commit ts."""
    with tidb.txn() as t:
        for table in tables:
            for i in ids:
                t.insert(db, table, {"id": i, "txn": label, "pad": PAD})
        if hold_s:
            t.prewrite()
            time.sleep(hold_s)
    return t.commit_ts


def spilled_rows(records: Sequence[logging.LogRecord]) -> list[int]:
    """Rows each drained prewrite spill held, from the puller's log (caplog at INFO on
    tidelake.capture.eventfeed.prewrites)."""
    return [int(m.group(1)) for r in records if (m := _SPILLED.search(r.getMessage()))]


def changelog_counts(layout: LakeLayout, commit_ts: int) -> set[int]:
    """How many rows at `commit_ts` each changelog version held (a value other than 0 and the
    transaction's size: the changelog held part of it at that version)."""
    latest = DeltaTable(layout.changelog).version()
    return {DeltaTable(layout.changelog, version=v).to_pyarrow_table(columns=["commit_ts"]).column("commit_ts")
            .to_pylist().count(commit_ts) for v in range(latest + 1)}
