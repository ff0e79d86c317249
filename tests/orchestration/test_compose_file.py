"""docker-compose.yaml: valid against the compose-spec schema (vendored by check-jsonschema from
PyPI, as `docker compose` is not installed here) and wired the way the DAGs expect."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tidelake.config import load_config

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yaml"
AIRFLOW_COMPONENTS = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")


def services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def test_compose_file_validates_against_the_compose_spec():
    checker = Path(sys.executable).with_name("check-jsonschema")
    result = subprocess.run([str(checker), "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_external_images_are_pinned_and_upstream_is_real_tidb_or_the_simulator():
    found = services()
    for name, service in found.items():
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), f"{name}: unpinned image {image}"
    for name, repo in (("pd", "pingcap/pd"), ("tikv", "pingcap/tikv"), ("tidb", "pingcap/tidb")):
        assert re.fullmatch(rf"{repo}:v\d+\.\d+\.\d+", found[name]["image"])
        assert found[name]["profiles"] == ["tidb"]
    sim = found["tidelake-sim"]
    assert sim["profiles"] == ["sim"]
    assert sim["command"][:2] == ["tidelake", "sim"]
    assert sim["network_mode"] == "service:airflow-scheduler"  # the sim serves on loopback


def test_airflow_components_share_config_and_wait_for_the_migration():
    found = services()
    for name in AIRFLOW_COMPONENTS:
        service = found[name]
        env = service["environment"]
        assert service["command"][:2] == ["airflow", name.removeprefix("airflow-").replace("apiserver", "api-server")]
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql")
        assert env["AIRFLOW__API_AUTH__JWT_SECRET"] == found["airflow-init"]["environment"]["AIRFLOW__API_AUTH__JWT_SECRET"]
        spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
        assert (spark["conn_type"], spark["host"]) == ("spark", "spark://spark-master:7077")
        assert not [k for k in env if k.startswith("TIDELAKE_") and k != "TIDELAKE_CONFIG"]  # the connection's extras
        assert service["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
    assert found["airflow-init"]["command"][-1].startswith("airflow db migrate && airflow pools set ")
    assert "spark://spark-master:7077" in found["spark-worker"]["command"]


def test_compose_changefeed_config_is_valid_and_points_at_the_compose_services():
    env = services()["airflow-scheduler"]["environment"]
    in_image = Path(env["TIDELAKE_CONFIG"])
    config = load_config(ROOT / in_image.relative_to("/opt/tidelake"))
    assert config.upstream.pd == ("pd:2379", "127.0.0.1:2379")
    assert config.lake.root.startswith("s3://")
    bucket = config.lake.root.removeprefix("s3://").split("/")[0]
    assert f"lake/{bucket}" in services()["minio-init"]["command"][0]


def test_sim_service_command_is_accepted_by_the_tidelake_cli():
    from tidelake.cli import build_parser

    command = services()["tidelake-sim"]["command"]
    args = build_parser().parse_args(command[1:])
    assert args.command == "sim" and args.pd_port == 2379


def test_the_optional_warm_spark_service_is_a_tidelake_spark_server_the_airflow_tasks_can_reach():
    from tidelake.cli import build_parser
    from tidelake.spark.s3a import hadoop_version

    found = services()
    command = found["spark-connect"]["command"]
    args = build_parser().parse_args(command[1:])
    assert (args.command, args.action, args.host, args.master) == ("spark-server", "run", "0.0.0.0",
                                                                    "spark://spark-master:7077")
    assert args.packages == [f"org.apache.hadoop:hadoop-aws:{hadoop_version()}"]  # the s3a lake
    assert f"{args.port}:{args.port}" in found["spark-connect"]["ports"]
    assert found["spark-connect"]["profiles"] == ["warm"]
    for name in AIRFLOW_COMPONENTS:  # by default the tasks spark-submit to the master
        assert json.loads(found[name]["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"])["conn_type"] == "spark"
    # how to switch: a spark_connect connection to the server
    assert f'"conn_type": "spark_connect", "host": "sc://spark-connect:{args.port}"' in COMPOSE.read_text()
