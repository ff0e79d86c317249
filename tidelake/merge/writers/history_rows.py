"""The rows of an SCD2 history table's MERGE (docs/history.md): its version columns, the shape of
a window's MERGE source, and that source built in Arrow on the driver from the run's changelog
snapshot, the rows tidelake.merge.scd2_history.history_source builds in Spark (tests/merge/
test_history_driver.py holds the two to one history). The MERGE itself is window_spec.history_merge
for both engines. Owner: tidelake.merge.scd2_history, which writes the history table.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType

from tidelake.codec.schema import TableInfo
from tidelake.lake.row_change import OP_PUT
from tidelake.merge.mount import mount_arrow
from tidelake.merge.replica_schema import COMMIT_TS_COLUMN, key_columns
from tidelake.merge.window_spec import OP_COLUMN, match_columns

VALID_FROM_COLUMN = "_tidb_valid_from"
VALID_TO_COLUMN = "_tidb_valid_to"
CURRENT_COLUMN = "_tidb_is_current"
VERSION_COLUMNS = (VALID_FROM_COLUMN, VALID_TO_COLUMN, CURRENT_COLUMN)
KIND_COLUMN = "_tidelake_kind"  # the source row's kind: 'version' (a row's new version) or 'close'


def mount_struct(history: StructType) -> StructType:
    """What mount() decodes into for the history: its row columns plus the commit ts."""
    return StructType([*(f for f in history.fields if f.name not in VERSION_COLUMNS),
                       StructField(COMMIT_TS_COLUMN, LongType(), True)])


def source_struct(history: StructType) -> StructType:
    """The MERGE source's schema: the history's columns, all nullable (a close holds only the key), and the kind."""
    return StructType([*(StructField(f.name, f.dataType, True) for f in history.fields),
                       StructField(KIND_COLUMN, StringType(), True)])


def empty_source(history: StructType) -> pa.Table:
    """A MERGE source of no rows: a step that only records its checkpoint."""
    return to_arrow_schema(source_struct(history), timezone="UTC").empty_table()


def history_rows(changes: pa.Table, info: TableInfo, history: StructType) -> pa.Table:
    """The MERGE source of a window's changes (changelog_snapshot.key_changes: one per key and
    commit ts, by key then ts): a 'version' row per put (valid_from its commit ts, valid_to the
    key's next change, current when there is none) and a 'close' row per key at its first change,
    keyed by the key's columns before that change (a common handle's PK as it was: match_columns)."""
    if changes.num_rows == 0:
        return empty_source(history)
    schema = to_arrow_schema(source_struct(history), timezone="UTC")
    key, ts = changes["key"].combine_chunks(), changes["commit_ts"].combine_chunks()
    same_key = pc.equal(key[1:], key[:-1])  # row i + 1 changes the key of row i
    has_next = pa.concat_arrays([same_key, pa.array([False])])
    next_ts = pc.if_else(has_next, pa.concat_arrays([ts[1:], pa.array([None], ts.type)]), pa.scalar(None, ts.type))
    first = pa.concat_arrays([pa.array([True]), pc.invert(same_key)])
    mounted = mount_arrow(changes, info, mount_struct(history))  # row for row, in order
    row_columns = [f for f in schema if f.name not in (*VERSION_COLUMNS, KIND_COLUMN)]
    puts = pc.equal(mounted[OP_COLUMN], OP_PUT)
    put_ts = pc.filter(next_ts, puts)
    versions = pa.table({
        **{f.name: mounted[f.name].filter(puts) for f in row_columns},
        VALID_FROM_COLUMN: mounted[COMMIT_TS_COLUMN].filter(puts), VALID_TO_COLUMN: put_ts,
        CURRENT_COLUMN: pc.is_null(put_ts), KIND_COLUMN: pa.array(["version"] * len(put_ts), pa.string()),
    }, schema=schema)
    keys, before, n = key_columns(info), match_columns(info), _count(first)
    closes = pa.table({
        **{f.name: mounted[before.get(f.name, f.name)].filter(first) if f.name in keys else pa.nulls(n, f.type)
           for f in row_columns},
        VALID_FROM_COLUMN: mounted[COMMIT_TS_COLUMN].filter(first), VALID_TO_COLUMN: pa.nulls(n, pa.int64()),
        CURRENT_COLUMN: pa.nulls(n, pa.bool_()), KIND_COLUMN: pa.array(["close"] * n, pa.string()),
    }, schema=schema)
    return pa.concat_tables([versions, closes])


def version_count(source: pa.Table) -> int:
    """The 'version' rows of a MERGE source history_rows built: the versions a step writes."""
    return _count(pc.equal(source[KIND_COLUMN], "version"))


def _count(mask: pa.Array | pa.ChunkedArray) -> int:
    return int(pc.sum(pc.cast(mask, "int64")).as_py() or 0)
