"""MergeCrashSwitch: a merge run dies at the chosen pass of an apply failpoint and commits nothing
more until a fresh run; the plan's apply failpoints are the ones the apply code passes; and the
apply checker shares no code with the merge it checks."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import tidelake.apply
import tidelake.nemesis.apply_check as apply_check
from tidelake.failpoints import failpoint
from tidelake.nemesis.merge_crash import MergeCrashed, MergeCrashSwitch
from tidelake.nemesis.plan import APPLY_FAILPOINTS, MERGE_STEPS, MergeCrash, crash_points, draw_plan


@pytest.fixture
def switch():
    switch = MergeCrashSwitch()
    with switch.armed():
        yield switch


def test_a_crash_strikes_at_its_nth_pass_and_the_run_is_dead_until_a_restart(switch):
    switch.crash_at(MergeCrash("merge_mid", "merge.after_commit", 2))
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
    switch.crash_at(MergeCrash("merge_mid", "merge.before_commit", 1))
    with pytest.raises(MergeCrashed):
        try:
            failpoint("merge.before_commit", "t1")
        except Exception:  # noqa: BLE001 - what merge_job's _merge_table does
            pytest.fail("the crash was caught as a table's failure")


def test_unarmed_failpoints_do_nothing():
    for name in APPLY_FAILPOINTS:
        failpoint(name, None)


def test_every_apply_failpoint_is_passed_in_the_apply_code():
    """A renamed or removed failpoint would turn its crashes into silent misses."""
    source = "\n".join(p.read_text() for p in Path(tidelake.apply.__file__).parent.glob("*.py"))
    passed = set(re.findall(r'failpoint\("([a-z_.]+)"', source))
    assert passed == set(APPLY_FAILPOINTS)


def test_plans_draw_merge_crashes_only_at_the_apply_level_and_only_where_they_can_strike():
    assert draw_plan(7, "bank", 2.0).merge_crashes == ()
    assert draw_plan(7, "bank", 2.0, "apply").events == draw_plan(7, "bank", 2.0).events
    crashes = [c for s in range(400) for c in draw_plan(s, "bank", 2.0, "apply").merge_crashes]
    assert {c.step for c in crashes} == set(MERGE_STEPS)
    assert {c.point for c in crashes} == set(APPLY_FAILPOINTS) - {"ddl_apply.after_rewrite"}  # bank has no rewrite
    assert all(c.point in crash_points(c.step, "bank") for c in crashes)
    assert all(c.point.startswith("merge.") for c in crashes if c.step == "merge_final")  # no DDL after the CREATEs


def test_the_apply_checker_imports_nothing_of_the_merge_or_the_lake_readers():
    tree = ast.parse(Path(apply_check.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m and m.startswith(("tidelake.apply", "tidelake.lake", "tidelake.codec"))}
