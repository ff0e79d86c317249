"""Reading a replica's change data feed between two checkpoints (tidelake.consumers.replica_changes).

The checker replays the changes of (A, B] onto the replica as it was at A (read by Delta version
with deltalake) and compares the result with the upstream at B from the fixture's own replay of
every committed change (lake_fixtures.FedLake.expected_rows), not with what merge wrote at B.
"""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake, sorted_rows

from tidelake.cli import main
from tidelake.consumers.replica_changes import CDF_FIELDS, CHECKPOINT_COLUMN, change_range, read_changes
from tidelake.errors import InputError

pytestmark = pytest.mark.spark
CDF_COLUMNS = {f.name for f in CDF_FIELDS}


def _row(change: dict, columns: list[str]) -> dict:
    """A CDF or replica row in the given columns (a column added later reads as NULL before)."""
    return {c: change.get(c) for c in columns}


def replay(start: list[dict], changes: list[dict], columns: list[str]) -> list[dict]:
    """Apply CDF rows in commit order; a delete or pre-image must be the row it removes."""
    rows = {r["id"]: _row(r, columns) for r in start}
    by_version: dict[int, list[dict]] = {}
    for change in changes:
        by_version.setdefault(change["_commit_version"], []).append(change)
    for version in sorted(by_version):
        batch = by_version[version]
        for change in batch:
            if change["_change_type"] in ("delete", "update_preimage"):
                row = _row(change, columns)
                assert rows.pop(row["id"]) == row, f"v{version}: {change['_change_type']} of a row not in the replica"
        for change in batch:
            if change["_change_type"] in ("insert", "update_postimage"):
                row = _row(change, columns)
                assert row["id"] not in rows, f"v{version}: {change['_change_type']} of a row already there"
                rows[row["id"]] = row
    return sorted_rows(list(rows.values()))


@pytest.fixture(scope="module")
def merged(spark, tmp_path_factory):
    """Five merges of shop.orders with inserts, updates, deletes, a re-insert, an ADD COLUMN and a
    RENAME COLUMN; yields the lake (with `renamed`, the rename's commit ts) and the checkpoints
    each merge reached."""
    from tidelake.merge.merge_run import run_merge

    lake = FedLake(str(tmp_path_factory.mktemp("changes") / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("qty", "int")]))
    checkpoints = []

    def merge() -> None:
        checkpoints.append(lake.resolve())
        assert not run_merge(spark, lake.layout, write_log=False).failed

    with lake.txn() as t:
        for i in range(1, 9):
            t.put("shop", "orders", {"id": i, "qty": i})
    merge()
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 1, "qty": 100})
        t.delete("shop", "orders", {"id": 2, "qty": 2})
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 1, "qty": 101})  # twice in one window: one update
        t.put("shop", "orders", {"id": 9, "qty": 9})
    merge()
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 2, "qty": 22})  # re-inserted after its delete
        t.delete("shop", "orders", {"id": 3, "qty": 3})
    merge()
    lake.ddl(lake.up.add_column("shop", "orders", ("note", "varchar(10)")))
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 4, "qty": 44, "note": "after"})
    merge()
    renamed = lake.ddl(lake.up.rename_column("shop", "orders", "qty", "amount"))  # the replica is rewritten
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 5, "amount": 55})
    merge()
    lake.renamed = renamed
    yield lake, checkpoints
    lake.close()


def rows_at(path: str, checkpoint: int | None, recorded: dict[int, int]) -> list[dict]:
    if checkpoint is None:
        return []
    return [r for r in DeltaTable(path, version=recorded[checkpoint]).to_pyarrow_table().to_pylist()]


def test_changes_between_any_two_checkpoints_replay_to_the_upstream(merged):
    from tidelake.consumers.replica_changes import recorded_checkpoints

    lake, checkpoints = merged
    path = lake.layout.replica_path("shop", "orders")
    recorded = dict(recorded_checkpoints(DeltaTable(path).history()))
    assert [c for c in checkpoints if c in recorded] == checkpoints  # every merge recorded its checkpoint
    # A range may not span the RENAME COLUMN (the replica was rewritten with a new schema there),
    # except one starting at the last checkpoint before it, after which the consumer renames too.
    points = sorted(recorded)
    before_rename = max(c for c in points if c < lake.renamed)
    crossing = 0
    for i, start in enumerate([None, *points]):
        for end in points[i:]:
            if (start is None or start < before_rename) and end >= lake.renamed:
                with pytest.raises(InputError, match=f"crosses the rewrite.*read up to checkpoint {before_rename}"):
                    change_range(path, start, end)
                crossing += 1
                continue
            rng = change_range(path, start, end)
            assert (rng.from_checkpoint, rng.to_checkpoint) == (start, end)
            changes = read_changes(rng).to_pylist()
            assert all((start or 0) < c[CHECKPOINT_COLUMN] <= end for c in changes)
            expected = lake.expected_rows("shop", "orders", end)  # in today's column names
            if end < lake.renamed:
                expected = [{("qty" if k == "amount" else k): v for k, v in r.items()} for r in expected]
            start_rows = rows_at(path, start, recorded)
            if start == before_rename and end >= lake.renamed:
                start_rows = [{("amount" if k == "qty" else k): v for k, v in r.items()} for r in start_rows]
            got = replay(start_rows, changes, list(expected[0]) if expected else [])
            assert got == expected, f"({start}, {end}]"
    assert crossing >= 4


def test_a_range_starts_only_at_a_recorded_checkpoint_and_ends_at_the_latest_before_to_ts(merged):
    lake, checkpoints = merged
    path = lake.layout.replica_path("shop", "orders")
    with pytest.raises(InputError, match=f"{checkpoints[1] + 1} is not a checkpoint.*nearest: {checkpoints[1]}, "
                                         f"{checkpoints[2]}"):
        change_range(path, checkpoints[1] + 1)
    rounded = change_range(path, checkpoints[0], checkpoints[2] - 1)
    assert rounded.to_checkpoint == checkpoints[1]
    from tidelake.consumers.replica_changes import recorded_checkpoints

    before_rename = max(c for c, _ in recorded_checkpoints(DeltaTable(path).history()) if c < lake.renamed)
    assert change_range(path, before_rename).to_checkpoint == checkpoints[-1]  # default: the current one
    nothing = change_range(path, checkpoints[2], checkpoints[2] + 1)
    assert nothing.empty and read_changes(nothing).num_rows == 0
    # an empty range has the columns of its checkpoint's version, before the ADD and the RENAME COLUMN
    assert read_changes(nothing).schema == read_changes(change_range(path, checkpoints[1], checkpoints[2])).schema
    with pytest.raises(InputError, match="before from_ts"):
        change_range(path, checkpoints[2], checkpoints[1])


def test_cli_writes_the_range_as_parquet_and_says_where_it_ended(merged, tmp_path, capsys):
    import pyarrow.parquet as pq

    lake, checkpoints = merged
    out = tmp_path / "changes.parquet"
    code = main(["changes", "--lake", lake.layout.root, "--table", "shop.orders", "--from-ts", str(checkpoints[0]),
                 "--to-ts", str(checkpoints[2]), "--out", str(out), "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    path = lake.layout.replica_path("shop", "orders")
    expected = read_changes(change_range(path, checkpoints[0], checkpoints[2]))
    assert report["to_checkpoint"] == checkpoints[2] and report["rows"] == expected.num_rows
    assert pq.read_table(out).to_pylist() == expected.to_pylist()
    assert main(["changes", "--lake", lake.layout.root, "--table", "shop.nope", "--from-ts", "1"]) == 2
    assert "shop.nope" in capsys.readouterr().err
