"""The changelog as one merge run reads it on the driver: one delta-rs snapshot, opened after the
run read the watermarks, so it holds every change they cover (docs/design.md invariant 2). Its
file stats and bucket size are read once; windows are read from it without opening the log again,
the first windows of many tables in one scan read ahead (a scan's planning walks every file of
the snapshot). Owner: the merge run (tidelake.merge.merge_run).

A window's keys are told apart here, no Spark job: TiKV sends with each change the key's value
before it (docs/wire.md#old-value "Old value"), so the old value of a key's first change in (lo, hi]
is its row at lo, empty when it had none (tidelake.merge.window_spec says what follows).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from tidelake.lake.commit_buckets import bucket_label, bucket_seconds_of
from tidelake.lake.delta_read import read_delta, sql_string
from tidelake.lake.layout import DEFAULT_BUCKET_SECONDS, LakeLayout
from tidelake.lake.row_change import OP_PUT
from tidelake.merge.table_plan import FileStat
from tidelake.merge.window_spec import COLLAPSED_COLUMNS, FIRST_CHANGE_ORDER, IS_PUT, LAST_CHANGE_ORDER

_MAX_TS = (1 << 63) - 1
_KEY_COLUMNS = ["key", "commit_ts", "flush_seq", "old_value"]  # what telling keys apart reads
_AHEAD_COLUMNS = list(dict.fromkeys([*COLLAPSED_COLUMNS, "flush_seq", *_KEY_COLUMNS]))  # what a writer reads


@dataclass(frozen=True)
class WindowKeys:
    """Raw keys changed in a window, by what the replica holds for them at its lower bound."""

    keys: int  # raw keys with a change in (lo, hi]
    new: int  # keys whose first change has no old value: no row at lo

    @property
    def held(self) -> int:
        """Keys with a row at lo: the ones a MERGE must update or delete."""
        return self.keys - self.new


class ChangelogSnapshot:
    """One run's view of the changelog (see the module doc); safe to share between table threads."""

    def __init__(self, layout: LakeLayout) -> None:
        self.layout = layout
        exists = DeltaTable.is_deltatable(layout.changelog, storage_options=layout.storage_options)
        self.table = DeltaTable(layout.changelog, storage_options=layout.storage_options) if exists else None
        self.bucket_seconds = bucket_seconds_of(self.table) if exists else DEFAULT_BUCKET_SECONDS
        self._files = _files_by_table_id(self.table) if exists else {}
        self._ahead: dict[int, tuple[int, int, pa.Table]] = {}  # physical id -> (lo, hi, its rows read ahead)

    def read_ahead(self, windows: Sequence[tuple[Sequence[int], int, int]]) -> None:
        """Read the rows of every window (physical ids, lo, hi] in one scan, kept by physical id:
        rows() of a window within one of them is then served from memory, once. Call before the
        table threads start (it is not locked; each thread then takes only its own table's ids)."""
        if self.table is None or not windows:
            return
        by_bounds: dict[tuple[int, int], set[int]] = defaultdict(set)
        for ids, lo, hi in windows:
            by_bounds[(int(lo), int(hi))].update(int(p) for p in ids)
        where = " OR ".join(f"({self._where(sorted(ids), lo, hi)})" for (lo, hi), ids in by_bounds.items())
        rows = read_delta(self.table, _AHEAD_COLUMNS, where).sort_by("table_id")
        spans, start = {}, 0  # physical id -> its rows' (start, end) in the sorted read
        if rows.num_rows:
            runs = pc.run_end_encode(rows["table_id"].combine_chunks())
            for pid, end in zip(runs.values.to_pylist(), runs.run_ends.to_pylist()):
                spans[int(pid)], start = (start, end), end
        for (lo, hi), ids in by_bounds.items():
            for pid in ids:  # its slice of the sorted rows, kept to its own bounds
                begin, end = spans.get(pid, (0, 0))
                mine = rows.slice(begin, end - begin)
                ts = mine["commit_ts"]
                self._ahead[pid] = (lo, hi, mine.filter(pc.and_(pc.greater(ts, lo), pc.less_equal(ts, hi))))

    def file_stats(self, physical_ids: Sequence[int], lo: int, hi: int) -> list[FileStat]:
        """Stats of the files of `physical_ids` that may hold a commit ts in (lo, hi]. A file
        without stats counts as spanning all time, so "no file" is a sound emptiness test."""
        return [FileStat(n, low, high) for pid in physical_ids for n, low, high in self._files.get(int(pid), ())
                if high > lo and low <= hi]

    def rows(self, physical_ids: Sequence[int], lo: int, hi: int, columns: Sequence[str],
             keep: bool = False) -> pa.Table:
        """`columns` of the rows of `physical_ids` with lo < commit_ts <= hi. The table_id and
        commit_bucket partitions and the commit_ts stats prune the files delta-rs reads. `keep`:
        rows read ahead stay for the window's next reader (a history table reads it before its replica)."""
        if self.table is None or not physical_ids:
            return pa.table({c: [] for c in columns})
        ahead = [self._ahead.get(int(p)) for p in physical_ids]
        if all(a is not None and a[0] <= lo and hi <= a[1] for a in ahead) and set(columns) <= set(_AHEAD_COLUMNS):
            if not keep:  # served once (a retried window reads its own)
                for p in physical_ids:
                    self._ahead.pop(int(p), None)
            read = pa.concat_tables([a[2] for a in ahead])
            ts = read["commit_ts"]
            return read.filter(pc.and_(pc.greater(ts, lo), pc.less_equal(ts, hi))).select(list(columns))
        return read_delta(self.table, columns, self._where(physical_ids, lo, hi))

    def _where(self, physical_ids: Sequence[int], lo: int, hi: int) -> str:
        """The predicate of the rows of `physical_ids` in (lo, hi]: both partition columns and the ts."""
        seconds = self.bucket_seconds
        ids = ", ".join(str(int(p)) for p in physical_ids)
        return (f"table_id IN ({ids})"
                f" AND commit_bucket >= {sql_string(bucket_label(lo + 1, seconds))}"
                f" AND commit_bucket <= {sql_string(bucket_label(hi, seconds))}"
                f" AND commit_ts > {int(lo)} AND commit_ts <= {int(hi)}")

    def last_changes(self, physical_ids: Sequence[int], lo: int, hi: int) -> pa.Table:
        """The window collapsed: one row of COLLAPSED_COLUMNS per raw key."""
        return last_changes(self.rows(physical_ids, lo, hi, [*COLLAPSED_COLUMNS, "flush_seq"]))

    def key_changes(self, physical_ids: Sequence[int], lo: int, hi: int) -> pa.Table:
        """Every change of the window, one per raw key and commit ts (key_changes), read ahead rows kept
        for the replica's window."""
        return key_changes(self.rows(physical_ids, lo, hi, [*COLLAPSED_COLUMNS, "flush_seq"], keep=True))

    def window_keys(self, physical_ids: Sequence[int], lo: int, hi: int) -> WindowKeys:
        """Tell the window's keys apart, reading only what that takes."""
        rows = self.rows(physical_ids, lo, hi, _KEY_COLUMNS)
        if rows.num_rows == 0:
            return WindowKeys(0, 0)
        held_at_lo = first_old_values(rows)
        return WindowKeys(keys=len(held_at_lo), new=_count(pc.equal(pc.binary_length(held_at_lo), 0)))


def last_changes(rows: pa.Table) -> pa.Table:
    """One row per raw key of a window's rows: its last change by LAST_CHANGE_ORDER with the old
    value of its first change by FIRST_CHANGE_ORDER (tidelake.merge.window_spec), in Arrow; any
    other columns are carried. tests/merge/test_last_changes.py holds it and Spark's
    tidelake.merge.changelog_reader.collapse_last_change to one reference."""
    if rows.num_rows == 0:
        return rows.drop_columns(["flush_seq"])
    ordered = rows.append_column(IS_PUT, pc.equal(rows["op"], OP_PUT))
    last = ordered.take(pc.sort_indices(ordered, _ascending(["key", *LAST_CHANGE_ORDER])))
    last = last.filter(_run_edge([last["key"]], at_end=True))
    old = first_old_values(rows)  # same key order as `last`
    kept = [name for name in rows.column_names if name not in ("old_value", "flush_seq")]
    return pa.table({**{name: last[name] for name in kept}, "old_value": old})


def first_old_values(rows: pa.Table) -> pa.ChunkedArray:
    """The old value of each key's first change, in key order: what the key held at lo (empty: no row)."""
    first = rows.select(["key", *FIRST_CHANGE_ORDER, "old_value"])
    first = first.take(pc.sort_indices(first, _ascending(["key", *FIRST_CHANGE_ORDER])))
    return first.filter(_run_edge([first["key"]], at_end=False))["old_value"]


def key_changes(rows: pa.Table) -> pa.Table:
    """A window's rows with a change landed twice as one: per raw key and commit ts the change
    LAST_CHANGE_ORDER picks (tidelake.merge.window_spec), sorted by key then commit ts, with
    COLLAPSED_COLUMNS (each its own old value). The SCD2 history's versions on the driver
    (tidelake.merge.writers.history_rows); Spark's is scd2_history.history_source."""
    if rows.num_rows == 0:
        return rows.select(list(COLLAPSED_COLUMNS))
    ordered = rows.append_column(IS_PUT, pc.equal(rows["op"], OP_PUT))
    ordered = ordered.take(pc.sort_indices(ordered, _ascending(["key", *LAST_CHANGE_ORDER])))
    one = ordered.filter(_run_edge([ordered["key"], ordered["commit_ts"]], at_end=True))
    return one.select(list(COLLAPSED_COLUMNS))


def held_keys(collapsed: pa.Table) -> int:
    """Keys of a collapsed window that held a row at lo (a non-empty old value)."""
    return _count(pc.greater(pc.fill_null(pc.binary_length(collapsed["old_value"]), 0), 0))


def _ascending(columns: Sequence[str]) -> list[tuple[str, str]]:
    return [(c, "ascending") for c in columns]


def _run_edge(keys: Sequence[pa.ChunkedArray], at_end: bool) -> pa.Array:
    """True at the last (at_end) or first row of each run of equal keys (equal in every one of `keys`)."""
    differs = None
    for column in keys:
        key = column.combine_chunks()
        step = pc.not_equal(key[1:], key[:-1])
        differs = step if differs is None else pc.or_(differs, step)
    edge = pa.array([True])
    return pa.concat_arrays([differs, edge] if at_end else [edge, differs])


def _count(mask: object) -> int:
    return int(pc.sum(pc.cast(mask, "int64")).as_py() or 0)


def _files_by_table_id(changelog: DeltaTable) -> dict[int, list[tuple[int, int, int]]]:
    """(records, min commit ts, max commit ts) of every changelog file, by physical table id."""
    actions = pa.table(changelog.get_add_actions(flatten=True))
    by_id: dict[int, list[tuple[int, int, int]]] = {}
    for row in actions.select(["partition.table_id", "num_records", "min.commit_ts", "max.commit_ts"]).to_pylist():
        low, high, n = row["min.commit_ts"], row["max.commit_ts"], row["num_records"]
        if low is None or high is None:  # no stats: the file may hold any ts
            low, high = 0, _MAX_TS
        records = int(n) if n is not None else 1
        by_id.setdefault(int(row["partition.table_id"]), []).append((records, int(low), int(high)))
    return by_id
