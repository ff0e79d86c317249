"""A tidelake error inside a DAG task: bad input fails the task for good, a lake's store that did
not answer fails the try and leaves Airflow's retries to it; both keep the one-line message."""

from __future__ import annotations

import socket

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from tidelake.errors import InputError, StoreUnreachable
from tidelake.lake.lake_check import require_lake
from tidelake.lake.layout import LakeLayout
from tidelake.orchestration.airflow.task_errors import input_errors_fail_the_task


def test_bad_input_fails_the_task_without_retries():
    with pytest.raises(AirflowFailException, match=r"^--tables: no such table x\.y$"):
        with input_errors_fail_the_task():
            raise InputError("--tables: no such table x.y")


def test_a_store_that_did_not_answer_fails_the_try_and_is_retried():
    # nothing listens on the endpoint: what the S3 outage of make integration looks like to plan
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    layout = LakeLayout("s3://lake/cf", {"aws_endpoint_url": f"http://127.0.0.1:{port}",
                                         "aws_allow_http": "true", "aws_region": "us-east-1",
                                         "aws_access_key_id": "k", "aws_secret_access_key": "s",
                                         "max_retries": "0", "retry_timeout": "1s"})
    with pytest.raises(AirflowException) as failed:
        with input_errors_fail_the_task():
            require_lake(layout)
    assert not isinstance(failed.value, AirflowFailException)
    assert str(failed.value).startswith("lake s3://lake/cf cannot be read: ") and "\n" not in str(failed.value)
    with pytest.raises(StoreUnreachable):
        require_lake(layout)
