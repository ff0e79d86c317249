"""Changelog append: exact contents, partitions, idempotency by app transaction."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tidelake.capture.landing.app_txn import LakeConflictError, commit_properties
from tidelake.capture.landing.changelog_writer import ChangelogWriter
from tidelake.capture.landing.watermark_writer import WatermarkWriter
from tidelake.demos.s3_requests import RequestLog
from tidelake.lake import flush_stamps
from tidelake.lake.commit_buckets import bucket_label
from tidelake.lake.delta_commits import DeltaLog
from tidelake.lake.layout import LakeLayout
from tidelake.lake.log_cleanup import CLEANUP_INTERVAL, cleanup_due
from tidelake.lake.object_store import lake_storage_options
from tidelake.status.freshness import landed_stamps
from tidelake.tso import compose

APP = "tidelake-puller/cf"


def _landed(layout):
    return DeltaTable(layout.changelog).to_pyarrow_table()


def test_append_lands_every_field(layout, make_rows):
    rows = make_rows(41, 3) + make_rows(42, 2, op="delete")
    writer = ChangelogWriter(layout, APP)
    assert writer.append(rows, seq=1)
    got = sorted(_landed(layout).to_pylist(), key=lambda r: r["key"])
    want = sorted(rows, key=lambda r: r.key)
    assert [(g["table_id"], g["commit_ts"], g["start_ts"], g["op"], g["key"], g["value"],
             g["old_value"], g["region_id"], g["flush_seq"]) for g in got] == [
        (r.table_id, r.commit_ts, r.start_ts, r.op, r.key, r.value, r.old_value, r.region_id, 1)
        for r in want
    ]
    assert all(g["commit_bucket"] == bucket_label(g["commit_ts"], 3600) for g in got)


def test_a_flush_larger_than_a_slice_is_one_commit_of_every_row(layout, make_rows, monkeypatch):
    """The write streams the flush in slices (bounded memory); it must stay one commit, one
    app transaction, with every row, or a crash between slices would land half a flush."""
    from tidelake.capture.landing import changelog_writer
    monkeypatch.setattr(changelog_writer, "APPEND_SLICE_ROWS", 7)
    rows = make_rows(41, 30) + make_rows(42, 23, op="delete")
    writer = ChangelogWriter(layout, APP)
    before = DeltaTable(layout.changelog).version()
    assert writer.append(rows, seq=4)
    table = DeltaTable(layout.changelog)
    assert table.version() == before + 1 and table.transaction_version(APP) == 4
    got = sorted(zip(_landed(layout)["key"].to_pylist(), _landed(layout)["op"].to_pylist()))
    assert got == sorted((r.key, r.op) for r in rows)


def test_one_file_group_per_table_and_bucket(layout, make_rows, base_ms):
    rows = make_rows(1, 2) + make_rows(1, 2, at_ms=base_ms + 3_600_000) + make_rows(2, 2)
    ChangelogWriter(layout, APP).append(rows, seq=1)
    partitions = {(p["table_id"], p["commit_bucket"]) for p in DeltaTable(layout.changelog).partitions()}
    assert partitions == {
        ("1", bucket_label(rows[0].commit_ts, 3600)),
        ("1", bucket_label(rows[2].commit_ts, 3600)),
        ("2", bucket_label(rows[4].commit_ts, 3600)),
    }


def test_same_sequence_twice_is_a_no_op(layout, make_rows):
    writer = ChangelogWriter(layout, APP)
    rows = make_rows(5, 4)
    assert writer.append(rows, seq=1)
    assert not writer.append(rows, seq=1)
    assert not ChangelogWriter(layout, APP).append(rows, seq=1)
    assert _landed(layout).num_rows == 4
    assert writer.committed_seq() == 1
    assert writer.append(rows, seq=2)
    assert _landed(layout).num_rows == 8


def test_other_app_ids_do_not_suppress_ours(layout, make_rows):
    ChangelogWriter(layout, "tidelake-puller/other").append(make_rows(5, 1), seq=9)
    assert ChangelogWriter(layout, APP).append(make_rows(5, 1), seq=1)
    assert _landed(layout).num_rows == 2


def test_concurrent_commit_under_same_app_id_is_refused(layout, make_rows, monkeypatch):
    """A zombie puller commits our sequence between our check and our commit: delta-rs's
    conflict checker sees the app transaction and our commit fails instead of landing twice."""
    writer = ChangelogWriter(layout, APP)
    ChangelogWriter(layout, APP).append(make_rows(5, 1), seq=1)
    monkeypatch.setattr(writer, "committed_seq", lambda: 0)  # the check saw the old snapshot
    with pytest.raises(LakeConflictError):
        writer.append(make_rows(5, 1), seq=1)
    assert _landed(layout).num_rows == 1


def test_a_retention_delete_racing_an_append_does_not_stop_the_puller(layout, make_rows, base_ms, monkeypatch):
    """Maintenance deletes merged buckets while the puller lands: delta-rs rejects the append
    ("a concurrent transaction deleted data this operation read"). No commit of our app id came
    in between, so this is no second puller: the append must be rebuilt and land, once."""
    from tidelake.capture.landing import changelog_writer
    from tidelake.capture.landing.changelog_retention import delete_merged_changelog

    old = make_rows(5, 2, at_ms=base_ms - 2 * 3_600_000)
    writer = ChangelogWriter(layout, APP)
    writer.append(old, seq=1)
    real_write = changelog_writer.write_deltalake
    raced = []

    def retention_commits_first(*args, **kwargs):
        if not raced:
            raced.append(delete_merged_changelog(layout, {5: compose(base_ms - 3_600_000, 0)}))
        return real_write(*args, **kwargs)

    monkeypatch.setattr(changelog_writer, "write_deltalake", retention_commits_first)
    new = make_rows(5, 3)
    assert writer.append(new, seq=2)
    assert raced == [2]
    assert sorted(_landed(layout)["key"].to_pylist()) == sorted(r.key for r in new)
    assert writer.committed_seq() == 2


def _lost_ack_write(path, landed_by: str):
    """A write whose commit lands (as `landed_by`) and then reports CommitFailedError, as an
    object-store commit whose 2xx was lost and whose client retry failed against itself."""
    import pyarrow as pa
    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError

    from tidelake.capture.landing.app_txn import commit_properties

    def write() -> None:
        write_deltalake(path, pa.table({"x": [1]}), mode="append",
                        commit_properties=commit_properties("app", 1, landed_by))
        raise CommitFailedError("version 1 already exists")

    return write


@pytest.mark.parametrize(("landed_by", "outcome"), [("me", False), ("someone-else", "conflict")])
def test_a_lost_ack_is_ours_only_when_our_writer_landed_it(tmp_path, landed_by, outcome):
    import pyarrow as pa
    from deltalake import write_deltalake

    from tidelake.capture.landing.app_txn import LakeConflictError, commit_once

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"x": [0]}))
    table = DeltaTable(path)
    args = (table, "app", 1, lambda: table.transaction_version("app") or 0, _lost_ack_write(path, landed_by), "test")
    if outcome == "conflict":
        with pytest.raises(LakeConflictError, match="second puller"):
            commit_once(*args, writer="me")
    else:
        assert commit_once(*args, writer="me") is False
    table.update_incremental()
    assert table.version() == 1 and table.transaction_version("app") == 1  # landed exactly once


def test_flushes_on_s3_list_no_whole_log(s3_server, make_rows):
    """delta-rs' default post-commit cleanup lists the whole _delta_log at every commit (its pages
    grow with the log retention's commits); the landing writers' flushes leave it to one version in
    every CLEANUP_INTERVAL (tidelake.lake.log_cleanup). Counted from moto's own request log."""
    root = s3_server.lake_root("landing-cleanup")
    layout = LakeLayout(root, lake_storage_options(root, s3_server.storage_options(), environ={}))
    changelog, watermarks = ChangelogWriter(layout, APP), WatermarkWriter(layout, "tidelake-puller/cf-0")
    assert changelog.append(make_rows(41, 2), seq=1) and watermarks.write({41: 10}, 10, 1, 0, seq=1)
    for table in (layout.changelog, layout.watermarks):  # the flushes counted are no cleanup's
        assert not cleanup_due(DeltaTable(table, storage_options=layout.storage_options).table_uri, 2)
    requests = RequestLog(s3_server)
    appended, by_append = requests.count(lambda: changelog.append(make_rows(41, 2), seq=2))
    wrote, by_write = requests.count(lambda: watermarks.write({41: 20}, 20, 2, 0, seq=2))
    assert appended and wrote
    assert by_append["put"] >= 2 and by_write["put"] >= 2  # the flushes committed, on this server
    assert by_append["list_from_start"] == by_write["list_from_start"] == 0
    assert DeltaTable(layout.changelog, storage_options=layout.storage_options).transaction_version(APP) == 2


def test_expired_log_entries_are_deleted_at_the_changelogs_phase_not_at_each_flush(tmp_path, make_rows):
    """The landing tables' cleanup runs at the version their phase sets, as a replica's does
    (tidelake.lake.log_cleanup.cleanup_due): here a changelog whose phase sets version 70."""
    at = CLEANUP_INTERVAL - 30
    layout = next(lake for lake in (LakeLayout(str(tmp_path / f"lake{i}")) for i in itertools.count())
                  if cleanup_due(Path(lake.changelog).as_uri() + "/", at))
    writer = ChangelogWriter(layout, APP)
    for seq in range(1, at - 1):  # versions 1..68, one flush each
        writer.append(make_rows(41, 1), seq=seq)
    assert cleanup_due(DeltaTable(layout.changelog).table_uri, at)  # the URI the lake was chosen for
    DeltaTable(layout.changelog, version=50).create_checkpoint()
    past = time.time() - 31 * 86_400  # past the changelog's log retention (Delta's default 30 days)
    log_dir = Path(layout.changelog, "_delta_log")
    for f in log_dir.iterdir():
        if f.name[:20].isdigit() and int(f.name[:20]) <= 50:
            os.utime(f, (past, past))

    def oldest() -> int:
        return min(int(f.name[:20]) for f in log_dir.glob("*.json"))

    writer.append(make_rows(41, 1), seq=at - 1)
    assert oldest() == 0
    writer.append(make_rows(41, 1), seq=at)
    assert oldest() == 50  # below the newest checkpoint past the retention, as delta-rs keeps it
    assert DeltaTable(layout.changelog).transaction_version(APP) == at


def test_a_failed_cleanup_never_fails_the_flush(layout, make_rows, monkeypatch):
    refused = []

    def refuse(table):
        refused.append(table.version())
        raise OSError("the store refused the delete")

    monkeypatch.setattr(DeltaTable, "cleanup_metadata", refuse)  # what the cleanup calls at the changelog's phase
    writer = ChangelogWriter(layout, APP)
    for seq in range(1, CLEANUP_INTERVAL + 1):  # through version CLEANUP_INTERVAL: one cleanup on any phase
        assert writer.append(make_rows(41, 1), seq=seq)
    assert DeltaTable(layout.changelog).transaction_version(APP) == CLEANUP_INTERVAL
    assert len(refused) == 1  # the cleanup ran, and failed, at the changelog's phase


def test_a_flush_commit_names_the_table_and_commit_ts_pairs_its_files_hold(layout, make_rows, base_ms):
    """Freshness learns when each change landed from this entry instead of the files: it must name
    exactly what the flush's files hold. Decoded here by hand, as the entry's format says."""
    rows = make_rows(41, 5) + make_rows(42, 3, op="delete") + make_rows(41, 2, at_ms=base_ms + 3_600_000)
    rows.append(dataclasses.replace(rows[0], key=b"same txn, other key"))
    ChangelogWriter(layout, APP).append(rows, seq=1)
    (info,) = DeltaTable(layout.changelog).history(1)
    named = {(int(table_id), ts) for table_id, steps in json.loads(info["tidelake.commit_ts"]).items()
             for ts in itertools.accumulate(steps)}
    landed = _landed(layout)
    assert named == set(zip(landed["table_id"].to_pylist(), landed["commit_ts"].to_pylist()))
    assert len(named) == len(rows) - 1


def test_past_the_cap_a_flush_leaves_a_table_out_and_its_files_tell_its_pairs(layout, make_rows, monkeypatch):
    monkeypatch.setattr(flush_stamps, "MAX_STAMPS", 2)
    rows = make_rows(41, 2) + make_rows(42, 1)
    ChangelogWriter(layout, APP).append(rows, seq=1)
    (info,) = DeltaTable(layout.changelog).history(1)
    assert list(json.loads(info["tidelake.commit_ts"])) == ["42"] and info["tidelake.app"] == APP
    log = DeltaLog(layout.changelog)
    (commit,) = log.commits_after(0)  # version 0 created the table
    read_file, read = DeltaLog.read_file, []
    monkeypatch.setattr(DeltaLog, "read_file", lambda self, path, columns: read.append(path) or read_file(self, path, columns))
    assert landed_stamps(log, [commit]) == [{(r.table_id, r.commit_ts) for r in rows}]
    assert read and all("table_id=41/" in path for path in read)


def test_the_writers_own_metadata_never_replaces_the_flush_keys():
    properties = commit_properties(APP, 7, "w1", {"tidelake.app": "other", "tidelake.flush_seq": "9", "x": "y"})
    assert properties.custom_metadata == {"tidelake.app": APP, "tidelake.flush_seq": "7", "tidelake.writer": "w1",
                                          "x": "y"}
