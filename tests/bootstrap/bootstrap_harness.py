"""Shared pieces of the bootstrap tests: a SimTiDB with tables, a live writer, and the oracle (an
upstream read at the same ts through the simulator's own MVCC, decoded by the codec)."""

from __future__ import annotations

import random
import threading
from datetime import timezone

from pyspark.sql.types import TimestampType

from tidelake.codec.keys import record_key
from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.codec.spark_types import spark_value
from tidelake.config import ChangefeedConfig
from tidelake.config_writer import changefeed_document, config_from_document
from tidelake.merge.replica_schema import HIDDEN_COLUMNS, stored_columns
from tidelake.sim.tidb.session import SimTiDB

COLUMNS = [("id", "bigint", "pk"), ("v", "varchar(32)"), ("n", "int")]


def make_config(sim, lake, rules=("shop.*",), changefeed_id="cf1", shards=1) -> ChangefeedConfig:
    doc = changefeed_document(changefeed_id, [sim.pd_address], lake, rules=rules, gc_ttl="10m",
                              puller={"flush_interval": "200ms", "shards": shards})
    return config_from_document(doc, "test.toml")


def fill(tidb: SimTiDB, table: str, n: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    for start in range(0, n, 200):
        with tidb.txn() as t:
            for i in range(start, min(n, start + 200)):
                t.insert("shop", table, {"id": i, "v": f"v{rng.randrange(10**6)}", "n": i})


def split_table(sim, table_id: int, handles: list[int]) -> None:
    """Region boundaries inside the table's record span."""
    for h in handles:
        key = encode_bytes(record_key(table_id, h))
        sim.split_region(sim.regions.locate(key).id, key)


class LiveWriter:
    """Random inserts, updates and deletes on some tables from a background thread."""

    def __init__(self, tidb: SimTiDB, tables: list[str], id_space: int, seed: int = 7) -> None:
        self._tidb, self._tables, self._space = tidb, tables, id_space
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.commits = 0

    def __enter__(self) -> LiveWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        rng = self._rng
        while not self._stop.is_set():
            table = rng.choice(self._tables)
            i = rng.randrange(self._space)
            with self._tidb.txn() as t:
                op = rng.random()
                if op < 0.3:
                    t.delete("shop", table, {"id": i})
                elif not t.update("shop", table, {"id": i}, {"v": f"w{rng.randrange(10**6)}", "n": -i}):
                    t.insert("shop", table, {"id": i, "v": "new", "n": i})
            self.commits += 1
            self._stop.wait(0.005)


def upstream_rows(tidb: SimTiDB, table: str, ts: int) -> list[tuple]:
    """The table at `ts` as replica values, sorted: the oracle for a replica at checkpoint ts."""
    info = tidb.table_info_at("shop", table, ts)
    columns = stored_columns(info)
    rows = [tuple(spark_value(r.get(c.name), c.field_type) for c in columns) for r in tidb.select_all("shop", table, ts)]
    return sorted(rows)


def replica_rows(spark, path: str, version: int | None = None) -> list[tuple]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    frame = reader.load(path)
    visible = [f for f in frame.schema.fields if f.name not in HIDDEN_COLUMNS]
    # pyspark returns TIMESTAMP (an instant) as a naive local time; the oracle holds UTC instants.
    instants = [isinstance(f.dataType, TimestampType) for f in visible]
    rows = frame.select(*[f.name for f in visible]).collect()
    return sorted(tuple(v.astimezone(timezone.utc) if instant and v is not None else v
                        for v, instant in zip(r, instants)) for r in rows)
