"""A Delta table's recent commits read from its log, on a local folder and on an S3 API server
(moto): the newest version found by probing from the last checkpoint, the commits of a span with
their commit times, added files and txn actions, and a walk that ends where the log was cleaned up.
The expected values come from delta-rs's own view of the table (version(), history()) and from
what the test wrote."""

from __future__ import annotations

import itertools
import os

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from tidelake.demos.s3_requests import KINDS, RequestLog
from tidelake.lake import delta_commits
from tidelake.lake.delta_commits import DeltaLog
from tidelake.lake.object_store import lake_storage_options

VERSIONS = 14
_prefixes = itertools.count()


@pytest.fixture(params=["local", "s3"])
def table(request, tmp_path) -> tuple[str, dict[str, str] | None]:
    if request.param == "local":
        return str(tmp_path / "t"), None
    server = request.getfixturevalue("s3_server")
    root = server.lake_root(f"commits{next(_prefixes)}") + "/t"
    return root, lake_storage_options(root, server.storage_options(), environ={})


def _write(path: str, options: dict[str, str] | None) -> None:
    """Version 0 creates the table; version v then appends row v of partition p{v % 2}, recording
    txn v for app 'app' on even versions."""
    for v in range(VERSIONS):
        rows = pa.table({"p": [f"p{v % 2}"], "n": [v]})
        txns = [Transaction("app", v)] if v % 2 == 0 else []
        write_deltalake(path, rows, mode="append", partition_by=["p"], storage_options=options,
                        commit_properties=CommitProperties(app_transactions=txns))


def test_commits_of_a_span_with_their_times_files_and_txns(table, monkeypatch):
    path, options = table
    log = DeltaLog(path, options)
    assert log.latest_version() is None
    assert log.commits_since(0) == []
    _write(path, options)
    delta = DeltaTable(path, storage_options=options)
    times = {h["version"]: h["timestamp"] for h in delta.history()}
    assert log.latest_version() == delta.version() == VERSIONS - 1

    since = times[9]
    commits = log.commits_since(since)
    assert [c.version for c in commits] == [v for v in sorted(times) if times[v] >= since]
    for commit in commits:
        assert commit.timestamp_ms == times[commit.version]
        assert commit.txns == ({"app": commit.version} if commit.version % 2 == 0 else {})
        (added,) = commit.added
        assert added.partition == {"p": f"p{commit.version % 2}"}
        assert added.min_values["n"] == added.max_values["n"] == commit.version
        assert log.read_file(added.path, ["n"]).column(0).to_pylist() == [commit.version]
    assert log.commit(VERSIONS) is None  # not written (yet): the store's "not found", on either store
    # every version's commitInfo from the first, as delta-rs' history() has it, read a few at a time
    monkeypatch.setattr(delta_commits, "READ_AHEAD", 4)
    infos = list(log.commit_infos())
    assert [v for v, _ in infos] == sorted(times) == list(range(VERSIONS))
    for (version, info), kept in zip(infos, sorted(delta.history(), key=lambda h: h["version"])):
        assert (info["timestamp"], info["operation"]) == (kept["timestamp"], kept["operation"])
    assert [v for v, _ in log.commit_infos(VERSIONS - 2)] == [VERSIONS - 2, VERSIONS - 1]


def test_the_newest_version_after_a_checkpoint_and_a_walk_that_stops_at_a_cleaned_up_log(tmp_path):
    path = str(tmp_path / "t")
    _write(path, None)
    delta = DeltaTable(path)
    delta.create_checkpoint()
    for v in range(4):  # the log of versions 0-3 cleaned up, as log retention does
        os.remove(os.path.join(path, "_delta_log", f"{v:020d}.json"))
    write_deltalake(path, pa.table({"p": ["p0"], "n": [99]}), mode="append", partition_by=["p"])
    log = DeltaLog(path)
    assert log.latest_version() == DeltaTable(path).version() == VERSIONS
    assert [c.version for c in log.commits_since(0)] == list(range(4, VERSIONS + 1))


def test_a_remove_without_partition_values_takes_them_from_its_path_and_no_commit_time_is_one_line(tmp_path):
    """Both optional in the protocol ("Delta Log Entries": remove.partitionValues, commitInfo)."""
    import json

    import pytest

    from tidelake.errors import InputError
    from tidelake.lake.delta_commits import DeltaLog

    log_dir = tmp_path / "t" / "_delta_log"
    log_dir.mkdir(parents=True)
    remove = {"remove": {"path": "puller=p%201/part-0.parquet", "dataChange": True, "deletionTimestamp": 1}}
    (log_dir / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in (
        {"commitInfo": {"timestamp": 1234}}, remove)) + "\n")
    (log_dir / f"{1:020d}.json").write_text(json.dumps(remove) + "\n")
    log = DeltaLog(str(tmp_path / "t"))
    assert log.commit(0).removed_partitions == [{"puller": "p 1"}]
    with pytest.raises(InputError, match="log version 1 has no commitInfo timestamp"):
        log.commit(1)


def test_the_newest_version_on_s3_is_probed_with_heads_alone_fewer_requests_than_a_table_open(s3_server):
    """Counted from moto's own request log: finding the newest version past a checkpoint makes no
    LIST (a LIST costs as much as a PUT on S3) and fewer requests than a DeltaTable open."""
    root = s3_server.lake_root(f"commits{next(_prefixes)}") + "/t"
    options = lake_storage_options(root, s3_server.storage_options(), environ={})
    _write(root, options)
    DeltaTable(root, storage_options=options).create_checkpoint()
    for n in range(5):
        write_deltalake(root, pa.table({"p": ["p0"], "n": [100 + n]}), mode="append", partition_by=["p"],
                        storage_options=options)
    requests = RequestLog(s3_server)
    newest, probed = requests.count(lambda: DeltaLog(root, options).latest_version())
    version, opened = requests.count(lambda: DeltaTable(root, storage_options=options).version())
    assert newest == version == VERSIONS + 4
    assert probed["list"] == 0 and probed["put"] == probed["delete"] == 0
    assert probed["head"] > 0
    assert sum(probed[k] for k in KINDS) < sum(opened[k] for k in KINDS)
