"""`tidelake nemesis`: a few seeded landing-level schedules end to end, with the puller on a thread
and as SIGKILLed `tidelake pull` shard processes (the long run is the documented command; the slow
tests add 50 landing schedules of each workload and one apply schedule of each workload crashing
the merge), reproducible plans, and bad input refused in one line."""

from __future__ import annotations

import json

import pytest

from tidelake.cli import main
from tidelake.nemesis.plan import BETWEEN_FLUSHES, CRASH_POINTS, FAULT_KINDS, PULLER_CRASH, crash_shards, draw_plan
from tidelake.nemesis.schedule import run_schedule


def test_seeded_schedules_run_clean_and_say_so(tmp_path, capsys):
    """Seeds 21 and 30 crash the puller inside a flush and fail lake writes; 13 runs the mixed
    workload (DDL, long txns) with both as well."""
    out = tmp_path / "bank.json"
    assert main(["nemesis", "--seed", "21", "--schedules", "1", "--duration", "2", "--json", str(out)]) == 0
    assert main(["nemesis", "--seed", "30", "--schedules", "1", "--duration", "2"]) == 0
    assert main(["nemesis", "--seed", "13", "--schedules", "1", "--workload", "mixed", "--duration", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("seed ")] == ["seed 21", "seed 30", "seed 13"]
    assert sum(line.startswith("summary: 1 schedules") for line in lines) == 3
    record = json.loads(out.read_text())
    (result,) = record["results"]
    assert record["anomalies"] == {} and result["anomalies"] == {}
    faults, missed = result["faults"], result["missed"]
    assert faults.get("puller_crash") == 1
    # the plan's one write error either struck (a flush passed its point while it lasted) or is missed
    assert faults.get("lake_write_error", 0) + missed.get("lake_write_error", 0) == 1
    assert result["watermarks_checked"] > 0 and result["totals_checked"] > 0
    assert result["rerun"] == "tidelake nemesis --seed 21 --schedules 1 --workload bank --level landing --duration 2"


def test_process_mode_sigkills_puller_processes_and_the_lake_holds(tmp_path, capsys):
    """Seed 25 (mixed, one shard): crashes armed at lander.before_watermarks and after_watermarks
    and one kill at once; seed 9001 (bank, two shards): shard 0 dies at lander.after_ddl. Every
    crash is a real SIGKILL of a `tidelake pull` process, counted where it struck, and the
    landing check finds the lake complete after the shards restart."""
    out = tmp_path / "proc.json"
    assert main(["nemesis", "--seed", "25", "--workload", "mixed", "--duration", "2", "--pullers", "process",
                 "--json", str(out)]) == 0
    mixed = json.loads(out.read_text())
    assert main(["nemesis", "--seed", "9001", "--duration", "2", "--pullers", "process", "--shards", "2",
                 "--json", str(out)]) == 0
    bank = json.loads(out.read_text())
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("seed ")] == ["seed 25", "seed 9001"]
    assert sum("SIGKILLs: " in line for line in lines) == 4  # each schedule's line and summary
    for record, workload in ((mixed, "mixed"), (bank, "bank")):
        (result,) = record["results"]
        assert record["anomalies"] == {} and result["watermarks_checked"] > 0
        crashes = [e.point for e in draw_plan(result["seed"], workload, 2.0).events if e.kind == PULLER_CRASH]
        kills = result["puller_kills"]
        assert result["faults"][PULLER_CRASH] == sum(kills.values()) == len(crashes)
        # a crash armed at a point either struck there or, not struck 2 s after its offset, was a kill at once
        missed = sum(n for point, n in result["missed"].items() if point in CRASH_POINTS)
        assert kills.get(BETWEEN_FLUSHES, 0) == crashes.count(BETWEEN_FLUSHES) + missed
        assert set(kills) <= set(CRASH_POINTS) and result["skipped"] == {}
    assert bank["results"][0]["puller_kills"] == {"lander.after_ddl": 1}  # shard 0 lands the CREATEs' DDL
    assert bank["results"][0]["totals_checked"] > 0 and bank["options"]["shards"] == 2
    assert bank["results"][0]["rerun"].endswith("--duration 2 --pullers process --shards 2")


def test_process_mode_aims_each_crash_at_a_shard_from_the_seed():
    plans = [draw_plan(s, "bank", 2.0) for s in range(200)]
    aimed = [crash_shards(p, 3) for p in plans]
    assert aimed == [crash_shards(p, 3) for p in plans] and {s for a in aimed for s in a.values()} == {0, 1, 2}
    for plan, shards in zip(plans, aimed):
        assert set(shards) == {i for i, e in enumerate(plan.events) if e.kind == PULLER_CRASH}
        assert all(n == 0 for i, n in shards.items() if plan.events[i].point in ("lander.before_ddl",
                                                                                  "lander.after_ddl"))


def test_a_seed_always_draws_the_same_plan():
    assert draw_plan(5, "bank", 2.0) == draw_plan(5, "bank", 2.0) != draw_plan(6, "bank", 2.0)
    plans = [draw_plan(s, "mixed", 3.0) for s in range(300)]
    assert {e.kind for p in plans for e in p.events} == set(FAULT_KINDS)
    assert {e.point for p in plans for e in p.events if e.kind == "puller_crash"} == set(CRASH_POINTS)
    assert all(0 <= e.at_s <= 3.0 for p in plans for e in p.events)


@pytest.mark.parametrize("argv, message", [
    (["--schedules", "0"], "--schedules must be at least 1"),
    (["--workload", "tpcc"], "--workload 'tpcc'"),
    (["--level", "replica"], "--level 'replica'"),
    (["--duration", "-1"], "--duration must be in (0, 600]"),
    (["--pullers", "fork"], "--pullers 'fork': known are thread, process"),
    (["--shards", "2"], "--shards 2 runs the changefeed as 2 `tidelake pull` processes: add --pullers process"),
    (["--pullers", "process", "--shards", "0"], "--shards must be in [1, 8]"),
    (["--pullers", "process", "--level", "apply"], "--pullers process runs landing-level schedules only"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(["nemesis", "--seed", "1", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


@pytest.mark.slow
def test_fifty_schedules_of_each_workload_run_clean(tmp_path):
    for workload, seed in (("bank", 500_000), ("mixed", 600_000)):
        out = tmp_path / f"{workload}.json"
        code = main(["nemesis", "--seed", str(seed), "--schedules", "50", "--workload", workload, "--duration", "2",
                     "--json", str(out)])
        record = json.loads(out.read_text())
        assert code == 0, record["failed_seeds"]
        assert record["schedules_run"] == 50 and sum(record["faults"].values()) >= 100


@pytest.mark.slow
@pytest.mark.spark
def test_an_apply_schedule_crashing_the_merge_three_times_runs_clean(spark):
    """Seed 7002 (~60 s): the first merge dies between the tables of its combined run, the
    syncpoint's merge after a window's commit and again as a table's turn starts; fresh runs
    resume, and every replica checkpoint and the syncpoint equal the upstream."""
    result = run_schedule(7002, "bank", 2.0, spark=spark)
    assert result.ok, result.anomalies[:3]
    assert result.faults["merge_crash"] == sum(result.merge_crashes.values()) >= 2, result.missed
    assert result.checkpoints_checked >= 9 and result.syncpoints_checked >= 1


@pytest.mark.slow
@pytest.mark.spark
def test_a_mixed_apply_schedule_crashing_the_merge_runs_clean(spark):
    """Seed 8001 (~2.5 min): the mixed workload with its DDL, three merge crashes and a merge write
    error; every replica checkpoint equals the upstream column by column."""
    result = run_schedule(8001, "mixed", 2.0, spark=spark)
    assert result.ok, result.anomalies[:3]
    assert result.faults["merge_crash"] == sum(result.merge_crashes.values()) >= 2, result.missed
    assert result.checkpoints_checked >= 20 and result.values_checked > 1000
    assert set(result.unchecked) <= {"ddl_in_flight"}, result.unchecked
