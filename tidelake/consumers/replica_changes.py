"""A replica's change data feed between two upstream TSOs, for consumers that read incrementally.

The changes upstream committed in (A, B] are the replica's CDF between the versions that recorded
checkpoints A and B; a range never spans a DDL's rewrite of the replica. Read with delta-rs.
Owner: `tidelake changes`.

More: docs/internals.md#replica_changes.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import pyarrow as pa
from deltalake import DeltaTable

from tidelake.errors import InputError
from tidelake.lake.checkpoint import CHECKPOINT_METADATA_KEY, MERGE_APP_ID, REWRITE_METADATA_KEY, metadata_int

CHECKPOINT_COLUMN = "_tidelake_checkpoint"
VERSION_COLUMN = "_commit_version"
# The columns delta-rs's load_cdf adds (Delta PROTOCOL.md "Change Data Files"), and ours.
CDF_FIELDS = (
    pa.field("_change_type", pa.string()),
    pa.field(VERSION_COLUMN, pa.uint64()),
    pa.field("_commit_timestamp", pa.timestamp("ms")),
    pa.field(CHECKPOINT_COLUMN, pa.int64()),
)


@dataclass(frozen=True)
class ChangeRange:
    """Delta versions [first_version, last_version] of a replica holding the upstream changes in
    (from_checkpoint, to_checkpoint]; from_checkpoint None means since the replica's creation.
    Empty when first_version > last_version."""

    path: str
    from_checkpoint: int | None
    to_checkpoint: int
    first_version: int
    last_version: int
    checkpoints: dict[int, int]  # Delta version -> the checkpoint it recorded, for versions in range

    @property
    def empty(self) -> bool:
        return self.first_version > self.last_version


def rewrites(commits: list[dict]) -> dict[int, int]:
    """Delta version -> DDL commit ts of each of `commits` that rewrote the replica for a DDL."""
    found = {commit["version"]: metadata_int(commit, REWRITE_METADATA_KEY) for commit in commits}
    return {version: ts for version, ts in found.items() if ts is not None}


def recorded_checkpoints(commits: list[dict]) -> list[tuple[int, int]]:
    """(checkpoint, Delta version that recorded it), ascending, among `commits` (DeltaTable.history()).

    A commit that records a checkpoint names it in commitInfo.userMetadata; a DDL step may name it
    on several commits, and only the last of them carries the txn (tidelake.merge.ddl_apply), so
    the last version naming a checkpoint is the one that holds it."""
    last: dict[int, int] = {}
    for commit in commits:
        checkpoint = metadata_int(commit, CHECKPOINT_METADATA_KEY)
        if checkpoint is not None:
            last[checkpoint] = max(last.get(checkpoint, -1), commit["version"])
    return sorted(last.items())


def change_range(path: str, from_ts: int | None, to_ts: int | None = None,
                 storage_options: dict[str, str] | None = None) -> ChangeRange:
    """The versions holding the changes after checkpoint `from_ts` up to `to_ts` (default: the
    replica's current checkpoint); InputError when `from_ts` is not a recorded checkpoint."""
    table = DeltaTable(path, storage_options=storage_options)
    current = table.transaction_version(MERGE_APP_ID)
    if current is None:
        raise InputError(f"{path}: the replica has not recorded a checkpoint yet: no merge has run")
    commits = table.history()  # the kept log, read once for checkpoints, rewrites and the oldest version
    recorded = recorded_checkpoints(commits)
    if not recorded:
        raise InputError(f"{path}: no commit in the kept Delta log names a checkpoint")
    points = [c for c, _ in recorded]
    upper = current if to_ts is None else to_ts
    if from_ts is None:
        first_version = min(commit["version"] for commit in commits)  # the oldest kept
    elif from_ts < points[0]:
        raise InputError(f"{path}: {from_ts} is older than the oldest checkpoint the Delta log still holds "
                         f"({points[0]}); the log before it was cleaned up (delta.logRetentionDuration)")
    else:
        i = bisect.bisect_left(points, from_ts)
        if i == len(points) or points[i] != from_ts:
            nearest = ", ".join(str(p) for p in points[max(i - 1, 0): i + 1])
            raise InputError(f"{path}: {from_ts} is not a checkpoint this replica recorded (nearest: {nearest}); "
                             "a range starts where a merge left the replica")
        if upper < from_ts:
            raise InputError(f"{path}: to_ts {upper} is before from_ts {from_ts}")
        first_version = recorded[i][1] + 1
    j = bisect.bisect_right(points, upper) - 1
    if j < 0:
        raise InputError(f"{path}: no checkpoint at or before {upper} (the oldest kept is {points[0]})")
    to_checkpoint, last_version = recorded[j]
    for version, ddl_ts in sorted(rewrites(commits).items()):
        if version == first_version:
            first_version += 1  # the range starts right before the rewrite: it starts after it
        elif first_version < version <= last_version:
            before = max((c for c, v in recorded if v < version), default=None)
            raise InputError(f"{path}: the range crosses the rewrite of the replica by the DDL committed at {ddl_ts} "
                             f"(Delta version {version}): the schema changed there; read up to checkpoint {before}, "
                             f"apply the DDL, then read from {before}")
    in_range = {version: checkpoint for checkpoint, version in recorded if first_version <= version <= last_version}
    return ChangeRange(path, from_ts, to_checkpoint, first_version, last_version, in_range)


def read_changes(rng: ChangeRange, storage_options: dict[str, str] | None = None) -> pa.Table:
    """The CDF rows of the range in commit order, each with `_tidelake_checkpoint`."""
    # Read as of the range's end: delta-rs reads every version's changes in the loaded version's
    # columns, which a later RENAME or DROP COLUMN would have changed.
    table = DeltaTable(rng.path, version=rng.last_version, storage_options=storage_options)
    if rng.empty:
        return pa.schema([*_without_views(pa.schema(table.schema().to_arrow())), *CDF_FIELDS]).empty_table()
    changes = pa.RecordBatchReader.from_stream(
        table.load_cdf(starting_version=rng.first_version, ending_version=rng.last_version)
    ).read_all()
    changes = changes.cast(_without_views(changes.schema))
    # A row written by a DDL step before the commit that records the checkpoint belongs to the
    # next recorded checkpoint.
    versions = sorted(rng.checkpoints)
    per_row = [rng.checkpoints[versions[bisect.bisect_left(versions, v)]]
               for v in changes.column(VERSION_COLUMN).to_pylist()]
    changes = changes.append_column(CHECKPOINT_COLUMN, pa.array(per_row, pa.int64()))
    return changes.sort_by(VERSION_COLUMN) if changes.num_rows else changes


def _without_views(schema: pa.Schema) -> pa.Schema:
    """delta-rs returns string_view/binary_view columns, which many pyarrow kernels (take, sort)
    and older readers do not handle; the plain types hold the same values."""
    plain = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    return pa.schema([f.with_type(plain.get(f.type, f.type)) for f in schema])
