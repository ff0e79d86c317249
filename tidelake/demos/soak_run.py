"""A soak's traffic phase (tidelake.demos.soak): the integration's `during_traffic` that samples
every --sample-every seconds and strikes the next fault of a rotation every --fault-every seconds
until --minutes have passed, then writes soak.json and soak.html. Owner: the soak.
"""

from __future__ import annotations

import http.client
import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from tidelake.demos.on_airflow import RunningAirflow, Say
from tidelake.demos.orchestrator_faults import Fault
from tidelake.demos.soak_chart import write_page
from tidelake.demos.soak_samples import Sample, flatness, series, take_sample
from tidelake.errors import InputError
from tidelake.lake.layout import LakeLayout

@dataclass(frozen=True)
class SoakOptions:
    minutes: float = 120.0
    fault_every_s: float = 300.0
    sample_every_s: float = 15.0

    def __post_init__(self) -> None:
        if self.minutes <= 0 or self.fault_every_s <= 0 or self.sample_every_s <= 0:
            raise InputError(f"soak: --minutes, --fault-every and --sample-every must be above zero, got "
                             f"{self.minutes:g}, {self.fault_every_s:g}, {self.sample_every_s:g}")

    @property
    def traffic_s(self) -> float:
        return self.minutes * 60


class Soak:
    """The integration's `during_traffic`: samples, and the faults in rotation, until the end."""

    def __init__(self, options: SoakOptions, faults: list[tuple[str, Fault]], lake_root: str, folder: Path,
                 run_id: str) -> None:
        self.options = options
        self._faults = faults
        self._layout = LakeLayout(lake_root)
        self.folder = folder
        self.run_id = run_id
        self.samples: list[Sample] = []
        self.struck: list[tuple[float, str]] = []

    def __call__(self, say: Say, airflow: RunningAirflow) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        end = started + self.options.traffic_s
        next_fault = started + self.options.fault_every_s
        turn = 0
        with (self.folder / "soak.jsonl").open("w") as out:
            while time.monotonic() < end:
                for check in airflow.checks:
                    check("soak")
                self._sample(out, started, airflow)
                if time.monotonic() >= next_fault and self._faults:
                    name, fault = self._faults[turn % len(self._faults)]
                    turn += 1
                    say(f"soak: fault {turn} ({name}) at {(time.monotonic() - started) / 60:.1f} min")
                    self.struck.append((time.monotonic() - started, name))
                    fault(say, airflow)
                    next_fault = time.monotonic() + self.options.fault_every_s
                time.sleep(max(0.0, min(self.options.sample_every_s, end - time.monotonic())))
            self._sample(out, started, airflow)
        say(f"soak: {len(self.samples)} samples, {len(self.struck)} faults over {self.options.minutes:g} min; "
            f"{self.summary_line()}")

    def _sample(self, out, started: float, airflow: RunningAirflow) -> None:
        sample = take_sample(self.run_id, self._layout, started, _task_ids(airflow))
        self.samples.append(sample)
        out.write(json.dumps(sample.to_json()) + "\n")
        out.flush()

    def summary_line(self) -> str:
        grown = [v.series for v in flatness(self.samples) if v.judged and not v.flat]
        return "every series flat" if not grown else f"grew: {', '.join(grown)}"

    def write_results(self, verified: bool) -> bool:
        """soak.json and soak.html; True when verify passed and every judged series stayed flat."""
        verdicts = flatness(self.samples)
        flat = all(v.flat for v in verdicts if v.judged)
        summary = {"run_id": self.run_id, "minutes": self.options.minutes, "fault_every_s": self.options.fault_every_s,
                   "sample_every_s": self.options.sample_every_s, "samples": len(self.samples),
                   "faults": [{"at_s": round(at, 1), "fault": name} for at, name in self.struck],
                   "series": [v.to_json() for v in verdicts], "flat": flat, "verified": verified}
        (self.folder / "soak.json").write_text(json.dumps(summary, indent=2) + "\n")
        write_page(self.folder / "soak.html", series(self.samples), self.struck, verdicts,
                   f"tidelake soak {self.run_id}: {self.options.minutes:g} min")
        return flat and verified


def _task_ids(airflow: RunningAirflow) -> dict[str, str]:
    """Running task instance id -> task id, to name the task processes; {} while the API is down."""
    try:
        running = [*airflow.api.running_tasks(airflow.dags.merge), *airflow.api.running_tasks(airflow.dags.puller)]
    except (OSError, ValueError, KeyError, http.client.HTTPException):
        return {}
    return {t["id"]: t["task_id"] for t in running}


def new_run_id() -> str:
    """The RUN_MARK value of one soak (tidelake.demos.soak_samples)."""
    return uuid.uuid4().hex[:12]
