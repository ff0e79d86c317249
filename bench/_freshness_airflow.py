"""The Airflow side of bench_freshness.py --merger airflow: the merge DAG's runs as its REST API
recorded them, summarized.

Pure computation, no I/O: the bench reads each run of tidelake_merge with its task instances and,
for an asset-triggered run, the asset events it consumed (tidelake.demos.airflow_api); this turns
them into where a run's time went. An event is the new-data trigger's ([merge].run_on_new_data,
tidelake.orchestration.airflow.new_data_trigger); a run consumes every event queued since the
previous one, so its wait is counted from the oldest.

    event -> queued   the scheduler creating the run after its oldest event
    event -> start    ... and starting it (max_active_runs=1: after the previous run ended)
    start -> plan     the run's start to its plan task running (scheduling, a task process)
    plan              the plan task (imports, the lake's control tables)
    plan -> merge     plan's end to the merge task running
    merge task        the merge task (a Spark Connect client, the merge run itself)
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import median  # noqa: E402


def _at(value: str | None) -> float | None:
    """An API timestamp (ISO 8601 with offset) as epoch seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None


def _p50(values: list[float]) -> float | None:
    return median(values) if values else None


def _task(tasks: list[dict], task_id: str) -> list[dict]:
    return [t for t in tasks if t["task_id"] == task_id and _at(t.get("start_date")) is not None]


def merge_tasks(runs: list[dict]) -> list[dict]:
    """Every merge task instance that ran, as a bench pass (began_at, ended_at, merge_s, merge_exit):
    bench_freshness.pass_split then splits it into the merge run and what the task spent outside it."""
    out = []
    for run in runs:
        for task in _task(run["tasks"], "merge"):
            began, ended = _at(task["start_date"]), _at(task.get("end_date"))
            if ended is not None:
                out.append({"label": f"{run['dag_run_id']}[{task['map_index']}]", "began_at": began, "ended_at": ended,
                            "merge_s": ended - began, "merge_exit": 0 if task["state"] == "success" else 1})
    return out


def run_passes(runs: list[dict]) -> list[dict]:
    """Every finished run as a bench pass, from its start to its end."""
    out = []
    for run in runs:
        began, ended = _at(run.get("start_date")), _at(run.get("end_date"))
        if began is not None and ended is not None:
            out.append({"label": run["dag_run_id"], "began_at": began, "ended_at": ended, "merge_s": ended - began,
                        "merge_exit": 0 if run["state"] == "success" else 1})
    return out


def summarize_runs(runs: list[dict]) -> dict:
    """Counts and medians over the runs (each a DAG run of the API with `tasks` and `events` added)."""
    types: dict[str, int] = {}
    states: dict[str, int] = {}
    durations, to_queued, to_start, to_plan, plans, plan_to_merge, merges = [], [], [], [], [], [], []
    without_merge = 0
    for run in runs:
        types[run["run_type"]] = types.get(run["run_type"], 0) + 1
        states[run["state"]] = states.get(run["state"], 0) + 1
        start, end, queued = _at(run.get("start_date")), _at(run.get("end_date")), _at(run.get("queued_at"))
        if start is not None and end is not None:
            durations.append(end - start)
        events = [_at(e["timestamp"]) for e in run["events"]]
        if events and queued is not None:
            to_queued.append(queued - min(events))
        if events and start is not None:
            to_start.append(start - min(events))
        plan = _task(run["tasks"], "plan")
        if plan and start is not None:
            to_plan.append(_at(plan[0]["start_date"]) - start)
        if plan and plan[0].get("end_date"):
            plans.append(_at(plan[0]["end_date"]) - _at(plan[0]["start_date"]))
        merge = _task(run["tasks"], "merge")
        if not merge:
            without_merge += 1
        if merge and plan and plan[0].get("end_date"):
            plan_to_merge.append(min(_at(t["start_date"]) for t in merge) - _at(plan[0]["end_date"]))
        merges += [_at(t["end_date"]) - _at(t["start_date"]) for t in merge if t.get("end_date")]
    return {"runs": len(runs), "run_types": types, "run_states": states, "runs_without_merge": without_merge,
            "run_s_p50": _p50(durations), "run_s_max": max(durations, default=None),
            "event_to_queued_s_p50": _p50(to_queued), "event_to_start_s_p50": _p50(to_start),
            "event_to_start_s_max": max(to_start, default=None),
            "start_to_plan_s_p50": _p50(to_plan), "plan_s_p50": _p50(plans), "plan_to_merge_s_p50": _p50(plan_to_merge),
            "merge_task_s_p50": _p50(merges)}
