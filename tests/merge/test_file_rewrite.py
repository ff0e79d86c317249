"""A window as a rewrite of the files it touches (tidelake.merge.writers.file_rewrite), without Spark:
the replica's rows after each window equal a dict replay of the same changes, each window is one
commit recording its checkpoint, files without a matched key stay, every add action's statistics
bound its file's values, and what the rewrite does not handle writes nothing.

tests/merge/test_delta_rs_writer.py and test_add_column_every_type.py run it inside the merge,
read back by Spark.
"""

from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from merge.lake_fixtures import by_rewrite, path_of, put, shop_lake

from tidelake.lake.checkpoint import MERGE_APP_ID
from tidelake.lake.object_store import lake_storage_options
from tidelake.merge.merge_run import run_merge
from tidelake.merge.window_spec import OP_COLUMN
from tidelake.merge.writers import file_rewrite
from tidelake.merge.writers.file_rewrite import file_stats, rewrite_window

SCHEMA = pa.schema([("id", pa.int64()), ("note", pa.string()), ("at", pa.timestamp("us", "UTC"))])
COLUMNS = ["id", "note", "at"]


def _rows(ids: list[int], tag: str) -> pa.Table:
    at = [dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=7 * i + 1) for i in ids]
    return pa.table({"id": ids, "note": [f"{tag}{i}" for i in ids], "at": at}, schema=SCHEMA)


def _window(changes: dict[int, str | None], tag: str) -> pa.Table:
    """key -> None (a delete) or the put's note tag, as a mounted window."""
    ids = sorted(changes)
    rows = _rows(ids, tag)
    notes = [f"{changes[i]}{i}" if changes[i] is not None else None for i in ids]
    rows = rows.set_column(1, "note", pa.array(notes, pa.string()))
    return rows.append_column(OP_COLUMN, pa.array(["put" if changes[i] is not None else "delete" for i in ids]))


def _replica(path: str, batches: list[list[int]]) -> dict[int, str]:
    for ids in batches:  # one file each
        write_deltalake(path, _rows(ids, "a"), mode="append")
    return {i: f"a{i}" for ids in batches for i in ids}


def _content(path: str) -> dict[int, str]:
    rows = DeltaTable(path).to_pyarrow_table()
    return dict(zip(rows["id"].to_pylist(), rows["note"].to_pylist(), strict=True))


def _bounds_hold(path: str) -> None:
    """Every live file's statistics (as delta-rs parses them from the log) hold for its rows;
    a timestamp's max within the millisecond Delta keeps (delta-rs truncates it, the rewrite ceils)."""
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
    checked = 0
    for action in actions:
        rows = pq.read_table(f"{path}/{action['path']}")
        assert action["num_records"] == rows.num_rows
        for column in rows.column_names:
            low, high = action.get(f"min.{column}"), action.get(f"max.{column}")
            if low is None:
                continue
            values = [v for v in rows[column].to_pylist() if v is not None]
            if isinstance(high, dt.datetime):  # kept to the millisecond; readers widen the max by one
                high += dt.timedelta(milliseconds=1)
            assert all(low <= v <= high for v in values), (column, low, high)
            checked += 1
    assert checked >= len(actions)  # at least the key's bounds of every file were checked


def _stats_of(path: str) -> list[dict]:
    """The statistics of the files the newest commit added, as its log entry holds them."""
    with open(f"{path}/_delta_log/{DeltaTable(path).version():020d}.json") as commit:
        entries = [json.loads(line) for line in commit]
    return [json.loads(e["add"]["stats"]) for e in entries if "add" in e]


def test_a_window_rewrites_only_the_files_holding_its_keys_in_one_commit(tmp_path):
    path = str(tmp_path / "r")
    model = _replica(path, [list(range(0, 10)), list(range(10, 20)), list(range(20, 30))])
    table = DeltaTable(path)
    before = set(table.file_uris())
    changes = {3: "u", 5: None, 40: "n"}  # an update and a delete in the first file, a new key
    assert rewrite_window(table, _window(changes, "x"), COLUMNS, ["id"], {}, 100, None) == (3, 3)
    model.update({3: "u3", 40: "n40"})
    del model[5]
    assert _content(path) == model
    assert table.version() == 3 and table.transaction_version(MERGE_APP_ID) == 100  # the handle is at the commit
    after = set(DeltaTable(path).file_uris())
    assert len(before - after) == 1 and len(after - before) == 1  # the other two files are kept as they were
    last = DeltaTable(path).history(1)[0]
    assert json.loads(last["userMetadata"])
    _bounds_hold(path)


def test_a_window_of_new_keys_and_absent_deletes_removes_no_file(tmp_path):
    path = str(tmp_path / "r")
    model = _replica(path, [list(range(0, 10))])
    table = DeltaTable(path)
    assert rewrite_window(table, _window({50: "n", 51: "n", 7000: None}, "x"), COLUMNS, ["id"], {}, 7, None) == (3, 2)
    model.update({50: "n50", 51: "n51"})
    assert _content(path) == model
    assert len(DeltaTable(path).file_uris()) == 2
    # Only deletes of keys the replica never held: nothing changes, nothing is committed.
    assert rewrite_window(table, _window({9000: None}, "x"), COLUMNS, ["id"], {}, 8, None) == (1, 0)
    assert DeltaTable(path).version() == 1


def test_a_common_handle_matches_on_its_key_as_it_was_at_lo(tmp_path):
    """The source's match column names the row to replace; the put carries the new key value."""
    path = str(tmp_path / "r")
    write_deltalake(path, pa.table({"k": ["ab", "cd"], "v": [1, 2]}))
    mounted = pa.table({"k": ["AB"], "v": [10], "_tidelake_match_k": ["ab"], OP_COLUMN: ["put"]})
    assert rewrite_window(DeltaTable(path), mounted, ["k", "v"], ["k"], {"k": "_tidelake_match_k"}, 5, None) == (1, 1)
    rows = DeltaTable(path).to_pyarrow_table().sort_by("k")
    assert rows.to_pylist() == [{"k": "AB", "v": 10}, {"k": "cd", "v": 2}]


def test_a_common_handles_new_keys_have_no_value_at_lo_and_match_nothing(tmp_path):
    """New keys of a clustered (int, string) key come with null match columns: they are inserted,
    not taken for one key held twice, and prune no file."""
    path = str(tmp_path / "r")
    write_deltalake(path, pa.table({"a": pa.array([1, 2], pa.int64()), "b": ["x", "y"], "v": [1, 2]}))
    match = {"a": "_tidelake_match_a", "b": "_tidelake_match_b"}
    mounted = pa.table({"a": pa.array([2, 7, 8], pa.int64()), "b": ["y", "n", "m"], "v": [20, 70, 80],
                        "_tidelake_match_a": pa.array([2, None, None], pa.int64()),
                        "_tidelake_match_b": ["y", None, None], OP_COLUMN: ["put", "put", "put"]})
    assert rewrite_window(DeltaTable(path), mounted, ["a", "b", "v"], ["a", "b"], match, 5, None) == (3, 3)
    rows = DeltaTable(path).to_pyarrow_table().sort_by("a").to_pylist()
    assert rows == [{"a": 1, "b": "x", "v": 1}, {"a": 2, "b": "y", "v": 20}, {"a": 7, "b": "n", "v": 70},
                    {"a": 8, "b": "m", "v": 80}]


@pytest.mark.parametrize("setup", ["partitioned", "append_only", "constraint", "duplicate_key", "too_big", "uncastable"])
def test_what_the_rewrite_does_not_handle_is_left_to_the_merge_untouched(tmp_path, monkeypatch, setup):
    path = str(tmp_path / "r")
    window = _window({1: "u"}, "x")
    if setup == "partitioned":
        write_deltalake(path, _rows([1, 2], "a"), partition_by=["note"])
    elif setup == "append_only":
        write_deltalake(path, _rows([1, 2], "a"), configuration={"delta.appendOnly": "true"})
    elif setup == "constraint":
        write_deltalake(path, _rows([1, 2], "a"))
        DeltaTable(path).alter.add_constraint({"positive": "id > 0"})
    elif setup == "duplicate_key":
        write_deltalake(path, _rows([1, 2], "a"))
        window = pa.concat_tables([window, window])
    elif setup == "uncastable":
        write_deltalake(path, _rows([1, 2], "a"))
        window = window.set_column(0, "id", pa.array(["one"]))
    else:
        write_deltalake(path, _rows([1, 2], "a"))
        monkeypatch.setattr("tidelake.merge.writers.file_rewrite.REWRITE_MAX_BYTES", 10)
    version = DeltaTable(path).version()
    assert rewrite_window(DeltaTable(path), window, COLUMNS, ["id"], {}, 9, None) is None
    assert DeltaTable(path).version() == version


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.dictionaries(st.integers(0, 60), st.one_of(st.none(), st.sampled_from("pqr")), min_size=1,
                                max_size=12), min_size=1, max_size=6))
def test_windows_replayed_equal_a_dict_replay_of_the_same_changes(tmp_path_factory, windows):
    path = str(tmp_path_factory.mktemp("r"))
    model = _replica(path, [list(range(0, 20, 2)), list(range(20, 40, 3))])
    table = DeltaTable(path)
    for hi, changes in enumerate(windows, start=1):
        version = table.version()
        _, written = rewrite_window(table, _window(changes, "w"), COLUMNS, ["id"], {}, hi, None)
        for key, tag in changes.items():
            if tag is None:
                model.pop(key, None)
            else:
                model[key] = f"{tag}{key}"
        assert table.version() == version + (1 if written else 0)
        assert _content(path) == model
    _bounds_hold(path)


def _cdf(path: str, version: int) -> list[tuple]:
    rows = pa.table(DeltaTable(path).load_cdf(starting_version=version, ending_version=version).read_all())
    return sorted(zip(rows["id"].to_pylist(), rows["note"].to_pylist(), rows["_change_type"].to_pylist(), strict=True))


def test_with_change_data_feed_the_commit_carries_the_changes_a_delta_rs_merge_records(tmp_path):
    """The same window into twin replicas, one rewritten, one MERGEd by delta-rs: the same rows and
    the same change data feed (deletes, update pre- and postimages, inserts)."""
    twins = [str(tmp_path / "rewrite"), str(tmp_path / "merge")]
    for path in twins:
        for ids in (range(0, 10), range(10, 20)):
            write_deltalake(path, _rows(list(ids), "a"), mode="append",
                            configuration={"delta.enableChangeDataFeed": "true"})
    window = _window({3: "u", 5: None, 12: "u", 40: "n", 41: None}, "x")
    assert rewrite_window(DeltaTable(twins[0]), window, COLUMNS, ["id"], {}, 50, None) == (5, 4)
    values = {c: f"s.{c}" for c in COLUMNS}
    (DeltaTable(twins[1]).merge(window, "t.id = s.id", source_alias="s", target_alias="t")
     .when_matched_delete(f"s.{OP_COLUMN} = 'delete'").when_matched_update(values)
     .when_not_matched_insert(values, f"s.{OP_COLUMN} = 'put'").execute())
    assert _content(twins[0]) == _content(twins[1])
    assert _cdf(twins[0], 2) == _cdf(twins[1], 2) == [
        (3, "a3", "update_preimage"), (3, "u3", "update_postimage"), (5, "a5", "delete"),
        (12, "a12", "update_preimage"), (12, "u12", "update_postimage"), (40, "n40", "insert")]
    commit = DeltaTable(twins[0]).history(1)[0]
    assert (commit["operation"], commit["operationMetrics"]["numTargetRowsUpdated"]) == ("MERGE", 2)


def test_a_version_another_writer_took_first_fails_the_commit_and_changes_nothing(tmp_path):
    path = str(tmp_path / "r")
    model = _replica(path, [list(range(0, 10))])
    stale = DeltaTable(path)
    write_deltalake(path, _rows([100], "o"), mode="append")  # another writer's version 1
    model[100] = "o100"
    with pytest.raises(CommitFailedError):
        rewrite_window(stale, _window({3: None}, "x"), COLUMNS, ["id"], {}, 9, None)
    assert _content(path) == model and DeltaTable(path).version() == 1


def test_statistics_bound_values_outwards_and_skip_what_they_cannot_bound():
    rows = pa.table({
        "i": pa.array([3, -2, None], pa.int32()),
        "at": pa.array([dt.datetime(2026, 1, 1, 0, 0, 0, 123_456), dt.datetime(2026, 1, 1, 0, 0, 1, 999_001), None],
                       pa.timestamp("us", "UTC")),
        "ntz": pa.array([dt.datetime(2026, 1, 1, 0, 0, 0, 500), None, None], pa.timestamp("us")),
        "d": pa.array([dt.date(2026, 2, 1), dt.date(2025, 1, 1), None]),
        "short": ["b", "a", None],
        "long": ["x" * 40, "y", None],
        "f": [1.5, float("nan"), None],
    })
    stats = json.loads(file_stats(rows))
    assert stats["numRecords"] == 3
    assert stats["minValues"] == {"i": -2, "at": "2026-01-01T00:00:00.123Z", "ntz": "2026-01-01 00:00:00.000",
                                  "d": "2025-01-01", "short": "a"}
    assert stats["maxValues"] == {"i": 3, "at": "2026-01-01T00:00:02.000Z", "ntz": "2026-01-01 00:00:00.001",
                                  "d": "2026-02-01", "short": "b"}
    assert stats["nullCount"] == {"i": 1, "at": 1, "ntz": 2, "d": 1, "short": 1, "long": 1, "f": 1}
    assert set(json.loads(file_stats(rows, indexed=2))["nullCount"]) == {"i", "at"}
    listed = json.loads(file_stats(rows, listed={"d", "short"}))  # delta.dataSkippingStatsColumns wins
    assert set(listed["nullCount"]) == set(listed["minValues"]) == {"d", "short"}


def test_on_s3_the_rewrite_commits_through_a_conditional_put_and_loses_a_taken_version(s3_server):
    """The same rewrite on the S3 API server (moto): files put and read by boto3, the commit
    created with If-None-Match, a version another writer took refused."""
    root = s3_server.lake_root("rewrite")
    options = lake_storage_options(root, s3_server.storage_options(), environ={})
    path = f"{root}/my db/表 1"  # a replica folder named by TiDB names: percent-encoded in the table's URI
    write_deltalake(path, _rows(list(range(10)), "a"), storage_options=options,
                    configuration={"delta.enableChangeDataFeed": "true"})
    table = DeltaTable(path, storage_options=options)
    assert rewrite_window(table, _window({2: "u", 4: None, 30: "n"}, "x"), COLUMNS, ["id"], {}, 11, options) == (3, 3)
    rows = DeltaTable(path, storage_options=options).to_pyarrow_table()
    model = {i: f"a{i}" for i in range(10) if i != 4} | {2: "u2", 30: "n30"}
    assert dict(zip(rows["id"].to_pylist(), rows["note"].to_pylist(), strict=True)) == model
    assert DeltaTable(path, storage_options=options).transaction_version(MERGE_APP_ID) == 11
    assert table.version() == 1  # the handle is at the commit it made
    stale = DeltaTable(path, storage_options=options, version=0)
    with pytest.raises(CommitFailedError):
        rewrite_window(stale, _window({3: None}, "x"), COLUMNS, ["id"], {}, 12, options)
    assert DeltaTable(path, storage_options=options).version() == 1


def test_a_folder_named_with_spaces_and_a_file_logged_with_escapes_are_rewritten_in_place(tmp_path):
    """The remove names a file as the log does (here `a+b=c%20d.parquet`, as another writer may
    name one): re-encoding it would leave the old file live beside its rewrite."""
    path = str(tmp_path / "my db" / "表 1")
    model = _replica(path, [list(range(0, 10))])
    table = DeltaTable(path)
    (logged,) = pa.table(table.get_add_actions(flatten=True))["path"].to_pylist()
    os.rename(f"{path}/{logged}", f"{path}/a+b=c d.parquet")
    log_file = f"{path}/_delta_log/{0:020d}.json"
    with open(log_file) as f:
        text = f.read().replace(logged, "a+b=c%20d.parquet")
    with open(log_file, "w") as f:
        f.write(text)
    table = DeltaTable(path)
    assert rewrite_window(table, _window({4: "u"}, "x"), COLUMNS, ["id"], {}, 3, None) == (1, 1)
    model[4] = "u4"
    assert _content(path) == model and table.version() == 1
    assert len(DeltaTable(path).file_uris()) == 1


def test_string_keys_prune_the_files_read_by_their_statistics(tmp_path, monkeypatch):
    path = str(tmp_path / "r")
    for tag in "abc":
        write_deltalake(path, pa.table({"k": [f"{tag}{i:03d}" for i in range(100)], "v": list(range(100))}),
                        mode="append")
    read = []
    real = file_rewrite._read_file
    monkeypatch.setattr(file_rewrite, "_read_file", lambda folder, p, *a: read.append(p) or real(folder, p, *a))
    mounted = pa.table({"k": ["b007"], "v": [-1], OP_COLUMN: ["put"]})
    assert rewrite_window(DeltaTable(path), mounted, ["k", "v"], ["k"], {}, 4, None) == (1, 1)
    assert len(read) == 1  # only the file whose min/max holds b007
    rows = DeltaTable(path).to_pyarrow_table()
    assert rows.num_rows == 300 and rows.filter(pc.equal(rows["k"], "b007"))["v"].to_pylist() == [-1]


def test_the_last_datetime_gets_no_bound_rather_than_a_failed_window(tmp_path):
    path = str(tmp_path / "r")
    last = dt.datetime(9999, 12, 31, 23, 59, 59, 999_999)
    write_deltalake(path, pa.table({"id": pa.array([1], pa.int64()), "until": pa.array([last], pa.timestamp("us"))}))
    mounted = pa.table({"id": pa.array([1, 2], pa.int64()), "until": pa.array([last, last], pa.timestamp("us")),
                        OP_COLUMN: ["put", "put"]})
    assert rewrite_window(DeltaTable(path), mounted, ["id", "until"], ["id"], {}, 6, None) == (2, 2)
    (stats,) = _stats_of(path)
    assert "until" not in stats["maxValues"] and stats["nullCount"]["until"] == 0


def test_through_the_merge_a_window_is_rewritten_and_one_the_rewrite_refuses_is_merged_by_delta_rs(tmp_path,
                                                                                                    monkeypatch):
    """run_merge on the driver (no Spark): an update window is the rewrite's commit; with the
    rewrite refusing (too many bytes to read) the next is delta-rs' MERGE; the replica equals the
    upstream replay at each checkpoint."""
    lake = shop_lake(str(tmp_path / "lake"), ("orders",))
    put(lake, "orders", range(1, 20), "a")
    lake.resolve()
    run_merge(None, lake.layout, write_log=False, threads=1)
    path = path_of(lake, "orders")
    for refused in (False, True):
        if refused:
            monkeypatch.setattr(file_rewrite, "REWRITE_MAX_BYTES", 0)
        put(lake, "orders", range(10, 25), "u" if refused else "b")
        with lake.txn() as t:
            t.delete("shop", "orders", {"id": 3 if refused else 2, "note": ""})
        upper = lake.resolve()
        (result,) = run_merge(None, lake.layout, write_log=False, threads=1).tables
        assert result.checkpoint_after == upper == DeltaTable(path).transaction_version(MERGE_APP_ID)
        last = DeltaTable(path).history(1)[0]
        assert (by_rewrite(last), last["engineInfo"].startswith("delta-rs")) == (not refused, refused)
        assert _content(path) == {r["id"]: r["note"] for r in lake.expected_rows("shop", "orders", upper)}
    lake.close()
