"""The upstream HISTORY of one FedLake table, to check SCD2 history tables and soft deletes against.

Independent of the merge: it replays every committed change (FedLake.committed) in commit order up
to a ts T, keeping only the physical ids the table had at T (TRUNCATE and partition DDL change
them), and decodes what is left with the schema the table had at T, as a snapshot read at T does.
It never reads the changelog, the history code or the replica.
"""

from __future__ import annotations

import copy
from typing import Any

from merge.lake_fixtures import FedLake, sorted_rows

from tidelake.codec.keys import decode_record_key
from tidelake.codec.row import decode_row
from tidelake.codec.schema import TableInfo
from tidelake.codec.spark_types import spark_value
from tidelake.lake.row_change import OP_DELETE


class TableHistory:
    """One upstream table over time: its schema after each DDL, its rows at any ts."""

    def __init__(self, lake: FedLake, db: str, name: str) -> None:
        self.lake, self.db, self.name = lake, db, name
        self.schemas: list[tuple[int, TableInfo]] = []

    def ddl(self, job) -> int:
        """Run a DDL of the table through the lake and remember the schema after it."""
        ts = self.lake.ddl(job)
        self.schemas.append((ts, copy.deepcopy(self.lake.up.table(self.db, self.name))))
        return ts

    def info_at(self, ts: int) -> TableInfo | None:
        infos = [info for at, info in self.schemas if at <= ts]
        return infos[-1] if infos else None

    def commit_ts(self) -> list[int]:
        """Every ts at which the table changed upstream: its commits and its DDLs."""
        return sorted({c.commit_ts for c in self.lake.committed} | {at for at, _ in self.schemas})

    def rows_by_key(self, ts: int) -> dict[bytes, dict[str, Any]]:
        """Raw key -> the row (upstream column names, Spark values) of the table at `ts`."""
        info = self.info_at(ts)
        if info is None:
            return {}
        pids = set(info.physical_ids())
        latest = {}
        for change in sorted(self.lake.committed, key=lambda c: c.commit_ts):
            if change.commit_ts <= ts and change.table_id in pids:
                latest[change.key] = change
        rows = {}
        for key, change in latest.items():
            if change.op == OP_DELETE:
                continue
            values = decode_row(change.value, info, decode_record_key(key)[1])
            rows[key] = {c.name: spark_value(values.get(c.name), c.field_type) for c in info.public_columns()}
        return rows

    def rows_at(self, ts: int) -> list[dict[str, Any]]:
        return sorted_rows(list(self.rows_by_key(ts).values()))

    def columns_at(self, ts: int) -> list[str]:
        info = self.info_at(ts)
        return [] if info is None else [c.name for c in info.public_columns()]


def valid_at(spark, path: str, ts: int, columns: list[str], version: int | None = None) -> list[dict[str, Any]]:
    """Rows of the history table at `path` valid at `ts` (the consumers' "as of" query), `columns` only."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    reader.load(path).createOrReplaceTempView("history_under_test")
    picked = ", ".join(f"`{c}`" for c in columns)
    rows = spark.sql(f"SELECT {picked} FROM history_under_test WHERE _tidb_valid_from <= {ts} "
                     f"AND (_tidb_valid_to IS NULL OR {ts} < _tidb_valid_to)").collect()
    return sorted_rows([r.asDict() for r in rows])
