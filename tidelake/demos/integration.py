"""`make integration`: the production parts together on loopback, then proof that it worked: an
S3 API server behind a relay killed for 10 s, PostgreSQL (Airflow's database, and the Iceberg
catalog in another), a Spark standalone cluster, Airflow on them installed as a user installs it
(a wheel of tidelake[airflow] in a fresh venv, the DAGs from a 3-line DAG file: two puller shards,
merges, syncpoints publishing to Iceberg, a bootstrap, maintenance) as separate supervised
components, the orchestrator's faults (tidelake.demos.orchestrator_faults), then `tidelake verify`
of the Delta and the Iceberg side, and a freshness line. Every process is started by pid and stopped
at the end.

More: docs/internals.md#integration.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidelake.config import IcebergConfig
from tidelake.consumers.iceberg.catalog_view import last_snapshots
from tidelake.consumers.iceberg.iceberg_catalog import open_catalog
from tidelake.demos import on_airflow
from tidelake.demos.installed_airflow import install
from tidelake.demos.on_airflow import REPO, AirflowDemoOptions, RunningAirflow, Say
from tidelake.demos.orchestrator_faults import OrchestratorFaults
from tidelake.demos.postgres import Postgres
from tidelake.demos.s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from tidelake.demos.soak_run import Soak, SoakOptions, new_run_id
from tidelake.demos.soak_samples import RUN_MARK
from tidelake.demos.spark_cluster import SparkCluster
from tidelake.demos.supervisor import StageFailed, exit_code, free_port
from tidelake.demos.tcp_relay import TcpRelay
from tidelake.lake.layout import LakeLayout
from tidelake.lake.object_store import store_error
from tidelake.lake.watermarks import read_by_puller
from tidelake.status.freshness import collect_freshness
from tidelake.syncpoint.records import read_syncpoints

SHARDS = 2  # the puller shards of the run (and of docker/changefeed.toml)
OUTAGE_S = 10.0
# What the master must have run (spark-submitted jobs name themselves tidelake-<command>).
CLUSTER_APPS = ("tidelake-merge", "tidelake-syncpoint", "tidelake-bootstrap", "tidelake-maintenance")
# A table of the workload that the demo's changefeed filter leaves out (on_airflow.TABLES).
BOOTSTRAP_TABLE = f"{on_airflow.DATABASE}.sessions"
# The new scheduler looks for the killed one's task instances every 15 s instead of Airflow's 300 s
# default (docs/operations.md#when-a-component-dies): they are reset once the killed
# scheduler's heartbeat is older than [scheduler] scheduler_health_check_threshold (30 s).
AIRFLOW_SETTINGS = (("AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL", "15"),)
ICEBERG_DATABASE = "iceberg"  # the Iceberg SQL catalog's database, beside Airflow's
LAKE_CONN_ID = "tidelake_lake"  # the changefeed's [lake].aws_conn_id


@dataclass(frozen=True)
class IntegrationOptions:
    workdir: Path = REPO / ".tidelake" / "integration"
    traffic_s: float = 60.0
    port: int = 8080
    spark_cluster: bool = True
    shards: int = SHARDS
    # Airflow from a fresh venv with the wheel of this tree (tidelake.demos.installed_airflow);
    # False: from the running venv with the repository's dags/ (a quicker local run).
    installed_airflow: bool = True
    # A soak (tidelake.demos.soak): its faults in rotation and samples during the traffic instead of
    # each fault once.
    soak: SoakOptions | None = None


def run(options: IntegrationOptions) -> int:
    """Start every component, run the Airflow demo path on them, check the lake; every component
    started is stopped by its pid at the end, even when an earlier stop raises (ExitStack)."""
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C through the stops below.
        signal.signal(signal.SIGTERM, on_airflow.interrupt)
    say = Say()
    started = time.time()
    run_id = new_run_id()
    if options.soak is not None:  # every process started from here on carries it (soak_samples)
        os.environ[RUN_MARK] = run_id
    s3 = S3Server(options.workdir / "s3")
    postgres = Postgres()
    cluster = SparkCluster(options.workdir / "spark") if options.spark_cluster else None
    jars = options.workdir / "spark-jars" if options.spark_cluster else None
    with contextlib.ExitStack() as stops:
        stops.callback(_timings, say)
        stops.callback(say.mark, "shutdown")
        installed = None
        if options.installed_airflow:
            say(f"building a wheel of this tree and installing tidelake[airflow] from it into a fresh venv "
                f"{options.workdir / 'installed' / 'venv'}; log: {options.workdir / 'installed' / 'install.log'}")
            installed, wheel, times = install(options.workdir / "installed")
            say(f"{wheel.name}: built in {times.wheel_s:.0f}s; venv {times.venv_s:.0f}s; "
                f"pip install {times.install_s:.0f}s")
            say.mark("wheel and venv")
        say(f"starting the S3 API server (moto) and the relay its clients reach it through; log: {s3.log}")
        stops.callback(_stop, say, lambda: f"the S3 server (pid {s3.pid})", s3.stop)
        s3.start()
        relay = TcpRelay(free_port(0), s3.port, s3.workdir / "relay.log")
        stops.callback(_stop, say, lambda: f"the S3 endpoint relay (pid {relay.pid})", relay.stop)
        relay.start()
        endpoint = f"http://127.0.0.1:{relay.listen_port}"
        say.mark("s3 server")
        say(f"S3 endpoint {endpoint} (relay pid {relay.pid}) to moto {s3.endpoint} (pid {s3.pid}); "
            f"starting PostgreSQL; log: {postgres.log}")
        stops.callback(_stop, say, lambda: f"PostgreSQL (pid {postgres.pid()})", postgres.remove)
        postgres.start()
        iceberg_catalog = postgres.create_database(ICEBERG_DATABASE)
        say.mark("postgres")
        say(f"PostgreSQL 127.0.0.1:{postgres.port} pid {postgres.pid()}; Iceberg catalog {iceberg_catalog}")
        # Before the Spark worker starts: its executors' s3a reads these AWS_* variables.
        os.environ.update(lake_environment(endpoint))
        if cluster is not None:
            say(f"starting a Spark standalone master and worker; logs: {cluster.master_log}, {cluster.worker_log}")
            stops.callback(_stop, say, lambda: "the Spark master and worker", cluster.stop)
            cluster.start()
            say.mark("spark cluster")
            say(f"Spark master {cluster.url}; resolving the Delta and hadoop-aws jars into {jars} once "
                f"(kept between runs)")
            _install_jars(jars)
            say.mark("spark jars")

        faults = OrchestratorFaults(postgres, cluster)

        def during_traffic(say: Say, airflow: RunningAirflow) -> None:
            outage(say)
            faults(say, airflow)

        def outage(say: Say) -> None:
            say(f"killing the S3 endpoint for {OUTAGE_S:.0f}s (SIGKILL relay pid {relay.pid}; "
                f"moto pid {s3.pid} keeps the objects)")
            relay.kill()
            time.sleep(OUTAGE_S)
            relay.start()
            say(f"S3 endpoint back on {endpoint} (relay pid {relay.pid})")

        lake_root = s3.lake_root("integration")
        soak = (Soak(options.soak, faults.rotation(lambda say, airflow: outage(say)), lake_root,
                     options.workdir / "soak", run_id) if options.soak is not None else None)
        demo = AirflowDemoOptions(workdir=options.workdir / "airflow-demo", traffic_s=options.traffic_s,
                                  port=options.port, lake_root=lake_root, sql_alchemy_conn=postgres.url,
                                  shards=options.shards, during_traffic=soak or during_traffic,
                                  during_bootstrap=faults.kill_spark_worker,
                                  airflow_components=True, airflow_settings=AIRFLOW_SETTINGS,
                                  spark_master=cluster.url if cluster is not None else None, spark_jars=jars,
                                  # on the cluster, the Spark jobs are SparkSubmitOperator tasks
                                  warm_spark=cluster is None, required_tasks=("merge", "syncpoint"),
                                  bootstrap_tables=(BOOTSTRAP_TABLE,), maintenance=True,
                                  iceberg_catalog_uri=iceberg_catalog, installed=installed,
                                  lake_connection=(LAKE_CONN_ID, lake_connection(endpoint)),
                                  component_checks=(s3.check, relay.check, *(cluster.checks() if cluster else ())))
        code = on_airflow.run(demo, say)
        if code == 0:
            _check_lake(lake_root, options.shards, say)
            _check_iceberg(lake_root, iceberg_catalog, say)
            _freshness(lake_root, time.time() - started, say)
            if cluster is not None:
                _check_cluster(cluster, say)
        if soak is not None:
            passed = soak.write_results(verified=code == 0)
            say(f"soak {'passed' if passed else 'failed'}: {soak.summary_line()}; charts {soak.folder / 'soak.html'}")
            return 0 if passed else 1
        return code


def _stop(say: Say, what: Callable[[], str], stop: Callable[[], None]) -> None:
    """One stop; its failure is a line, so the run's own outcome (and the other stops) stand."""
    name = what()
    say(f"stopping {name}")
    try:
        stop()
    except Exception as exc:  # noqa: BLE001 - any failure to stop is reported, never masks the run's
        say(f"stopping {name} failed: {exc!r}")


def lake_environment(endpoint: str) -> dict[str, str]:
    """The AWS variables every process of the run gets: its only way to the lake's store."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}


def lake_connection(endpoint: str) -> dict[str, Any]:
    """The same store as an Airflow `aws` connection (the amazon provider's fields), which the tasks
    use; the Airflow processes keep the AWS variables for what runs outside tasks (the triggerer's
    new-data watch, the Replication page, the DAG parse's table list)."""
    return {"conn_type": "aws", "login": ACCESS_KEY, "password": SECRET_KEY,
            "extra": {"endpoint_url": endpoint, "region_name": REGION}}


def _install_jars(folder: Path) -> None:
    """`tidelake spark-jars` as a deployment runs it; a failure names its log."""
    log = folder.with_suffix(".log")
    with log.open("w") as out:
        code = subprocess.run([sys.executable, "-m", "tidelake", "spark-jars", str(folder)], stdout=out,
                              stderr=subprocess.STDOUT, cwd=REPO).returncode
    if code != 0:
        raise StageFailed("spark jars", f"tidelake spark-jars exited with code {code}", log)


def _check_lake(lake_root: str, shards: int, say: Say) -> None:
    """Every shard landed its own watermarks, and a syncpoint was recorded."""
    layout = LakeLayout(lake_root)
    pullers = read_by_puller(layout)
    if len(pullers) != shards:
        raise StageFailed("puller shards", f"expected watermarks of {shards} shards in {layout.watermarks}, "
                          f"found {sorted(pullers)}")
    cuts = read_syncpoints(layout)
    if not cuts:
        raise StageFailed("syncpoint", f"no syncpoint recorded in {layout.syncpoints}")
    say(f"lake {lake_root}: watermarks of shards {sorted(pullers)}; {len(cuts)} syncpoint(s)")


def _check_iceberg(lake_root: str, catalog_uri: str, say: Say) -> None:
    """The syncpoint job published to the PostgreSQL catalog: some replica's Iceberg table is tagged
    at a recorded syncpoint (verify compared each one at the newest syncpoint's tag)."""
    layout = LakeLayout(lake_root)
    recorded = {cut.ts for cut in read_syncpoints(layout)}
    shown = last_snapshots(open_catalog(layout, IcebergConfig(enabled=True, catalog_uri=catalog_uri)), layout)
    tagged = [entry["table"] for entry in shown if entry["syncpoint_ts"] in recorded and entry["snapshot_id"] is not None]
    if not tagged:
        raise StageFailed("iceberg", f"no replica of {lake_root} is published at a recorded syncpoint in the Iceberg "
                          f"catalog {catalog_uri} ({len(shown)} tables there)")
    say(f"Iceberg catalog {catalog_uri}: {len(tagged)} of {len(shown)} tables tagged at a recorded syncpoint, "
        f"newest syncpoint-{max(entry['syncpoint_ts'] for entry in shown)}")


def _freshness(lake_root: str, span_s: float, say: Say) -> None:
    """Freshness per stage of the run's changes (tidelake.status.freshness), read from the lake on
    the S3 API server as `tidelake freshness` reads it; a run whose changes it cannot find fails."""
    try:
        report = collect_freshness(LakeLayout(lake_root), span_s)
    except Exception as exc:  # noqa: BLE001 - the stage fails in one line; the run's other results stand
        raise StageFailed("freshness", store_error(exc)) from exc
    if report.changes == 0:
        raise StageFailed("freshness", f"no change of the run found in {lake_root}'s changelog versions of the last "
                          f"{span_s:.0f}s")
    say(f"freshness: {report.summary_line()}")


def _check_cluster(cluster: SparkCluster, say: Say) -> None:
    """The Spark tasks of the run were applications of the standalone master."""
    apps = cluster.registered_apps()
    missing = [app for app in CLUSTER_APPS if app not in apps]
    if missing:
        raise StageFailed("spark cluster", f"the master registered no {', '.join(missing)} application "
                          f"(registered: {', '.join(apps) or 'none'})", cluster.master_log)
    say("Spark master ran " + ", ".join(f"{apps.count(app)} {app}" for app in CLUSTER_APPS) + " applications")


def _timings(say: Say) -> None:
    previous = 0.0
    lines = []
    for stage, at in say.marks:
        lines.append(f"  {stage:<22} {at - previous:7.1f}s")
        previous = at
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print("stage times:\n" + "\n".join(lines) + f"\n  {'total':<22} {previous:7.1f}s   load average {load}",
          flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tidelake.demos.integration", description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=IntegrationOptions.workdir, help="logs, Airflow home")
    parser.add_argument("--traffic", type=float, default=IntegrationOptions.traffic_s, metavar="S",
                        help="seconds of traffic before the target TSO (default 60)")
    parser.add_argument("--port", type=int, default=IntegrationOptions.port, help="Airflow UI port (default 8080, or a free one)")
    parser.add_argument("--local-spark", action="store_true",
                        help="no Spark cluster: merge, syncpoint and maintenance on a warm Spark on local[*], "
                             "bootstrap a spark-submit on local[*] (a quicker local run)")
    parser.add_argument("--shards", type=int, default=SHARDS, help=f"puller shards (default {SHARDS})")
    parser.add_argument("--repo-airflow", action="store_true",
                        help="Airflow from this venv with the repository's dags/ instead of a fresh venv with a "
                             "wheel of this tree (a quicker local run)")
    args = parser.parse_args(argv)
    return exit_code("integration", lambda: run(IntegrationOptions(
        workdir=args.workdir.resolve(), traffic_s=args.traffic, port=args.port, spark_cluster=not args.local_spark,
        shards=args.shards, installed_airflow=not args.repo_airflow)))


if __name__ == "__main__":
    sys.exit(main())
