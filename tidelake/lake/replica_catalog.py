"""Where each replicated table's replica lives and whether it is still being merged.

A replica's folder is chosen once and never moves (RENAME changes names only; a folder rename on
an object store is neither atomic nor cheap), and no two tables share one. A small Delta table
(`_tidelake/replicas`) upserted by delta-rs. Owner: the merge (DDL apply) and bootstrap.

More: docs/internals.md#replica_catalog.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from enum import StrEnum

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from tidelake.errors import InputError
from tidelake.lake.delta_read import read_delta
from tidelake.lake.layout import LakeLayout, open_or_create

_ASSIGN_LOCK = threading.Lock()
MAX_FILES = 32  # data files of the catalog before an upsert compacts it
log = logging.getLogger(__name__)

class ReplicaState(StrEnum):
    """A replica's lifecycle in the catalog."""

    ACTIVE = "active"
    DROPPED = "dropped"
    STOPPED = "stopped"


CATALOG_SCHEMA = pa.schema(
    [
        pa.field("table_key", pa.int64(), nullable=False),
        pa.field("db", pa.string(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("state", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=True),
        pa.field("state_ts", pa.int64(), nullable=False),  # upstream ts of the last state/name change
        pa.field("updated_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


@dataclass(frozen=True)
class ReplicaEntry:
    """One replicated table: its current upstream names, its (stable) replica path and state."""

    table_key: int
    db: str
    name: str
    path: str
    state: str = ReplicaState.ACTIVE
    reason: str | None = None  # why a table is stopped (e.g. an unsupported DDL)
    state_ts: int = 0

    def __post_init__(self) -> None:
        if self.state not in tuple(ReplicaState):
            raise InputError(f"replica of table {self.table_key}: unknown state {self.state!r}")


def catalog_path(layout: LakeLayout) -> str:
    return f"{layout.tidelake_root}/replicas"


def _entries_of(table: DeltaTable) -> dict[int, ReplicaEntry]:
    rows = read_delta(table).to_pylist()
    return {r["table_key"]: ReplicaEntry(**{k: r[k] for k in ReplicaEntry.__dataclass_fields__}) for r in rows}


def read_entries(layout: LakeLayout) -> dict[int, ReplicaEntry]:
    """The catalog read-only, in one replay of its log (status reads it on every call); a lake
    nobody merged into yet has none, and gets none."""
    try:
        table = DeltaTable(catalog_path(layout), storage_options=layout.storage_options)
    except TableNotFoundError:
        return {}
    return _entries_of(table)


class ReplicaCatalog:
    """Read and upsert the catalog; every method reads the latest table version. Safe to share
    between threads (a merge run's table threads share one): one lock around the log handle.

    The rows of a version are decoded once and kept: a merge asks the catalog several times per
    table, and scanning the catalog's files costs far more than the one log listing that finds
    the version did not move."""

    def __init__(self, layout: LakeLayout) -> None:
        self.layout = layout
        self._table = open_or_create(layout, catalog_path(layout), CATALOG_SCHEMA)
        self._read: tuple[int, dict[int, ReplicaEntry]] | None = None  # (version, its entries)
        self._lock = threading.RLock()

    def entries(self) -> dict[int, ReplicaEntry]:
        with self._lock:
            self._table.update_incremental()
            version = self._table.version()
            if self._read is None or self._read[0] != version:
                self._read = (version, _entries_of(self._table))
            return dict(self._read[1])

    def get(self, table_key: int) -> ReplicaEntry | None:
        return self.entries().get(int(table_key))

    def find(self, db: str, name: str) -> ReplicaEntry | None:
        """The entry now named `db`.`name` (case-insensitive as TiDB), preferring an active one."""
        wanted = (db.lower(), name.lower())
        matches = [e for e in self.entries().values() if (e.db.lower(), e.name.lower()) == wanted]
        matches.sort(key=lambda e: (e.state == ReplicaState.ACTIVE, e.state_ts))
        return matches[-1] if matches else None

    def assign(self, table_key: int, db: str, name: str, ts: int) -> ReplicaEntry:
        """The table's entry, creating it with a fresh path on first call (idempotent). Under a
        process-wide lock: two tables of one merge run (threads) may both claim `db/name`, e.g.
        a dropped table and its successor of the same name."""
        with _ASSIGN_LOCK:
            existing = self.get(table_key)
            if existing is not None:
                return existing
            path = self.layout.replica_path(db, name)
            if any(e.path == path for e in self.entries().values()):
                path = f"{path}__{int(table_key)}"
            entry = ReplicaEntry(int(table_key), db, name, path, ReplicaState.ACTIVE, None, ts)
            self.upsert([entry])
            return entry

    def rename(self, table_key: int, db: str, name: str, ts: int) -> ReplicaEntry:
        return self._change(table_key, ts, db=db, name=name)

    def mark_dropped(self, table_key: int, ts: int, reason: str | None = None) -> ReplicaEntry:
        """`reason` says why when the upstream table was not dropped (it left the changefeed)."""
        return self._change(table_key, ts, state=ReplicaState.DROPPED, reason=reason)

    def mark_stopped(self, table_key: int, reason: str, ts: int) -> ReplicaEntry:
        return self._change(table_key, ts, state=ReplicaState.STOPPED, reason=reason)

    def mark_active(self, table_key: int, ts: int) -> ReplicaEntry:
        return self._change(table_key, ts, state=ReplicaState.ACTIVE, reason=None)

    def _change(self, table_key: int, ts: int, **changes: object) -> ReplicaEntry:
        entry = self.get(table_key)
        if entry is None:
            raise InputError(f"table {table_key} has no replica in the catalog")
        updated = replace(entry, state_ts=max(entry.state_ts, ts), **changes)
        if updated != entry:
            self.upsert([updated])
        return updated

    def upsert(self, entries: Iterable[ReplicaEntry]) -> None:
        with self._lock:
            self._merge(entries)
            self._compact()

    def _compact(self) -> None:
        """Rewrite the catalog into one file once it has more than MAX_FILES: each upsert of a new
        table adds a file, and every read scans them all (a merge run creating 1,000 replicas spent
        a third of its time reading the catalog). A compaction losing a commit race to an upsert is
        left to the next one."""
        if len(self._table.file_uris()) <= MAX_FILES:
            return
        try:
            self._table.optimize.compact()
        except CommitFailedError:
            log.debug("catalog compaction lost a commit race; the next upsert compacts", exc_info=True)

    @retry(
        retry=retry_if_exception_type(CommitFailedError),
        stop=stop_after_attempt(8),
        wait=wait_random_exponential(multiplier=0.05, max=2),
        reraise=True,
    )
    def _merge(self, entries: Iterable[ReplicaEntry]) -> None:
        now = datetime.now(timezone.utc)
        rows = [{**asdict(e), "updated_at": now} for e in entries]
        data = pa.Table.from_pylist(rows, schema=CATALOG_SCHEMA)
        self._table.update_incremental()
        (
            self._table.merge(data, predicate="t.table_key = s.table_key", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
