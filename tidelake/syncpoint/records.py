"""Syncpoints: cross-table consistent cuts, `ts -> {table: Delta version}` (docs/design.md#data-flow).
Delta has no multi-table commit, so consistency across replicas is a read-side contract, recorded
here as TiCDC's syncpoint table does it (docs/peers.md#ticdc--iceberg-sink). Owner: the syncpoint
cut writes them; merge caps, the metastore and `tidelake snapshot-at` read them.

More: docs/internals.md#records.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from tidelake import tso
from tidelake.errors import InputError
from tidelake.lake.delta_read import read_delta
from tidelake.lake.layout import LakeLayout, open_or_create

SYNCPOINT_APP_ID = "tidelake-syncpoint"

SYNCPOINTS_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("replicas", pa.string(), nullable=False),  # JSON list of ReplicaAt
        pa.field("excluded", pa.string(), nullable=False),  # JSON {db.table: why not in the cut}
        pa.field("created_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


@dataclass(frozen=True)
class ReplicaAt:
    """One replica in a cut: read `path` at Delta `version` to see upstream `db`.`name` at the cut."""

    table_key: int
    db: str
    name: str
    path: str
    version: int

    @property
    def qualified_name(self) -> str:
        return f"{self.db}.{self.name}"


@dataclass(frozen=True)
class Syncpoint:
    ts: int
    replicas: list[ReplicaAt]
    excluded: dict[str, str] = field(default_factory=dict)

    def versions(self) -> dict[str, int]:
        return {r.qualified_name: r.version for r in self.replicas}


def boundary_at_or_below(ts: int, interval_s: int) -> int:
    """The latest aligned syncpoint ts <= ts (first TSO of an interval_s period)."""
    if interval_s <= 0:
        raise InputError(f"syncpoint interval must be a positive number of seconds, got {interval_s}")
    step = interval_s * 1000
    return tso.compose(tso.physical_ms(ts) // step * step)


def next_boundary(after_ts: int, interval_s: int) -> int:
    """The first aligned syncpoint ts > after_ts."""
    below = boundary_at_or_below(after_ts, interval_s)
    return tso.compose(tso.physical_ms(below) + interval_s * 1000)


def read_syncpoints(layout: LakeLayout) -> list[Syncpoint]:
    """All recorded syncpoints, oldest first; empty before the first."""
    if not DeltaTable.is_deltatable(layout.syncpoints, storage_options=layout.storage_options):
        return []
    rows = read_delta(DeltaTable(layout.syncpoints, storage_options=layout.storage_options)).to_pylist()
    out = [
        Syncpoint(r["ts"], [ReplicaAt(**x) for x in json.loads(r["replicas"])], json.loads(r["excluded"]))
        for r in rows
    ]
    return sorted(out, key=lambda s: s.ts)


def merge_cap(layout: LakeLayout, interval_s: int) -> int | None:
    """With syncpoints on, merges pass until_ts=min(their cap, this): the first boundary above the
    last recorded syncpoint, so no table runs past a cut before it is recorded (None before the
    first syncpoint: the syncpoint job then picks a boundary above every checkpoint)."""
    recorded = read_syncpoints(layout)
    return next_boundary(recorded[-1].ts, interval_s) if recorded else None


def boundary_at_or_above(ts: int, interval_s: int) -> int:
    below = boundary_at_or_below(ts, interval_s)
    return below if below == ts else next_boundary(ts, interval_s)


def record_syncpoint(layout: LakeLayout, syncpoint: Syncpoint) -> bool:
    """Append the syncpoint; False if one at this ts (or a later one) was already recorded."""
    table = open_or_create(layout, layout.syncpoints, SYNCPOINTS_SCHEMA)
    if (table.transaction_version(SYNCPOINT_APP_ID) or 0) >= syncpoint.ts:
        return False
    row = {
        "ts": syncpoint.ts,
        "replicas": json.dumps([asdict(r) for r in syncpoint.replicas], sort_keys=True),
        "excluded": json.dumps(syncpoint.excluded, sort_keys=True),
        "created_at": datetime.now(timezone.utc),
    }
    write_deltalake(
        table,
        pa.Table.from_pylist([row], schema=SYNCPOINTS_SCHEMA),
        mode="append",
        commit_properties=CommitProperties(
            app_transactions=[Transaction(SYNCPOINT_APP_ID, syncpoint.ts)],
            custom_metadata={"tidelake.syncpoint": str(syncpoint.ts)},
        ),
    )
    return True


def replicas_at(layout: LakeLayout, ts: int) -> dict[str, int]:
    """`db.table -> Delta version` of the syncpoint at exactly `ts`; an InputError naming the
    nearest syncpoints otherwise (a cut exists only where one was recorded)."""
    recorded = read_syncpoints(layout)
    for sp in recorded:
        if sp.ts == ts:
            return sp.versions()
    if not recorded:
        raise InputError(f"no syncpoint at {ts}: none recorded yet (run the syncpoint job)")
    below = [s.ts for s in recorded if s.ts < ts][-1:]
    above = [s.ts for s in recorded if s.ts > ts][:1]
    near = ", ".join(f"{s} ({tso.to_datetime(s):%Y-%m-%d %H:%M:%S} UTC)" for s in below + above)
    raise InputError(f"{ts} is not a syncpoint; nearest: {near}")
