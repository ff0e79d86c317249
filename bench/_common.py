"""Shared bench helpers: the environment a number was measured in, RSS sampling, percentiles, tables.

A throughput figure means little without the machine, the load on it and the exact code: every
bench prints `environment()` first and its own command line, so a row in bench/README.md can be
reproduced and a regression can be told apart from a busy neighbour.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("grpcio", "protobuf", "pyarrow", "deltalake", "pyspark", "delta-spark")
MIB = 2**20


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_revision() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head


def environment() -> dict[str, object]:
    """Where and on what a result was measured; load average says how shared the machine was."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "-"
    return {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "host": platform.node(),
        "cpu": _cpu_model(),
        "cores": psutil.cpu_count(logical=True),
        "load_avg_1m": round(os.getloadavg()[0], 1),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "os": platform.platform(terse=True),
        "git": _git_revision(),
        "packages": versions,
        "command": " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv]),
    }


def print_environment(env: dict[str, object] | None = None) -> dict[str, object]:
    env = env or environment()
    pkgs = " ".join(f"{k}={v}" for k, v in env["packages"].items())  # type: ignore[union-attr]
    print(f"# {env['date_utc']} UTC  {env['host']}  {env['cpu']} x{env['cores']}  {env['memory_gib']} GiB  "
          f"load {env['load_avg_1m']}  python {env['python']}  git {env['git']}")
    print(f"# {pkgs}")
    print(f"# {env['command']}")
    return env


def rss_bytes(pid: int | None = None, children: bool = False) -> int:
    """Resident set size of a process (and its children, e.g. a JVM or a subprocess server)."""
    try:
        proc = psutil.Process(pid or os.getpid())
        total = proc.memory_info().rss
        if children:
            total += sum(c.memory_info().rss for c in proc.children(recursive=True))
        return total
    except psutil.NoSuchProcess:
        return 0


class RssSampler:
    """Samples a process's RSS on a thread; `peak` and `samples` (monotonic s, bytes) afterwards."""

    def __init__(self, pid: int | None = None, interval_s: float = 0.05) -> None:
        self.pid = pid or os.getpid()
        self.interval_s = interval_s
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    @property
    def peak(self) -> int:
        return max((b for _, b in self.samples), default=0)

    @property
    def first(self) -> int:
        return self.samples[0][1] if self.samples else 0

    def __enter__(self) -> RssSampler:
        self.samples.append((time.monotonic(), rss_bytes(self.pid)))  # `first` is the RSS at entry
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((time.monotonic(), rss_bytes(self.pid)))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), rss_bytes(self.pid)))
            self._stop.wait(self.interval_s)


class Timer:
    """Wall seconds and this process's CPU seconds (all threads) of a block; `cpu_share` below 1
    on a single-threaded block means the machine was busy, so read its rate with care."""

    def __enter__(self) -> Timer:
        self.wall_s = self.cpu_s = 0.0
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.perf_counter() - self._wall
        self.cpu_s = time.process_time() - self._cpu

    @property
    def cpu_share(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s else 0.0


def counts(text: str) -> list[int]:
    """An argparse type: a comma-separated list of counts, each at least 1 (`10,100`)."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of counts like 10,100") from None
    if min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every count must be at least 1")
    return values


def percentile(values: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile (p in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no samples")
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table, so bench output pastes into bench/README.md as is."""
    cells = [[_cell(v) for v in row] for row in rows]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def write_json(path: str | None, bench: str, env: dict[str, object], results: object) -> None:
    """Machine-readable results beside the printed table (`--json PATH`)."""
    if path:
        Path(path).write_text(json.dumps({"bench": bench, "environment": env, "results": results},
                                         indent=2, default=str) + "\n")
