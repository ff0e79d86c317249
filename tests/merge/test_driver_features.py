"""Which protocols the driver's writers accept (tidelake.merge.writers.driver_features): column
mapping in name mode only for a writer that stores it (the window rewrite), never with type
widening or deletion vectors, never in id mode; and a column-mapped replica's DDL removal is
handed to the fallback writer (Spark), never to delta-rs' DELETE. Logs written by hand.
tests/merge/test_column_mapped_driver.py runs the rewrite on such replicas against Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from pyspark.sql.types import BooleanType, StructField, StructType

from tidelake.errors import InputError
from tidelake.merge.replica_schema import DELETED_COLUMN
from tidelake.lake.row_change import OP_DELETE, OP_PUT
from tidelake.merge.window_spec import OP_COLUMN, Removal
from tidelake.merge.writers.delta_rs_writer import DeltaRsWriter, writable
from tidelake.merge.writers.driver_features import column_mapping_by_name, driver_protocol
from tidelake.merge.writers import file_rewrite
from tidelake.merge.writers.file_rewrite import rewrite_window
from tidelake.merge.writers.replica_window import ReplicaWindow

SCHEMA = {"type": "struct", "fields": [{"name": "my id", "type": "long", "nullable": True, "metadata": {
    "delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-1"}}]}


def _table(root: Path, protocol: dict, mode: str | None) -> DeltaTable:
    configuration = {"delta.columnMapping.mode": mode, "delta.columnMapping.maxColumnId": "1"} if mode else {}
    entries = [{"protocol": protocol},
               {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
                             "schemaString": json.dumps(SCHEMA), "partitionColumns": [],
                             "configuration": configuration, "createdTime": 0}}]
    (root / "_delta_log").mkdir(parents=True)
    (root / "_delta_log" / f"{0:020d}.json").write_text("".join(json.dumps(e) + "\n" for e in entries))
    return DeltaTable(str(root))


LEGACY = {"minReaderVersion": 2, "minWriterVersion": 5}
LEGACY_READER = {"minReaderVersion": 2, "minWriterVersion": 7, "writerFeatures": ["columnMapping", "changeDataFeed"]}
FEATURES = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["columnMapping", "timestampNtz"],
            "writerFeatures": ["columnMapping", "changeDataFeed", "timestampNtz"]}


@pytest.mark.parametrize(("protocol", "mode", "by_rewrite"), [
    (LEGACY, "name", True),
    (LEGACY_READER, "name", True),
    (FEATURES, "name", True),
    (LEGACY, "id", False),  # files matched by field id: not what the rewrite reads
    ({**FEATURES, "readerFeatures": ["columnMapping", "typeWidening"],
      "writerFeatures": ["columnMapping", "typeWidening"]}, "name", False),
    ({**FEATURES, "readerFeatures": ["columnMapping", "deletionVectors"],
      "writerFeatures": ["columnMapping", "deletionVectors"]}, "name", False),
    ({"minReaderVersion": 2, "minWriterVersion": 6}, "name", False),  # legacy 6: identity columns
])
def test_column_mapping_is_accepted_only_for_the_writer_that_stores_it(tmp_path, protocol, mode, by_rewrite):
    table = _table(tmp_path / "r", protocol, mode)
    assert driver_protocol(table, column_mapping=True) == by_rewrite
    assert not driver_protocol(table)  # delta-rs' own writes: logical names where the files hold physical ones
    assert column_mapping_by_name(table) == (mode == "name")


def test_a_replica_without_column_mapping_is_the_drivers_either_way(tmp_path):
    table = _table(tmp_path / "r", {"minReaderVersion": 1, "minWriterVersion": 4}, None)
    assert driver_protocol(table) and driver_protocol(table, column_mapping=True) and not column_mapping_by_name(table)


class _Recorder:
    def __init__(self) -> None:
        self.windows: list[ReplicaWindow] = []

    def write(self, window: ReplicaWindow) -> tuple[int, int]:
        self.windows.append(window)
        return 0, 7


def test_a_column_mapped_replicas_ddl_removal_goes_to_the_fallback_and_nothing_is_committed(tmp_path):
    table = _table(tmp_path / "r", LEGACY_READER, "name")
    target = StructType.fromJson(json.loads(table.schema().to_json()))
    assert writable(table, target, column_mapping=True)  # no soft deletes: the driver takes the replica
    assert not writable(table, target)  # delta-rs' own operations (a history MERGE, OPTIMIZE): not checked
    flagged = StructType([*target.fields, StructField(DELETED_COLUMN, BooleanType())])
    assert not writable(table, flagged, column_mapping=True)  # soft deletes: a flag only a MERGE sets
    window = ReplicaWindow(str(tmp_path / "r"), table, target, None, (), 0, 10, (), removal=Removal(10))
    fallback = _Recorder()
    assert DeltaRsWriter(None, fallback).write(window) == (0, 7)
    assert fallback.windows == [window] and DeltaTable(str(tmp_path / "r")).version() == 0
    with pytest.raises(InputError, match="column-mapped replica needs Spark"):
        DeltaRsWriter(None).write(window)
    assert DeltaTable(str(tmp_path / "r")).version() == 0


def test_the_rewrites_append_stores_physical_names_field_ids_and_statistics_by_physical_name(tmp_path):
    """A window of new keys on a column-mapped replica is the rewrite of no file: its data file
    holds the physical column with the mapping id as Parquet field id, its statistics are keyed by it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tidelake.merge.window_spec import OP_COLUMN
    from tidelake.merge.writers.file_rewrite import rewrite_window

    path = str(tmp_path / "r")
    table = _table(tmp_path / "r", LEGACY_READER, "name")
    mounted = pa.table({"my id": pa.array([1, 2], pa.int64()), OP_COLUMN: ["put", "put"]})
    assert rewrite_window(table, mounted, ["my id"], ["my id"], {}, 5, None, append=True) == (2, 2)
    (written,) = DeltaTable(path).file_uris()
    stored = pq.read_table(written)
    assert stored.schema.names == ["col-1"] and stored.schema.field("col-1").metadata == {b"PARQUET:field_id": b"1"}
    assert sorted(stored["col-1"].to_pylist()) == [1, 2]
    with open(f"{path}/_delta_log/{1:020d}.json") as commit:
        (add,) = [json.loads(line)["add"] for line in commit if '"add"' in line]
    assert json.loads(add["stats"]) == {"numRecords": 2, "minValues": {"col-1": 1}, "maxValues": {"col-1": 2},
                                        "nullCount": {"col-1": 0}}


def test_the_rewrite_prunes_a_column_mapped_replicas_files_by_its_key_columns_own_statistics(tmp_path,
                                                                                           monkeypatch):
    """The key (`id`) is not the first column: its files are pruned by `id`'s physical column's
    statistics, not by whichever column stands at the key's position: the two files holding the
    window's keys are read, the third is not. An update and a delete of held keys then leave one
    row per key, none for the deleted one, and the third file as it was."""
    root = tmp_path / "r"
    (root / "_delta_log").mkdir(parents=True)
    schema = {"type": "struct", "fields": [
        {"name": name, "type": "long", "nullable": True,
         "metadata": {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": f"col-{name}"}}
        for i, name in ((1, "qty"), (2, "id"))]}
    adds = []
    for n, (qty, key) in enumerate(((1, 100), (7, 200), (9, 300))):  # qty's bounds never hold the keys
        name = f"f{n}.parquet"
        pq.write_table(pa.table({"col-qty": pa.array([qty], pa.int64()), "col-id": pa.array([key], pa.int64())}),
                       root / name)
        stats = {"numRecords": 1, "minValues": {"col-qty": qty, "col-id": key},
                 "maxValues": {"col-qty": qty, "col-id": key}, "nullCount": {"col-qty": 0, "col-id": 0}}
        adds.append({"add": {"path": name, "partitionValues": {}, "size": (root / name).stat().st_size,
                             "modificationTime": 0, "dataChange": True, "stats": json.dumps(stats)}})
    entries = [{"protocol": LEGACY_READER},
               {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
                             "schemaString": json.dumps(schema), "partitionColumns": [],
                             "configuration": {"delta.columnMapping.mode": "name",
                                               "delta.columnMapping.maxColumnId": "2"}, "createdTime": 0}},
               *adds]
    (root / "_delta_log" / f"{0:020d}.json").write_text("".join(json.dumps(e) + "\n" for e in entries))
    window = pa.table({"qty": pa.array([5, None], pa.int64()), "id": pa.array([100, 200], pa.int64()),
                       OP_COLUMN: [OP_PUT, OP_DELETE]})

    read = []
    real_read = file_rewrite._read_file
    monkeypatch.setattr(file_rewrite, "_read_file",
                        lambda folder, path, *rest: read.append(path) or real_read(folder, path, *rest))

    written = rewrite_window(DeltaTable(str(root)), window, ["qty", "id"], ["id"], {}, 5, None)

    assert written == (2, 2)  # two changes: a row updated and one deleted, as a MERGE counts them
    table = DeltaTable(str(root))
    rows = [r for uri in table.file_uris() for r in pq.read_table(uri).to_pylist()]
    assert sorted(path.rsplit("/", 1)[-1] for path in read) == ["f0.parquet", "f1.parquet"]
    assert sorted(rows, key=lambda r: r["col-id"]) == [{"col-qty": 5, "col-id": 100}, {"col-qty": 9, "col-id": 300}]
