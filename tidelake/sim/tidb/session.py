"""SimTiDB: the TiDB-like front of a SimCluster (DDL, DML transactions, snapshot reads for tests).

On first use of a cluster it writes what TiDB's bootstrap leaves (the `mysql` schema and its DDL
tables); on a cluster that already holds meta keys it picks the schema up from them, so several
fronts over one cluster in turn see one schema.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from tidelake.codec.keys import decode_record_key, table_record_span
from tidelake.codec.row import decode_row
from tidelake.codec.schema import TableInfo
from tidelake.sim.tidb import system_tables as st
from tidelake.sim.tidb.catalog import Catalog
from tidelake.sim.tidb.ddl_partitioning import PartitioningDDL
from tidelake.sim.tidb.dml import Txn
from tidelake.sim.tidb.kvtxn import DEFAULT_TXN_MODE, KvTxn, check_txn_mode, snapshot_scan
from tidelake.sim.tidb.rowid import RowIdAllocator
from tidelake.table_filter import TableFilter


class SimTiDB(PartitioningDDL):
    """DDL methods come from DDLExecutor and PartitioningDDL; each returns the finished DDLJob (finished_ts =
    its commit ts).

    `txn_mode` is the front's tidb_txn_mode for DML transactions (docs/wire.md#the-simulators-own-front-tidbs-transaction-modes); DDL, meta and
    row-id transactions are TiDB's internal ones and commit with classic 2PC.
    """

    def __init__(self, cluster: Any, txn_mode: str = DEFAULT_TXN_MODE) -> None:
        self.cluster = cluster
        self.txn_mode = check_txn_mode(txn_mode, "SimTiDB txn_mode")
        self.schema_lock = threading.RLock()
        catalog = Catalog.load(cluster, cluster.tso.next())
        if catalog is None:
            catalog = Catalog()
            txn = KvTxn(cluster)
            catalog.bootstrap(txn)
            txn.commit()
            for table in st.system_tables():
                cluster.split_table(table.id)
        self.catalog = catalog
        self.rowids = RowIdAllocator(cluster, catalog, self.schema_lock)
        super().__init__(cluster, catalog, self.schema_lock)

    # ---- DML ---------------------------------------------------------------------------------

    def txn(self, lock_ttl_ms: int | None = None, mode: str | None = None) -> Txn:
        """`with tidb.txn() as t:` commits on success and rolls back on an exception; `mode`
        overrides the front's txn_mode for this transaction."""
        return Txn(self, lock_ttl_ms, mode)

    def resolve_table(self, db: str, table: str) -> tuple[int, TableInfo]:
        """(db id, current TableInfo) for a statement; the object is never mutated afterwards."""
        with self.schema_lock:
            return self.catalog.db(db).id, self.catalog.table(db, table)

    def live_physical_ids(self, db_id: int, table_id: int) -> set[int]:
        for info in self.catalog.tables.get(db_id, {}).values():
            if info.id == table_id:
                return set(info.physical_ids())
        return set()

    # ---- reads -------------------------------------------------------------------------------

    def select_all(self, db: str, table: str, ts: int | None = None) -> list[dict]:
        """Every row at `ts` (default: now), decoded with the schema the meta keys held at `ts`."""
        ts = ts if ts is not None else self.cluster.tso.next()
        info = self.table_info_at(db, table, ts)
        rows = []
        for physical in info.physical_ids():
            for key, value in snapshot_scan(self.cluster, *table_record_span(physical), ts):
                rows.append(decode_row(value, info, decode_record_key(key)[1]))
        return rows

    def table_info_at(self, db: str, table: str, ts: int) -> TableInfo:
        """The TableInfo as the meta keys stored it at `ts` (what a schema snapshot reader sees)."""
        catalog = Catalog.load(self.cluster, ts)
        if catalog is None:
            return self.catalog.table(db, table)  # raises: nothing existed yet
        return catalog.table(db, table)

    def table_info(self, db: str, table: str) -> TableInfo:
        with self.schema_lock:
            return copy.deepcopy(self.catalog.table(db, table))

    def tables(self) -> list[tuple[str, str, TableInfo]]:
        """User tables (not the `mysql` schema) as (db, table, TableInfo)."""
        with self.schema_lock:
            return self.catalog.user_tables()

    def physical_ids(self, table_filter: TableFilter) -> list[int]:
        """Physical ids (partitions included) of the live tables a changefeed with this filter replicates."""
        return [pid for db, name, info in self.tables() if table_filter.should_replicate_table(db, name)
                for pid in info.physical_ids()]

    @property
    def schema_version(self) -> int:
        return self.catalog.schema_version
