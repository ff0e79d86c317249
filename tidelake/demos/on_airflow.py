"""`make demo` and `make up`: the production path on one machine, orchestrated by Airflow.

Stages, each with a deadline and its own log file under <workdir>/logs:
  1. `tidelake sim` as a child process: PD + 3 TiKV stores on loopback, the `mixed` workload at
     2 txn/s (DML of every handle kind, a DDL every ~100 s, lock-holding txns, hot keys) and
     light region faults (splits, merges, leader transfers).
  2. A changefeed.toml pointing at it. Its start ts is taken BEFORE the simulator starts, so the
     puller sees every CREATE TABLE (tables that exist before a changefeed's start need
     `tidelake bootstrap`); syncpoints every minute.
  3. `airflow standalone` (SQLite, LocalExecutor, simple auth manager) with the repo's DAGs and
     plugins, examples off, spark_default = local[*], DAGs unpaused: tidelake_puller runs
     continuously, tidelake_merge every minute (spark-submit per run).
  4. Traffic for a while, then wait until every replicated table is merged past a target TSO.
  5. `tidelake verify` (replica at checkpoint == snapshot read of the simulator at it) and a summary.
  6. Shut down: DAGs paused, Airflow and the simulator terminated, then every process that was
     in their trees (task processes and spark-submit JVMs run in their own process groups, so
     terminating the parents alone would orphan them). `make up` waits for Ctrl-C before this.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidelake import tso
from tidelake.errors import InputError, TidelakeError

REPO = Path(__file__).resolve().parent.parent
CHANGEFEED_ID = "demo"
DATABASE = "demo"
# The workload's tables of every handle kind (int PK, clustered common handle, _tidb_rowid), a
# range-partitioned one and one with every column type; the DDLs the workload runs on them
# (columns, indexes, truncates, partitions) are replicated, its scratch tables are not, which
# keeps the Spark work of a first demo within minutes on a laptop.
TABLES = ("orders", "accounts", "events", "metrics", "type_zoo")
DEMO_DAGS = ("tidelake_puller", "tidelake_merge")
PASSWORDS_FILE = "simple_auth_manager_passwords.json.generated"  # facts/stack.md §6
# Files and folders the demo owns in its workdir: only these are ever removed.
OWNED = ("lake", "airflow_home", "logs", "changefeed.toml", "cluster.json")


class StageFailed(TidelakeError):
    """A demo stage did not finish: names the stage and the log to read."""

    def __init__(self, stage: str, message: str, log: Path | None = None) -> None:
        where = f" (log: {log})" if log is not None else ""
        super().__init__(f"stage '{stage}' failed: {message}{where}")
        self.stage = stage


@dataclass(frozen=True)
class DemoOptions:
    workdir: Path = REPO / ".tidelake" / "airflow-demo"
    traffic_s: float = 30.0
    keep_running: bool = False
    port: int = 8080
    seed: int = 1
    workload: str = "mixed"
    rate: float = 2.0
    faults: str = "light"
    merge_schedule: str = "1m"
    syncpoint_interval: str = "1m"
    startup_timeout_s: float = 600.0
    merge_timeout_s: float = 1200.0


@dataclass
class DemoPaths:
    workdir: Path

    @property
    def lake(self) -> Path:
        return self.workdir / "lake"

    @property
    def airflow_home(self) -> Path:
        return self.workdir / "airflow_home"

    @property
    def logs(self) -> Path:
        return self.workdir / "logs"

    @property
    def config(self) -> Path:
        return self.workdir / "changefeed.toml"

    @property
    def cluster_info(self) -> Path:
        return self.workdir / "cluster.json"

    def reset(self) -> None:
        """Remove what a previous demo left (only the demo's own files), then make the folders."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        for name in OWNED:
            path = self.workdir / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        for folder in (self.lake, self.airflow_home, self.logs):
            folder.mkdir()


# --- what the demo writes ---------------------------------------------------------------------


def changefeed_toml(pd: str, lake: Path, start_ts: int, syncpoint_interval: str) -> str:
    """The demo changefeed: the workload's database, from `start_ts`, one Spark job per merge run
    (a 2-core laptop runs one JVM well, not four)."""
    return (
        "# Written by `make demo` (tidelake.demos.on_airflow).\n"
        f'[changefeed]\nid = "{CHANGEFEED_ID}"\nstart_ts = {start_ts}\n\n'
        f'[upstream]\npd = ["{pd}"]\ngc_ttl = "1h"\n\n'
        f"[filter]\nrules = {json.dumps([f'{DATABASE}.{t}' for t in TABLES])}\n\n"
        f'[lake]\nroot = "{lake}"\n\n'
        '[puller]\nflush_interval = "1s"\n\n'
        f'[merge]\nsyncpoint_interval = "{syncpoint_interval}"\nparallel_jobs = 1\n'
    )


def sim_command(options: DemoOptions, info_file: Path) -> list[str]:
    return [
        sys.executable, "-m", "tidelake", "sim", "--workload", options.workload, "--rate", str(options.rate),
        "--faults", options.faults, "--seed", str(options.seed), "--database", DATABASE,
        "--info-file", str(info_file), "--progress-interval", "30",
        # verify reads the upstream at each replica's checkpoint, which trails the puller by the
        # merge schedule; TiDB's 10m default could collect that history on a slow machine.
        "--gc-life-time", "2h",
    ]


def airflow_env(paths: DemoPaths, port: int, merge_schedule: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment of `airflow standalone`: everything set here, nothing in a global airflow.cfg,
    and no AIRFLOW_* setting inherited from the caller's shell (another deployment's DB, auth or
    connections would silently change the demo)."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("AIRFLOW")}
    bin_dir = str(Path(sys.executable).parent)  # spark-submit comes with the venv's pyspark (facts/stack.md §9)
    env.update({
        "PATH": os.pathsep.join([bin_dir, env.get("PATH", "")]),
        "AIRFLOW_HOME": str(paths.airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # unpaused once the API server is up
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{paths.airflow_home / 'airflow.db'}",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(paths.airflow_home / PASSWORDS_FILE),
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://localhost:{port}",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://localhost:{port}/execution/",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
        "TIDELAKE_CONFIG": str(paths.config),
        "TIDELAKE_MERGE_SCHEDULE": merge_schedule,
        "TIDELAKE_SPARK_CONF": json.dumps({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}),
        "PYSPARK_PYTHON": sys.executable,
    })
    return env


def free_port(preferred: int) -> int:
    """`preferred` if nothing listens there, else any free port (another Airflow may own 8080)."""
    for port in (preferred, 0):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise InputError("no free TCP port for the Airflow UI")


# --- child processes --------------------------------------------------------------------------


class Child:
    """A child process in its own session, output to a log file; stopped with its whole tree."""

    def __init__(self, name: str, command: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.log = log
        self._out = log.open("ab")
        self.process = subprocess.Popen(command, stdout=self._out, stderr=subprocess.STDOUT, env=env,
                                        cwd=REPO, start_new_session=True)

    def check(self, stage: str) -> None:
        code = self.process.poll()
        if code is not None:
            raise StageFailed(stage, f"{self.name} exited with code {code}", self.log)

    def tree(self) -> list[Any]:
        """This process and every descendant now (psutil is an Airflow dependency)."""
        import psutil

        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def stop(self, grace_s: float = 60.0) -> None:
        stop_tree(self.tree(), grace_s)
        self.process.wait(timeout=10)
        self._out.close()


def stop_tree(processes: list[Any], grace_s: float) -> None:
    """SIGTERM the root (it shuts its children down in order), then SIGTERM what is left of the
    tree as it was, then SIGKILL: nothing from the tree outlives this call."""
    import psutil

    def signal_all(procs: list[Any], sig: int) -> None:
        for proc in procs:
            try:
                proc.send_signal(sig)
            except psutil.NoSuchProcess:
                pass

    if not processes:
        return
    signal_all(processes[:1], signal.SIGTERM)
    psutil.wait_procs(processes[:1], timeout=grace_s)
    left = [p for p in processes if p.is_running()]
    signal_all(left, signal.SIGTERM)
    _, left = psutil.wait_procs(left, timeout=10)
    signal_all(left, signal.SIGKILL)
    psutil.wait_procs(left, timeout=10)


def wait_for(stage: str, ready: Callable[[], Any], timeout_s: float, log: Path | None,
             checks: Iterable[Callable[[str], None]] = (), interval_s: float = 2.0,
             waiting: Callable[[], str] | None = None) -> Any:
    """Poll `ready` until it returns something truthy; the children's checks run every round so a
    crashed process fails the stage at once, not at its deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        for check in checks:
            check(stage)
        result = ready()
        if result:
            return result
        if time.monotonic() > deadline:
            detail = f": {waiting()}" if waiting is not None else ""
            raise StageFailed(stage, f"timed out after {timeout_s:.0f}s{detail}", log)
        time.sleep(interval_s)


# --- Airflow's REST API -----------------------------------------------------------------------


class AirflowApi:
    """The few REST calls the demo makes (facts/stack.md §6: JWT from /auth/token)."""

    def __init__(self, base_url: str, passwords_file: Path) -> None:
        self.base_url = base_url
        self.passwords_file = passwords_file
        self._token: str | None = None

    def healthy(self) -> bool:
        try:
            health = self._call("GET", "/api/v2/monitor/health", auth=False)
        except (OSError, urllib.error.URLError, ValueError):
            return False
        return all(health.get(part, {}).get("status") == "healthy" for part in ("metadatabase", "scheduler"))

    def password(self) -> str:
        return json.loads(self.passwords_file.read_text())["admin"]

    def dag(self, dag_id: str) -> dict | None:
        try:
            return self._call("GET", f"/api/v2/dags/{dag_id}")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self._call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": paused})

    def run_states(self, dag_id: str) -> dict[str, int]:
        runs = self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100")["dag_runs"]
        counts: dict[str, int] = {}
        for run in runs:
            counts[run["state"]] = counts.get(run["state"], 0) + 1
        return counts

    def _call(self, method: str, path: str, body: dict | None = None, auth: bool = True) -> Any:
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self._login()}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def _login(self) -> str:
        if self._token is None:
            body = json.dumps({"username": "admin", "password": self.password()}).encode()
            request = urllib.request.Request(self.base_url + "/auth/token", data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                self._token = json.loads(response.read())["access_token"]
        return self._token


# --- the lake's side --------------------------------------------------------------------------


@dataclass
class MergeProgress:
    """Where the replicas stand against the target: the tables still behind it."""

    tables: dict[str, int | None] = field(default_factory=dict)  # db.table -> checkpoint (None: no replica)
    stopped: dict[str, str] = field(default_factory=dict)

    def behind(self, target: int) -> list[str]:
        return sorted(t for t, c in self.tables.items() if t not in self.stopped and (c is None or c < target))

    def describe(self, target: int) -> str:
        behind = self.behind(target)
        now = tso.compose(int(time.time() * 1000))
        lags = [tso.lag_seconds(self.tables[t], now) for t in behind if self.tables[t] is not None]
        worst = f", worst lag {max(lags):.0f}s" if lags else ""
        return f"{len(self.tables) - len(behind)}/{len(self.tables)} tables past the target{worst}"


def merge_progress(lake: Path) -> MergeProgress:
    """Checkpoint of every live replicated table, read from the lake (no Spark)."""
    from tidelake.lake.checkpoint import read_checkpoint
    from tidelake.lake.layout import LakeLayout
    from tidelake.lake.replica_catalog import STATE_STOPPED, ReplicaCatalog
    from tidelake.lake.schema_history import SchemaHistory

    layout = LakeLayout(str(lake))
    history = SchemaHistory.load(layout)
    entries = ReplicaCatalog(layout).entries()
    progress = MergeProgress()
    for key in history.live_tables():
        name = ".".join(history.current_name(key))
        entry = entries.get(key)
        progress.tables[name] = None if entry is None else read_checkpoint(entry.path)
        if entry is not None and entry.state == STATE_STOPPED:
            progress.stopped[name] = entry.reason or "stopped"
    return progress


def puller_started(lake: Path) -> bool:
    from deltalake.exceptions import DeltaError

    from tidelake.lake.layout import LakeLayout
    from tidelake.lake.watermarks import read_watermarks

    try:
        return read_watermarks(LakeLayout(str(lake))).ddl_resolved > 0
    except (OSError, DeltaError, InputError):
        return False


# --- the run ----------------------------------------------------------------------------------


class Say:
    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self, text: str) -> None:
        print(f"[demo {time.monotonic() - self.started:6.0f}s] {text}", flush=True)


def run(options: DemoOptions, say: Say | None = None) -> int:
    """The whole demo; 0 when every replica verified, 1 otherwise. Always shuts everything down."""
    say = say or Say()
    if options.traffic_s <= 0:
        raise InputError(f"--traffic must be above zero seconds, got {options.traffic_s}")
    paths = DemoPaths(options.workdir)
    paths.reset()
    port = free_port(options.port)
    children: list[Child] = []
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (a CI timeout, `kill`) ends the demo like Ctrl-C, through the shutdown below: the
        # children live in their own sessions and would otherwise outlive it.
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        start_ts = tso.compose(int(time.time() * 1000))  # before the first CREATE (module doc, stage 2)
        say(f"starting the simulated cluster ({options.workload} workload at {options.rate:g} txn/s, "
            f"{options.faults} faults); log: {paths.logs / 'sim.log'}")
        sim = Child("tidelake sim", sim_command(options, paths.cluster_info), paths.logs / "sim.log")
        children.append(sim)
        wait_for("simulator", paths.cluster_info.exists, 120, sim.log, [sim.check])
        pd = json.loads(paths.cluster_info.read_text())["pd"][0]
        paths.config.write_text(changefeed_toml(pd, paths.lake, start_ts, options.syncpoint_interval))
        say(f"simulator up: PD {pd}; changefeed config {paths.config}")

        say(f"starting Airflow standalone on port {port} (first start migrates its DB: a minute or two); "
            f"log: {paths.logs / 'airflow.log'}")
        airflow = Child("airflow standalone", [sys.executable, "-m", "airflow", "standalone"],
                        paths.logs / "airflow.log", airflow_env(paths, port, options.merge_schedule))
        children.append(airflow)
        checks = [sim.check, airflow.check]
        api = AirflowApi(f"http://localhost:{port}", paths.airflow_home / PASSWORDS_FILE)
        wait_for("airflow startup", lambda: api.healthy() and api.passwords_file.exists(), options.startup_timeout_s,
                 airflow.log, checks, 3)
        say("Airflow is up; waiting for the DAGs to be parsed")
        for dag_id in DEMO_DAGS:
            wait_for(f"parse {dag_id}", lambda d=dag_id: api.dag(d), options.startup_timeout_s, airflow.log, checks, 3)
            api.set_paused(dag_id, False)
        say(f"DAGs unpaused: tidelake_puller (continuous), tidelake_merge (every {options.merge_schedule}); "
            f"UI http://localhost:{port}")
        wait_for("puller start", lambda: puller_started(paths.lake), options.startup_timeout_s,
                 paths.airflow_home / "logs", checks, 3)
        target = tso.compose(int((time.time() + options.traffic_s) * 1000))
        say(f"puller is landing changes; target: every table merged past TSO {target} "
            f"({tso.to_datetime(target):%H:%M:%S} UTC, {options.traffic_s:.0f}s from now)")
        _wait_merged(api, paths, target, options, checks, say)
        api.set_paused("tidelake_merge", True)  # verify gets the CPU; the puller keeps up
        say("verifying every replica against a snapshot read of the simulator at its checkpoint")
        verified = _verify(paths)
        _summary(api, paths, port, say)
        say("demo passed: every replica equals the simulator at its checkpoint" if verified
            else f"demo failed: verify found differences (see above and {paths.logs / 'verify.log'})")
        if options.keep_running:
            api.set_paused("tidelake_merge", False)
            say("running until Ctrl-C (merges every minute; `tidelake status --config "
                f"{paths.config}` shows the lag)")
            _wait_for_interrupt(checks)
        return 0 if verified else 1
    finally:
        _shutdown(children, port, paths, say)


def _wait_merged(api: AirflowApi, paths: DemoPaths, target: int, options: DemoOptions,
                 checks: list[Callable[[str], None]], say: Say) -> None:
    last_line = [0.0]
    progress = [MergeProgress()]

    def done() -> bool:
        progress[0] = merge_progress(paths.lake)
        if time.monotonic() - last_line[0] >= 20:
            last_line[0] = time.monotonic()
            runs = ", ".join(f"{n} {s}" for s, n in sorted(api.run_states("tidelake_merge").items())) or "none yet"
            say(f"merge: {progress[0].describe(target)}; tidelake_merge runs: {runs}")
        return bool(progress[0].tables) and not progress[0].behind(target)

    wait_for("merge past the target", done, options.traffic_s + options.merge_timeout_s,
             paths.airflow_home / "logs", checks, 5,
             waiting=lambda: f"tables behind: {', '.join(progress[0].behind(target)) or 'no tables replicated yet'}")
    for table, reason in progress[0].stopped.items():
        say(f"{table}: replication stopped: {reason}")
    say(f"every table is merged past {target}")


def tool_env() -> dict[str, str]:
    """Environment of the `tidelake` commands the demo runs: their rich tables are captured, so
    they get the terminal's width (or a wide one when the demo itself is piped)."""
    return {**os.environ, "COLUMNS": str(shutil.get_terminal_size((160, 40)).columns)}


def _verify(paths: DemoPaths) -> bool:
    """`tidelake verify` prints its table to the console and a copy goes to logs/verify.log."""
    command = [sys.executable, "-m", "tidelake", "verify", "--config", str(paths.config)]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=tool_env())
    (paths.logs / "verify.log").write_text(result.stdout + result.stderr)
    print(result.stdout, end="", flush=True)
    if result.returncode == 2:
        raise StageFailed("verify", result.stderr.strip().splitlines()[-1], paths.logs / "verify.log")
    return result.returncode == 0


def _summary(api: AirflowApi, paths: DemoPaths, port: int, say: Say) -> None:
    from tidelake.lake.layout import LakeLayout
    from tidelake.lake.syncpoints import read_syncpoints

    status = subprocess.run([sys.executable, "-m", "tidelake", "status", "--config", str(paths.config)],
                            cwd=REPO, capture_output=True, text=True, env=tool_env())
    print(status.stdout, end="", flush=True)
    cuts = read_syncpoints(LakeLayout(str(paths.lake)))
    runs = ", ".join(f"{n} {s}" for s, n in sorted(api.run_states("tidelake_merge").items()))
    say(f"tidelake_merge runs: {runs}; syncpoints recorded: {len(cuts)}"
        + (f" (latest {cuts[-1].ts}: `tidelake snapshot-at {cuts[-1].ts} --config {paths.config}`)" if cuts else ""))
    say(f"Airflow UI: http://localhost:{port}  login: admin / {api.password()}  "
        f"(Browse > Replication: lag, pending DDL, syncpoints; JSON at /tidelake/api/status)")
    say(f"logs: {paths.logs} (sim, airflow, verify); task logs: {paths.airflow_home / 'logs'}")


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def _wait_for_interrupt(checks: list[Callable[[str], None]]) -> None:
    """`make up`: Ctrl-C or SIGTERM is the normal end."""
    try:
        while True:
            for check in checks:
                check("running")
            time.sleep(5)
    except KeyboardInterrupt:
        pass


def _shutdown(children: list[Child], port: int, paths: DemoPaths, say: Say) -> None:
    """Pause the DAGs (no new task starts), stop Airflow with its task processes and Spark JVMs,
    then the simulator."""
    say("shutting down: Airflow (scheduler, dag-processor, triggerer, api-server, tasks, Spark), then the simulator")
    api = AirflowApi(f"http://localhost:{port}", paths.airflow_home / PASSWORDS_FILE)
    for dag_id in DEMO_DAGS:
        try:
            api.set_paused(dag_id, True)
        except (OSError, urllib.error.URLError, ValueError, KeyError):
            break  # Airflow never came up or is gone: nothing to pause
    for child in reversed(children):
        child.stop()
    say("all demo processes stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tidelake.demos.on_airflow", description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=DemoOptions.workdir, help="lake, Airflow home and logs")
    parser.add_argument("--traffic", type=float, default=DemoOptions.traffic_s, metavar="S",
                        help="seconds of traffic before the target TSO (default 30)")
    parser.add_argument("--port", type=int, default=DemoOptions.port, help="Airflow UI port (default 8080, or a free one)")
    parser.add_argument("--keep-running", action="store_true", help="after verify, keep running until Ctrl-C (make up)")
    args = parser.parse_args(argv)
    try:
        return run(DemoOptions(workdir=args.workdir.resolve(), traffic_s=args.traffic, port=args.port,
                               keep_running=args.keep_running))
    except InputError as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 2
    except StageFailed as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("demo interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
