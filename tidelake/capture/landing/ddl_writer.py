"""The puller's side of the `ddl` table (tidelake.lake.ddl_log).

Rows are inserted with a MERGE that only inserts absent keys, so a DDL job delivered twice (at-
least-once pulling, a crash-replayed flush) is stored once.
Owner: the lander; bootstrap's handoff (tidelake.bootstrap.handoff) writes through it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple

import pyarrow as pa

from tidelake.capture.landing.app_txn import AppTxnTable, commit_once, commit_properties
from tidelake.lake.ddl_log import DdlRow
from tidelake.lake.layout import DDL_KEY, DDL_SCHEMA, LakeLayout, open_or_create
from tidelake.lake.log_cleanup import POST_COMMIT


def ddl_rows_to_arrow(rows: Sequence[DdlRow]) -> pa.Table:
    columns = list(zip(*(astuple(r) for r in rows))) if rows else [[] for _ in DDL_SCHEMA]
    return pa.Table.from_arrays(
        [pa.array(col, f.type) for col, f in zip(columns, DDL_SCHEMA)], schema=DDL_SCHEMA
    )


class DdlWriter(AppTxnTable):
    """Writes DDL rows for one app id, de-duplicated by DDL_KEY, idempotent per flush sequence."""

    def __init__(self, layout: LakeLayout, app_id: str) -> None:
        super().__init__(open_or_create(layout, layout.ddl, DDL_SCHEMA), app_id)

    def insert(self, rows: Sequence[DdlRow], seq: int, writer: str = "") -> bool:
        """Insert the rows not yet present as flush `seq`; False if that flush had landed."""
        unique = list({tuple(getattr(r, k) for k in DDL_KEY): r for r in rows}.values())
        predicate = " AND ".join(f"t.{k} = s.{k}" for k in DDL_KEY)

        def write() -> None:
            (
                self._table.merge(
                    ddl_rows_to_arrow(unique),
                    predicate=predicate,
                    source_alias="s",
                    target_alias="t",
                    commit_properties=commit_properties(self.app_id, seq, writer),
                    post_commithook_properties=POST_COMMIT,
                )
                .when_not_matched_insert_all()
                .execute()
            )

        return commit_once(self._table, self.app_id, seq, self.committed_seq, write, "ddl", writer)
