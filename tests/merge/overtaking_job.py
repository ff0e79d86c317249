"""Another merge job of the same lake (an abandoned Airflow attempt still running) overtaking a
run: it commits after the run read the replica's checkpoint and before the run's first window.
It holds no lease: it is the writer that lost its lease while paused mid-write, the window fencing
leaves open (docs/operations.md#writer-leases), which the txn versions must still make harmless."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tidelake.lake.layout import LakeLayout
from tidelake.lake.lease import Leases
from tidelake.merge import merge_run
from tidelake.merge.changelog_snapshot import ChangelogSnapshot
from tidelake.merge.merge_run import run_merge
from tidelake.merge.table_merge import TableResult
from tidelake.spark.spark_session import release_session, sibling_session


def merge_overtaken(spark, layout: LakeLayout, other_until: int, monkeypatch) -> tuple[TableResult, TableResult]:
    """run_merge of a one-table lake that another job, in its own session, overtakes by merging
    up to `other_until`: (this run's result, the other job's)."""
    real, other = ChangelogSnapshot.file_stats, []

    def overtaken(snapshot, *args):
        if not other:  # the run has read the checkpoint and plans its windows from it
            monkeypatch.setattr(ChangelogSnapshot, "file_stats", real)
            session = sibling_session(spark)
            try:
                with unleased_runs(monkeypatch):
                    other.extend(run_merge(session, layout, until_ts=other_until, write_log=False).tables)
            finally:
                release_session(session)
        return real(snapshot, *args)

    monkeypatch.setattr(ChangelogSnapshot, "file_stats", overtaken)
    (result,) = run_merge(spark, layout).tables
    assert len(other) == 1, "the other job did not run: the run planned no window"
    return result, other[0]


@contextmanager
def unleased_runs(monkeypatch) -> Iterator[None]:
    """run_merge in this block takes no lease and is refused none: the other job of a race."""
    real = merge_run.hold
    monkeypatch.setattr(merge_run, "hold", _unleased)
    try:
        yield
    finally:
        monkeypatch.setattr(merge_run, "hold", real)


@contextmanager
def _unleased(layout: LakeLayout, names) -> Iterator[Leases]:
    leases = Leases(layout.leases, {}, {}, fenced=False)
    try:
        yield leases
    finally:
        leases.close()
