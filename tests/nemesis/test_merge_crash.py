"""MergeCrashSwitch: a merge run dies at the chosen pass of an apply failpoint and commits nothing
more until a fresh run, or meets one write error there and goes on; a run that hides a write error
is named; the plan's apply failpoints are the ones the apply code passes; and the apply checker
shares no code with the merge it checks."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import tidelake.merge
import tidelake.nemesis.apply_check as apply_check
import tidelake.syncpoint
from tidelake.failpoints import failpoint
from tidelake.nemesis.landing_check import Anomaly
from tidelake.nemesis.merge_crash import MergeCrashed, MergeCrashSwitch, MergeWriteError
from tidelake.nemesis.merge_cycles import MergeCycles, _run_step
from tidelake.nemesis.plan import (
    APPLY_FAILPOINTS,
    MERGE_CRASH,
    MERGE_STEPS,
    MERGE_WRITE_ERROR,
    WRITE_ERROR_COMMITS,
    MergeFault,
    draw_plan,
    fault_points,
)


@pytest.fixture
def switch():
    switch = MergeCrashSwitch()
    with switch.armed():
        yield switch


def test_a_crash_strikes_at_its_nth_pass_and_the_run_is_dead_until_a_restart(switch):
    switch.fault_at(MergeFault("merge_mid", "merge.after_commit", 2))
    failpoint("merge.before_commit", "t1")  # another point: passes
    failpoint("merge.after_commit", "t1")  # first pass: passes
    with pytest.raises(MergeCrashed, match="pass 2 of merge.after_commit"):
        failpoint("merge.after_commit", "t2")
    for name in ("merge.next_table", "merge.before_log", "syncpoint.before_record"):
        with pytest.raises(MergeCrashed, match="crashed merge run passed"):  # dead: every point raises
            failpoint(name, "t3")
    switch.restart()  # a fresh run: nothing armed
    for name in APPLY_FAILPOINTS:
        failpoint(name, "t1")


def test_a_crash_escapes_the_handlers_that_log_a_table_failure_and_go_on(switch):
    """The merge catches Exception per table; a crash must reach the nemesis like a process exit."""
    switch.fault_at(MergeFault("merge_mid", "merge.before_commit", 1))
    with pytest.raises(MergeCrashed):
        try:
            failpoint("merge.before_commit", "t1")
        except Exception:  # noqa: BLE001 - what TableMerge.run does
            pytest.fail("the crash was caught as a table's failure")


def test_unarmed_failpoints_do_nothing():
    for name in APPLY_FAILPOINTS:
        failpoint(name, None)


def test_every_apply_failpoint_is_passed_in_the_merge_and_syncpoint_code():
    """A renamed or removed failpoint would turn its crashes into silent misses."""
    rooms = [Path(tidelake.merge.__file__).parent, Path(tidelake.syncpoint.__file__).parent]
    source = "\n".join(p.read_text() for room in rooms for p in room.rglob("*.py"))
    passed = set(re.findall(r'failpoint\("([a-z_.]+)"', source))
    assert passed == set(APPLY_FAILPOINTS)


def test_plans_draw_merge_faults_only_at_the_apply_level_and_only_where_they_can_strike():
    assert draw_plan(7, "bank", 2.0).merge_faults == ()
    assert draw_plan(7, "bank", 2.0, "apply").events == draw_plan(7, "bank", 2.0).events
    plans = [draw_plan(s, "bank", 2.0, "apply") for s in range(400)]
    crashes = [f for p in plans for f in p.merge_faults if f.kind == MERGE_CRASH]
    assert {c.step for c in crashes} == set(MERGE_STEPS)
    assert {c.point for c in crashes} == set(APPLY_FAILPOINTS) - {"ddl_apply.after_rewrite"}  # bank has no rewrite
    assert all(c.point in fault_points(c.step, "bank") for c in crashes)
    assert all(c.point.startswith("merge.") for c in crashes if c.step == "merge_final")  # no DDL after the CREATEs
    errors = [f for p in plans for f in p.merge_faults if f.kind == MERGE_WRITE_ERROR]
    assert {e.point for e in errors} == WRITE_ERROR_COMMITS
    assert all(e.point in fault_points(e.step, "bank", MERGE_WRITE_ERROR) for e in errors)
    assert 100 < sum(p.maintenance for p in plans) < 300


def test_a_write_error_strikes_once_as_an_ordinary_exception_and_the_run_goes_on(switch):
    switch.fault_at(MergeFault("merge_mid", "merge.after_commit", 2, MERGE_WRITE_ERROR))
    failpoint("merge.after_commit", "t1")
    with pytest.raises(Exception) as caught:  # what _merge_table's handler sees
        failpoint("merge.after_commit", "t2")
    assert isinstance(caught.value, MergeWriteError) and "pass 2 of merge.after_commit" in str(caught.value)
    assert switch.write_error_struck
    for name in APPLY_FAILPOINTS:  # not dead: the run goes on
        failpoint(name, "t3")


def _step_with(run, fault: MergeFault) -> MergeCycles:
    out = MergeCycles()
    switch = MergeCrashSwitch()
    with switch.armed():
        _run_step(run, [fault], switch, out)
    return out


@pytest.mark.parametrize("report", ["raise", "failure"])
def test_a_write_error_the_run_reports_is_expected_and_the_step_runs_again(report):
    runs = []

    def run():
        runs.append(1)
        try:
            failpoint("merge.before_commit", "t1")
        except MergeWriteError as exc:
            if report == "raise":
                raise
            out.failures.append(Anomaly("merge_failed", 1, 0, str(exc)))

    out = MergeCycles()
    switch = MergeCrashSwitch()
    with switch.armed():
        _run_step(run, [MergeFault("merge_mid", "merge.before_commit", 1, MERGE_WRITE_ERROR)], switch, out)
    assert out.failures == [] and out.write_errors == {"merge.before_commit": 1} and len(runs) == 2


def test_a_write_error_the_run_swallows_is_named():
    def run():
        try:
            failpoint("merge.before_log", "run")
        except MergeWriteError:
            pass

    out = _step_with(run, MergeFault("merge_final", "merge.before_log", 1, MERGE_WRITE_ERROR))
    assert [a.kind for a in out.failures] == ["write_error_hidden"]


def test_a_write_error_whose_point_no_run_passes_is_missed():
    out = _step_with(lambda: None, MergeFault("merge_final", "merge.after_commit", 2, MERGE_WRITE_ERROR))
    assert out.failures == [] and out.write_errors == {} and out.missed == {"merge_write_error:merge.after_commit": 1}


def test_the_apply_checker_imports_nothing_of_the_merge_or_the_lake_readers():
    tree = ast.parse(Path(apply_check.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m and m.startswith(("tidelake.merge", "tidelake.lake", "tidelake.codec"))}
