"""Turn a tidelake InputError inside an Airflow task into a failure without retries: bad
params or a bad config will not get better by retrying, and the one-line message is what the
user reads in the task log and the run's failure note. A lake's store that did not answer
(StoreUnreachable) may come back: the same one line fails the try, and the task's retries apply.
Owner: the Airflow operators here."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from tidelake.errors import InputError, StoreUnreachable


@contextmanager
def input_errors_fail_the_task() -> Iterator[None]:
    try:
        yield
    except StoreUnreachable as exc:
        raise AirflowException(str(exc)) from None
    except InputError as exc:
        raise AirflowFailException(str(exc)) from None
