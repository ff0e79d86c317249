"""Every in-process read of a lake table into Arrow goes through here, on delta-rs's own engine
(DeltaTable.scan), never DeltaTable.to_pyarrow_table/_dataset: those give pyarrow's C++ thread
pools Python file objects, one of which a pool thread may release after the read returned; if the
interpreter is exiting then, the thread dies taking the GIL and the process aborts after its work
("terminate called without an active exception", exit 134; apache/arrow issue #34314). scan keeps
the read in delta-rs's Rust runtime and serves the table at the snapshot the DeltaTable loaded.
Owner: the lake contracts; every stage's in-process reads go through it.

More: docs/internals.md#delta_read.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from deltalake import DeltaTable


def read_delta(table: DeltaTable, columns: Sequence[str] | None = None, where: str | None = None) -> pa.Table:
    """`columns` (all by default) of the rows matching the SQL predicate `where` (all by default),
    in the table's own Arrow types; row order is unspecified."""
    schema = pa.schema(table.schema().to_arrow())
    if columns is not None:
        schema = pa.schema([schema.field(name) for name in columns])
    rows = pa.table(table.scan(columns=None if columns is None else list(columns), predicate=where))
    return rows.select(schema.names).cast(schema)


def sql_string(value: str) -> str:
    """`value` as a SQL string literal for a `where` predicate."""
    return "'" + value.replace("'", "''") + "'"
