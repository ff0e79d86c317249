"""Which protocols the driver's writers accept (tidelake.merge.writers.driver_features): column
mapping in name mode only for a writer that stores it (the window rewrite), never with type
widening or deletion vectors, never in id mode. Logs written by hand: one commit each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tidelake.merge.writers.driver_features import column_mapped, driver_protocol

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
    assert column_mapped(table) == (mode == "name")


def test_a_replica_without_column_mapping_is_the_drivers_either_way(tmp_path):
    table = _table(tmp_path / "r", {"minReaderVersion": 1, "minWriterVersion": 4}, None)
    assert driver_protocol(table) and driver_protocol(table, column_mapping=True) and not column_mapped(table)
