"""`tidelake merge` (the delta-rs writer) on a lake whose filesystem is full, for real: a tmpfs of a
few MiB filled by a ballast file (tests/lake/tiny_fs.py). Full before the run, or filling up
right before the replica's commit: one line naming the cause, no trace, exit 75 (EX_TEMPFAIL:
the same command later succeeds), the replica and its checkpoint unchanged; once the volume is
grown, the next run merges and the replica equals the upstream (docs/operations.md#when-the-lake-has-no-room).

Small windows are written on the driver with delta-rs, so the first test starts no Spark session:
the command's session is stubbed out, and anything that used it would fail the run. The second
sends every window through Spark (marked spark)."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import pytest

from merge.lake_fixtures import FedLake, sorted_rows
from deltalake import DeltaTable

from tests.lake.tiny_fs import fill, grow, tiny_tmpfs
from tidelake.cli import main, merge_command
from tidelake.config import LeaseSettings
from tidelake.config_writer import changefeed_document, write_config
from tidelake.errors import EXIT_TRY_LATER
from tidelake.failpoints import armed
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.merge import table_merge
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import run_merge

LEASE_TTL_S = 2
FULL = "the lake's filesystem is full: OSError: [Errno 28] No space left on device"


def _replica(lake: FedLake) -> tuple[int, int | None]:
    path = ReplicaCatalog(lake.layout).find("shop", "orders").path
    return DeltaTable(path).version(), read_checkpoint(path, {})


def _rows(lake: FedLake) -> list[dict]:
    path = ReplicaCatalog(lake.layout).find("shop", "orders").path
    return sorted_rows(DeltaTable(path).to_pyarrow_table().to_pylist())


def test_merge_on_a_full_filesystem_says_so_in_one_line_changes_nothing_and_merges_once_grown(
        tmp_path, monkeypatch, capfd, caplog):
    monkeypatch.setattr(merge_command, "get_session", lambda *args, **kwargs: None)
    monkeypatch.setattr(merge_command, "release_session", lambda session: None)
    caplog.set_level(logging.WARNING)
    with tiny_tmpfs(tmp_path / "mnt", "4m") as mnt:
        lake = FedLake(str(mnt / "lake"))
        try:
            lake.ddl(lake.up.create_schema("shop"))
            lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
            lake.resolve()
            # A short lease: the run that failed on a full disk could not mark its lease released
            # (that is a write too), so the next run waits for it to expire, as on another host.
            config = write_config(tmp_path / "cf.toml", changefeed_document(
                "cf", ["127.0.0.1:1"], lake.layout.root, lake={"lease_ttl": f"{LEASE_TTL_S}s"}))
            merge = ["merge", "--config", str(config)]
            assert main(merge) == 0
            with lake.txn() as t:
                for i in range(1, 40):
                    t.put("shop", "orders", {"id": i, "note": f"n{i}"})
            with lake.txn() as t:
                t.delete("shop", "orders", {"id": 7, "note": "n7"})
            upper = lake.resolve()
            before = _replica(lake)
            capfd.readouterr()

            fill(mnt)  # full before the run: its lease cannot even be recorded
            assert main(merge) == EXIT_TRY_LATER
            out, err = capfd.readouterr()
            (line,) = err.splitlines()
            assert line.startswith(f"tidelake: error: {FULL} (full trace: "), err
            assert _replica(lake) == before

            grow(mnt, "8m")
            fill(mnt, "ballast-2", leave=256 << 10)  # room for the lease, not for the window
            assert main(merge) == EXIT_TRY_LATER
            out, err = capfd.readouterr()
            said = " ".join(out.split())
            assert ("stopped for lack of room: 1 of 1 tables not merged (shop.orders: the lake's filesystem is "
                    "full: NoRoomError: the lake's filesystem is full: 0.2 MiB free under ") in said, out
            assert "a merge window of 0.0 MiB needs up to 1.0 MiB); run again once the store has room" in said, out
            assert "Traceback" not in out + err and "panicked" not in out + err, out + err  # no file was written
            assert _replica(lake) == before

            grow(mnt, "16m")  # the disk fills up right before the commit: the write itself fails
            with armed(["merge.before_commit"], lambda name, path: fill(mnt, "ballast-3")):
                assert main(merge) == EXIT_TRY_LATER
            out, err = capfd.readouterr()
            said = " ".join(out.split())
            assert "stopped for lack of room: 1 of 1 tables not merged (shop.orders: the lake's filesystem is full: " \
                in said and "No space left on device (os error 28)" in said, out
            assert "Traceback" not in out + err, out + err
            # object_store's background upload task panics once per failed file write (not in a loop)
            assert err.count("panicked at") <= 2, err
            assert _replica(lake) == before  # nothing half-committed
            warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            assert not [r for r in caplog.records if r.exc_info], warned
            assert any(m.startswith("merge of shop.orders failed: the lake's filesystem is full: ") for m in warned)
            assert any("its merge-log entries were not written: the lake's filesystem is full" in m for m in warned)

            grow(mnt, "64m")
            time.sleep(LEASE_TTL_S)
            assert main(merge) == 0
            assert _replica(lake)[1] == upper
            assert _rows(lake) == lake.expected_rows("shop", "orders", upper)
        finally:
            lake.close()


@pytest.mark.spark
def test_the_spark_writer_on_a_filesystem_filling_up_at_the_commit_fails_the_table_in_one_line(
        spark, tmp_path, monkeypatch, caplog):
    """The same with every window through Spark: the MERGE's files meet a full disk; the table's
    reason names the cause (Java's own message, not the py4j call), no_room is set (exit 75), the
    replica and its checkpoint are unchanged, and the run once grown merges to the upstream."""
    monkeypatch.setattr(table_merge, "DRIVER_WINDOW_MAX_ROWS", -1)
    caplog.set_level(logging.WARNING)
    with tiny_tmpfs(tmp_path / "mnt", "16m") as mnt:
        lake = FedLake(str(mnt / "lake"))
        try:
            lake.ddl(lake.up.create_schema("shop"))
            lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
            with lake.txn() as t:
                for i in range(1, 20):
                    t.put("shop", "orders", {"id": i, "note": f"n{i}"})
            lake.resolve()
            assert run_merge(spark, lake.layout).tables[0].status == MergeStatus.MERGED
            with lake.txn() as t:
                for i in range(10, 40):
                    t.put("shop", "orders", {"id": i, "note": f"m{i}"})
            upper = lake.resolve()
            before = _replica(lake)
            # a short lease: the failed run cannot mark it released (see the test above)
            layout = replace(lake.layout, leases=LeaseSettings(ttl_s=LEASE_TTL_S, renew_s=LEASE_TTL_S / 4))
            with armed(["merge.before_commit"], lambda name, path: fill(mnt)):
                report = run_merge(spark, layout)
            (result,) = report.tables
            assert result.status == MergeStatus.ERROR and result.no_room, result
            assert result.reason.startswith("the lake's filesystem is full: ") and "\n" not in result.reason, result
            assert _replica(lake) == before
            assert report.log_refused is not None and report.log_refused.startswith("the lake's filesystem is full")
            assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]

            grow(mnt, "64m")
            time.sleep(LEASE_TTL_S)
            assert run_merge(spark, layout).tables[0].status == MergeStatus.MERGED
            assert _replica(lake)[1] == upper
            assert _rows(lake) == lake.expected_rows("shop", "orders", upper)
        finally:
            lake.close()
