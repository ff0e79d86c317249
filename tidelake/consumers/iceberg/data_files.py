"""The Parquet files of one Delta version as Iceberg data files: path, size and record count from
the version's add actions (delta-io/delta PROTOCOL.md "Add File and Remove File", stats.numRecords),
no partition (tidelake.consumers.iceberg.refusal refuses partitioned tables). Owner:
tidelake.consumers.iceberg.publish.
"""

from __future__ import annotations

from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

UNPARTITIONED_SPEC_ID = 0


def delta_data_files(delta: DeltaTable, root: str, io: FileIO) -> dict[str, DataFile]:
    """file URI -> Iceberg DataFile of every file of `delta`'s version, a table at `root`. A file whose add action has
    no record count (stats not collected) is counted from its Parquet footer."""
    actions = pa.table(delta.get_add_actions(flatten=True))
    found = {}
    for path, size, records in zip(actions["path"].to_pylist(), actions["size_bytes"].to_pylist(),
                                   actions["num_records"].to_pylist(), strict=True):
        uri = path if "://" in path else f"{root}/{unquote(path)}"
        if records is None:
            with io.new_input(uri).open() as stream:
                records = pq.read_metadata(stream).num_rows
        data_file = DataFile.from_args(content=DataFileContent.DATA, file_path=uri, file_format=FileFormat.PARQUET,
                                       partition=Record(), record_count=records, file_size_in_bytes=size)
        data_file.spec_id = UNPARTITIONED_SPEC_ID
        found[uri] = data_file
    return found
