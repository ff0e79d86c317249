"""bench/spark_jobs.py: a hand-made event log's jobs get their own stages, tasks and executor
time (a stage listed again by a later job counts as skipped there), and a span's seconds split
into in jobs, in a SQL execution with no job, and outside both, each instant once; a statement
counts the jobs of the executions nested in it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.spark_jobs import main  # noqa: E402

SQL = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"


def job_start(job: int, at: int, stages: list[int], sql: int | None) -> dict:
    props = {"callSite.short": f"collect at job{job}.py:1"}
    if sql is not None:
        props["spark.sql.execution.id"] = str(sql)
    return {"Event": "SparkListenerJobStart", "Job ID": job, "Submission Time": at, "Stage IDs": stages,
            "Properties": props}


def stage_done(stage: int) -> dict:
    return {"Event": "SparkListenerStageCompleted", "Stage Info": {"Stage ID": stage, "Completion Time": 0}}


def task(stage: int, run_ms: int) -> dict:
    return {"Event": "SparkListenerTaskEnd", "Stage ID": stage, "Task Metrics": {"Executor Run Time": run_ms}}


def job_end(job: int, at: int) -> dict:
    return {"Event": "SparkListenerJobEnd", "Job ID": job, "Completion Time": at,
            "Job Result": {"Result": "JobSucceeded"}}


EVENTS = [
    {"Event": "SparkListenerApplicationStart", "Timestamp": 1000},
    {"Event": SQL, "executionId": 0, "description": "sql at NativeMethodAccessorImpl.java:0", "time": 1100,
     "physicalPlanDescription": "== Physical Plan ==\nExecute MergeIntoCommand (1)\n   +- MergeIntoCommand (2)\n"},
    job_start(0, 1200, [0, 1], 0), stage_done(0), task(0, 30), task(0, 40), stage_done(1), task(1, 50),
    job_end(0, 1500),
    {"Event": SQL, "executionId": 1, "rootExecutionId": 0, "description": "MERGE operation - scanning files",
     "time": 1550},
    job_start(1, 1600, [2, 1], 1), stage_done(2), task(2, 20), job_end(1, 1700),
    {"Event": SQL.replace("Start", "End"), "executionId": 1, "time": 1750},
    {"Event": SQL.replace("Start", "End"), "executionId": 0, "time": 1900},
    job_start(2, 2000, [3], None), stage_done(3), task(3, 10), job_end(2, 2100),
    {"Event": "SparkListenerApplicationEnd", "Timestamp": 2500},
]


@pytest.fixture
def event_log(tmp_path: Path) -> Path:
    folder = tmp_path / "events"
    folder.mkdir()
    (folder / "local-1").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    return folder


def test_the_whole_application_splits_into_jobs_sql_and_driver_time(event_log, tmp_path, capsys):
    results = main([str(event_log), "--json", str(tmp_path / "out.json")])
    (span,) = results["spans"]
    assert (span["seconds"], span["jobs"], span["sql_executions"], span["stages"], span["tasks"]) == (1.5, 3, 1, 4, 5)
    assert (span["in_jobs_s"], span["in_sql_no_job_s"], span["outside_sql_s"]) == (0.5, 0.4, 0.6)
    assert span["executor_run_s"] == pytest.approx(0.15)
    jobs = results["details"][0]["jobs"]
    assert [(j["job_id"], j["sql_id"], j["wall_s"], j["gap_before_s"]) for j in jobs] == [
        (0, 0, 0.3, 0.2), (1, 1, 0.1, 0.1), (2, None, 0.1, 0.3)]
    assert [(j["stages_run"], j["stages_skipped"], j["tasks"], j["executor_run_ms"]) for j in jobs] == [
        (2, 0, 3, 120), (1, 1, 1, 20), (1, 0, 1, 10)]
    assert jobs[1]["sql_description"] == "MERGE operation - scanning files"
    assert json.loads((tmp_path / "out.json").read_text())["spans"] == results["spans"]
    assert "| application | 1.50 | 3 |" in capsys.readouterr().out


def test_a_marked_span_counts_the_jobs_started_in_it_and_its_sql_executions(event_log, tmp_path):
    marks = tmp_path / "marks"
    marks.write_text(json.dumps({"label": "orders_2 #3", "start_s": 1.05, "end_s": 1.95}) + "\n"
                     + json.dumps({"label": "orders #4", "start_s": 1.95, "end_s": 2.5}) + "\n")
    results = main([str(event_log), "--marks", str(marks), "--show", "orders_2"])
    window, other = results["spans"]
    assert (window["jobs"], window["in_jobs_s"], window["in_sql_no_job_s"]) == (2, 0.4, 0.4)
    assert window["outside_sql_s"] == pytest.approx(0.1)
    assert (other["jobs"], other["in_jobs_s"], other["in_sql_no_job_s"]) == (1, 0.1, 0)
    assert other["outside_sql_s"] == pytest.approx(0.45)
    (detail,) = results["details"]
    assert detail["label"] == "orders_2 #3" and [j["job_id"] for j in detail["jobs"]] == [0, 1]
    (merge,) = detail["sql"]  # the statement, its nested execution's job counted in it
    assert (merge["sql_id"], merge["plan"], merge["nested"], merge["nested_with_jobs"]) == (
        0, "MergeIntoCommand", 1, ["MERGE operation - scanning files"])
    assert (merge["seconds"], merge["jobs"], merge["in_jobs_s"], merge["no_job_s"]) == (0.8, 2, 0.4, 0.4)


def test_a_compressed_log_is_refused_with_its_line_and_the_setting(tmp_path):
    log = tmp_path / "local-1.zstd"
    log.write_bytes(b"(\xb5/\xfd binary\n")
    with pytest.raises(SystemExit, match=r"local-1.zstd:1 is not JSON.*spark.eventLog.compress=false"):
        main([str(log)])


def test_marks_of_another_run_are_a_warning_and_a_malformed_mark_an_error_naming_its_line(event_log, tmp_path,
                                                                                        capsys):
    marks = tmp_path / "marks"
    marks.write_text(json.dumps({"label": "elsewhere #1", "start_s": 9.0, "end_s": 9.5}) + "\n")
    (span,) = main([str(event_log), "--marks", str(marks)])["spans"]
    assert span["jobs"] == 0
    assert "1 of 1 marks fall outside the event log's application (first: elsewhere #1)" in capsys.readouterr().err
    marks.write_text(json.dumps({"label": "a", "start_s": 1.0}) + "\n")
    with pytest.raises(SystemExit):
        main([str(event_log), "--marks", str(marks)])
    assert f"{marks} line 1: not a mark with label, start_s and end_s" in capsys.readouterr().err
