"""`tidelake freshness` on a lake fed through the real lander and merged through delta-rs: the JSON
names each stage's seconds as the Delta histories' own commit times minus the change's commit ts,
the table form shows every stage of the table, and an unknown table is one line, exit 2."""

from __future__ import annotations

import json
import re

import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import recent_change_lake

from tidelake import tso
from tidelake.cli import main
from tidelake.merge.merge_run import run_merge


@pytest.fixture
def lake(tmp_path):
    lake, commit_ts = recent_change_lake(str(tmp_path / "lake"))
    run_merge(None, lake.layout, write_log=False)
    yield lake, commit_ts
    lake.close()


def _first_commit_time_ms(path: str, version: int) -> int:
    return next(h["timestamp"] for h in DeltaTable(path).history() if h["version"] == version)


def test_json_gives_the_seconds_each_stage_took(lake, capsys):
    fed, commit_ts = lake
    assert main(["freshness", "--lake", fed.layout.root, "--since", "5m", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["changes"] == 1 and doc["syncpoints"] is False and "syncpoint" not in doc["stages"]
    # the change's flush is the changelog's newest version; resolve() flushed the watermarks once after it
    landed_ms = _first_commit_time_ms(fed.layout.changelog, DeltaTable(fed.layout.changelog).version())
    assert doc["stages"]["landed"]["max"] == pytest.approx((landed_ms - tso.physical_ms(commit_ts)) / 1000)
    orders = doc["tables"]["shop.orders"]
    assert orders["merged"]["shown"] == 1 and orders["merged"]["pending"] == 0
    assert orders["landed"]["p50"] <= orders["covered"]["p50"] <= orders["merged"]["p50"]


def test_the_table_form_shows_each_stage(lake, capsys):
    fed, _ = lake
    assert main(["freshness", "--lake", fed.layout.root, "--table", "shop.orders"]) == 0
    out = capsys.readouterr().out
    assert "shop.orders" in out and "1 changes landed in the last 600s" in out
    for stage in ("landed", "covered", "merged"):
        assert len(re.findall(rf"│ {stage} +│", out)) == 2, out  # all tables, then the table's own rows


def test_an_unknown_table_is_one_line(lake, capsys):
    fed, _ = lake
    assert main(["freshness", "--lake", fed.layout.root, "--table", "shop.nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shop.nope" in err, err
