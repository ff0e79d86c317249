"""`make demo` and `make up`: the production path on one machine, orchestrated by Airflow: the
simulator with a workload and light faults, a warm Spark, Airflow standalone with the DAGs,
traffic until every table merged past a target, `tidelake verify`, then everything stopped by pid
and process tree. Each stage has a deadline and its own log.

More: docs/internals.md#on_airflow.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltalake.exceptions import DeltaError

from tidelake import tso
from tidelake.config import load_config
from tidelake.config_writer import changefeed_document, write_config
from tidelake.demos.airflow_api import AirflowApi
from tidelake.demos.airflow_components import AirflowComponents
from tidelake.demos.connection_form import check_connection_form
from tidelake.demos.installed_airflow import InstalledAirflow, check_installed, check_provider, write_dag_file
from tidelake.demos.supervisor import Child, StageFailed, await_stage, exit_code, free_port
from tidelake.errors import InputError
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import read_watermarks
from tidelake.orchestration.changefeeds import CONFIG_ENV
from tidelake.orchestration.plugin_views import PAGE_PATH, URL_PREFIX
from tidelake.orchestration.writer_pool import writer_pool
from tidelake.spark.connect_server import ServerSettings, accepting, server_command
from tidelake.spark.s3a import lake_packages, s3a_confs, s3a_credential_env
from tidelake.status.status_report import collect_status
from tidelake.syncpoint.records import read_syncpoints

REPO = Path(__file__).resolve().parents[2]
CHANGEFEED_ID = "demo"
STATUS_PATH = f"{URL_PREFIX}/api/status"  # the Replication page's JSON
BOOTSTRAP_SPARK_CONN_ID = "spark_bootstrap"
DATABASE = "demo"
# The workload's tables of every handle kind (int PK, clustered common handle, _tidb_rowid), a
# range-partitioned one and one with every column type; the DDLs the workload runs on them
# (columns, indexes, truncates, partitions) are replicated, its scratch tables are not, which
# keeps the Spark work of a first demo within minutes on a laptop.
TABLES = ("orders", "accounts", "events", "metrics", "type_zoo")
PASSWORDS_FILE = "simple_auth_manager_passwords.json.generated"  # docs/stack.md#airflow-testing-dags-processes-local-auth
# Files and folders the demo owns in its workdir: only these are ever removed.
OWNED = ("lake", "airflow_home", "logs", "dags", "changefeed.toml", "cluster.json")
SPARK_CONNECT_PORT = 15002
# A cluster master gets none of the local confs (tidelake.spark.connect_server); a small one-machine
# cluster wants the same few partitions and one modest executor.
CLUSTER_CONFS = {"spark.sql.shuffle.partitions": "4", "spark.databricks.delta.snapshotPartitions": "2",
                 "spark.ui.enabled": "false", "spark.executor.memory": "1g", "spark.cores.max": "2",
                 "spark.driver.host": "127.0.0.1"}


@dataclass(frozen=True)
class AirflowDemoOptions:
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
    # [merge].run_on_new_data: besides the schedule, a merge run when new changes are covered by
    # the watermarks, at most this often (the triggerer watches the lake); None: schedule only.
    run_on_new_data: str | None = "15s"
    startup_timeout_s: float = 600.0
    merge_timeout_s: float = 1200.0
    warm_spark: bool = True
    # `make integration` (tidelake.demos.integration): an object-store lake, Airflow's metadata
    # DB elsewhere (with LocalExecutor), several puller shards, a fault while traffic runs.
    lake_root: str | None = None
    # [lake].aws_conn_id of the changefeed and that Airflow connection's fields (conn id, fields as
    # AIRFLOW_CONN_* JSON): the tasks' store settings; the secret must be in no task log after the run.
    lake_connection: tuple[str, dict[str, Any]] | None = None
    sql_alchemy_conn: str | None = None
    shards: int = 1
    during_traffic: Callable[[Say, RunningAirflow], None] | None = None
    during_bootstrap: Callable[[Say, RunningAirflow], None] | None = None  # once its run is triggered
    # Airflow as its four components under a supervisor that starts a dead one again
    # (tidelake.demos.airflow_components), with these extra AIRFLOW__* settings; False: `airflow standalone`.
    airflow_components: bool = False
    airflow_settings: tuple[tuple[str, str], ...] = ()
    spark_master: str | None = None  # a standalone cluster (spark://) instead of local[*]
    # Checks of the processes started around the demo (the integration's S3 server, its relay,
    # the Spark cluster): one that dies fails the running stage with its own log named.
    component_checks: tuple[Callable[[str], None], ...] = ()
    # Tasks of tidelake_merge that must have succeeded at least once before verify: the
    # integration's proof that merge and syncpoint ran where it put them (a run's merges can
    # all be folded into its syncpoint).
    required_tasks: tuple[str, ...] = ()
    # Then, before verify, each until its run succeeded: a manual tidelake_bootstrap of these
    # tables (outside the demo's filter: they join the running changefeed), and with
    # `maintenance` the scheduled run of tidelake_maintenance that unpausing it creates.
    bootstrap_tables: tuple[str, ...] = ()
    maintenance: bool = False
    spark_jars: Path | None = None  # spark_default's spark_jars_dir extra (tidelake.spark.cluster_jars)
    # [iceberg].catalog_uri: the syncpoint job publishes each cut to this SQL catalog, and verify
    # checks the Iceberg side too; None: no Iceberg.
    iceberg_catalog_uri: str | None = None
    # Airflow from this installed venv (tidelake.demos.installed_airflow), its DAGs from the DAG
    # file the demo writes there; None: the running venv, the DAG file in <workdir>/dags.
    installed: InstalledAirflow | None = None


@dataclass(frozen=True)
class DemoDags:
    """The demo changefeed's DAG ids, `tidelake_<kind>__demo`: the demo's DAG file names its config
    (config_path) and its merge schedule, as a user's does (tidelake.orchestration.airflow.dag_factory)."""

    suffix: str = f"__{CHANGEFEED_ID}"

    @classmethod
    def of(cls, options: AirflowDemoOptions) -> DemoDags:
        return cls()

    @property
    def puller(self) -> str:
        return f"tidelake_puller{self.suffix}"

    @property
    def merge(self) -> str:
        return f"tidelake_merge{self.suffix}"

    @property
    def bootstrap(self) -> str:
        """Run once by `make integration` after the merges (AirflowDemoOptions.bootstrap_tables)."""
        return f"tidelake_bootstrap{self.suffix}"

    @property
    def maintenance(self) -> str:
        """Run once by `make integration` after the merges (AirflowDemoOptions.maintenance)."""
        return f"tidelake_maintenance{self.suffix}"

    def all(self) -> tuple[str, ...]:
        return self.puller, self.merge, self.bootstrap, self.maintenance


@dataclass(frozen=True)
class RunningAirflow:
    """What a fault injected while traffic runs (AirflowDemoOptions.during_traffic) acts on and watches."""

    api: AirflowApi
    dags: DemoDags
    components: AirflowComponents | None  # None under `airflow standalone`
    checks: list[Callable[[str], None]]


@dataclass
class DemoPaths:
    workdir: Path
    lake_root: str | None = None  # an object-store lake instead of <workdir>/lake

    @property
    def lake_uri(self) -> str:
        return self.lake_root or str(self.lake)

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
    def dags_folder(self) -> Path:
        return self.workdir / "dags"

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


def sim_command(options: AirflowDemoOptions, info_file: Path) -> list[str]:
    return [
        sys.executable, "-m", "tidelake", "sim", "--workload", options.workload, "--rate", str(options.rate),
        "--faults", options.faults, "--seed", str(options.seed), "--database", DATABASE,
        "--info-file", str(info_file), "--progress-interval", "30",
        # verify reads the upstream at each replica's checkpoint, which trails the puller by the
        # merge schedule; TiDB's 10m default could collect that history on a slow machine.
        "--gc-life-time", "2h",
    ]


def airflow_env(paths: DemoPaths, port: int, base: dict[str, str] | None = None,
                sql_alchemy_conn: str | None = None, spark_master: str | None = None,
                spark_jars: Path | None = None, installed: InstalledAirflow | None = None,
                spark_remote: str | None = None) -> dict[str, str]:
    """Environment of `airflow standalone`: everything set here, nothing in a global airflow.cfg,
    and no AIRFLOW_* setting inherited from the caller's shell (another deployment's DB, auth or
    connections would silently change the demo). With `installed`, that venv's processes and
    folders (InstalledAirflow.environment), else the running venv's with the demo's DAGs folder.
    spark_default is a `spark_connect` connection to `spark_remote` (a warm Spark), else a `spark`
    one on `spark_master` (or local[*]) with the demo's Spark confs and jar folder as its extras."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith("AIRFLOW") and k != "SPARK_REMOTE"}  # the demo's config names its Spark
    if installed is not None:
        env = installed.environment(env)  # its bin first on PATH, with spark-submit
        python = str(installed.python)
    else:
        python = sys.executable
        # spark-submit comes with the venv's pyspark (docs/stack.md#apache-airflow-providers-apache-spark-634)
        env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
        # Airflow's processes run this checkout's tidelake, as the demo's own children do: a venv
        # shared by several checkouts (git worktrees) resolves its editable install to another one.
        if (REPO / "pyproject.toml").exists():  # a checkout, not an installed package's folder
            env["PYTHONPATH"] = os.pathsep.join([str(REPO), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env.update({
        "AIRFLOW_HOME": str(paths.airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(installed.dags_folder if installed is not None else paths.dags_folder),
        # empty: the Replication plugin comes from the installed package's entry point
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(installed.plugins_folder if installed is not None
                                             else paths.airflow_home / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # unpaused once the API server is up
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": sql_alchemy_conn or f"sqlite:///{paths.airflow_home / 'airflow.db'}",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(paths.airflow_home / PASSWORDS_FILE),
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://localhost:{port}",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://localhost:{port}/execution/",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(spark_connection(spark_master, spark_jars, spark_remote)),
        # the bootstrap needs classic Spark: spark-submit also when the other jobs run on a warm Spark
        f"AIRFLOW_CONN_{BOOTSTRAP_SPARK_CONN_ID.upper()}": json.dumps(spark_connection(spark_master, spark_jars, None)),
        "PYSPARK_PYTHON": python,
    })
    # The DAG file names its config and the Replication page finds it in the serialized puller DAG:
    # a caller's TIDELAKE_CONFIG would add its changefeeds to the page.
    env.pop(CONFIG_ENV, None)
    return env


def spark_connection(master: str | None, jars: Path | None, remote: str | None) -> dict[str, Any]:
    """The demo's spark_default as an AIRFLOW_CONN_* JSON document (docs/operations.md#spark-cluster)."""
    if remote is not None:
        return {"conn_type": "spark_connect", "host": remote}
    extra: dict[str, Any] = {"spark_conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
                                            **(CLUSTER_CONFS if master else {})}}
    if jars is not None:
        extra["spark_jars_dir"] = str(jars)
    return {"conn_type": "spark", "host": master or "local[*]", "extra": extra}


# --- the lake's side --------------------------------------------------------------------------


def puller_started(lake: str) -> bool:
    try:
        return read_watermarks(LakeLayout(lake)).ddl_resolved > 0
    except (OSError, DeltaError, InputError):
        return False


# --- the run ----------------------------------------------------------------------------------


class Say:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.marks: list[tuple[str, float]] = []  # (stage that ended, seconds since start)

    def __call__(self, text: str) -> None:
        print(f"[demo {time.monotonic() - self.started:6.0f}s] {text}", flush=True)

    def mark(self, stage: str) -> None:
        """`stage` has just finished (the summary of `make integration` times each one)."""
        self.marks.append((stage, time.monotonic() - self.started))


def run(options: AirflowDemoOptions, say: Say | None = None) -> int:
    """The whole demo; 0 when every replica verified, 1 otherwise. Always shuts everything down."""
    say = say or Say()
    if options.traffic_s <= 0:
        raise InputError(f"--traffic must be above zero seconds, got {options.traffic_s}")
    paths = DemoPaths(options.workdir, options.lake_root)
    paths.reset()
    dags = DemoDags.of(options)
    port = free_port(options.port)
    children: list[Child | AirflowComponents] = []
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (a CI timeout, `kill`) ends the demo like Ctrl-C, through the shutdown below: the
        # children live in their own sessions and would otherwise outlive it.
        signal.signal(signal.SIGTERM, interrupt)
    try:
        start_ts = tso.compose(int(time.time() * 1000))  # before the first CREATE (module doc, stage 2)
        say(f"starting the simulated cluster ({options.workload} workload at {options.rate:g} txn/s, "
            f"{options.faults} faults); log: {paths.logs / 'sim.log'}")
        sim = Child("tidelake sim", sim_command(options, paths.cluster_info), paths.logs / "sim.log", cwd=REPO)
        children.append(sim)
        spark_server = _start_spark_server(paths, say, options.spark_master) if options.warm_spark else None
        if spark_server is not None:
            children.append(spark_server[0])
        await_stage("simulator", paths.cluster_info.exists, 120, sim.log, [sim.check])
        pd = json.loads(paths.cluster_info.read_text())["pd"][0]
        write_demo_changefeed(paths.config, pd, paths.lake_uri, start_ts, options.syncpoint_interval,
                              remote=spark_server[1].url if spark_server is not None else None, shards=options.shards,
                              run_on_new_data=options.run_on_new_data, iceberg_catalog_uri=options.iceberg_catalog_uri,
                              aws_conn_id=options.lake_connection[0] if options.lake_connection else None)
        say.mark("simulator")
        say(f"simulator up: PD {pd}; changefeed config {paths.config}")

        env = airflow_env(paths, port, sql_alchemy_conn=options.sql_alchemy_conn, spark_master=options.spark_master,
                          spark_jars=options.spark_jars, installed=options.installed,
                          spark_remote=spark_server[1].url if spark_server is not None else None)
        if options.installed is not None:
            _check_installed(options.installed, paths, env, dag_settings(options), say)
        else:
            write_dag_file(paths.dags_folder, CHANGEFEED_ID, paths.config, **dag_settings(options))
        env.update(dict(options.airflow_settings))
        if options.lake_connection is not None:
            conn_id, fields = options.lake_connection
            env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(fields)
            say(f"the tasks reach the lake's store through the aws connection {conn_id!r} "
                f"([lake].aws_conn_id; endpoint {fields['extra']['endpoint_url']})")
        cli = ([str(options.installed.bin_dir / "airflow")] if options.installed is not None
               else [sys.executable, "-m", "airflow"])
        cwd = options.installed.cwd if options.installed is not None else REPO
        airflow: Child | AirflowComponents
        if options.airflow_components:
            say(f"starting Airflow as its components (db migrate, then scheduler, dag-processor, triggerer, "
                f"api-server on port {port}), each started again if it dies; logs: {paths.logs / 'airflow-*.log'}")
            airflow = AirflowComponents(cli, paths.logs, env, cwd, say)
            children.append(airflow)
            airflow.start()
        else:
            airflow = standalone(paths, env, port, say, cli, cwd)
            children.append(airflow)
        checks = [*options.component_checks, *(child.check for child in children)]
        api = airflow_api(paths, port)
        if isinstance(airflow, AirflowComponents):
            airflow.liveness = api.component_health
        await_airflow(api, options.startup_timeout_s, airflow.log, checks)
        if spark_server is not None:
            await_stage("spark connect server", lambda: accepting(spark_server[1]), options.startup_timeout_s,
                        spark_server[0].log, checks, 2)
            say(f"warm Spark: Spark Connect server {spark_server[1].url} pid {spark_server[0].process.pid}")
        set_writer_pool(api, paths.config)
        say("Airflow is up; waiting for the DAGs to be parsed")
        unpause_when_parsed(api, (dags.puller, dags.merge), options.startup_timeout_s, airflow.log, checks)
        if options.installed is not None:
            _check_parsed(api, options.installed, dags, say)
            _check_connection_form(api, pd, paths, say)
        on_data = f" and on new data, at most every {options.run_on_new_data}" if options.run_on_new_data else ""
        say(f"DAGs unpaused: {dags.puller} (continuous), {dags.merge} (every {options.merge_schedule}{on_data}); "
            f"UI http://localhost:{port}")
        say.mark("airflow and the DAGs")
        await_stage("puller start", lambda: puller_started(paths.lake_uri), options.startup_timeout_s,
                 paths.airflow_home / "logs", checks, 3)
        _check_replication_page(api, say)  # the lake has its control tables now
        say.mark("puller start")
        target = tso.compose(int((time.time() + options.traffic_s) * 1000))
        say(f"puller is landing changes; target: every table merged past TSO {target} "
            f"({tso.to_datetime(target):%H:%M:%S} UTC, {options.traffic_s:.0f}s from now)")
        running = RunningAirflow(api, dags, airflow if isinstance(airflow, AirflowComponents) else None, checks)
        if options.during_traffic is not None:
            options.during_traffic(say, running)
            # the merges past the target must come after every fault: the proof that runs resumed
            after = tso.compose(int(time.time() * 1000))
            if after > target:
                target = after
                say(f"faults over; target moved to TSO {target} ({tso.to_datetime(target):%H:%M:%S} UTC)")
        _wait_merged(api, dags, paths, target, options, checks, say)
        say.mark("traffic and merges")
        if options.required_tasks:
            _wait_tasks(api, dags, paths, options, checks, say)
            say.mark("merge and syncpoint tasks")
        # The merges are checked above. From here on no merge run is scheduled (a paused DAG's tasks
        # are not queued), so none queued behind the bootstrap takes the writer pool ahead of
        # maintenance (tidelake.orchestration.writer_pool), and verify gets the CPU; the puller keeps up.
        api.set_paused(dags.merge, True)
        if options.bootstrap_tables:
            _bootstrap(running, paths, options, say)
            say.mark("bootstrap")
        if options.maintenance:
            _maintenance(api, dags.maintenance, paths, options, checks, say)
            say.mark("maintenance")
        say("verifying every replica against a snapshot read of the simulator at its checkpoint")
        verified = _verify(paths)
        say.mark("verify")
        if options.lake_connection is not None:
            _check_secret_not_logged(paths, options.lake_connection[1]["password"], say)
        _summary(api, dags, paths, port, options.installed is not None, say)
        say("demo passed: every replica equals the simulator at its checkpoint" if verified
            else f"demo failed: verify found differences (see above and {paths.logs / 'verify.log'})")
        if options.keep_running:
            api.set_paused(dags.merge, False)
            say("running until Ctrl-C (merges every minute; `tidelake status --config "
                f"{paths.config}` shows the lag)")
            _wait_for_interrupt(checks)
        return 0 if verified else 1
    finally:
        shutdown(children, port, paths, dags, say)


def standalone(paths: DemoPaths, env: dict[str, str], port: int, say: Say, cli: list[str] | None = None,
               cwd: Path = REPO) -> Child:
    """`airflow standalone` (scheduler, dag-processor, triggerer, api-server) as a child with
    airflow_env's `env`, its output in logs/airflow.log; `cli` is the airflow command (default the
    running venv's)."""
    say(f"starting Airflow standalone on port {port} (first start migrates its DB: a minute or two); "
        f"log: {paths.logs / 'airflow.log'}")
    return Child("airflow standalone", [*(cli or [sys.executable, "-m", "airflow"]), "standalone"],
                 paths.logs / "airflow.log", env, cwd=cwd)


def airflow_api(paths: DemoPaths, port: int) -> AirflowApi:
    """The API of the Airflow on `port`, logged in as the admin of its generated passwords file."""
    return AirflowApi(f"http://localhost:{port}", paths.airflow_home / PASSWORDS_FILE)


def await_airflow(api: AirflowApi, timeout_s: float, log: Path, checks: list[Callable[[str], None]]) -> None:
    """Until the metadata DB and scheduler are healthy and the admin's password is written."""
    await_stage("airflow startup", lambda: api.healthy() and api.passwords_file.exists(), timeout_s, log, checks, 3)


def set_writer_pool(api: AirflowApi, config: Path) -> None:
    """The changefeed's writer pool, when its config needs one (tidelake.orchestration.writer_pool)."""
    pool = writer_pool(load_config(str(config)))
    if pool.required:
        api.set_pool(pool.name, pool.slots, "tidelake replica writers (tidelake.orchestration.writer_pool)")


def unpause_when_parsed(api: AirflowApi, dag_ids: tuple[str, ...], timeout_s: float, log: Path,
                        checks: list[Callable[[str], None]]) -> None:
    """Each DAG unpaused once the DAG processor has parsed it (they are created paused)."""
    for dag_id in dag_ids:
        await_stage(f"parse {dag_id}", lambda d=dag_id: api.dag(d), timeout_s, log, checks, 3)
        api.set_paused(dag_id, False)


def dag_settings(options: AirflowDemoOptions) -> dict[str, str]:
    """The DAG factory's keyword arguments in the demo's DAG file."""
    return {"merge_schedule": options.merge_schedule, "bootstrap_spark_conn_id": BOOTSTRAP_SPARK_CONN_ID}


def _check_installed(installed: InstalledAirflow, paths: DemoPaths, env: dict[str, str], settings: dict[str, str],
                     say: Say) -> None:
    """Before Airflow starts: the user's DAG file written, tidelake importing from the venv with
    Airflow's environment, and `airflow providers list` naming it."""
    dag_file = installed.write_dag_file(CHANGEFEED_ID, paths.config, **settings)
    say(f"the DAG file a user writes, {dag_file} (the only file of the DAGs folder):\n"
        + "".join(f"    {line}\n" for line in dag_file.read_text().splitlines()).rstrip())
    module = check_installed(installed, env)
    provider = check_provider(installed, env)
    say(f"installed: tidelake imports from {module}; `airflow providers list`: "
        f"{provider['package_name']} {provider['version']} ({provider['description']})")


def _check_connection_form(api: AirflowApi, pd: str, paths: DemoPaths, say: Say) -> None:
    screenshot = paths.logs / "connection-form.png"
    shown = check_connection_form(api, pd, screenshot, paths.logs / "chromium.log")
    say(f"the UI's connection form (headless Chromium) shows the tidb_pd type: {', '.join(shown)}; "
        f"screenshot: {screenshot}")


def _check_replication_page(api: AirflowApi, say: Say) -> None:
    """The api-server serves the Replication plugin's page (from the package's entry point; the
    plugins folder is empty) to the logged-in admin, and its JSON reports the demo's changefeed,
    found from the serialized puller DAG (no TIDELAKE_CONFIG), without an error."""
    status, page = api.get_page(PAGE_PATH)
    if status != 200:
        raise StageFailed("replication page", f"GET {PAGE_PATH} as admin: HTTP {status}: {page[:200]!r}")
    if f"Changefeed {CHANGEFEED_ID}" not in page:
        raise StageFailed("replication page", f"GET {PAGE_PATH} as admin: no changefeed {CHANGEFEED_ID!r} on the page")
    status, body = api.get_page(STATUS_PATH)
    reports = json.loads(body) if status == 200 else []
    ours = [r for r in reports if r.get("changefeed") == CHANGEFEED_ID]
    if len(ours) != 1 or "error" in ours[0]:
        raise StageFailed("replication page", f"GET {STATUS_PATH} as admin: HTTP {status}: "
                          f"{ours[0]['error'] if ours else body[:200]!r}")
    say(f"the Replication page is served at {PAGE_PATH} (plugin from the installed package's entry point)")


def _check_secret_not_logged(paths: DemoPaths, secret: str, say: Say) -> None:
    """No task log of the run holds the lake connection's secret (Airflow masks it as `***`)."""
    logs = [path for path in (paths.airflow_home / "logs").rglob("*") if path.is_file()]
    leaked = [path for path in logs if secret.encode() in path.read_bytes()]
    if leaked:
        raise StageFailed("secrets", f"the lake connection's secret is in {len(leaked)} task log(s)", leaked[0])
    say(f"the lake connection's secret is in none of the {len(logs)} task log files")


def _check_parsed(api: AirflowApi, installed: InstalledAirflow, dags: DemoDags, say: Say) -> None:
    """The DAG processor parsed the DAG file into every DAG of the changefeed, without import errors."""
    errors = api.import_errors()
    if errors:
        raise StageFailed("parse the DAG file", "import errors: " + "; ".join(
            f"{e['filename']}: {e['stack_trace'].strip().splitlines()[-1]}" for e in errors), installed.dag_file)
    missing = [dag_id for dag_id in dags.all() if api.dag(dag_id) is None]
    if missing:
        raise StageFailed("parse the DAG file", f"no DAG {', '.join(missing)} from it", installed.dag_file)
    say(f"{installed.dag_file.name} parsed into {', '.join(dags.all())}; no import errors")


def _wait_merged(api: AirflowApi, dags: DemoDags, paths: DemoPaths, target: int, options: AirflowDemoOptions,
                 checks: list[Callable[[str], None]], say: Say) -> None:
    layout = LakeLayout(paths.lake_uri)
    last_line = [0.0]
    report = [collect_status(layout, exact=True)]  # waits for replicas: their own checkpoints

    def describe() -> str:
        behind, tables = report[0].behind(target), report[0].tables
        lags = [t.lag_seconds for t in behind if t.lag_seconds is not None]
        worst = f", worst lag {max(lags):.0f}s" if lags else ""
        return f"{len(tables) - len(behind)}/{len(tables)} tables past the target{worst}"

    lags: list[float] = []  # the worst replica's lag at each poll, from the first merge on

    def done() -> bool:
        report[0] = collect_status(layout, exact=True)
        live = [t.lag_seconds for t in report[0].tables if t.lag_seconds is not None]
        if live:
            lags.append(max(live))
        if time.monotonic() - last_line[0] >= 20:
            last_line[0] = time.monotonic()
            runs = ", ".join(f"{n} {s}" for s, n in sorted(api.run_states(dags.merge).items())) or "none yet"
            say(f"merge: {describe()}; {dags.merge} runs: {runs}")
        return bool(report[0].tables) and not report[0].behind(target)

    await_stage("merge past the target", done, options.traffic_s + options.merge_timeout_s,
                paths.airflow_home / "logs", checks, 5,
                waiting=lambda: "tables behind: " + (", ".join(t.table for t in report[0].behind(target))
                                                    or "no tables replicated yet"))
    if lags:
        ranked = sorted(lags)
        p50, p95 = (ranked[max(0, math.ceil(q * len(ranked)) - 1)] for q in (0.5, 0.95))  # nearest rank
        say(f"replica lag while merging (worst table, every 5 s from the first merge, {len(ranked)} samples): "
            f"p50 {p50:.0f}s, p95 {p95:.0f}s, max {ranked[-1]:.0f}s")
    for table in report[0].stopped():
        say(f"{table.table}: replication stopped: {table.reason or 'stopped'}")
    say(f"every table is merged past {target}")


def _wait_tasks(api: AirflowApi, dags: DemoDags, paths: DemoPaths, options: AirflowDemoOptions,
                checks: list[Callable[[str], None]], say: Say) -> None:
    """Each required task succeeded once; with `syncpoint` among them, a cut is also recorded: a
    syncpoint task that found the replicas short of its cut succeeds without one (the next
    interval takes it), so its success alone does not prove a syncpoint."""
    layout = LakeLayout(paths.lake_uri)

    def missing() -> list[str]:
        absent = [task for task in options.required_tasks if not api.succeeded(dags.merge, task)]
        if "syncpoint" in options.required_tasks and not read_syncpoints(layout):
            absent.append("a recorded syncpoint")
        return absent

    say(f"waiting until {dags.merge}'s " + ", ".join(options.required_tasks) + " tasks have each succeeded once")
    await_stage("merge and syncpoint tasks", lambda: not missing(), options.merge_timeout_s,
                paths.airflow_home / "logs" / f"dag_id={dags.merge}", checks, 5,
                waiting=lambda: "no success yet of " + ", ".join(missing()))
    say(f"{dags.merge}: " + ", ".join(f"{task} succeeded {api.succeeded(dags.merge, task)}x"
                                       for task in options.required_tasks)
        + (f"; {len(read_syncpoints(layout))} syncpoint(s) recorded" if "syncpoint" in options.required_tasks else ""))


def _bootstrap(running: RunningAirflow, paths: DemoPaths, options: AirflowDemoOptions, say: Say) -> None:
    api, dag_id, checks = running.api, running.dags.bootstrap, running.checks
    tables = list(options.bootstrap_tables)
    await_stage(f"parse {dag_id}", lambda: api.dag(dag_id), options.startup_timeout_s, paths.logs,
                checks, 3)
    api.set_paused(dag_id, False)  # a manual run of a paused DAG stays queued; it has no schedule
    run_id = api.trigger(dag_id, {"tables": tables})
    say(f"{dag_id}: run {run_id} bootstraps {', '.join(tables)} into the running changefeed")
    if options.during_bootstrap is not None:
        options.during_bootstrap(say, running)
    _await_run(api, dag_id, lambda runs: next((r for r in runs if r["dag_run_id"] == run_id), None),
               "bootstrap", paths, options, checks)
    say(f"{dag_id}: run {run_id} succeeded")


def _maintenance(api: AirflowApi, dag_id: str, paths: DemoPaths, options: AirflowDemoOptions,
                 checks: list[Callable[[str], None]], say: Say) -> None:
    """Unpausing a DAG with catchup=False makes the scheduler create the run of its latest
    interval: that run is the integration's one maintenance (a manual trigger besides it would
    make two, which is how an earlier integration ran maintenance twice)."""
    await_stage(f"parse {dag_id}", lambda: api.dag(dag_id), options.startup_timeout_s, paths.logs,
                checks, 3)
    api.set_paused(dag_id, False)
    say(f"{dag_id} unpaused: its scheduled run of the latest interval compacts, vacuums and retires changelog")
    _await_run(api, dag_id, lambda runs: runs[0] if runs else None, "maintenance", paths, options, checks)
    api.set_paused(dag_id, True)
    runs = api.runs(dag_id)
    say(f"{dag_id}: run {runs[0]['dag_run_id']} succeeded; {len(runs)} run(s) in all")


def _await_run(api: AirflowApi, dag_id: str, which: Callable[[list[dict]], dict | None], stage: str,
               paths: DemoPaths, options: AirflowDemoOptions, checks: list[Callable[[str], None]]) -> None:
    """Until the chosen run of `dag_id` succeeded; a failed run fails the stage with its task logs named."""
    logs = paths.airflow_home / "logs" / f"dag_id={dag_id}"

    def succeeded() -> bool:
        run = which(api.runs(dag_id))
        if run is not None and run["state"] == "failed":
            raise StageFailed(stage, f"{dag_id} run {run['dag_run_id']} failed", logs / f"run_id={run['dag_run_id']}")
        return run is not None and run["state"] == "success"

    await_stage(stage, succeeded, options.merge_timeout_s, logs, checks, 5,
                waiting=lambda: f"{dag_id}: " + ", ".join(f"{n} {s}" for s, n in sorted(api.run_states(dag_id).items())))


def write_demo_changefeed(path: Path, pd: str, lake: Path | str, start_ts: int, syncpoint_interval: str,
                          remote: str | None = None, shards: int = 1, run_on_new_data: str | None = None,
                          iceberg_catalog_uri: str | None = None, aws_conn_id: str | None = None) -> Path:
    """The demo changefeed: the workload's database from `start_ts`, one Spark job per merge run
    (a 2-core laptop runs one JVM well, not four), on the Spark Connect server `remote` if given,
    publishing to the Iceberg catalog `iceberg_catalog_uri` if given, its store's settings from the
    Airflow connection `aws_conn_id` in the tasks if given."""
    merge = {"syncpoint_interval": syncpoint_interval, "parallel_jobs": 1}
    if run_on_new_data is not None:
        merge["run_on_new_data"] = run_on_new_data
    doc = changefeed_document(CHANGEFEED_ID, [pd], lake, rules=[f"{DATABASE}.{t}" for t in TABLES],
                              lake={"aws_conn_id": aws_conn_id} if aws_conn_id else None,
                              start_ts=start_ts, gc_ttl="1h", puller={"flush_interval": "1s", "shards": shards},
                              merge=merge,
                              spark={"remote": remote} if remote else None,
                              iceberg={"enabled": True, "catalog_uri": iceberg_catalog_uri} if iceberg_catalog_uri else None)
    return write_config(path, doc, "Written by `make demo` (tidelake.demos.on_airflow).")


def _start_spark_server(paths: DemoPaths, say: Say, master: str | None = None) -> tuple[Child, ServerSettings]:
    """The warm Spark as a demo child: the server JVM itself, so shutdown stops it by its pid."""
    settings = ServerSettings(paths.logs, port=free_port(SPARK_CONNECT_PORT), master=master or "local[*]")
    lake = LakeLayout(paths.lake_uri)  # an s3 lake: hadoop-aws and the s3a confs of its options
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    env["PYSPARK_PYTHON"] = sys.executable
    env.update(s3a_credential_env(lake))  # credentials in the environment, never on the command line
    say(f"starting a warm Spark (Spark Connect server with Delta on {settings.url}); "
        f"log: {paths.logs / 'spark-server.log'}")
    confs = {**s3a_confs(lake, credentials=False), **(CLUSTER_CONFS if master else {})}
    command = server_command(settings, confs, tuple(lake_packages(lake)))
    child = Child("spark connect server", command, paths.logs / "spark-server.log", env, cwd=REPO)
    return child, settings


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


def _summary(api: AirflowApi, dags: DemoDags, paths: DemoPaths, port: int, installed: bool, say: Say) -> None:
    status = subprocess.run([sys.executable, "-m", "tidelake", "status", "--config", str(paths.config)],
                            cwd=REPO, capture_output=True, text=True, env=tool_env())
    print(status.stdout, end="", flush=True)
    cuts = read_syncpoints(LakeLayout(paths.lake_uri))
    runs = ", ".join(f"{n} {s}" for s, n in sorted(api.run_states(dags.merge).items()))
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(api.run_types(dags.merge).items()))
    say(f"{dags.merge} runs: {runs} ({kinds}); syncpoints recorded: {len(cuts)}"
        + (f" (latest {cuts[-1].ts}: `tidelake snapshot-at {cuts[-1].ts} --config {paths.config}`)" if cuts else ""))
    say(f"Airflow UI: http://localhost:{port}  login: admin / {api.password()}  (Browse > Replication: lag, "
        "pending DDL, syncpoints; JSON at /tidelake/api/status)")
    say(f"logs: {paths.logs} (sim, airflow, verify); task logs: {paths.airflow_home / 'logs'}")


def interrupt(*_: object) -> None:
    """SIGTERM handler: end like Ctrl-C, through the caller's shutdown."""
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


def shutdown(children: list[Child | AirflowComponents], port: int, paths: DemoPaths, dags: DemoDags, say: Say) -> None:
    """Pause the DAGs (no new task starts), stop Airflow with its task processes and Spark JVMs,
    then the Spark Connect server and the simulator, each by its pid (children in reverse order)."""
    say("shutting down, in reverse start order: " + ", ".join(child.name for child in reversed(children)))
    api = airflow_api(paths, port)
    for dag_id in dags.all():
        try:
            api.set_paused(dag_id, True)
        except (OSError, urllib.error.URLError, ValueError, KeyError):
            break  # Airflow never came up or is gone: nothing to pause
    for child in reversed(children):
        child.stop()
    say("all demo processes stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tidelake.demos.on_airflow", description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=AirflowDemoOptions.workdir, help="lake, Airflow home and logs")
    parser.add_argument("--traffic", type=float, default=AirflowDemoOptions.traffic_s, metavar="S",
                        help="seconds of traffic before the target TSO (default 30)")
    parser.add_argument("--port", type=int, default=AirflowDemoOptions.port, help="Airflow UI port (default 8080, or a free one)")
    parser.add_argument("--keep-running", action="store_true", help="after verify, keep running until Ctrl-C (make up)")
    parser.add_argument("--cold-spark", action="store_true",
                        help="no Spark Connect server: every merge task is a spark-submit (a JVM per task)")
    parser.add_argument("--schedule-only", action="store_true",
                        help="merge runs by schedule only, not also when new changes are covered ([merge].run_on_new_data)")
    args = parser.parse_args(argv)
    return exit_code("demo", lambda: run(AirflowDemoOptions(
        workdir=args.workdir.resolve(), traffic_s=args.traffic, port=args.port, keep_running=args.keep_running,
        warm_spark=not args.cold_spark, run_on_new_data=None if args.schedule_only else AirflowDemoOptions.run_on_new_data)))


if __name__ == "__main__":
    sys.exit(main())
