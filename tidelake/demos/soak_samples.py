"""What a soak (tidelake.demos.soak) records over time, and whether it stayed flat.

A soak's processes carry RUN_MARK in their environment (found whoever their parent is now), or
descend from one that does (setproctitle overwrites the environment of Airflow's retitled
processes). A sample holds the memory summed per role as PSS (shared pages split between their
sharers: Airflow's executor workers are forks of the scheduler), the role from ROLES and the command
line (a task runner by its task id), and the lags a reader sees: worst and median replica lag, and the
capture lag (the lowest table watermark's age). A series is flat when its last quarter's median is
at most FLAT_RATIO times its second quarter's plus a slack (the first quarter is warm-up).
Owner: the soak.
"""

from __future__ import annotations

import re
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

from tidelake import tso
from tidelake.errors import TidelakeError
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaState
from tidelake.status.status_report import collect_status

RUN_MARK = "TIDELAKE_SOAK_RUN"
# First match wins; a process no pattern names is counted under its executable's name.
ROLES = (
    ("puller", re.compile(r"tidelake(?:\.__main__)?\s+pull\b|pull_changefeed|tidelake-puller")),
    ("simulator", re.compile(r"tidelake(?:\.__main__)?\s+sim\b")),
    ("spark executor", re.compile(r"CoarseGrainedExecutorBackend")),
    ("spark worker", re.compile(r"deploy\.worker\.Worker")),
    ("spark master", re.compile(r"deploy\.master\.Master")),
    ("spark driver", re.compile(r"SparkSubmit|pyspark|spark_jobs/\w+_job\.py")),
    ("airflow executor", re.compile(r"airflow executor --|airflow worker -- LocalExecutor(?: \[[^\]]*\])?:")),
    ("airflow supervisor", re.compile(r"airflow supervisor:")),
    ("airflow scheduler", re.compile(r"airflow\s+scheduler")),
    ("airflow triggerer", re.compile(r"airflow\s+triggerer")),
    ("airflow dag-processor", re.compile(r"airflow\s+dag-processor")),
    ("airflow api-server", re.compile(r"airflow\s+api[-_]server|uvicorn|gunicorn")),
    ("postgres", re.compile(r"postgres")),
    ("s3 server", re.compile(r"moto")),
)
# Stand-ins for the object store and TiKV keep every object of the lake and every MVCC version in
# memory: they grow with the data written, as a real store's disks do. Charted, not judged.
DATA_HOLDERS = frozenset({"s3 server", "simulator"})
FLAT_RATIO = 1.25
PSS_SLACK = 32 * 2**20  # bytes: a flush buffer's or a page cache's worth of noise
LAG_SLACK_S = 15.0  # one merge interval's worth of noise


@dataclass(frozen=True)
class Sample:
    at: float  # seconds since the soak's start
    pss: dict[str, int]  # role -> bytes
    processes: dict[str, int]  # role -> how many
    replica_lag_max_s: float | None
    replica_lag_median_s: float | None
    capture_lag_s: float | None

    def to_json(self) -> dict[str, Any]:
        """One line of soak.jsonl."""
        return {"at": round(self.at, 1), "pss": self.pss, "processes": self.processes,
                "replica_lag_max_s": self.replica_lag_max_s, "replica_lag_median_s": self.replica_lag_median_s,
                "capture_lag_s": self.capture_lag_s}


# airflow.sdk.execution_time.task_runner's title; the LocalExecutor's workers are "-- LocalExecutor: ..."
TASK_RUNNER = re.compile(r"airflow worker -- (?!LocalExecutor(?: \[[^\]]*\])?:)(\S+)")


def role_of(command: list[str], tasks: dict[str, str] | None = None) -> str:
    """The role of a process from its command line (ROLES), else its executable's name; a task
    runner's is `task <task id>` when `tasks` (task instance id -> task id) names it."""
    line = " ".join(command)
    runner = TASK_RUNNER.search(line)
    if runner:
        return f"task {(tasks or {}).get(runner.group(1), 'unknown')}"
    for role, pattern in ROLES:
        if pattern.search(line):
            return role
    return (command[0].rsplit("/", 1)[-1] if command else "") or "unknown"


def memory_by_role(run_id: str, tasks: dict[str, str] | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """(role -> PSS bytes, role -> processes) over the processes carrying RUN_MARK=run_id."""
    pss: dict[str, int] = {}
    count: dict[str, int] = {}
    for proc in _run_processes(run_id):
        try:
            role = role_of(proc.cmdline(), tasks)
            nbytes = proc.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue  # gone between the listing and the read
        pss[role] = pss.get(role, 0) + nbytes
        count[role] = count.get(role, 0) + 1
    return pss, count


def _run_processes(run_id: str) -> list[psutil.Process]:
    """The marked processes and every descendant of them, this process excluded."""
    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(RUN_MARK) == run_id:
                found[proc.pid] = proc
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue  # gone, or not ours to read
    for root in list(found.values()):
        try:
            found.update((child.pid, child) for child in root.children(recursive=True))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    found.pop(psutil.Process().pid, None)
    return list(found.values())


def lag_now(layout: LakeLayout) -> tuple[float | None, float | None, float | None]:
    """(worst replica lag, median replica lag, capture lag) in seconds, over live tables."""
    report = collect_status(layout)
    live = [t for t in report.tables if t.state not in (ReplicaState.DROPPED, ReplicaState.STOPPED)]
    lags = [t.lag_seconds for t in live if t.lag_seconds is not None]
    resolved = [t.resolved_ts for t in live if t.resolved_ts]
    capture = tso.lag_seconds(min(resolved), report.now_ts) if resolved else None
    return (max(lags) if lags else None, statistics.median(lags) if lags else None, capture)


def take_sample(run_id: str, layout: LakeLayout, started: float, tasks: dict[str, str] | None = None) -> Sample:
    """Memory now, and the lags unless the store does not answer (the S3 outage): then None."""
    pss, count = memory_by_role(run_id, tasks)
    try:
        worst, median, capture = lag_now(layout)
    except (TidelakeError, OSError):
        worst = median = capture = None
    return Sample(time.monotonic() - started, pss, count, worst, median, capture)


@dataclass(frozen=True)
class Flatness:
    """One series over the soak: the medians of its second and last quarter."""

    series: str
    settled: float | None
    last: float | None
    slack: float
    judged: bool = True  # False for a role in DATA_HOLDERS
    flat: bool = field(init=False)

    def __post_init__(self) -> None:
        ok = self.settled is None or self.last is None or self.last <= FLAT_RATIO * self.settled + self.slack
        object.__setattr__(self, "flat", ok)

    def to_json(self) -> dict[str, Any]:
        """The summary's form (soak.json `series` items)."""
        return {"series": self.series, "second_quarter_median": self.settled, "last_quarter_median": self.last,
                "slack": self.slack, "flat": self.flat, "judged": self.judged}


def series(samples: list[Sample]) -> dict[str, list[tuple[float, float]]]:
    """Each charted series as (seconds, value) points: `pss <role>` in MiB, and the three lags."""
    out: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        for role, nbytes in s.pss.items():
            out.setdefault(f"pss {role}", []).append((s.at, nbytes / 2**20))
        for name, value in (("replica lag max", s.replica_lag_max_s), ("replica lag median", s.replica_lag_median_s),
                            ("capture lag", s.capture_lag_s)):
            if value is not None:
                out.setdefault(name, []).append((s.at, value))
    return out


def flatness(samples: list[Sample]) -> list[Flatness]:
    """Per series, the second quarter's median against the last quarter's (quarters of the soak's time)."""
    if not samples:
        return []
    end = samples[-1].at
    verdicts = []
    for name, points in sorted(series(samples).items()):
        settled = [v for at, v in points if end / 4 <= at < end / 2]
        last = [v for at, v in points if at >= 3 * end / 4]
        slack = PSS_SLACK / 2**20 if name.startswith("pss ") else LAG_SLACK_S
        verdicts.append(Flatness(name, statistics.median(settled) if settled else None,
                                 statistics.median(last) if last else None, slack,
                                 judged=name.removeprefix("pss ") not in DATA_HOLDERS))
    return verdicts
