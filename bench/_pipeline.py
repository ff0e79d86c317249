"""A simulator with its SQL front, the puller, then merge and verify: every step a `tidelake`
process as a user runs it, so a SQL client's load (sysbench, a corpus of scripts) ends in replicas
checked against the upstream.

    with Pipeline(workdir) as pipe:       # tidelake sim --workload none --sql-port P; tidelake pull
        ... load through 127.0.0.1:pipe.sql_port ...
        outcome = pipe.replicate()        # status until resolved past now, merge --until-ts, verify

Logs of every process and command are kept in workdir/logs.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidelake.errors import EXIT_TRY_LATER
from tidelake.config_writer import changefeed_document, write_config
from tidelake.demos.supervisor import Child, accepting, await_stage, free_port

MASTER = "local[2]"
STALL_S = 20.0  # a table's resolved ts unchanged this long while the DDL resolved ts passed the target


def tidelake(*args: str) -> list[str]:
    return [sys.executable, "-m", "tidelake", *args]


@dataclass
class Outcome:
    """What pull + merge + verify made of the load."""

    target_ts: int
    merge_rounds: int = 0
    replicas: int = 0
    behind: list[str] = field(default_factory=list)  # live tables whose checkpoint is short of target_ts
    stalled: list[str] = field(default_factory=list)  # tables whose resolved ts stopped below target_ts
    failed: dict[str, str] = field(default_factory=dict)  # table -> the error its merge ended with
    stopped: dict[str, str] = field(default_factory=dict)  # table -> reason the merge stopped it
    verify_exit: int | None = None
    verify_tail: str = ""
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def verified(self) -> bool:
        return self.verify_exit == 0 and not (self.behind or self.stopped or self.stalled or self.failed)

    def to_json(self) -> dict:
        return {"target_ts": self.target_ts, "merge_rounds": self.merge_rounds, "replicas": self.replicas,
                "behind": self.behind, "stalled": self.stalled, "failed": self.failed, "stopped": self.stopped,
                "verify_exit": self.verify_exit,
                "verified": self.verified, "seconds": self.seconds}


class Pipeline:
    def __init__(self, workdir: Path, rules: tuple[str, ...] = ("*.*",), stores: int = 3,
                 preferred_sql_port: int = 4000, spark_lock: Path | None = None,
                 lake_root: str | None = None, lake: Mapping[str, Any] | None = None) -> None:
        self.workdir = workdir
        self.lake_root = lake_root or str(workdir / "lake")  # an s3:// root takes `lake`'s storage_options
        self.lake = lake
        self.logs = workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.rules = rules
        self.stores = stores
        self.sql_port = free_port(preferred_sql_port)
        self.config = workdir / "changefeed.toml"
        self.spark_lock = spark_lock  # merge and verify run under `flock` of it (a machine shared with Spark tests)
        self._children: list[Child] = []

    def __enter__(self) -> Pipeline:
        # SIGTERM unwinds like Ctrl-C, so the simulator and the puller are stopped with the run
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        info = self.workdir / "cluster.json"
        sim = Child("sim", tidelake("sim", "--workload", "none", "--stores", str(self.stores),
                                    "--sql-port", str(self.sql_port), "--info-file", str(info),
                                    "--gc-life-time", "2h", "--progress-interval", "30"), self.logs / "sim.log")
        self._children.append(sim)
        await_stage("sim", lambda: info.exists() and accepting(self.sql_port), 120, sim.log, checks=[sim.check],
                    interval_s=0.5)
        pd = json.loads(info.read_text())["pd"][0]
        doc = changefeed_document("sql", [pd], self.lake_root, rules=list(self.rules), gc_ttl="2h",
                                  puller={"flush_interval": "500ms"}, lake=self.lake)
        write_config(self.config, doc)
        puller = Child("puller", tidelake("pull", "--config", str(self.config), "--progress-interval", "30"),
                       self.logs / "puller.log")
        self._children.append(puller)
        await_stage("puller", lambda: self.status().get("ddl_resolved_ts"), 180, puller.log, checks=self._checks())

    def _checks(self) -> list:
        return [c.check for c in self._children]

    def check(self, stage: str) -> None:
        """Fail `stage` when the simulator or the puller has exited."""
        for check in self._checks():
            check(stage)

    def close(self) -> None:
        for child in reversed(self._children):
            child.stop(grace_s=30)
        self._children.clear()

    def run(self, name: str, *args: str, timeout_s: float = 3600, spark: bool = False) -> subprocess.CompletedProcess:
        """One `tidelake` command to completion; its output is kept in logs/<name>.log."""
        command = tidelake(*args)
        if spark and self.spark_lock is not None:
            command = ["flock", str(self.spark_lock), *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        (self.logs / f"{name}.log").write_text(done.stdout + done.stderr)
        return done

    def status(self, exact: bool = False) -> dict:
        """`tidelake status --json` ({} while it fails); `exact` reads every replica's own log."""
        args = ("status", "--config", str(self.config), "--json") + (("--exact",) if exact else ())
        done = self.run("status", *args, timeout_s=300)
        return json.loads(done.stdout) if done.returncode == 0 else {}

    def replicate(self, merge_rounds: int = 6) -> Outcome:
        """Pull up to now, merge every replica to it, verify them all."""
        started = time.monotonic()
        target = self.status()["now_ts"]
        outcome = Outcome(target)

        seen: dict[int, tuple[int, float]] = {}  # table key -> (resolved ts, when it last moved)

        def resolved() -> bool:
            """DDL resolved past the target, and every live table too, or stalled below it: a table
            whose physical ids all left the feed (a job the replica side does not follow yet) keeps
            its last resolved ts; it is reported, not waited for."""
            doc = self.status()
            if (doc.get("ddl_resolved_ts") or 0) < target:
                return False
            now = time.monotonic()
            waiting = []
            for t in doc.get("tables", []):
                if t["state"] in ("dropped", "stopped") or (t["resolved_ts"] or 0) >= target:
                    continue
                ts = t["resolved_ts"] or 0
                last = seen.get(t["table_key"])
                if last is None or last[0] != ts:
                    seen[t["table_key"]] = (ts, now)
                if now - seen[t["table_key"]][1] < STALL_S:
                    waiting.append(t["table"])
                elif t["table"] not in outcome.stalled:
                    outcome.stalled.append(t["table"])
            return not waiting

        outcome.seconds["pull"] = round(time.monotonic() - started, 1)
        started = time.monotonic()
        for round_no in range(1, merge_rounds + 1):
            outcome.merge_rounds = round_no
            done = self.run(f"merge-{round_no}", "merge", "--config", str(self.config), "--until-ts", str(target),
                            "--master", MASTER, spark=True)
            doc = self.status(exact=True)
            tables = doc.get("tables", [])
            outcome.stopped = {t["table"]: t.get("reason") or t.get("last_error") or ""
                               for t in tables if t["state"] == "stopped"}
            if done.returncode not in (0, EXIT_TRY_LATER):  # blocked: the next round tries again
                failed = _failed_merges(done.stdout + done.stderr)
                if not failed and not outcome.stopped:  # exit 1 also says a table stopped: reported, not fatal
                    raise RuntimeError(f"tidelake merge exited {done.returncode}; see {self.logs}/merge-{round_no}.log")
                outcome.failed.update(failed)
            live = [t for t in tables if t["state"] not in ("dropped", "stopped")]
            outcome.replicas = len(live)
            outcome.behind = sorted(t["table"] for t in live if (t["checkpoint_ts"] or 0) < target
                                    and t["table"] not in outcome.stalled and t["table"] not in outcome.failed)
            if not outcome.behind:
                break
        outcome.seconds["merge"] = round(time.monotonic() - started, 1)
        started = time.monotonic()
        done = self.run("verify", "verify", "--config", str(self.config), spark=True)
        outcome.verify_exit = done.returncode
        outcome.verify_tail = (done.stdout + done.stderr)[-3000:]
        outcome.seconds["verify"] = round(time.monotonic() - started, 1)
        return outcome


def _failed_merges(output: str) -> dict[str, str]:
    """`merge of db.t failed` lines of a merge run, each with the last line of its traceback."""
    failed: dict[str, str] = {}
    current = None
    for line in output.splitlines():
        match = re.match(r"merge of (\S+) failed", line)
        if match:
            current = match.group(1)
            failed[current] = ""
        elif current is not None and re.match(r"^[\w.]+(Error|Exception|Bootstrap)\b.*?:", line):
            failed[current] = line.strip()[:300]
            current = None
    return failed


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")

