"""The changelog's `commit_bucket` partition: which bucket a TSO falls in, and the bucket size a
table was created with (docs/design.md#lake-layout).
Owner: the lander partitions the changelog with it; retention, compaction and the merge read it.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from tidelake.errors import InputError
from tidelake.lake.layout import BUCKET_FORMAT, BUCKET_SECONDS_PROPERTY, DEFAULT_BUCKET_SECONDS
from tidelake.tso import PHYSICAL_SHIFT_BITS


def bucket_seconds_of(table: DeltaTable) -> int:
    """Commit-bucket size the table was created with (the table, not the config, is the truth)."""
    raw = table.metadata().configuration.get(BUCKET_SECONDS_PROPERTY)
    if raw is None:
        return DEFAULT_BUCKET_SECONDS
    try:
        seconds = int(raw)
    except ValueError:
        seconds = 0
    if seconds <= 0:
        raise InputError(f"table property {BUCKET_SECONDS_PROPERTY}={raw!r} is not a positive int")
    return seconds


def commit_buckets(commit_ts: pa.Array, bucket_seconds: int) -> pa.Array:
    """`commit_bucket` partition values: UTC start of the bucket holding each TSO's physical time."""
    physical_ms = pc.shift_right(commit_ts, PHYSICAL_SHIFT_BITS)  # tidelake/tso.py layout
    bucket_ms = bucket_seconds * 1000
    start_ms = pc.multiply(pc.divide(physical_ms, bucket_ms), bucket_ms)
    distinct = pc.unique(start_ms)
    labels = pc.strftime(distinct.cast(pa.timestamp("ms", tz="UTC")), format=BUCKET_FORMAT)
    return pc.take(labels, pc.index_in(start_ms, value_set=distinct))


def bucket_label(ts: int, bucket_seconds: int) -> str:
    """Partition value of the bucket holding TSO `ts`."""
    return commit_buckets(pa.array([ts], pa.int64()), bucket_seconds)[0].as_py()
