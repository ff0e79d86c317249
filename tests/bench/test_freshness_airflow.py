"""bench/_freshness_airflow.py: the merge DAG's runs as the Airflow API records them become where a
run's time went: an asset-triggered run's wait counts from the oldest event it consumed, a run
whose plan found nothing to merge has no merge task, and an unfinished run is no pass."""

from __future__ import annotations

from bench._freshness_airflow import merge_tasks, run_passes, summarize_runs


def t(seconds: float) -> str:
    return f"2026-11-30T17:00:{seconds:06.3f}Z"


def task(task_id: str, start: float, end: float | None, state: str = "success", map_index: int = -1) -> dict:
    return {"task_id": task_id, "map_index": map_index, "state": state, "start_date": t(start),
            "end_date": t(end) if end is not None else None}


RUNS = [
    {"dag_run_id": "scheduled__1", "run_type": "scheduled", "state": "success", "queued_at": t(0), "start_date": t(1),
     "end_date": t(5), "events": [],
     "tasks": [task("plan", 2, 3), task("merge", 0, None, state="skipped") | {"start_date": None},
               task("publish", 3.5, 4)]},
    {"dag_run_id": "asset_triggered__2", "run_type": "asset_triggered", "state": "success", "queued_at": t(7),
     "start_date": t(10), "end_date": t(20), "events": [{"timestamp": t(6)}, {"timestamp": t(4)}],
     "tasks": [task("plan", 11, 12), task("merge", 13, 18, map_index=0), task("publish", 19, 19.5)]},
    {"dag_run_id": "asset_triggered__3", "run_type": "asset_triggered", "state": "failed", "queued_at": t(21),
     "start_date": t(22), "end_date": t(30), "events": [{"timestamp": t(20)}],
     "tasks": [task("plan", 23, 25), task("merge", 26, 29, state="failed", map_index=0)]},
    {"dag_run_id": "asset_triggered__4", "run_type": "asset_triggered", "state": "running", "queued_at": t(31),
     "start_date": t(32), "end_date": None, "events": [{"timestamp": t(30)}],
     "tasks": [task("plan", 33, None, state="running")]},
]


def test_summary_counts_runs_and_times_each_step_from_the_oldest_event():
    s = summarize_runs(RUNS)
    assert s["runs"] == 4 and s["run_types"] == {"scheduled": 1, "asset_triggered": 3}
    assert s["run_states"] == {"success": 2, "failed": 1, "running": 1}
    assert s["runs_without_merge"] == 2  # the scheduled run planned nothing; the running one has not merged yet
    assert s["run_s_p50"] == 8.0 and s["run_s_max"] == 10.0  # 4, 10, 8: the running run has no duration
    assert s["event_to_queued_s_p50"] == 1.0  # 3 (from the oldest of two events), 1, 1
    assert s["event_to_start_s_p50"] == 2.0 and s["event_to_start_s_max"] == 6.0  # 6, 2, 2
    assert s["start_to_plan_s_p50"] == 1.0 and s["plan_s_p50"] == 1.0  # plans 1, 1, 2; the running one unfinished
    assert s["plan_to_merge_s_p50"] == 1.0 and s["merge_task_s_p50"] == 4.0  # merges 5 and 3


def test_finished_runs_and_merge_tasks_become_passes_with_their_exit():
    passes = run_passes(RUNS)
    assert [(p["label"], p["merge_s"], p["merge_exit"]) for p in passes] == [
        ("scheduled__1", 4.0, 0), ("asset_triggered__2", 10.0, 0), ("asset_triggered__3", 8.0, 1)]
    tasks = merge_tasks(RUNS)
    assert [(p["label"], p["merge_s"], p["merge_exit"]) for p in tasks] == [
        ("asset_triggered__2[0]", 5.0, 0), ("asset_triggered__3[0]", 3.0, 1)]
    assert tasks[0]["began_at"] < tasks[0]["ended_at"] == passes[1]["ended_at"] - 2
