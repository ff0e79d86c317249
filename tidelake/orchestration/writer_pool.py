"""The Airflow pool that keeps two Spark writers off one replica at a time on an s3 lake: Spark's S3
log store has no conditional PUT, so two commits of one replica version could overwrite each
other. Merges take a slot each, maintenance and syncpoints the whole pool.
Owner: the merge, maintenance and bootstrap DAGs, which take its slots.

More: docs/internals.md#writer_pool.
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
