"""Merge steps that lose a Delta commit race are rerun (they are idempotent by txn version);
other failures are not. No Spark session: the step is a stand-in raising Delta's own classes."""

from __future__ import annotations

import pytest
from delta.exceptions import ConcurrentDeleteReadException, MetadataChangedException

from tidelake.merge import table_merge
from tidelake.merge.table_merge import CONFLICT_RETRIES, retry_on_conflict


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(table_merge.time, "sleep", lambda s: None)


def flaky(failures: list[Exception], result: object):
    calls = []

    def step():
        calls.append(1)
        if len(calls) <= len(failures):
            raise failures[len(calls) - 1]
        return result

    return step, calls


def test_a_step_that_lost_a_race_to_an_optimize_is_rerun():
    step, calls = flaky([ConcurrentDeleteReadException(message="compacted")] * 2, (5, 3))
    assert retry_on_conflict(step, "t window") == (5, 3)
    assert len(calls) == 3


def test_retries_are_bounded_and_other_errors_are_not_retried():
    step, calls = flaky([ConcurrentDeleteReadException(message="again")] * (CONFLICT_RETRIES + 1), None)
    with pytest.raises(ConcurrentDeleteReadException):
        retry_on_conflict(step, "t window")
    assert len(calls) == CONFLICT_RETRIES + 1
    step, calls = flaky([MetadataChangedException(message="schema moved")], None)
    with pytest.raises(MetadataChangedException):
        retry_on_conflict(step, "t window")
    assert len(calls) == 1


def test_a_driver_window_that_lost_a_delta_rs_commit_race_is_rerun():
    """delta-rs refuses a commit racing one of the same txn app id (tidelake.merge.writers.delta_rs_writer)."""
    from deltalake.exceptions import CommitFailedError

    step, calls = flaky([CommitFailedError("Failed to commit transaction: Concurrent transaction failed.")], (0, 0))
    assert retry_on_conflict(step, "t window") == (0, 0)
    assert len(calls) == 2
