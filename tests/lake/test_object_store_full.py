"""The lake on an S3 server that refuses writes for a while (moto's server behind the fault proxy,
tests/lake/s3_fault_proxy.py: every PUT and POST answered 507 Insufficient Storage, as MinIO does
when its drives are full, or 503 Slow Down; reads answered). The lander pauses with one line
naming the answer and lands every row exactly once when the store takes writes again;
`tidelake merge` (delta-rs writer) fails in one line naming it, exit 75, the replica unchanged, and
the rerun merges (docs/operations.md#when-the-lake-has-no-room)."""

from __future__ import annotations

import itertools
import logging
import time

import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake, sorted_rows

from tidelake.capture.landing.lander import Lander
from tidelake.cli import main, merge_command
from tidelake.config_writer import changefeed_document, write_config
from tidelake.errors import EXIT_TRY_LATER
from tidelake.failpoints import armed
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.layout import LakeLayout
from tidelake.lake.object_store import lake_storage_options
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.wait import wait_until

CAUSES = {507: "the object store has no room (HTTP 507 Insufficient Storage)",
          503: "the object store refuses writes for now (HTTP 503)"}
LEASE_TTL_S = 2
_prefixes = itertools.count()


def _landed(layout: LakeLayout) -> list[tuple[int, int, bytes]]:
    table = DeltaTable(layout.changelog, storage_options=layout.storage_options).to_pyarrow_table()
    return sorted(zip(table["table_id"].to_pylist(), table["commit_ts"].to_pylist(), table["key"].to_pylist()))


@pytest.mark.parametrize("status", [507, pytest.param(503, marks=pytest.mark.slow)])  # the same path, another answer
def test_the_lander_pauses_in_one_line_while_the_store_refuses_writes_and_lands_everything_after(
        s3_server, proxy, make_rows, caplog, capfd, status):
    caplog.set_level(logging.WARNING)
    root = s3_server.lake_root(f"full{next(_prefixes)}")
    options = {**s3_server.storage_options(), "AWS_ENDPOINT_URL": proxy.endpoint, "max_retries": "2"}
    layout = LakeLayout(root, lake_storage_options(root, options, environ={}))
    lander = Lander(layout, "cf-1", flush_interval_s=0.2)
    try:
        before = make_rows(7, 10)
        lander.add_rows(before)
        lander.resolve(7, before[-1].commit_ts)
        lander.flush()
        proxy.set(refuse_writes=status)
        during = make_rows(7, 10)
        lander.add_rows(during)
        lander.resolve(7, during[-1].commit_ts)
        assert wait_until(lander.paused, 60, "landing paused") == CAUSES[status]
        time.sleep(2.5)  # retries at 0.4, 0.8 and 1.6 s: each asks the store with a small PUT first
        said = [r for r in caplog.records if r.name.endswith("lander")]
        assert len(said) == 1 and not said[0].exc_info, [r.getMessage() for r in said]
        assert said[0].getMessage().startswith(f"landing of tidelake-puller/cf-1 paused 0 s: {CAUSES[status]}; ")
        assert proxy.set(refuse_writes=0)["refused"] > 0
        wait_until(lambda: lander.paused() is None, 60, "landing resumed")
        lander.flush()
    finally:
        lander.close()
    resumed = [r.getMessage() for r in caplog.records if r.name.endswith("lander")][1:]
    assert len(resumed) == 1 and resumed[0].startswith("landing of tidelake-puller/cf-1 resumed after "), resumed
    assert _landed(layout) == sorted((r.table_id, r.commit_ts, r.key) for r in before + during)  # each row once
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
    # The flush that met the refusal makes object_store's BufWriter panic in its upload task
    # (apache/arrow-rs-object-store issue 810); the retries behind the probe do not.
    assert err.count("panicked at") <= 1, err


def _merged_lake(s3_server, proxy, tmp_path, monkeypatch) -> tuple[FedLake, list[str]]:
    """A lake on the S3 server through the proxy, table shop.orders merged once, then 29 more rows
    landed; the merge command line of its config."""
    for key, value in {**s3_server.storage_options(), "AWS_ENDPOINT_URL": proxy.endpoint}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(merge_command, "get_session", lambda *args, **kwargs: None)  # delta-rs windows only
    monkeypatch.setattr(merge_command, "release_session", lambda session: None)
    lake = FedLake(s3_server.lake_root(f"merge{next(_prefixes)}"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    lake.resolve()
    # A run that failed could not mark its lease released (a write too): with a short lease the
    # rerun takes it over once expired, as a run on another host would. Two retries of a refused
    # request instead of object_store's ten keep the test short.
    config = write_config(tmp_path / "cf.toml", changefeed_document(
        "cf", ["127.0.0.1:1"], lake.layout.root,
        lake={"lease_ttl": f"{LEASE_TTL_S}s", "storage_options": {"max_retries": "2"}}))
    merge = ["merge", "--config", str(config)]
    assert main(merge) == 0
    with lake.txn() as t:
        for i in range(1, 30):
            t.put("shop", "orders", {"id": i, "note": f"n{i}"})
    return lake, merge


def _replica(lake: FedLake) -> tuple[int, int | None]:
    path = ReplicaCatalog(lake.layout).find("shop", "orders").path
    options = lake.layout.storage_options
    return DeltaTable(path, storage_options=options).version(), read_checkpoint(path, options)


@pytest.mark.slow  # about 10 s, most of it feeding and merging the S3 lake first; the 507 reading is test_store_room's
def test_merge_while_the_store_refuses_writes_is_one_line_before_anything_is_written(
        s3_server, proxy, tmp_path, monkeypatch, capfd):
    """The run's lease cannot be recorded: refused before any replica is touched."""
    lake, merge = _merged_lake(s3_server, proxy, tmp_path, monkeypatch)
    try:
        lake.resolve()
        before = _replica(lake)
        capfd.readouterr()
        proxy.set(refuse_writes=507)
        assert main(merge) == EXIT_TRY_LATER
        out, err = capfd.readouterr()
        (line,) = err.splitlines()
        assert line.startswith(f"tidelake: error: {CAUSES[507]}: ClientError: An error occurred (XMinioStorageFull) "
                               "when calling the PutObject operation"), err
        assert _replica(lake) == before
    finally:
        proxy.set(refuse_writes=0)
        lake.close()


@pytest.mark.slow  # about 30 s: object_store retries the refused writes, the lease must expire
def test_merge_when_the_store_starts_refusing_at_the_commit_fails_in_one_line_and_the_rerun_merges(
        s3_server, proxy, tmp_path, monkeypatch, caplog, capfd):
    """The store refuses from right before the replica's commit: the table fails, the merge log is
    skipped behind a refused probe, the replica is unchanged; the rerun merges it."""
    caplog.set_level(logging.WARNING)
    lake, merge = _merged_lake(s3_server, proxy, tmp_path, monkeypatch)
    try:
        upper = lake.resolve()
        before = _replica(lake)
        capfd.readouterr()
        with armed(["merge.before_commit"], lambda name, where: proxy.set(refuse_writes=503)):
            assert main(merge) == EXIT_TRY_LATER
        out, err = capfd.readouterr()
        said = " ".join(out.split())
        assert f"stopped for lack of room: 1 of 1 tables not merged (shop.orders: {CAUSES[503]}: " in said, out
        assert "Traceback" not in out + err, out + err
        # the replica's write that met the refusal panics in object_store's upload task (issue 810
        # of apache/arrow-rs-object-store); the merge log is not tried behind a refused probe
        assert err.count("panicked at") <= 1, err
        assert _replica(lake) == before  # nothing half-committed
        assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
        assert any("its merge-log entries were not written: the object store refuses writes for now (HTTP 503)"
                   in r.getMessage() for r in caplog.records)

        proxy.set(refuse_writes=0)
        time.sleep(LEASE_TTL_S)
        assert main(merge) == 0
        assert _replica(lake)[1] == upper
        path = ReplicaCatalog(lake.layout).find("shop", "orders").path
        rows = sorted_rows(DeltaTable(path, storage_options=lake.layout.storage_options).to_pyarrow_table().to_pylist())
        assert rows == lake.expected_rows("shop", "orders", upper)
    finally:
        proxy.set(refuse_writes=0)
        lake.close()
