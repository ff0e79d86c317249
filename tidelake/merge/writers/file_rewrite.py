"""A merge window as a rewrite of the replica files holding its keys: their other rows and the
window's puts in one new file, its row changes in one change data file, and ONE commit removing
the rewritten files, adding the new ones and recording the txn, created only if its version is
free (tidelake.lake.table_folder). The result is window_spec.replica_merge's for a replica without
soft deletes and a window without a DDL's removal, change data included, without the DataFusion
plan a delta-rs MERGE costs per window; on a column-mapped replica by physical names and field
ids, as Spark writes it. `rewrite_window` returns None, writing nothing, where it does not apply;
the caller then MERGEs (column-mapped: Spark does). Owner: DeltaRsWriter.

More: docs/internals.md#file_rewrite.
"""

from __future__ import annotations

import datetime as dt
import bisect
import io
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, Metadata
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError

from tidelake import __version__
from tidelake.errors import InputError
from tidelake.lake.checkpoint import MERGE_APP_ID, checkpoint_metadata
from tidelake.lake.column_mapping import FIELD_ID, PHYSICAL_NAME
from tidelake.lake.row_change import OP_PUT
from tidelake.lake.table_folder import TableFolder
from tidelake.merge.decimal_stats import listed_columns
from tidelake.merge.replica_schema import CHANGE_DATA_FEED
from tidelake.merge.txn_confs import fenced
from tidelake.merge.window_spec import OP_COLUMN
from tidelake.merge.writers.driver_features import column_mapping_by_name, driver_protocol

log = logging.getLogger(__name__)

REWRITE_MAX_BYTES = 16 * 1024 * 1024  # files read per window at most; above it a MERGE streams them
DEFAULT_INDEXED_COLUMNS = 32  # delta.dataSkippingNumIndexedCols' default (PROTOCOL.md "Per-file Statistics")
STRING_STATS_MAX_CHARS = 32  # longer strings get no min/max: a truncated max would be below the values
CHANGE_TYPE = "_change_type"  # the change data files' column (PROTOCOL.md "Change Data Files")
OPERATION = "MERGE"  # the commit's operation: a MERGE's result, as history() shows it
_FILE_COLUMN = "_tidelake_file"  # which file read a row came from
_SOURCE_COLUMN = "_tidelake_source"  # the window's row a read row's key matched
_REFUSED_FIELD_METADATA = ("delta.invariants", "delta.generationExpression", "delta.identity.start")
PARQUET_FIELD_ID = b"PARQUET:field_id"  # the Arrow field metadata pyarrow writes as a Parquet field_id


@dataclass(frozen=True)
class _File:
    logged: str  # the path as the log holds it (a remove must name it so)
    size: int

    @property
    def path(self) -> str:
        return unquote(self.logged)


def _refusal(replica: DeltaTable, metadata: Metadata, schema: DeltaSchema) -> str | None:
    """Why a window of `replica` may not be a rewrite: a protocol the driver does not write
    (driver_features, checked on the log it commits to), or metadata asking a writer for more
    than rows, statistics and change data (partitions, constraints, column rules); None: it may."""
    if not driver_protocol(replica, column_mapping=True):
        return "its protocol has features the driver does not write"
    fields = pa.schema(schema.to_arrow())
    unmapped = any(pa.types.is_nested(f.type) or PHYSICAL_NAME.encode() not in (f.metadata or {}) for f in fields)
    if column_mapping_by_name(replica) and unmapped:
        return "it is column-mapped with nested columns or a column without a physical name"
    configuration = metadata.configuration
    if metadata.partition_columns or configuration.get("delta.appendOnly", "false").lower() == "true" \
            or any(k.startswith("delta.constraints.") for k in configuration) \
            or any(key in (field.metadata or {}) for field in schema.fields for key in _REFUSED_FIELD_METADATA):
        return "it is partitioned, append-only, constrained or has column rules"
    return None


def rewrite_window(replica: DeltaTable, mounted: pa.Table, columns: Sequence[str], keys: Sequence[str],
                   match: dict[str, str], hi: int, storage_options: dict[str, str] | None,
                   append: bool = False) -> tuple[int, int] | None:
    """Apply the mounted window (`columns` and OP_COLUMN; the replica's key columns `keys` matched on
    the source's `match` columns where given) as one commit recording checkpoint `hi`, leaving the
    handle at it; `append`: the caller knows the replica holds none of its keys (no file is read).
    (changes, rows written as a MERGE counts them); written 0 means nothing changed and nothing
    was committed. None: not applicable, nothing written."""
    metadata, delta_schema = replica.metadata(), replica.schema()
    refusal = _refusal(replica, metadata, delta_schema)
    if refusal is not None:
        return _merged(replica, refusal)
    schema = pa.schema(delta_schema.to_arrow())
    physical = _physical_names(schema) if column_mapping_by_name(replica) else None
    stored = None if physical is None else _stored_schema(schema, physical)
    source_keys = [match.get(k, k) for k in keys]
    try:
        probe = mounted.select(source_keys).rename_columns(list(keys)).cast(pa.schema([schema.field(k) for k in keys]))
        is_put = pc.equal(mounted[OP_COLUMN], OP_PUT).to_numpy(zero_copy_only=False)
        puts = mounted.filter(is_put).select(list(columns)).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError) as exc:
        return _merged(replica, f"the window's columns do not cast to the replica's ({exc})")
    # A key the replica could hold twice in the window (a null key matches nothing: a common
    # handle's new key has no value at lo): the MERGE decides; a collapsed window has none.
    valid = probe.filter(pc.and_kleene(*[pc.is_valid(probe[k]) for k in keys]) if len(keys) > 1
                         else pc.is_valid(probe[keys[0]]))
    if valid.group_by(list(keys)).aggregate([]).num_rows != valid.num_rows:
        return _merged(replica, "the window holds a key twice")
    folder = TableFolder.of(replica.table_uri, storage_options)
    if folder is None:
        return _merged(replica, "no conditional create of commit files on its store")
    files = [] if append else _touched_files(replica, valid, keys, physical)
    if files is None:
        return _merged(replica, f"it would read more than {REWRITE_MAX_BYTES} bytes of files")
    # One join tags each read row with the window's row matching its key (null: none matches).
    sources = probe.append_column(_SOURCE_COLUMN, pa.array(np.arange(probe.num_rows, dtype=np.int64)))
    try:
        old = pa.concat_tables([_read_file(folder, f.path, schema, stored, i) for i, f in enumerate(files)]) if files \
            else schema.empty_table().append_column(_FILE_COLUMN, pa.array([], pa.int32()))
        tagged = old.join(sources, list(keys), join_type="left outer")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:  # a type Arrow lacks
        return _merged(replica, f"its files do not read or join as its schema ({exc})")
    hit = pc.is_valid(tagged[_SOURCE_COLUMN])
    matched = tagged.filter(hit)
    rewritten = np.unique(matched[_FILE_COLUMN].to_numpy())  # only files holding a matched key
    kept = tagged.filter(pc.and_(pc.invert(hit), pc.is_in(tagged[_FILE_COLUMN], pa.array(rewritten, pa.int32()))))
    by = matched[_SOURCE_COLUMN].to_numpy()
    updated = is_put[by]  # per matched row: a put's (updated) or a delete's
    put_of = np.cumsum(is_put) - 1  # a window row's index among the puts
    updates = pa.array(put_of[by[updated]], pa.int64())
    if matched.num_rows == 0 and puts.num_rows == 0:
        return mounted.num_rows, 0  # deletes of keys the replica does not hold: nothing changes
    metrics = {"numSourceRows": mounted.num_rows, "numTargetRowsInserted": puts.num_rows - len(updates),
               "numTargetRowsUpdated": len(updates), "numTargetRowsDeleted": matched.num_rows - len(updates),
               "numTargetFilesRemoved": len(rewritten)}
    configuration = metadata.configuration
    now = int(time.time() * 1000)
    actions: list[dict] = [{"remove": {"path": files[i].logged, "deletionTimestamp": now, "dataChange": True,
                                       "extendedFileMetadata": True, "partitionValues": {}, "size": files[i].size}}
                           for i in rewritten]
    rows = pa.concat_tables([kept.select(schema.names), puts]).combine_chunks()
    if rows.num_rows:
        name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        indexed = int(configuration.get("delta.dataSkippingNumIndexedCols", DEFAULT_INDEXED_COLUMNS))
        stats = file_stats(rows, indexed, listed_columns(configuration), physical)
        actions.append({"add": {"path": name, "partitionValues": {}, "size": _write_parquet(folder, name, rows, stored),
                                "modificationTime": now, "dataChange": True, "stats": stats}})
    if configuration.get(CHANGE_DATA_FEED, "false").lower() == "true":
        changes = _changes(matched.select(schema.names), updated, puts, updates)
        name = f"_change_data/cdc-00000-{uuid.uuid4()}.c000.snappy.parquet"
        size = _write_parquet(folder, name, changes, stored)
        actions.append({"cdc": {"path": name, "partitionValues": {}, "size": size, "dataChange": False}})
    _commit(replica, folder, actions, metrics, hi, now)
    return mounted.num_rows, metrics["numTargetRowsInserted"] + metrics["numTargetRowsUpdated"] \
        + metrics["numTargetRowsDeleted"]


def _changes(matched: pa.Table, updated: np.ndarray, puts: pa.Table, updates: pa.Array) -> pa.Table:
    """The window's change data as a MERGE writes it: a matched row deleted or updated (its
    preimage and the put's postimage), an unmatched put inserted."""
    inserted = np.ones(puts.num_rows, dtype=bool)
    inserted[updates.to_numpy(zero_copy_only=False)] = False
    parts = [(matched.filter(~updated), "delete"), (matched.filter(updated), "update_preimage"),
             (puts.take(updates), "update_postimage"), (puts.filter(inserted), "insert")]
    return pa.concat_tables([t.append_column(CHANGE_TYPE, pa.array([kind] * t.num_rows, pa.string()))
                             for t, kind in parts])


def _merged(replica: DeltaTable, why: str) -> None:
    """Say why the window is left to the MERGE (None: nothing was written)."""
    log.debug("replica %s: window MERGEd, not rewritten: %s", replica.table_uri, why)
    return None


def _commit(replica: DeltaTable, folder: TableFolder, actions: list[dict], metrics: dict[str, int], hi: int,
            now: int) -> None:
    """Create the replica's next version from `actions`, recording checkpoint `hi` as delta-rs'
    CommitProperties would (the txn, the fenced userMetadata); then bring the handle to it."""
    version = replica.version() + 1
    info = {"timestamp": now, "operation": OPERATION, "operationParameters": {}, "operationMetrics": metrics,
            "readVersion": version - 1, "isBlindAppend": False, "engineInfo": f"tidelake/{__version__}",
            "userMetadata": fenced(checkpoint_metadata(hi))}
    entries = [{"commitInfo": info}, {"txn": {"appId": MERGE_APP_ID, "version": hi, "lastUpdated": now}}, *actions]
    body = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries).encode()
    if not folder.create_commit(version, body):
        raise CommitFailedError(f"{replica.table_uri}: version {version} was committed by another writer first")
    replica.update_incremental()
    if replica.version() != version:  # the commit went where the log is not: stop, never go on without it
        raise InputError(f"{replica.table_uri}: commit {version} written but the log reads version {replica.version()}")


def _physical_names(schema: pa.Schema) -> dict[str, str]:
    """A column-mapped replica's (name mode) physical name of each column of its `schema`, by the
    column's name (PROTOCOL.md "Column Mapping"): the one map from logical to physical names here,
    for the data files' columns and the statistics' keys."""
    return {f.name: f.metadata[PHYSICAL_NAME.encode()].decode() for f in schema}


def _stored_schema(schema: pa.Schema, physical: dict[str, str]) -> pa.Schema:
    """A column-mapped replica's data file schema: each field of the replica's `schema` under its
    `physical` name, its column mapping id as its Parquet field id, as Spark writes them."""
    return pa.schema([pa.field(physical[f.name], f.type, f.nullable,
                               {PARQUET_FIELD_ID: f.metadata[FIELD_ID.encode()]}) for f in schema])


def _read_file(folder: TableFolder, path: str, schema: pa.Schema, stored: pa.Schema | None, index: int) -> pa.Table:
    """One data file's rows as the replica's schema (a column-mapped one's columns read by their
    `stored` physical names), tagged with its index among the files read. The file is read whole
    first: no Python file object reaches pyarrow's threads (docs/internals.md#delta_read)."""
    data = pa.BufferReader(folder.read(path))
    rows = pq.read_table(data, schema=schema) if stored is None \
        else pq.read_table(data, schema=stored).rename_columns(schema.names).cast(schema)
    return rows.append_column(_FILE_COLUMN, pa.array(np.full(rows.num_rows, index, dtype=np.int32)))


def _touched_files(replica: DeltaTable, probe: pa.Table, keys: Sequence[str],
                   physical: dict[str, str] | None) -> list[_File] | None:
    """The files that may hold a key of `probe`: pruned by each integer, string or date key
    column's min/max statistics (keyed by the column's `physical` name in a column-mapped
    replica), bounds every Delta reader's file skipping trusts (a file without them is read);
    None past REWRITE_MAX_BYTES, or for a file named by a URI (a shallow clone's)."""
    actions = pa.table(replica.get_add_actions(flatten=True))
    maybe = [True] * actions.num_rows
    for k in keys:
        stat = k if physical is None else physical[k]
        kind, low, high = probe.schema.field(k).type, f"min.{stat}", f"max.{stat}"
        if not _prunable(kind) or low not in actions.column_names or high not in actions.column_names:
            continue
        values = sorted(probe[k].drop_null().to_pylist())
        for i, (lo, hi) in enumerate(zip(actions[low].to_pylist(), actions[high].to_pylist(), strict=True)):
            if maybe[i] and lo is not None and hi is not None:
                maybe[i] = bisect.bisect_left(values, lo) < bisect.bisect_right(values, hi)
    files = [_File(p, size) for p, size, m in zip(actions["path"].to_pylist(), actions["size_bytes"].to_pylist(),
                                                    maybe, strict=True) if m]
    if sum(f.size for f in files) > REWRITE_MAX_BYTES or any("://" in f.logged for f in files):
        return None
    return files


def _prunable(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind) \
        or pa.types.is_date(kind)


def _write_parquet(folder: TableFolder, name: str, rows: pa.Table, stored: pa.Schema | None) -> int:
    """Write `rows` as one Parquet file `name` in one put, a column-mapped replica's columns
    under their `stored` physical names and field ids (others, _change_type, as they are); its size."""
    if stored is not None:
        fields = [stored.field(i) if i < len(stored) else f for i, f in enumerate(rows.schema)]
        rows = pa.Table.from_arrays(rows.columns, schema=pa.schema(fields))
    buffer = io.BytesIO()
    pq.write_table(rows, buffer, compression="snappy")
    data = buffer.getvalue()
    folder.put(name, data)
    return len(data)


def file_stats(rows: pa.Table, indexed: int = DEFAULT_INDEXED_COLUMNS, listed: set[str] | None = None,
               physical: dict[str, str] | None = None) -> str:
    """The add action's statistics (PROTOCOL.md "Per-file Statistics"): numRecords, and for the
    columns `listed` (lower-cased; delta.dataSkippingStatsColumns), else the first `indexed`
    (-1: all), keyed by their `physical` names where given (a column-mapped replica's,
    _physical_names), the null count of each, min/max where the bound is exact or safely wide:
    integers, dates, strings of up to STRING_STATS_MAX_CHARS, timestamps to the millisecond the
    protocol keeps (min floored, max ceiled). Other types get none; readers then keep the file for
    a filter on them."""
    stats: dict[str, object] = {"numRecords": rows.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    fields = list(rows.schema) if indexed < 0 else list(rows.schema)[:indexed]
    if listed is not None:
        fields = [f for f in rows.schema if f.name.lower() in listed]
    for field in fields:
        if pa.types.is_nested(field.type):
            continue
        column, name = rows[field.name], field.name if physical is None else physical[field.name]
        stats["nullCount"][name] = column.null_count
        bounds = _bounds(field.type, column)
        if bounds is not None:
            stats["minValues"][name], stats["maxValues"][name] = bounds
    return json.dumps(stats, separators=(",", ":"))


def _bounds(kind: pa.DataType, column: pa.ChunkedArray) -> tuple[object, object] | None:
    if column.null_count == len(column):
        return None
    found = pc.min_max(column)
    low, high = found["min"].as_py(), found["max"].as_py()
    if pa.types.is_integer(kind):
        return low, high
    if pa.types.is_date(kind):
        return low.isoformat(), high.isoformat()
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return (low, high) if max(len(low), len(high)) <= STRING_STATS_MAX_CHARS else None
    if pa.types.is_timestamp(kind):
        try:
            return _millis(found["min"], kind, ceiling=False), _millis(found["max"], kind, ceiling=True)
        except OverflowError:  # 9999-12-31 23:59:59.999999 ceils past the last datetime: no bound
            return None
    return None


def _millis(value: pa.Scalar, kind: pa.TimestampType, ceiling: bool) -> str:
    """A timestamp bound at millisecond precision, rounded outwards; UTC with Z, or without a zone
    for timestamp_ntz, as delta-rs writes them."""
    count = value.cast(pa.int64()).as_py()
    if kind.unit == "s":
        millis = count * 1000
    else:
        per_milli = {"ms": 1, "us": 1_000, "ns": 1_000_000}[kind.unit]
        millis = -(-count // per_milli) if ceiling else count // per_milli
    moment = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=millis)
    text = moment.isoformat(timespec="milliseconds")
    return f"{text}Z" if kind.tz is not None else text.replace("T", " ")
