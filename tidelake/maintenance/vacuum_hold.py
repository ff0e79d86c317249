"""A hold on a replica's VACUUM: the files of one older Delta version must survive (an Iceberg
snapshot lists them). VACUUM keeps a removed file while its remove is younger than the retention
(delta-io/delta PROTOCOL.md "Add File and Remove File", deletionTimestamp), and the first version
that can remove a file of version v is v+1; so a retention of v+1's age keeps them all, and none
is needed while the table still holds every file of v. The table's tombstones live only
`delta.deletedFileRetentionDuration`; past it no retention can keep the files, and the replica is
not vacuumed at all. Owner: tidelake.maintenance.lake_upkeep.

More: docs/operations.md#reading-replicas-as-iceberg.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from tidelake.errors import TidelakeError

# Clock skew between the replica's writers, and a remove's deletionTimestamp taken before its
# commit's timestamp: a hold keeps files this much longer than the version's age.
HOLD_MARGIN_HOURS = 1.0
TOMBSTONE_RETENTION = "delta.deletedFileRetentionDuration"  # delta-io/delta PROTOCOL.md "Table Properties"
DEFAULT_TOMBSTONE_HOURS = 168.0  # Delta's default, "interval 1 week"
_INTERVAL = re.compile(r"^\s*interval\s+(\d+)\s+(second|minute|hour|day|week)s?\s*$", re.IGNORECASE)
_UNIT_HOURS = {"second": 1 / 3600, "minute": 1 / 60, "hour": 1.0, "day": 24.0, "week": 168.0}


@dataclass(frozen=True)
class VacuumHold:
    version: int  # the oldest Delta version of the replica whose files must survive
    holder: str  # what reads them, for the report line (an Iceberg snapshot and its tag)


class VacuumHeld(TidelakeError):
    """No VACUUM retention keeps the held files: the replica is left unvacuumed; the line says why."""


def held_retention_hours(path: str, storage_options: dict[str, str] | None, hold: VacuumHold, now_ms: int) -> float:
    """Hours of VACUUM retention that keep every file of `hold.version` of the table at `path` (0
    when the current version still has them all); VacuumHeld when the log no longer has that
    version or the one after it, or when the retention would outlive the table's tombstones."""
    table = DeltaTable(path, storage_options=storage_options)
    latest = table.version()
    try:
        held = DeltaTable(path, version=hold.version, storage_options=storage_options).file_uris()
    except DeltaError as exc:
        raise VacuumHeld(f"{hold.holder} shows Delta version {hold.version}, which the log no longer has "
                         f"({str(exc).splitlines()[0]})") from exc
    if hold.version >= latest or set(held) <= set(table.file_uris()):
        return 0.0
    after = table.history(limit=latest - hold.version)[-1]
    if after.get("version") != hold.version + 1:
        raise VacuumHeld(f"{hold.holder} shows Delta version {hold.version}, and the log no longer says when "
                         f"version {hold.version + 1} was written")
    hours = (now_ms - after["timestamp"]) / 3_600_000 + HOLD_MARGIN_HOURS
    tombstones = _tombstone_hours(table)
    if tombstones is None or hours > tombstones:
        kept = table.metadata().configuration.get(TOMBSTONE_RETENTION, f"{DEFAULT_TOMBSTONE_HOURS:g} hours")
        raise VacuumHeld(f"{hold.holder} shows Delta version {hold.version}, whose files need {hours:.1f} hours of "
                         f"removed files kept, longer than the table keeps them ({TOMBSTONE_RETENTION} {kept})")
    return hours


def _tombstone_hours(table: DeltaTable) -> float | None:
    """The table's deletedFileRetentionDuration in hours; None when it is not a plain interval."""
    value = table.metadata().configuration.get(TOMBSTONE_RETENTION)
    if value is None:
        return DEFAULT_TOMBSTONE_HOURS
    found = _INTERVAL.match(value)
    return int(found.group(1)) * _UNIT_HOURS[found.group(2).lower()] if found else None
