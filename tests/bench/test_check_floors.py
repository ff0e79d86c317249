"""bench/check_floors.py: each check reads its bench's JSON output, divides by the same run's
ceiling when it names one, and fails past its bound; a missing output or value fails too."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.check_floors import HERE, load_checks, main  # noqa: E402

FLOORS = """
[[check]]
bench = "sim"
what = "smoke / ceiling"
path = ["presets", "preset=smoke", "rows_per_s"]
over = ["ceiling", "rows_per_s"]
at_least = 0.5

[[check]]
bench = "lag"
what = "p95"
path = ["lag", "1"]
at_most = 10.0
"""


def outputs(folder: Path, smoke: float, p95: float) -> Path:
    folder.mkdir()
    (folder / "sim.json").write_text(json.dumps({"bench": "sim", "results": {
        "presets": [{"preset": "hot", "rows_per_s": 1.0}, {"preset": "smoke", "rows_per_s": smoke}],
        "ceiling": {"rows_per_s": 100.0}}}))
    (folder / "lag.json").write_text(json.dumps({"bench": "lag", "results": {"lag": [1.0, p95, 20.0]}}))
    return folder


@pytest.fixture
def floors(tmp_path) -> Path:
    path = tmp_path / "floors.toml"
    path.write_text(FLOORS)
    return path


def test_figures_within_their_bounds_pass(tmp_path, floors, capsys):
    assert main([str(outputs(tmp_path / "out", smoke=60.0, p95=9.5)), "--floors", str(floors)]) == 0
    assert "| sim | smoke / ceiling | 0.6 | >= 0.5 | ok |" in capsys.readouterr().out


def test_a_ratio_below_its_floor_and_a_lag_above_its_bound_fail_each_named(tmp_path, floors, capsys):
    assert main([str(outputs(tmp_path / "out", smoke=40.0, p95=10.5)), "--floors", str(floors)]) == 1
    err = capsys.readouterr().err
    assert "sim: smoke / ceiling: PAST ITS FLOOR (0.4, needs >= 0.5)" in err
    assert "lag: p95: PAST ITS FLOOR (10.5, needs <= 10)" in err


def test_a_missing_output_or_value_fails(tmp_path, floors, capsys):
    folder = outputs(tmp_path / "out", smoke=60.0, p95=1.0)
    (folder / "lag.json").unlink()
    (folder / "sim.json").write_text(json.dumps({"bench": "sim", "results": {"presets": [], "ceiling": {}}}))
    assert main([str(folder), "--floors", str(floors)]) == 1
    err = capsys.readouterr().err
    assert "no output of bench 'lag'" in err and "step 'preset=smoke' not found" in err


def test_a_check_needs_exactly_one_bound(tmp_path):
    path = tmp_path / "floors.toml"
    path.write_text('[[check]]\nbench = "x"\nwhat = "y"\npath = ["a"]\n')
    with pytest.raises(SystemExit, match="check 1 \\(y\\) needs exactly one of at_least, at_most"):
        load_checks(path)


def test_the_shipped_floors_load():
    checks = load_checks(HERE / "floors.toml")
    assert {c.bench for c in checks} >= {"sim", "puller", "lag", "merge", "bench_iceberg_publish"}


def test_a_step_of_several_conditions_picks_the_element_matching_all():
    from bench.check_floors import pick

    runs = {"runs": [{"case": "txn", "quota": "1MiB", "peak": 1.0}, {"case": "backlog", "quota": "8MiB", "peak": 2.0},
                     {"case": "txn", "quota": "8MiB", "peak": 3.0}]}
    assert pick(runs, ("runs", "case=txn", "peak")) == 1.0
    assert pick(runs, ("runs", "case=txn,quota=8MiB", "peak")) == 3.0
    with pytest.raises(KeyError, match="case=txn,quota=2MiB"):
        pick(runs, ("runs", "case=txn,quota=2MiB", "peak"))
