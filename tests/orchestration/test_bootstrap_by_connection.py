"""The bootstrap task on a changefeed whose [upstream] is a tidb_pd connection holding mutual TLS
as PEM text, against a simulated cluster whose PD and stores require a client certificate signed by
the test's CA. Without Spark: the job's side of a faked submit reads the schema over that TLS from
the files the task handed over (upstream_handoff). With Spark (slow): the real spark-submit of
spark_jobs/bootstrap_job.py on local Spark, its driver dialing through those files and a table of
four region ranges read by Spark tasks, which open the same files; oracle: each replica equals the
simulator's MVCC read at its checkpoint.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import grpc
import pytest
from tls_certs import HAVE_OPENSSL, make_certs

from tests.bootstrap.bootstrap_harness import COLUMNS, fill, replica_rows, split_table, upstream_rows
from tidelake.config_writer import changefeed_document, write_config
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.orchestration.job_spec import BootstrapJob, to_json
from tidelake.orchestration.upstream_handoff import HANDOFF_ENV
from tidelake.sim.cluster import SimCluster
from tidelake.sim.tidb.session import SimTiDB

pytestmark = pytest.mark.skipif(not HAVE_OPENSSL, reason="needs the openssl command")


@pytest.fixture
def certs(tmp_path):
    return make_certs(tmp_path / "certs")


@pytest.fixture
def tls_cluster(certs):
    server = grpc.ssl_server_credentials([((certs / "server.key").read_bytes(), (certs / "server.pem").read_bytes())],
                                         root_certificates=(certs / "ca.pem").read_bytes(), require_client_auth=True)
    with SimCluster(n_stores=2, split_check_interval_s=0, gc_interval_s=0, server_workers=8,
                    server_credentials=server) as sim:
        tidb = SimTiDB(sim)
        tidb.create_database("shop")
        tidb.create_table("shop", "small", COLUMNS)
        yield sim, tidb


@pytest.fixture
def bootstrap_task(tls_cluster, certs, tmp_path, monkeypatch):
    """The bootstrap task of a changefeed on connection pd_tls, which holds the TLS as PEM text."""
    from tidelake.orchestration.airflow.spark_operator import TidelakeSparkOperator

    sim, _ = tls_cluster
    monkeypatch.setenv("AIRFLOW_CONN_PD_TLS", json.dumps({
        "conn_type": "tidb_pd", "host": f"https://{sim.pd_address}",
        "extra": {"tls_ca": (certs / "ca.pem").read_text(), "tls_cert": (certs / "client.pem").read_text(),
                  "tls_private_key": (certs / "client.key").read_text()}}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({
        "conn_type": "spark", "host": "local[2]",
        "extra": {"spark_conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}}}))
    path = write_config(tmp_path / "cf.toml", changefeed_document("cf1", ["127.0.0.1:1"], tmp_path / "lake",
                                                                 rules=["shop.*"], gc_ttl="10m"))
    path.write_text(path.read_text().replace('pd = ["127.0.0.1:1"]', 'connection = "pd_tls"'))
    return TidelakeSparkOperator(task_id="bootstrap", config_path=str(path), job="bootstrap", name="tidelake bootstrap",
                                 application_args=[to_json(BootstrapJob(str(path)))])


def test_the_job_reads_pd_and_tikv_over_the_connections_tls_from_the_handed_files(bootstrap_task, monkeypatch):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    from tidelake.orchestration import job_entry
    from tidelake.orchestration.job_spec import from_json
    from tidelake.upstream.kv_snapshot import SnapshotReader
    from tidelake.upstream.pd_client import PDClient
    from tidelake.upstream.schema_snapshot import load_schema

    seen = []

    def submit(self, context):  # what the bootstrap job's driver does first, in the submit's environment
        config = job_entry._config(from_json(self.application_args[0]))
        with PDClient(config.upstream.endpoints("the bootstrap job"), config.upstream.tls, retry_timeout_s=5) as pd:
            with SnapshotReader(pd, config.upstream.tls) as reader:
                seen.append(sorted(db.name for db in load_schema(reader, pd.get_ts()).dbs))

    monkeypatch.setattr(SparkSubmitOperator, "execute", submit)
    bootstrap_task.execute({})
    assert seen == [["shop"]]


@pytest.mark.spark
@pytest.mark.slow  # a spark-submit JVM and a Delta package resolution: a minute or more on a busy 2-core machine
def test_the_bootstrap_task_reads_over_the_connections_tls_in_driver_and_executors(tls_cluster, bootstrap_task,
                                                                                 spark, tmp_path, monkeypatch):
    sim, tidb = tls_cluster
    big = tidb.create_table("shop", "big", COLUMNS).table_id
    fill(tidb, "small", 300)
    fill(tidb, "big", 1500, seed=2)
    split_table(sim, big, [400, 800, 1200])  # 4 region ranges: read by Spark tasks
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    bootstrap_task.execute({})
    assert HANDOFF_ENV not in os.environ
    for table in ("small", "big"):
        replica = f"{tmp_path / 'lake'}/shop/{table}"
        ts = read_checkpoint(replica)
        assert ts is not None, f"{table} has no checkpoint"
        assert replica_rows(spark, replica) == upstream_rows(tidb, table, ts), f"{table} differs from upstream at {ts}"
