"""`tidelake verify` of the Iceberg side: each replica's Iceberg table, read by pyiceberg at the
tag `syncpoint-<S>` of the newest recorded syncpoint S, holds the rows of the replica's Delta
version at S read by Spark (as verify reads replicas: delta-rs refuses typeWidening), every
column, compared as multisets of values. Reads both sides itself, never through
tidelake.consumers.iceberg (the code it checks); the tag name is the published contract
(docs/operations.md#reading-replicas-as-iceberg). Owner: `tidelake verify`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError

from tidelake.lake.layout import LakeLayout
from tidelake.syncpoint.records import ReplicaAt, read_syncpoints
from tidelake.verify.verifier import Verdict

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class IcebergVerdict:
    table: str
    status: str
    ts: int
    delta_version: int
    snapshot_id: int | None = None
    delta_rows: int = 0
    iceberg_rows: int = 0
    missing: int = 0  # Delta rows the snapshot lacks
    extra: int = 0  # snapshot rows the Delta version lacks
    note: str | None = None


def verify_iceberg(spark: SparkSession, catalog: Catalog, layout: LakeLayout,
                   tables: Iterable[str] = ()) -> list[IcebergVerdict]:
    """One verdict per replica of the newest syncpoint (only `tables`, DB.TABLE, when given);
    empty before the first syncpoint."""
    syncpoints = read_syncpoints(layout)
    if not syncpoints:
        return []
    newest = syncpoints[-1]
    wanted = {t.lower() for t in tables}
    return [_verify(spark, catalog, replica, newest.ts) for replica in newest.replicas
            if not wanted or replica.qualified_name.lower() in wanted]


def iceberg_ok(verdicts: Iterable[IcebergVerdict]) -> bool:
    return all(v.status in (Verdict.MATCH, Verdict.SKIPPED) for v in verdicts)


def _verify(spark: SparkSession, catalog: Catalog, replica: ReplicaAt, ts: int) -> IcebergVerdict:
    verdict = IcebergVerdict(replica.qualified_name, Verdict.MATCH, ts, replica.version)
    try:
        table = catalog.load_table((replica.db, replica.name))
    except NoSuchTableError:
        verdict.status, verdict.note = Verdict.SKIPPED, "not published as Iceberg yet"
        return verdict
    tag = f"syncpoint-{ts}"
    ref = table.refs().get(tag)
    if ref is None:
        tags = sorted((name for name in table.refs() if name.startswith("syncpoint-")),
                      key=lambda name: int(name.removeprefix("syncpoint-")))
        verdict.status = Verdict.SKIPPED
        verdict.note = f"not published at {tag} yet (newest tag: {tags[-1] if tags else 'none'})"
        return verdict
    verdict.snapshot_id = ref.snapshot_id
    try:
        expected = spark.read.format("delta").option("versionAsOf", replica.version).load(replica.path).toArrow()
        got = table.scan(snapshot_id=ref.snapshot_id).to_arrow_batch_reader().read_all()
    except Exception as exc:  # noqa: BLE001 - a file the snapshot lists and the store lacks, or any read failure
        verdict.status = Verdict.ERROR
        verdict.note = f"snapshot {ref.snapshot_id}: could not read: {str(exc).splitlines()[0]}"
        return verdict
    verdict.delta_rows, verdict.iceberg_rows = expected.num_rows, got.num_rows
    if got.schema.names != expected.schema.names:
        verdict.status = Verdict.MISMATCH
        verdict.note = f"columns {got.schema.names} in Iceberg, {expected.schema.names} in Delta"
        return verdict
    want, have = _multiset(expected), _multiset(got)
    verdict.missing = sum((want - have).values())
    verdict.extra = sum((have - want).values())
    if verdict.missing or verdict.extra:
        verdict.status = Verdict.MISMATCH
    return verdict


def _multiset(table: pa.Table) -> Counter:
    return Counter(tuple(_comparable(row[name]) for name in table.schema.names) for row in table.to_pylist())


def _comparable(value: Any) -> Any:
    """A hashable value equal exactly when the values are (NaN equals NaN, lists become tuples);
    Python values compare across Arrow widths (int8 and int32, a zone and UTC: the same instant)."""
    if isinstance(value, list):
        return tuple(_comparable(v) for v in value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value
