"""Many schedules in a row (seeds S, S+1, ...): per-schedule lines, a summary, a JSON record."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tidelake.errors import InputError
from tidelake.nemesis.plan import LEVELS, PULLER_MODES, WORKLOADS
from tidelake.nemesis.schedule import ScheduleResult, run_schedule
from tidelake.spark.spark_session import get_session


@dataclass(frozen=True)
class BatchOptions:
    seed: int
    schedules: int
    workload: str = "bank"
    level: str = "landing"
    duration_s: float = 3.0
    pullers: str = "thread"
    shards: int = 1

    def __post_init__(self) -> None:
        if self.schedules < 1:
            raise InputError(f"--schedules must be at least 1, got {self.schedules}")
        if self.workload not in WORKLOADS:
            raise InputError(f"--workload {self.workload!r}: known are {', '.join(WORKLOADS)}")
        if self.level not in LEVELS:
            raise InputError(f"--level {self.level!r}: known are {', '.join(LEVELS)}")
        if not 0 < self.duration_s <= 600:
            raise InputError(f"--duration must be in (0, 600] seconds, got {self.duration_s}")
        if self.pullers not in PULLER_MODES:
            raise InputError(f"--pullers {self.pullers!r}: known are {', '.join(PULLER_MODES)}")
        if not 1 <= self.shards <= 8:
            raise InputError(f"--shards must be in [1, 8], got {self.shards}")
        if self.shards > 1 and self.pullers != "process":
            raise InputError(f"--shards {self.shards} runs the changefeed as {self.shards} `tidelake pull` processes: "
                             "add --pullers process")
        if self.pullers == "process" and self.level != "landing":
            raise InputError("--pullers process runs landing-level schedules only: drop --level apply")

    def rerun_command(self, seed: int) -> str:
        return (f"tidelake nemesis --seed {seed} --schedules 1 --workload {self.workload} --level {self.level} "
                f"--duration {self.duration_s:g}"
                + (f" --pullers process --shards {self.shards}" if self.pullers == "process" else ""))


@dataclass
class BatchSummary:
    options: BatchOptions
    results: list[ScheduleResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def faults(self) -> Counter[str]:
        return sum((r.faults for r in self.results), Counter())

    @property
    def puller_kills(self) -> Counter[str]:
        return sum((r.puller_kills for r in self.results), Counter())

    @property
    def anomalies(self) -> Counter[str]:
        return sum((Counter(r.anomalies_by_kind()) for r in self.results), Counter())

    @property
    def ddls(self) -> Counter[str]:
        """DDL issued by kind over every schedule (the workload's DDL coverage)."""
        return sum((r.ddls for r in self.results), Counter())

    @property
    def failed_seeds(self) -> list[int]:
        return [r.plan.seed for r in self.results if not r.ok]

    def to_json(self) -> dict[str, Any]:
        return {
            "options": {"seed": self.options.seed, "schedules": self.options.schedules,
                        "workload": self.options.workload, "level": self.options.level,
                        "duration_s": self.options.duration_s, "pullers": self.options.pullers,
                        "shards": self.options.shards},
            "schedules_run": len(self.results),
            "seconds": round(self.seconds, 1),
            "load_average": list(os.getloadavg()),
            "faults": dict(sorted(self.faults.items())),
            "puller_kills": dict(sorted(self.puller_kills.items())),
            "skipped": dict(sorted(sum((r.skipped for r in self.results), Counter()).items())),
            "merge_crashes": dict(sorted(sum((r.merge_crashes for r in self.results), Counter()).items())),
            "merge_write_errors": dict(sorted(sum((r.merge_write_errors for r in self.results), Counter()).items())),
            "maintenance_runs": sum(r.maintained for r in self.results),
            "checkpoints_checked": sum(r.checkpoints_checked for r in self.results),
            "syncpoints_checked": sum(r.syncpoints_checked for r in self.results),
            "values_checked": sum(r.values_checked for r in self.results),
            "unchecked": dict(sorted(sum((r.unchecked for r in self.results), Counter()).items())),
            "anomalies": dict(sorted(self.anomalies.items())),
            "ddls": dict(sorted(self.ddls.items())),
            "failed_seeds": self.failed_seeds,
            "results": [{
                "seed": r.plan.seed, "seconds": round(r.seconds, 2), "txns": r.txns, "ddls": dict(sorted(r.ddls.items())),
                "faults": dict(sorted(r.faults.items())), "missed": dict(sorted(r.missed.items())),
                "puller_kills": dict(sorted(r.puller_kills.items())), "skipped": dict(sorted(r.skipped.items())),
                "anomalies": r.anomalies_by_kind(),
                "watermarks_checked": r.watermarks_checked, "totals_checked": r.totals_checked,
                "copies_checked": r.copies_checked,
                "removed_checked": r.removed_checked,
                "checkpoints_checked": r.checkpoints_checked, "syncpoints_checked": r.syncpoints_checked,
                "values_checked": r.values_checked, "unchecked": dict(sorted(r.unchecked.items())),
                "merge_crashes": dict(sorted(r.merge_crashes.items())),
                "merge_write_errors": dict(sorted(r.merge_write_errors.items())),
                "maintained": r.maintained,
                "first_anomalies": [a.__dict__ for a in r.anomalies[:5]],
                "rerun": self.options.rerun_command(r.plan.seed),
            } for r in self.results],
        }


def run_batch(options: BatchOptions, on_result: Callable[[ScheduleResult], None] = lambda r: None) -> BatchSummary:
    """Schedule i uses seed `seed + i`; each result is handed to `on_result` as it completes."""
    summary = BatchSummary(options)
    started = time.monotonic()
    spark = _spark() if options.level == "apply" else None
    for i in range(options.schedules):
        result = run_schedule(options.seed + i, options.workload, options.duration_s, spark=spark,
                              pullers=options.pullers, shards=options.shards)
        summary.results.append(result)
        summary.seconds = time.monotonic() - started
        on_result(result)
    return summary


def _spark() -> Any:
    """One local session for the batch, started before any gRPC thread (pyspark forks its JVM,
    unsafe in a busy multi-threaded process; see tidelake.demos.one_process)."""
    session = get_session("tidelake-nemesis", master="local[2]", extra_confs={"spark.ui.showConsoleProgress": "false"})
    session.sparkContext.setLogLevel("FATAL")  # the verdict is the check's; Spark's notices would bury the lines
    return session
