"""Which keys of a changelog window the replica can hold: read on the driver, no Spark job.

TiKV reports with each change the key's latest committed value before it, empty bytes when the
key had none (docs/wire.md §7.6 "Old value"). Changes of one raw key are ordered by commit ts
(two commits of one key never share a ts; equal (key, commit ts) rows are one change landed
twice, docs/design.md invariant 5), so the old value of a key's FIRST change in (lo, hi] is the
key's value at lo. A key whose first change has no old value held no row upstream at lo, and so
none in the replica at checkpoint lo (invariant 6): its rows can be appended, while a key with a
row at lo needs a MERGE (tidelake.merge.merge_job).

Nothing but the old value decides: a key inserted, deleted and inserted again in the window is
new by its first change; a row moving between partitions is a delete of one key and a put of
another (the replica key holds the partition id); a row loaded by a bootstrap snapshot at T has
an old value in every change after T, which is where its replica's windows start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidelake.lake.commit_buckets import bucket_label, bucket_seconds_of
from tidelake.lake.layout import LakeLayout
from tidelake.lake.row_change import OP_PUT

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class WindowKeys:
    """Raw keys changed in a window, by what the replica holds for them at its lower bound."""

    keys: int  # raw keys with a change in (lo, hi]
    new: int  # keys whose first change has no old value: no row at lo

    @property
    def held(self) -> int:
        """Keys with a row at lo: the ones a MERGE must update or delete."""
        return self.keys - self.new


def window_keys(layout: LakeLayout, physical_ids: Sequence[int], lo: int, hi: int) -> WindowKeys:
    """Classify the keys of the changelog window (lo, hi] of `physical_ids` (latest version),
    reading only `key, commit_ts, flush_seq, op, old_value` of the files the partitions and the
    commit-ts range leave."""
    import pyarrow.compute as pc

    rows = read_window_rows(layout, physical_ids, lo, hi, ["key", "commit_ts", "flush_seq", "old_value"])
    if rows.num_rows == 0:
        return WindowKeys(0, 0)
    held_at_lo = first_old_values(rows)  # only the first change's old value decides: one sort
    return WindowKeys(keys=len(held_at_lo), new=_count(pc.equal(pc.binary_length(held_at_lo), 0)))


def last_changes(rows: pa.Table) -> pa.Table:
    """One row per raw key of a window's changelog rows (`key, commit_ts, op, flush_seq, old_value`
    and any other columns): the key's last change (highest commit ts, a put over a delete at one
    ts, then the latest landing) with the old value of its FIRST change by (commit ts, landing),
    i.e. the row the key held at lo. The same rule as Spark's
    tidelake.merge.changelog_reader.collapse_last_change, in Arrow for windows read on the driver;
    tests/merge/test_last_changes.py holds the two to one reference."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if rows.num_rows == 0:
        return rows.drop_columns(["flush_seq"])
    ordered = rows.append_column("is_put", pc.equal(rows["op"], OP_PUT))
    last = ordered.take(pc.sort_indices(ordered, [("key", "ascending"), ("commit_ts", "ascending"),
                                                  ("is_put", "ascending"), ("flush_seq", "ascending")]))
    last = last.filter(_run_edge(last["key"], at_end=True))
    old = first_old_values(rows)  # same key order as `last`
    kept = [name for name in rows.column_names if name not in ("old_value", "flush_seq")]
    return pa.table({**{name: last[name] for name in kept}, "old_value": old})


def first_old_values(rows: pa.Table) -> pa.ChunkedArray:
    """The old value of each key's first change by (commit ts, landing), in key order: what the
    key held at lo (empty: no row)."""
    import pyarrow.compute as pc

    first = rows.select(["key", "commit_ts", "flush_seq", "old_value"])
    first = first.take(pc.sort_indices(first, [("key", "ascending"), ("commit_ts", "ascending"),
                                               ("flush_seq", "ascending")]))
    return first.filter(_run_edge(first["key"], at_end=False))["old_value"]


def _run_edge(keys: pa.ChunkedArray, at_end: bool) -> pa.Array:
    """True at the last (at_end) or first row of each run of equal keys."""
    import pyarrow as pa
    import pyarrow.compute as pc

    key = keys.combine_chunks()
    differs = pc.not_equal(key[1:], key[:-1])
    edge = pa.array([True])
    return pa.concat_arrays([differs, edge] if at_end else [edge, differs])


def read_window_rows(layout: LakeLayout, physical_ids: Sequence[int], lo: int, hi: int,
                     columns: Sequence[str]) -> pa.Table:
    """`columns` of the changelog rows of `physical_ids` with lo < commit_ts <= hi (latest version),
    read with delta-rs. The table_id partition filter prunes the file list in delta-rs before
    pyarrow builds a fragment per file: a dataset of the whole changelog costs time in its file
    count (1,000 tables: a fifth of a merge run, bench/README.md "Per-table costs of a small window")."""
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    changelog = DeltaTable(layout.changelog, storage_options=layout.storage_options)
    seconds = bucket_seconds_of(changelog)
    window = (ds.field("table_id").isin([int(p) for p in physical_ids])
              & (ds.field("commit_bucket") >= bucket_label(lo + 1, seconds))
              & (ds.field("commit_bucket") <= bucket_label(hi, seconds))
              & (ds.field("commit_ts") > lo) & (ds.field("commit_ts") <= hi))
    ids = [str(int(p)) for p in physical_ids]
    dataset = changelog.to_pyarrow_dataset(file_pruning_predicate=[("table_id", "in", ids)])
    return dataset.to_table(columns=list(columns), filter=window)


def _count(mask: object) -> int:
    import pyarrow.compute as pc

    return int(pc.sum(pc.cast(mask, "int64")).as_py() or 0)
