"""Where a Spark application's wall time goes, from its own event log: jobs, and the time between them.

Input: an event log as Spark writes it with `spark.eventLog.enabled=true` and
`spark.eventLog.compress=false` (JSON lines, one listener event a line; a folder means its newest
log, Spark's `eventlog_v2_<app>` folder its parts in order). Every job (SparkListenerJobStart/JobEnd)
is reported with its SQL execution (the `spark.sql.execution.id` property, and that execution's
description), its description and call site, wall seconds, the stages it ran (StageCompleted) and
skipped, its tasks and their summed executor run time (TaskEnd, a task counted in the job that listed its stage last).

The time of a span splits three ways, each instant counted once:
  in jobs         some job running: scans, shuffles, Parquet writes;
  in SQL, no job  inside a SQL execution with no job running: Spark's driver planning a
                  statement, Delta replaying its log, committing, writing a checkpoint;
  outside SQL     no SQL execution either: the caller's own driver work (for tidelake, delta-rs
                  log reads, the changelog snapshot, the py4j round trips between statements).
Each statement (a root SQL execution: a MERGE, a count) is also reported with the executions
nested in it (Delta's MERGE runs its source materialization, file scan and rewrite as nested ones).
--marks FILE (bench_merge.py --marks: JSON lines of label, start_s, end_s on the wall clock) gives
those figures per marked span, and --show TEXT the jobs and SQL executions of the spans whose
label holds TEXT; without marks the span is the whole application.

    python bench/spark_jobs.py EVENT_LOG [--marks FILE] [--show TEXT] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import markdown_table  # noqa: E402

SQL_START = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"
SQL_END = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd"


@dataclass
class Job:
    """One Spark job as the event log tells it (times in epoch ms)."""

    job_id: int
    start_ms: int
    end_ms: int | None = None
    result: str = ""
    description: str = ""
    call_site: str = ""
    sql_id: int | None = None
    stage_ids: list[int] = field(default_factory=list)
    stages_run: set[int] = field(default_factory=set)
    tasks: int = 0
    executor_run_ms: int = 0

    @property
    def wall_s(self) -> float:
        return ((self.end_ms or self.start_ms) - self.start_ms) / 1000


@dataclass
class SqlExecution:
    """One SQL execution: a statement or a DataFrame action (root), or one run inside another's
    (Delta's MERGE runs its scan, its rewrite, its log reads as nested executions of the statement)."""

    sql_id: int
    root_id: int
    description: str
    plan: str
    start_ms: int
    end_ms: int | None = None


@dataclass
class EventLog:
    jobs: list[Job]
    sql: dict[int, SqlExecution]
    app_start_ms: int
    app_end_ms: int


def event_files(path: Path) -> list[Path]:
    """The files of the event log at `path`: a file; a folder of rolled parts (Spark's
    `eventlog_v2_<app>/events_<n>_<app>`), in order; else a folder's newest log."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise SystemExit(f"spark_jobs: no event log at {path}")
    parts = sorted(path.glob("events_*_*"), key=lambda p: int(p.name.split("_")[1]))
    if parts:
        return parts
    entries = [p for p in path.iterdir() if not p.name.startswith(".")]
    if not entries:
        raise SystemExit(f"spark_jobs: no event log in {path}")
    return event_files(max(entries, key=lambda p: p.stat().st_mtime))


def _events(files: list[Path]) -> Iterator[dict]:
    """Each listener event of `files`, in order."""
    for part in files:
        with part.open("rb") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                except ValueError:  # not UTF-8, or not JSON
                    raise SystemExit(f"spark_jobs: {part}:{number} is not JSON; a compressed log? "
                                     "run Spark with spark.eventLog.compress=false") from None
                yield event


def read_event_log(path: Path) -> EventLog:
    """Jobs, stages, tasks and SQL executions of the event log at `path` (event_files)."""
    jobs: dict[int, Job] = {}
    sql: dict[int, SqlExecution] = {}
    owner: dict[int, int] = {}  # stage id -> the job that listed it last
    first = last = None
    for event in _events(event_files(path)):
        kind = event.get("Event")
        stamp = event.get("Timestamp") or event.get("Submission Time") or event.get("Completion Time") \
            or event.get("time")
        if isinstance(stamp, int):
            first = stamp if first is None else min(first, stamp)
            last = stamp if last is None else max(last, stamp)
        if kind == "SparkListenerJobStart":
            props = event.get("Properties") or {}
            sql_id = props.get("spark.sql.execution.id")
            job = Job(event["Job ID"], event["Submission Time"],
                      description=props.get("spark.job.description", ""),
                      call_site=props.get("callSite.short", ""),
                      sql_id=int(sql_id) if sql_id not in (None, "") else None,
                      stage_ids=list(event.get("Stage IDs", [])))
            jobs[job.job_id] = job
            owner.update({stage: job.job_id for stage in job.stage_ids})
        elif kind == "SparkListenerJobEnd":
            job = jobs.get(event["Job ID"])
            if job is not None:
                job.end_ms = event["Completion Time"]
                job.result = (event.get("Job Result") or {}).get("Result", "")
        elif kind == "SparkListenerStageCompleted":
            stage = event["Stage Info"]["Stage ID"]
            if stage in owner:
                jobs[owner[stage]].stages_run.add(stage)
        elif kind == "SparkListenerTaskEnd":
            job = jobs.get(owner.get(event.get("Stage ID"), -1))
            if job is not None:
                job.tasks += 1
                job.executor_run_ms += (event.get("Task Metrics") or {}).get("Executor Run Time", 0)
        elif kind == SQL_START:
            sql_id = event["executionId"]
            root = event.get("rootExecutionId")
            sql[sql_id] = SqlExecution(sql_id, sql_id if root in (None, -1) else root, event.get("description", ""),
                                       _plan_root(event.get("physicalPlanDescription", "")), event["time"])
        elif kind == SQL_END and event["executionId"] in sql:
            sql[event["executionId"]].end_ms = event["time"]
    if first is None:
        raise SystemExit(f"spark_jobs: {path} holds no timed event")
    return EventLog(sorted(jobs.values(), key=lambda j: j.start_ms), sql, first, last)


def _plan_root(plan: str) -> str:
    """The top operator of a physical plan description ('== Physical Plan ==' then 'Execute
    MergeIntoCommand (1)'): a statement's kind where its description is only a call site."""
    lines = [line.strip(" +-:") for line in plan.splitlines()[1:] if line.strip() and not line.startswith("==")]
    top = next((line for line in lines if not line.startswith("AdaptiveSparkPlan")), "")
    return top.rsplit(" (", 1)[0].removeprefix("Execute ").removeprefix("* ")


def covered_ms(intervals: list[tuple[int, int]], lo: int, hi: int) -> int:
    """Milliseconds of [lo, hi] inside at least one of `intervals` (each instant once)."""
    total, reach = 0, lo
    for start, end in sorted(intervals):
        start, end = max(start, reach), min(end, hi)
        if end > start:
            total += end - start
            reach = end
    return total


def span_summary(log: EventLog, label: str, lo: int, hi: int) -> dict:
    """The span [lo, hi] (epoch ms): its jobs (started in it) and its time in jobs, in SQL
    executions with no job running, and outside both."""
    jobs = [j for j in log.jobs if lo <= j.start_ms <= hi]
    job_spans = [(j.start_ms, j.end_ms or hi) for j in log.jobs]
    sql_spans = [(s.start_ms, s.end_ms or hi) for s in log.sql.values()]
    in_jobs = covered_ms(job_spans, lo, hi)
    in_sql_or_jobs = covered_ms(job_spans + sql_spans, lo, hi)
    walls = [j.wall_s for j in jobs]
    return {"label": label, "seconds": (hi - lo) / 1000, "jobs": len(jobs),
            "sql_executions": len({log.sql[j.sql_id].root_id if j.sql_id in log.sql else j.sql_id
                                   for j in jobs if j.sql_id is not None}),
            "stages": sum(len(j.stages_run) for j in jobs), "tasks": sum(j.tasks for j in jobs),
            "in_jobs_s": in_jobs / 1000, "in_sql_no_job_s": (in_sql_or_jobs - in_jobs) / 1000,
            "outside_sql_s": (hi - lo - in_sql_or_jobs) / 1000,
            "executor_run_s": sum(j.executor_run_ms for j in jobs) / 1000,
            "job_wall_median_s": statistics.median(walls) if walls else None}


def job_rows(log: EventLog, lo: int, hi: int) -> list[dict]:
    """Each job started in [lo, hi], with the time since the previous job (of any span) ended."""
    rows, reach = [], None
    for job in log.jobs:  # by start time
        if lo <= job.start_ms <= hi:
            sql = log.sql.get(job.sql_id) if job.sql_id is not None else None
            rows.append({**{k: v for k, v in asdict(job).items() if k != "stages_run"},
                         "offset_s": (job.start_ms - lo) / 1000,
                         "gap_before_s": max(0, job.start_ms - max(lo, reach or lo)) / 1000, "wall_s": job.wall_s,
                         "stages_run": len(job.stages_run), "stages_skipped": len(set(job.stage_ids) - job.stages_run),
                         "sql_description": sql.description if sql else ""})
        end = job.end_ms or job.start_ms
        reach = end if reach is None else max(reach, end)
    return rows


def sql_rows(log: EventLog, lo: int, hi: int) -> list[dict]:
    """Each root SQL execution started in [lo, hi] with the executions nested in it: its seconds,
    its jobs, and its seconds with no job running."""
    rows = []
    for s in sorted(log.sql.values(), key=lambda s: s.start_ms):
        if s.root_id == s.sql_id and lo <= s.start_ms <= hi:
            end = s.end_ms or hi
            nested = [n for n in log.sql.values() if n.root_id == s.sql_id and n is not s]
            ids = {s.sql_id, *(n.sql_id for n in nested)}
            jobs = [j for j in log.jobs if j.sql_id in ids]
            in_jobs = covered_ms([(j.start_ms, j.end_ms or end) for j in log.jobs], s.start_ms, end)
            parts = [n.description for n in sorted(nested, key=lambda n: n.start_ms)
                     if any(j.sql_id == n.sql_id for j in jobs)]
            rows.append({"sql_id": s.sql_id, "description": s.description, "plan": s.plan,
                         "offset_s": (s.start_ms - lo) / 1000, "seconds": (end - s.start_ms) / 1000,
                         "nested": len(nested), "jobs": len(jobs), "in_jobs_s": in_jobs / 1000,
                         "no_job_s": (end - s.start_ms - in_jobs) / 1000,
                         "nested_with_jobs": list(dict.fromkeys(parts))})
    return rows


def _short(text: str, width: int = 70) -> str:
    one = " ".join(text.split()).replace("|", "/")
    return one if len(one) <= width else one[:width - 1] + "…"


def _read_marks(path: Path, parser: argparse.ArgumentParser) -> list[tuple[str, int, int]]:
    """(label, start ms, end ms) of each line of a marks file; a line without them is an error naming it."""
    spans = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            mark = json.loads(line)
            spans.append((str(mark["label"]), round(mark["start_s"] * 1000), round(mark["end_s"] * 1000)))
        except (ValueError, KeyError, TypeError) as exc:
            parser.error(f"{path} line {number}: not a mark with label, start_s and end_s ({exc!r})")
    return spans


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("event_log", type=Path, help="a Spark event log (uncompressed), or its folder")
    parser.add_argument("--marks", type=Path, help="JSON lines of label, start_s, end_s (bench_merge.py --marks)")
    parser.add_argument("--show", help="jobs and SQL executions of the marked spans whose label holds this")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    log = read_event_log(args.event_log)
    if args.marks is not None:
        spans = _read_marks(args.marks, parser)
        outside = [label for label, lo, hi in spans if hi < log.app_start_ms or lo > log.app_end_ms]
        if outside:
            print(f"warning: {len(outside)} of {len(spans)} marks fall outside the event log's application "
                  f"(first: {outside[0]}): marks of another run?", file=sys.stderr)
    else:
        spans = [("application", log.app_start_ms, log.app_end_ms)]
    summaries = [span_summary(log, *span) for span in spans]
    print(markdown_table(
        ["span", "s", "jobs", "SQL executions", "stages", "tasks", "in jobs s", "in SQL, no job s", "outside SQL s",
         "executor run s", "job median s"],
        [[s["label"], s["seconds"], s["jobs"], s["sql_executions"], s["stages"], s["tasks"], s["in_jobs_s"],
          s["in_sql_no_job_s"], s["outside_sql_s"], s["executor_run_s"],
          "-" if s["job_wall_median_s"] is None else s["job_wall_median_s"]] for s in summaries]))
    shown = [span for span in spans if args.marks is None or (args.show is not None and args.show in span[0])]
    details = []
    for label, lo, hi in shown:
        jobs, sqls = job_rows(log, lo, hi), sql_rows(log, lo, hi)
        details.append({"label": label, "jobs": jobs, "sql": sqls})
        print(f"\n### {label}: jobs\n")
        print(markdown_table(
            ["job", "SQL", "at s", "gap before s", "wall s", "stages run/skipped", "tasks", "executor run s",
             "call site", "SQL description"],
            [[j["job_id"], "-" if j["sql_id"] is None else j["sql_id"], j["offset_s"], j["gap_before_s"], j["wall_s"],
              f"{j['stages_run']}/{j['stages_skipped']}", j["tasks"], j["executor_run_ms"] / 1000,
              _short(j["call_site"], 40), _short(j["sql_description"] or j["description"])] for j in jobs]))
        print(f"\n### {label}: SQL executions (statements and actions, with those nested in them)\n")
        print(markdown_table(["SQL", "at s", "s", "nested", "jobs", "in jobs s", "no job s", "plan", "description",
                              "nested with jobs"],
                             [[s["sql_id"], s["offset_s"], s["seconds"], s["nested"], s["jobs"], s["in_jobs_s"],
                               s["no_job_s"], _short(s["plan"], 30), _short(s["description"], 50),
                               _short("; ".join(s["nested_with_jobs"]), 90)] for s in sqls]))
    results = {"spans": summaries, "details": details}
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1, default=list))
    return results


if __name__ == "__main__":
    main()
