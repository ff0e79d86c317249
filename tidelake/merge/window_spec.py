"""What a merge window does to a replica, declared once: the writers (tidelake.merge.writers) run
it on Spark and on delta-rs and hold no rule of their own. Owner: the merge, for docs/design.md
invariants 3 to 5.

- Collapse: a raw key's last change in (lo, hi], and the old value of its first one (its row at lo).
- Clauses: the replica's MERGE, matched on the key as it was at lo; soft deletes flag, not delete;
  the SCD2 history table's MERGE of versions and closes.
- Append: a window none of whose keys held a row at lo is one append.
- Removal: the rows a DDL removes leave in its last commit, with the rows committed at its ts.
- Barriers: a DDL cuts the windows unless it leaves the replica and the row decoding unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from tidelake.codec import mysql_types as mt
from tidelake.codec.ddl_job import ActionType
from tidelake.codec.schema import TableInfo
from tidelake.lake.schema_history import DdlEvent
from tidelake.merge.replica_schema import (
    COMMIT_TS_COLUMN,
    DELETED_COLUMN,
    PARTITION_ID_COLUMN,
    key_columns,
    quote,
    replica_columns,
    stored_columns,
)
from tidelake.merge.soft_deletes import live_condition

# --- collapse ----------------------------------------------------------------------------

IS_PUT = "is_put"  # op == 'put', derived: a put wins over a delete at one commit ts
# Ascending: a key's LAST change by this order is the one the window applies. Equal (key,
# commit ts) rows are one change landed twice (invariant 5); flush_seq only makes the pick stable.
LAST_CHANGE_ORDER = ("commit_ts", IS_PUT, "flush_seq")
# Ascending: the old value of a key's FIRST change by this order is the row the key held at lo.
FIRST_CHANGE_ORDER = ("commit_ts", "flush_seq")
# What a collapsed window holds per key: the last change's columns, then the first change's old value.
COLLAPSED_COLUMNS = ("table_id", "commit_ts", "op", "key", "value", "old_value")

# --- clauses -----------------------------------------------------------------------------

OP_COLUMN = "_tidelake_op"  # the mounted source's op column: put or delete
MATCH_PREFIX = "_tidelake_match_"  # a common handle's key column as it was at lo


class When(StrEnum):
    MATCHED = "matched"
    NOT_MATCHED = "not matched"
    NOT_MATCHED_BY_SOURCE = "not matched by source"


class Action(StrEnum):
    DELETE = "delete"
    UPDATE = "update"
    INSERT = "insert"


@dataclass(frozen=True)
class Clause:
    """WHEN [NOT] MATCHED [AND condition] THEN action; `values` are (column, SQL over t and s)."""

    when: When
    condition: str | None
    action: Action
    values: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class MergeSpec:
    """MERGE INTO target t USING source s ON `on`, the first clause that applies to a row wins."""

    on: str
    clauses: tuple[Clause, ...]


def match_columns(table: TableInfo) -> dict[str, str]:
    """Replica key column -> source column the MERGE matches it on. A common handle's key holds
    collation keys, so one raw key can change its PK string ('ab' -> 'AB' under a _ci collation):
    such tables match on the PK as it was at lo (tidelake.merge.mount decodes it)."""
    if not table.is_common_handle or table.primary_index() is None:
        return {}
    return {c.name: MATCH_PREFIX + c.name for c in table.primary_index().columns}


@dataclass(frozen=True)
class Removal:
    """The replica rows a DDL at `ts` removes: those of `partition_ids` (None: every row) that the
    rows committed at `ts` do not restate. They leave in the DDL's last commit, together with
    those rows (TiDB's copies of moved rows among them), so no replica version shows the DDL half
    done. Owner: tidelake.merge.ddl_apply, which says what a DDL removes."""

    ts: int
    partition_ids: tuple[int, ...] | None = None

    def condition(self, alias: str = "") -> str | None:
        """SQL over the replica's columns: the rows removed; None for every row."""
        if self.partition_ids is None:
            return None
        prefix = f"{alias}." if alias else ""
        return f"{prefix}{quote(PARTITION_ID_COLUMN)} IN ({', '.join(str(int(p)) for p in self.partition_ids)})"


def removal_clause(removal: Removal, soft_deletes: bool) -> Clause:
    """The MERGE clause that removes `removal`'s rows the source does not match: deleted, or
    with soft deletes flagged with the DDL's ts (a flagged row stays as it was deleted)."""
    condition = removal.condition("t")
    if not soft_deletes:
        return Clause(When.NOT_MATCHED_BY_SOURCE, condition, Action.DELETE)
    live = live_condition("t") + (f" AND {condition}" if condition else "")
    return Clause(When.NOT_MATCHED_BY_SOURCE, live, Action.UPDATE,
                  ((DELETED_COLUMN, "true"), (COMMIT_TS_COLUMN, str(int(removal.ts)))))


def replica_merge(info: TableInfo, columns: Sequence[str], soft_deletes: bool = False,
                  removal: Removal | None = None) -> MergeSpec:
    """The replica's MERGE of a mounted window (`columns`: the replica's, the soft-delete flag
    apart). A delete removes the row, or with soft deletes flags it with its commit ts; a put
    updates or inserts it and clears the flag; a flagged row stays as it was deleted. A DDL's
    last window also removes what `removal` names (removal_clause)."""
    match = match_columns(info)
    on = " AND ".join(f"t.{quote(k)} = s.{quote(match.get(k, k))}" for k in key_columns(info))
    op = f"s.{quote(OP_COLUMN)}"
    values = tuple((c, f"s.{quote(c)}") for c in columns)
    delete = Clause(When.MATCHED, f"{op} = 'delete'", Action.DELETE)
    if soft_deletes:
        on += f" AND ({op} = 'put' OR {live_condition('t')})"
        delete = Clause(When.MATCHED, f"{op} = 'delete'", Action.UPDATE,
                        ((DELETED_COLUMN, "true"), (COMMIT_TS_COLUMN, f"s.{quote(COMMIT_TS_COLUMN)}")))
        values += ((DELETED_COLUMN, "false"),)
    clauses = (delete, Clause(When.MATCHED, None, Action.UPDATE, values),
               Clause(When.NOT_MATCHED, f"{op} = 'put'", Action.INSERT, values))
    if removal is not None:
        clauses += (removal_clause(removal, soft_deletes),)
    return MergeSpec(on, clauses)


def history_merge(info: TableInfo, columns: Sequence[str], kind: str, valid_from: str, valid_to: str,
                  current: str) -> MergeSpec:
    """The SCD2 history table's MERGE (tidelake.merge.scd2_history): a 'close' row ends the key's
    open version at its first change in the window, a 'version' row is added once (matched again
    by its key and valid_from, so a step applied twice changes nothing)."""
    k, vf, vt = (f"s.{quote(kind)}", quote(valid_from), quote(valid_to))
    keys = " AND ".join(f"t.{quote(c)} = s.{quote(c)}" for c in key_columns(info))
    on = (f"{keys} AND (({k} = 'version' AND t.{vf} = s.{vf}) OR "
          f"({k} = 'close' AND t.{vt} IS NULL AND t.{vf} < s.{vf}))")
    values = tuple((c, f"s.{quote(c)}") for c in columns)
    return MergeSpec(on, (
        Clause(When.MATCHED, f"{k} = 'close'", Action.UPDATE, ((valid_to, f"s.{vf}"), (current, "false"))),
        Clause(When.MATCHED, None, Action.UPDATE, values),
        Clause(When.NOT_MATCHED, f"{k} = 'version'", Action.INSERT, values),
    ))


# --- append ------------------------------------------------------------------------------


def can_append(held_keys: int, recorded: int | None, lo: int, soft_deletes: bool,
               removal: Removal | None = None) -> bool:
    """Whether the window (lo, hi] is one append of its keys' last puts instead of a MERGE: no key
    held a row at lo, and the replica is at lo (another job that merged part of the window leaves
    it between lo and hi, where only a MERGE is right). A replica with soft deletes keeps deleted
    keys, which come back without an old value, so it is always merged; so is a window that
    removes a DDL's rows."""
    return held_keys == 0 and recorded in (None, lo) and not soft_deletes and removal is None


# --- barriers ----------------------------------------------------------------------------

# Jobs whose whole effect on the replica is the schema diff (often empty: index, comment, charset...).
SCHEMA_DIFF_ACTIONS = frozenset({
    ActionType.ADD_COLUMN, ActionType.DROP_COLUMN, ActionType.MODIFY_COLUMN, ActionType.ADD_COLUMNS,
    ActionType.DROP_COLUMNS, ActionType.MULTI_SCHEMA_CHANGE, ActionType.SET_DEFAULT_VALUE,
    ActionType.ADD_INDEX, ActionType.DROP_INDEX, ActionType.DROP_INDEXES, ActionType.RENAME_INDEX,
    ActionType.ALTER_INDEX_VISIBILITY, ActionType.ADD_COLUMNAR_INDEX, ActionType.ADD_PRIMARY_KEY,
    ActionType.DROP_PRIMARY_KEY, ActionType.ADD_FOREIGN_KEY, ActionType.DROP_FOREIGN_KEY,
    ActionType.ADD_CHECK_CONSTRAINT, ActionType.DROP_CHECK_CONSTRAINT, ActionType.ALTER_CHECK_CONSTRAINT,
    ActionType.MODIFY_TABLE_COMMENT, ActionType.MODIFY_TABLE_CHARSET_AND_COLLATE, ActionType.REBASE_AUTO_ID,
    ActionType.REBASE_AUTO_RANDOM_BASE, ActionType.MODIFY_TABLE_AUTO_ID_CACHE, ActionType.SHARD_ROW_ID,
    ActionType.LOCK_TABLE, ActionType.UNLOCK_TABLE, ActionType.SET_TIFLASH_REPLICA,
    ActionType.UPDATE_TIFLASH_REPLICA_STATUS, ActionType.ALTER_TABLE_ATTRIBUTES,
    ActionType.ALTER_TABLE_PARTITION_ATTRIBUTES, ActionType.ALTER_TABLE_PARTITION_PLACEMENT,
    ActionType.ALTER_TABLE_PLACEMENT, ActionType.ALTER_CACHE_TABLE, ActionType.ALTER_NO_CACHE_TABLE,
    ActionType.ALTER_TABLE_STATS_OPTIONS, ActionType.ALTER_TTL_INFO, ActionType.ALTER_TTL_REMOVE,
    ActionType.MODIFY_ENGINE_ATTRIBUTE, ActionType.ALTER_TABLE_MODE, ActionType.REFRESH_META,
})
# Index flags TiDB sets on a column when an index over it is added or dropped (addIndexColumnFlag):
# they change no stored byte of a row.
_INDEX_FLAGS = mt.UNIQUE_KEY_FLAG | mt.MULTIPLE_KEY_FLAG


def leaves_replica_unchanged(event: DdlEvent) -> bool:
    """Whether `event` changes neither the replica (columns, types, key, physical ids, name) nor
    how the table's rows decode, so a merge window may run across it instead of stopping at its
    barrier: ADD/DROP INDEX, comments, defaults, table options and the like. Consecutive such
    DDLs are thereby applied together, by the window that passes them."""
    before, after = event.table_info_before, event.table_info_after
    if before is None or after is None or event.action not in SCHEMA_DIFF_ACTIONS:
        return False
    if (event.db_before, event.name_before) != (event.db, event.name):
        return False
    if before.physical_ids() != after.physical_ids() or key_columns(before) != key_columns(after):
        return False
    return _decoding_view(before) == _decoding_view(after)


def _decoding_view(info: TableInfo) -> tuple:
    """What the replica's columns and the row decoder read from a TableInfo (comments and
    current defaults are not: rows carry their values, missing columns take the origin default)."""
    columns = tuple(
        (c.id, c.name, c.field_type.tp, c.field_type.flag & ~_INDEX_FLAGS, c.field_type.flen, c.field_type.decimal,
         c.field_type.charset, c.field_type.collate, tuple(c.field_type.elems or ()), c.origin_default,
         c.origin_default_bit, c.version, c.generated_stored)
        for c in stored_columns(info)
    )
    replica = tuple((name, tp) for name, tp, _ in replica_columns(info))
    return columns, replica, info.pk_is_handle, info.is_common_handle


def rows_at_ddl_ts(event: DdlEvent) -> tuple[int, int]:
    """The window a DDL's last commit also merges: the rows committed at exactly its ts D (async
    commit and 1PC can share it, TiCDC cdc/entry/mounter.go mountRowKVEntry), decoded with the
    schema after the DDL; the windows around it end at D - 1 and start above D."""
    return event.commit_ts - 1, event.commit_ts
