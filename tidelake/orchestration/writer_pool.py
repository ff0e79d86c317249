"""The Airflow pool that keeps two Spark writers off one replica at a time.

On an s3 lake Spark commits replica versions through its S3 log store, which has no conditional
PUT: two Spark jobs committing the same version of one replica (a merge and maintenance's
OPTIMIZE, say) can overwrite each other's commit (tidelake.spark.s3a, docs/stack.md#object-store-the-lake-on-s3). So
every Spark task that writes a changefeed's replicas takes slots of one pool of that changefeed:
a merge task one slot (a run's table groups write disjoint replicas and still run side by side),
the tasks that may write any replica (maintenance, syncpoint, bootstrap) all of them, so they
never overlap a merge. Airflow schedules no task of a pool that does not exist, so the pool must
be created with the changefeed's `[merge].parallel_jobs` slots before the DAGs run:
`airflow pools set <name> <slots> "tidelake replica writers"` (the demos do it over the REST API).

A lake on a filesystem needs no pool: Spark's log store there commits a version by an atomic
create-if-absent, so concurrent writers conflict and retry instead of overwriting. Its tasks stay
in Airflow's default pool, and a deployment without an object store has nothing to create.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidelake.config import ChangefeedConfig
from tidelake.lake.object_store import is_s3


@dataclass(frozen=True)
class WriterPool:
    name: str
    slots: int
    required: bool  # the lake is on an object store

    def task_args(self, exclusive: bool) -> dict[str, object]:
        """`pool`/`pool_slots` of a writing task: one slot, or the whole pool when `exclusive`;
        none (Airflow's default pool) when the lake needs no pool."""
        if not self.required:
            return {}
        return {"pool": self.name, "pool_slots": self.slots if exclusive else 1}


def writer_pool(config: ChangefeedConfig) -> WriterPool:
    """The replica writers' pool of a changefeed: as many slots as a merge run's parallel jobs."""
    return WriterPool(f"tidelake_writers__{config.changefeed_id}", config.merge.parallel_jobs,
                      is_s3(config.lake.root))
