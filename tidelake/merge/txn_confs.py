"""Spark's side of the checkpoint: the txn (app id, version) a replica write records (and the same
for a delta-rs write, tidelake.merge.writers.delta_rs_writer).

Delta skips a write whose txn version is <= the one recorded for the app, and records it in the
same commit as the rows (docs/stack.md#delta-lake-deltatable-python-api-and-write-options "Idempotent writes"); tidelake.lake.checkpoint reads
it back without Spark.
Owner: the merge's writers; bootstrap and maintenance use it too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from deltalake import CommitProperties, Transaction

from tidelake.lake.checkpoint import MERGE_APP_ID, checkpoint_metadata
from tidelake.lake.lease import LEASE_METADATA_KEY, fence_token

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Session confs honoured by MERGE/UPDATE/DELETE/INSERT (docs/stack.md#delta-lake-deltatable-python-api-and-write-options); both must be set.
TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


def fenced(metadata: str) -> str:
    """A commit's userMetadata JSON with the fencing token of the writer's lease added, checked
    against the store first (tidelake.lake.lease.fence_token raises LeaseLost when the lease is
    gone); as given outside a lease. Called right before the commit it describes."""
    token = fence_token()
    return metadata if token is None else json.dumps({**json.loads(metadata), LEASE_METADATA_KEY: token})


def writer_txn_options(version: int, app_id: str = MERGE_APP_ID) -> dict[str, str]:
    """DataFrameWriter options recording checkpoint `version` in the write's commit."""
    return {"txnAppId": app_id, "txnVersion": str(version), "userMetadata": fenced(checkpoint_metadata(version))}


def delta_rs_commit_properties(version: int, app_id: str = MERGE_APP_ID) -> object:
    """delta-rs CommitProperties recording checkpoint `version` in the commit (docs/stack.md#delta-lake-deltatable-python-api-and-write-options:
    delta-rs records the txn but does not skip a recorded version; the writer checks first)."""
    return CommitProperties(app_transactions=[Transaction(app_id, version)],
                            custom_metadata={"userMetadata": fenced(checkpoint_metadata(version))})


@contextmanager
def txn_confs(spark: SparkSession, version: int, app_id: str = MERGE_APP_ID) -> Iterator[None]:
    """Run one Spark DML (MERGE/UPDATE/DELETE/INSERT) so its commit records checkpoint `version`.

    The confs are per SparkSession, not per thread: concurrent table merges must each use their
    own session (tidelake.spark.spark_session.sibling_session: newSession() locally, a cloned server-side
    session over Spark Connect). Previous values are restored.
    """
    with session_confs(spark, {TXN_APP_ID_CONF: app_id, TXN_VERSION_CONF: str(version),
                                USER_METADATA_CONF: fenced(checkpoint_metadata(version))}):
        yield


@contextmanager
def session_confs(spark: SparkSession, confs: dict[str, str]) -> Iterator[None]:
    """Set session confs for the block; each gets its previous value (or none) back after it."""
    saved = {k: spark.conf.get(k, None) for k in confs}
    for key, value in confs.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
