"""`_tidb_rowid` / AUTO_INCREMENT allocation the way a TiDB server caches it.

TiDB reserves ids in batches by bumping `TID:<table id>` in its own small transaction, then hands
them out from memory (docs/metadata.md#meta-keys-and-values, docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns); the first id is 1.
"""

from __future__ import annotations

import threading
from typing import Any

from tidelake.sim.tidb.catalog import Catalog
from tidelake.sim.tidb.kvtxn import KvTxn

# TiDB's default auto-id cache step (`autoid.step`).
BATCH = 30_000


class RowIdAllocator:
    """Per logical table: next id and the reserved upper bound mirrored in `TID:<id>`."""

    def __init__(self, cluster: Any, catalog: Catalog, schema_lock: threading.RLock) -> None:
        self._cluster = cluster
        self._catalog = catalog
        self._schema_lock = schema_lock
        self._mu = threading.Lock()
        self._next: dict[int, int] = {}

    def alloc(self, db_id: int, table_id: int) -> int:
        with self._mu:
            base = self._catalog.rowid_bases.get(table_id, 0)
            value = self._next.get(table_id, base + 1)
            if value > base:
                self._reserve(db_id, table_id, value - 1 + BATCH)
            self._next[table_id] = value + 1
            return value

    def rebase(self, db_id: int, table_id: int, used: int) -> None:
        """An explicit AUTO_INCREMENT value moves the allocator past it (TiDB `Rebase`)."""
        with self._mu:
            if used >= self._next.get(table_id, self._catalog.rowid_bases.get(table_id, 0) + 1):
                self._next[table_id] = used + 1
                if used > self._catalog.rowid_bases.get(table_id, 0):
                    self._reserve(db_id, table_id, used + BATCH)

    def _reserve(self, db_id: int, table_id: int, new_base: int) -> None:
        with self._schema_lock:
            txn = KvTxn(self._cluster)
            self._catalog.write_rowid_base(txn, db_id, table_id, new_base)
            txn.commit()
