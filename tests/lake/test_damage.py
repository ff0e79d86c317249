"""Damaged lake files are named in one line (table, log version or file, what it affects, the way
out), by `status`, `pull` and merge reasons; the full trace goes to a file, not the terminal."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from tests.capture.pull_harness import config_doc, sim  # noqa: F401 (sim is a fixture)
from tidelake.capture.landing.lander import Lander
from tidelake.cli import main
from tidelake.config_writer import write_config
from tidelake.lake.damage import explain_failure, find_damage, first_line
from tidelake.lake.layout import LakeLayout
from tidelake.lake.row_change import RowChange


def _landed(root: Path) -> LakeLayout:
    layout = LakeLayout(str(root))
    lander = Lander(layout, "cf1", 1 << 20, 0.2, 1 << 20, 3600)
    lander.add_rows([RowChange(table_id=5, commit_ts=150, start_ts=140, op="put", key=b"k", value=b"v", old_value=b"", region_id=1)])
    for ts in (100, 200):
        lander.resolve(5, ts)
        lander.resolve_ddl(ts)
        lander.flush()
    lander.close()
    return layout


def _truncate_last_commit(table: str) -> str:
    last = sorted(glob.glob(f"{table}/_delta_log/*.json"))[-1]
    text = Path(last).read_text()
    Path(last).write_text(text[: len(text) // 2])
    return last


def test_a_truncated_watermarks_commit_is_named_by_status(tmp_path, capsys):
    layout = _landed(tmp_path / "lake")
    last = _truncate_last_commit(layout.watermarks)
    assert main(["status", "--lake", layout.root]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "<unknown>" not in err, err
    assert f"damaged lake table {layout.watermarks}: commit 2 ({last}) is truncated" in err
    assert "recovery: move" in err and "version 1 holds older watermarks" in err
    trace = err.rsplit("full trace: ", 1)[1].rstrip(")\n")
    assert "DeltaError" in Path(trace).read_text()


def test_a_truncated_watermarks_commit_stops_pull_with_one_line(sim, tmp_path, capsys):
    lake = tmp_path / "lake"
    layout = _landed(lake)
    _truncate_last_commit(layout.watermarks)
    path = write_config(tmp_path / "cf.toml", config_doc(sim, lake))
    assert main(["pull", "--config", str(path), "--max-run-seconds", "5"]) == 1
    err = capsys.readouterr().err
    assert f"damaged lake table {layout.watermarks}: commit 2" in err and "Traceback" not in err, err


def test_a_changelog_file_deleted_by_hand_is_named_with_its_table(tmp_path):
    layout = _landed(tmp_path / "lake")
    data = glob.glob(f"{layout.changelog}/**/*.parquet", recursive=True)
    os.remove(data[0])
    damage = find_damage(layout)
    assert damage.table == layout.changelog and data[0] in damage.problem and "is missing" in damage.problem
    assert "table id 5" in damage.affected and "tidelake bootstrap --table" in damage.recovery
    assert explain_failure(layout, RuntimeError("x\n at java...")) == damage.line()


def test_a_replica_file_deleted_by_hand_points_at_delta_history(tmp_path):
    layout = _landed(tmp_path / "lake")
    replica = layout.replica_path("shop", "orders")
    write_deltalake(replica, pa.table({"id": [1]}))
    write_deltalake(replica, pa.table({"id": [2]}), mode="append")
    os.remove(glob.glob(f"{replica}/*.parquet")[0])
    damage = find_damage(layout)
    assert damage.affected == "the replica shop.orders" and "RESTORE TABLE" in damage.recovery
    assert "tidelake merge --rebuild shop.orders" in damage.recovery


def test_an_intact_lake_has_no_damage_and_errors_keep_their_first_line(tmp_path):
    layout = _landed(tmp_path / "lake")
    assert find_damage(layout) is None
    assert explain_failure(layout, ValueError("bad window\n  stack")) == "ValueError: bad window"
    assert first_line(RuntimeError("")) == "RuntimeError: (no message)"


def test_a_lake_under_a_file_uri_with_escapes_and_replicas_named_with_spaces_is_checked_by_its_files(tmp_path):
    """A file:// root is read as its unescaped folder, and a data file delta-rs names escaped
    (`my%20db/t%201/...`) is looked for under its real name: intact, no damage; removed, named."""
    lake = tmp_path / "my lake"
    _landed(lake)
    layout = LakeLayout(lake.as_uri())
    assert "%20" in layout.root
    write_deltalake(str(lake / "my db" / "t 1"), pa.table({"id": [1]}))
    assert find_damage(layout) is None
    (data,) = glob.glob(f"{lake}/my db/t 1/*.parquet")
    os.remove(data)
    damage = find_damage(layout)
    assert damage.affected == "the replica my db.t 1" and f"data file {data} is missing" in damage.problem
