"""docker-compose.yaml describes the topology `make integration` runs, with its settings: compose
cannot start here, so this compares the two (the integration itself runs in CI)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlparse

import yaml

from tidelake.config import load_config
from tidelake.demos.integration import SHARDS, lake_environment
from tidelake.demos.on_airflow import DemoPaths, airflow_env
from tidelake.demos.postgres import database_url
from tidelake.demos.s3_server import S3Server
from tidelake.lake.object_store import is_s3

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yaml").read_text())["services"]


def test_compose_airflow_runs_the_executor_database_driver_and_lake_variables_of_the_integration(tmp_path):
    compose_env = _compose()["airflow-scheduler"]["environment"]
    ours = airflow_env(DemoPaths(tmp_path), 8080, base={}, sql_alchemy_conn=database_url(5432),
                       spark_master="spark://127.0.0.1:7077")
    assert compose_env["AIRFLOW__CORE__EXECUTOR"] == ours["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert urlparse(compose_env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).scheme == urlparse(
        ours["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).scheme == "postgresql+psycopg2"
    assert set(lake_environment(S3Server(tmp_path).endpoint)) <= set(compose_env)
    assert json.loads(compose_env["AIRFLOW_CONN_SPARK_DEFAULT"])["conn_type"] == "spark"


def test_compose_creates_the_replica_writers_pool_of_its_changefeed():
    from tidelake.orchestration.writer_pool import writer_pool

    pool = writer_pool(load_config(ROOT / "docker" / "changefeed.toml"))
    assert f"airflow pools set {pool.name} {pool.slots} " in _compose()["airflow-init"]["command"][-1]


def test_compose_lake_is_on_the_s3_api_with_the_shards_of_the_integration(tmp_path):
    config = load_config(ROOT / "docker" / "changefeed.toml")
    ours = S3Server(tmp_path).lake_root("integration")
    assert is_s3(config.lake.root) and urlparse(config.lake.root).scheme == urlparse(ours).scheme  # one path in delta-rs
    assert config.puller.shards == SHARDS


# Confs that name the host the executors reach the driver at: per deployment by nature.
HOST_CONFS = ("spark.driver.host",)


def _lake_layout(root: str, environ: dict[str, str]):
    from tidelake.lake.layout import LakeLayout
    from tidelake.lake.object_store import lake_storage_options

    return LakeLayout(root, lake_storage_options(root, None, environ=environ))


def test_compose_runs_spark_jobs_on_its_master_with_the_settings_of_the_cluster_integration(tmp_path):
    """`make integration` runs the Spark jobs as SparkSubmitOperator tasks on a standalone master
    with the jars in a folder on each node; compose does the same, with the same confs and worker size."""
    from tidelake.demos.spark_cluster import SparkCluster

    services = _compose()
    compose_env = services["airflow-scheduler"]["environment"]
    ours = airflow_env(DemoPaths(tmp_path), 8080, base={}, spark_master="spark://127.0.0.1:7077",
                       spark_jars=tmp_path / "spark-jars")
    assert "SPARK_REMOTE" not in compose_env and "SPARK_REMOTE" not in ours  # spark-submit, not a warm Spark
    compose_spark, our_spark = json.loads(compose_env["AIRFLOW_CONN_SPARK_DEFAULT"]), json.loads(ours["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert compose_spark["conn_type"] == our_spark["conn_type"] == "spark"
    assert urlparse(compose_spark["host"]).scheme == urlparse(our_spark["host"]).scheme == "spark"
    # jars on each node's classpath
    assert "spark_jars_dir" in compose_spark["extra"] and "spark_jars_dir" in our_spark["extra"]
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert f"RUN tidelake spark-jars {compose_spark['extra']['spark_jars_dir']}\n" in dockerfile
    compose_conf, our_conf = compose_spark["extra"]["spark_conf"], our_spark["extra"]["spark_conf"]
    assert set(compose_conf) == set(our_conf)
    assert {k: v for k, v in compose_conf.items() if k not in HOST_CONFS} == {
        k: v for k, v in our_conf.items() if k not in HOST_CONFS}
    worker = services["spark-worker"]["command"]
    cluster = SparkCluster(tmp_path)
    assert worker[worker.index("--cores") + 1] == str(cluster.cores)
    assert worker[worker.index("--memory") + 1] == cluster.memory
    assert set(services["spark-worker"]["environment"]) >= set(lake_environment("http://x"))  # executors' s3a


def test_compose_s3a_confs_are_the_ones_derived_from_its_aws_variables_as_in_the_integration(tmp_path, monkeypatch):
    """The DAGs derive the s3a confs from the lake root and the AWS_* variables: compose writes
    none by hand for them, and its warm-Spark profile's command line has exactly those."""
    from tidelake.orchestration.spark_submit import SparkSettings, packages_for, spark_submit_kwargs
    from tidelake.spark.cluster_jars import MANIFEST
    from tidelake.spark.s3a import hadoop_aws_package, s3a_confs
    from tidelake.spark.spark_session import delta_package

    services = _compose()
    compose_env = {k: str(v) for k, v in services["airflow-scheduler"]["environment"].items()}
    config = load_config(ROOT / "docker" / "changefeed.toml")
    derived = s3a_confs(_lake_layout(config.lake.root, compose_env), credentials=False)
    integration_env = lake_environment("http://127.0.0.1:9000")
    exercised = s3a_confs(_lake_layout(S3Server(tmp_path).lake_root("integration"), integration_env), credentials=False)
    endpoint = "spark.hadoop.fs.s3a.endpoint"
    assert set(derived) == set(exercised)
    assert {k: v for k, v in derived.items() if k != endpoint} == {k: v for k, v in exercised.items() if k != endpoint}
    assert derived[endpoint] == compose_env["AWS_ENDPOINT_URL"]
    compose_spark = json.loads(compose_env["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert not [k for k in compose_spark["extra"]["spark_conf"] if k.startswith("spark.hadoop.")]
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    for name, value in compose_env.items():
        monkeypatch.setenv(name, value)
    jars = tmp_path / "spark-jars"  # the image's folder, filled with what `tidelake spark-jars` records
    jars.mkdir()
    (jars / MANIFEST).write_text(f"{delta_package()}\n{hadoop_aws_package()}\n")
    settings = SparkSettings.from_extras("spark_default", {**compose_spark["extra"], "spark_jars_dir": str(jars)})
    submitted = spark_submit_kwargs(settings, job="merge", app_name="m", lake=config.lake)
    assert {k: submitted["conf"][k] for k in derived} == derived
    assert hadoop_aws_package() in packages_for(_lake_layout(config.lake.root, compose_env), settings)
    assert "packages" not in submitted and submitted["conf"]["spark.executor.extraClassPath"] == f"{jars}/*"
    connect = services["spark-connect"]["command"]
    confs = dict(connect[i + 1].split("=", 1) for i, arg in enumerate(connect) if arg == "--conf")
    assert {k: v for k, v in confs.items() if k.startswith("spark.hadoop.")} == derived
    assert connect[connect.index("--packages") + 1] == hadoop_aws_package()


def test_every_started_component_is_stopped_even_when_a_stop_or_the_run_fails(tmp_path, monkeypatch):
    import pytest

    from tidelake.demos import integration

    stopped: list[str] = []

    class Component:
        def __init__(self, name: str, fails: bool = False) -> None:
            self.name, self.fails = name, fails
            self.log = self.master_log = self.worker_log = tmp_path / f"{name}.log"
            self.port = self.listen_port = 1
            self.endpoint, self.url, self.workdir = "http://127.0.0.1:1", "x", tmp_path

        pid = 1

        def start(self) -> None:
            pass

        def stop(self) -> None:
            stopped.append(self.name)
            if self.fails:
                raise OSError(f"{self.name} would not stop")

        remove = stop

        def check(self, stage: str) -> None:
            pass

        def checks(self) -> list:
            return [self.check]

        def lake_root(self, prefix: str) -> str:
            return f"s3://b/{prefix}"

    class Database(Component):
        def pid(self) -> int:  # Postgres reads its pid file
            return 1

        def create_database(self, name: str) -> str:
            return f"postgresql+psycopg2://airflow@127.0.0.1:1/{name}"

    monkeypatch.setattr(integration, "S3Server", lambda _: Component("s3"))
    monkeypatch.setattr(integration, "TcpRelay", lambda *_: Component("relay"))
    monkeypatch.setattr(integration, "Postgres", lambda: Database("postgres", fails=True))
    monkeypatch.setattr(integration, "SparkCluster", lambda _: Component("spark", fails=True))
    monkeypatch.setattr(integration, "lake_environment", lambda _: {})
    monkeypatch.setattr(integration, "_install_jars", lambda folder: stopped.append("jars installed"))

    def interrupted(*_: object) -> int:
        raise KeyboardInterrupt

    handlers = {}
    monkeypatch.setattr(integration.on_airflow, "run", interrupted)
    monkeypatch.setattr(integration.signal, "signal", lambda signum, handler: handlers.setdefault(signum, handler))
    with pytest.raises(KeyboardInterrupt):
        # the cluster is the default; the wheel and venv are not what this test is about
        integration.run(integration.IntegrationOptions(workdir=tmp_path, installed_airflow=False))
    assert stopped == ["jars installed", "spark", "postgres", "relay", "s3"]
    assert handlers == {integration.signal.SIGTERM: integration.on_airflow.interrupt}


def test_the_cluster_check_reads_the_applications_the_master_registered(tmp_path):
    import pytest

    from tidelake.demos import integration
    from tidelake.demos.spark_cluster import SparkCluster
    from tidelake.demos.supervisor import StageFailed

    cluster = SparkCluster(tmp_path)
    log = tmp_path.joinpath("spark-master.log")
    log.write_text("26/11/27 08:43:18 INFO Master: Registering app tidelake-syncpoint\n"
                   "26/11/27 08:43:18 INFO Master: Registered app tidelake-syncpoint with ID app-20261127084318-0000\n")
    assert cluster.registered_apps() == ["tidelake-syncpoint"]
    with pytest.raises(StageFailed, match="registered no tidelake-merge, tidelake-bootstrap, tidelake-maintenance "
                                          "application .*spark-master.log"):
        integration._check_cluster(cluster, print)
    for i, app in enumerate(("tidelake-merge", "tidelake-bootstrap")):
        with log.open("a") as out:
            out.write(f"26/11/27 08:45:0{i} INFO Master: Registered app {app} with ID app-20261127084501-000{i + 1}\n")
    with pytest.raises(StageFailed, match="registered no tidelake-maintenance application"):
        integration._check_cluster(cluster, print)
    with log.open("a") as out:
        out.write("26/11/27 08:47:00 INFO Master: Registered app tidelake-maintenance with ID app-20261127084700-0003\n")
    integration._check_cluster(cluster, print)


def test_a_spark_master_or_worker_that_cannot_start_fails_its_stage_naming_its_log(tmp_path, monkeypatch):
    """`make integration` names the component and its log when the cluster does not come up."""
    import pytest

    from tidelake.demos import spark_cluster
    from tidelake.demos.supervisor import StageFailed

    launcher = tmp_path / "spark-class"
    launcher.write_text("#!/bin/sh\necho \"no JVM for $1\"; exit 3\n")
    launcher.chmod(0o755)
    monkeypatch.setattr(spark_cluster, "spark_class", lambda: launcher)
    cluster = spark_cluster.SparkCluster(tmp_path / "spark")
    with pytest.raises(StageFailed, match=r"stage 'spark master' failed: spark master exited with code 3 "
                                          rf"\(log: {cluster.master_log}\)"):
        cluster.start(timeout_s=20)
    assert "no JVM for org.apache.spark.deploy.master.Master" in cluster.master_log.read_text()
    cluster.stop()


def test_the_worker_kill_waits_for_an_application_whose_executor_runs_a_task(tmp_path):
    from tidelake.demos.spark_cluster import SparkCluster

    cluster = SparkCluster(tmp_path)
    log = tmp_path.joinpath("spark-master.log")
    log.write_text("INFO Master: Registered app tidelake-merge with ID app-1-0000\n"
                   "INFO Master: Launching executor app-1-0000/0 on worker worker-1\n"
                   "INFO Master: Removing app app-1-0000\n"
                   "INFO Master: Registered app tidelake-syncpoint with ID app-2-0001\n"
                   "INFO Master: Launching executor app-2-0001/0 on worker worker-1\n"
                   "INFO Master: Registered app tidelake-merge with ID app-3-0002\n")
    assert cluster.running_apps() == ["tidelake-syncpoint"]  # the second merge has no executor yet
    with log.open("a") as out:
        out.write("INFO Master: Launching executor app-3-0002/0 on worker worker-1\n")
    assert cluster.running_apps() == ["tidelake-syncpoint", "tidelake-merge"]
    assert cluster.busy_apps() == []  # executors launched, no task started on them yet
    stderr = tmp_path / "work" / "app-3-0002" / "0" / "stderr"
    stderr.parent.mkdir(parents=True)
    stderr.write_text("INFO CoarseGrainedExecutorBackend: Got assigned task 0\n")
    assert cluster.busy_apps() == []
    stderr.write_text("INFO Executor: Running task 0.0 in stage 0.0 (TID 0)\n")
    assert cluster.busy_apps() == ["tidelake-merge"]


def test_the_tasks_lake_connection_is_the_store_every_process_reaches(tmp_path):
    """The integration's aws connection names the same store as the AWS variables, with the amazon
    provider's fields, and the demo's config points the tasks at it."""
    from tidelake.demos.integration import LAKE_CONN_ID, lake_connection
    from tidelake.demos.on_airflow import write_demo_changefeed
    from tidelake.orchestration.aws_connection import aws_lake_settings

    fields = lake_connection("http://127.0.0.1:9999")
    env = lake_environment("http://127.0.0.1:9999")
    settings = aws_lake_settings(LAKE_CONN_ID, fields["conn_type"], fields["login"], fields["password"],
                                 fields["extra"], {})
    assert settings.values == {"access_key_id": env["AWS_ACCESS_KEY_ID"],
                               "secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
                               "endpoint": env["AWS_ENDPOINT_URL"], "region": env["AWS_REGION"]}
    config = write_demo_changefeed(tmp_path / "c.toml", "127.0.0.1:1", "s3://lake/x", 450_000_000_000_000_000, "1m",
                                   aws_conn_id=LAKE_CONN_ID)
    assert load_config(config).lake.aws_conn_id == LAKE_CONN_ID


def test_a_secret_in_a_task_log_fails_the_run_naming_the_log(tmp_path):
    import pytest

    from tidelake.demos.on_airflow import Say, _check_secret_not_logged
    from tidelake.demos.supervisor import StageFailed

    paths = DemoPaths(tmp_path)
    task_logs = paths.airflow_home / "logs" / "dag_id=x" / "run_id=y"
    task_logs.mkdir(parents=True)
    (task_logs / "attempt=1.log").write_text("key ***\n")
    _check_secret_not_logged(paths, "s3-secret-value", Say())
    (task_logs / "attempt=2.log").write_text("spark conf s3-secret-value\n")
    with pytest.raises(StageFailed) as err:
        _check_secret_not_logged(paths, "s3-secret-value", Say())
    assert "secret is in 1 task log" in str(err.value) and str(task_logs / "attempt=2.log") in str(err.value)
