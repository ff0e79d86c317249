"""[upstream].connection for the Spark jobs the Airflow task starts: the task resolves the tidb_pd
connection (here an AIRFLOW_CONN_* variable, as Airflow resolves any) and hands the job the PD
endpoints and the paths of its TLS files through the task's environment, which spark-submit
inherits; the job reads them back (job_entry). Nothing is submitted and no Spark starts: the
provider's SparkSubmitOperator.execute is replaced by a fake that runs the job's side in the
environment spark-submit would get."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tidelake.config import TlsConfig, UpstreamConfig, load_config
from tidelake.config_writer import changefeed_document, write_config
from tidelake.errors import InputError
from tidelake.orchestration.job_spec import BootstrapJob, MergeJob, to_json
from tidelake.orchestration.upstream_handoff import HANDOFF_ENV, handoff_environment, received_upstream

KEY_BODY = "aGFuZG9mZi1wZC1jbGllbnQta2V5LTQyNDI="
CA = "-----BEGIN CERTIFICATE-----\nQ0EgY2VydA==\n-----END CERTIFICATE-----\n"
KEY = f"-----BEGIN PRIVATE KEY-----\n{KEY_BODY}\n-----END PRIVATE KEY-----\n"
PD_CONN = {"conn_type": "tidb_pd", "host": "pd-0.pd", "port": 2379,
           "extra": {"pd_endpoints": "pd-1.pd:2379", "tls_ca": CA, "tls_cert": CA, "tls_private_key": KEY}}


def changefeed(tmp_path: Path, connection: str = "pd_prod") -> Path:
    path = write_config(tmp_path / "cf.toml", changefeed_document("cf", ["127.0.0.1:1"], tmp_path / "lake",
                                                                 gc_ttl="2h"))
    path.write_text(path.read_text().replace('pd = ["127.0.0.1:1"]', f'connection = "{connection}"'))
    return path


def test_the_job_reads_back_what_the_task_handed_over(tmp_path):
    config = load_config(changefeed(tmp_path))
    upstream = UpstreamConfig(pd=("pd-0:2379", "pd-1:2379"), tls=TlsConfig(ca="/t/ca.pem", cert="/t/c.pem",
                                                                           key="/t/k.pem"))
    got = received_upstream(config, handoff_environment("pd_prod", upstream))
    assert got.upstream == UpstreamConfig(pd=("pd-0:2379", "pd-1:2379"), tls=upstream.tls, gc_ttl_s=7200.0)
    assert got.upstream.endpoints("the bootstrap job") == ["pd-0:2379", "pd-1:2379"]
    assert received_upstream(config, handoff_environment("pd_prod", UpstreamConfig(pd=("pd-0:2379",)))).upstream.tls \
        is None
    assert received_upstream(config, {}) == config  # nothing handed over: the config as it is


def test_without_a_handoff_the_bootstrap_job_refuses_the_connection_in_one_line(tmp_path):
    config = received_upstream(load_config(changefeed(tmp_path)), {})
    with pytest.raises(InputError) as err:
        config.upstream.endpoints("the bootstrap job")
    assert str(err.value) == ("[upstream].connection 'pd_prod': the bootstrap job cannot read Airflow connections "
                              "(the Airflow tasks and the tidelake commands resolve it for it): run it from one of "
                              "those, or give [upstream].pd")


@pytest.mark.parametrize("text, message", [
    ("{oops", "not what the Spark task hands over (JSONDecodeError"),
    ('{"pd": []}', "not what the Spark task hands over (KeyError"),
    ('{"connection": "pd_other", "pd": ["a:1"], "tls": null}', "names connection 'pd_other'"),
    ('{"connection": "pd_prod", "pd": [], "tls": null}', "pd: expected the PD endpoints, got []"),
    ('{"connection": "pd_prod", "pd": ["a:1"], "tls": "ca.pem"}', "tls: expected the TLS file paths"),
])
def test_a_bad_handoff_is_one_line_naming_the_connection(tmp_path, text, message):
    path = changefeed(tmp_path)
    with pytest.raises(InputError) as err:
        received_upstream(load_config(path), {HANDOFF_ENV: text})
    assert str(err.value).startswith(f"{path}: [upstream].connection 'pd_prod': {HANDOFF_ENV}: ")
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.fixture
def submitted(monkeypatch):
    """Per submit: the job's config as spark_jobs/ reads it in the environment the submit inherits,
    the TLS files' text as it finds them, and the spark-submit command line."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    from tidelake.orchestration import job_entry
    from tidelake.orchestration.job_spec import from_json

    seen = []

    def submit(self, context):
        config = job_entry._config(from_json(self.application_args[0]))
        tls = config.upstream.tls
        hook = SparkSubmitHook(conn_id=self._conn_id, conf=self.conf, application_args=self.application_args,
                               packages=self.packages, env_vars=self.env_vars, py_files=self.py_files)
        seen.append({"upstream": config.upstream, "handoff": os.environ.get(HANDOFF_ENV),
                     "files": {} if tls is None else {part: Path(getattr(tls, part)).read_text()
                                                      for part in ("ca", "cert", "key")},
                     "command": " ".join(hook._build_spark_submit_command(self.application)),
                     "attributes": json.dumps([self.conf, self.env_vars, self.application_args, self.py_files])})

    monkeypatch.setattr(SparkSubmitOperator, "execute", submit)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    monkeypatch.delenv(HANDOFF_ENV, raising=False)
    return seen


def spark_task(path: Path, job: str, spec: str):
    from tidelake.orchestration.airflow.spark_operator import TidelakeSparkOperator

    return TidelakeSparkOperator(task_id=job, config_path=str(path), job=job, name=f"tidelake {job}",
                                 application_args=[spec])


def test_the_bootstrap_job_dials_the_connections_pd_with_its_tls_files_while_the_task_runs(tmp_path, monkeypatch,
                                                                                         submitted):
    monkeypatch.setenv("AIRFLOW_CONN_PD_PROD", json.dumps(PD_CONN))
    path = changefeed(tmp_path)
    spark_task(path, "bootstrap", to_json(BootstrapJob(str(path)))).execute(context={})
    (job,) = submitted
    assert job["upstream"].pd == ("pd-0.pd:2379", "pd-1.pd:2379") and job["upstream"].connection is None
    assert job["upstream"].gc_ttl_s == 7200.0  # gc_ttl stays the file's
    assert job["files"] == {"ca": CA, "cert": CA, "key": KEY}  # the driver, a child on this worker, opens them
    assert KEY_BODY not in job["handoff"] and "pd-0.pd:2379" in job["handoff"]  # paths, never PEM text
    for where in ("command", "attributes"):
        assert KEY_BODY not in job[where] and "pd-0.pd" not in job[where] and HANDOFF_ENV not in job[where], where
    assert HANDOFF_ENV not in os.environ  # only while the task ran
    assert not any(Path(p).exists() for p in (job["upstream"].tls.ca, job["upstream"].tls.key))  # files removed


def test_jobs_that_do_not_dial_pd_never_read_the_connection(tmp_path, submitted):
    """A merge needs no tidb_pd connection, even when the config names one that is not defined."""
    path = changefeed(tmp_path, connection="pd_undefined")
    spark_task(path, "merge", to_json(MergeJob(str(path)))).execute(context={})
    (job,) = submitted
    assert job["handoff"] is None and job["upstream"].connection == "pd_undefined"


@pytest.mark.parametrize("fields, message", [
    (None, "tidb_pd connection 'pd_prod': not defined (add it in Admin > Connections"),
    ({**PD_CONN, "extra": {"tls_private_key": KEY}}, "tidb_pd connection 'pd_prod': tls_ca: required when"),
    ({**PD_CONN, "conn_type": "aws"}, "tidb_pd connection 'pd_prod': conn_type: is 'aws', expected 'tidb_pd'"),
])
def test_a_missing_or_wrong_connection_fails_the_bootstrap_task_in_one_line(tmp_path, monkeypatch, submitted,
                                                                            fields, message):
    from airflow.sdk.exceptions import AirflowFailException

    if fields is not None:
        monkeypatch.setenv("AIRFLOW_CONN_PD_PROD", json.dumps(fields))
    path = changefeed(tmp_path)
    with pytest.raises(AirflowFailException) as err:
        spark_task(path, "bootstrap", to_json(BootstrapJob(str(path)))).execute(context={})
    assert str(err.value).startswith(message) and "\n" not in str(err.value) and KEY_BODY not in str(err.value)
    assert submitted == [] and HANDOFF_ENV not in os.environ
