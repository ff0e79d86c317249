"""Lake upkeep: compact and vacuum the replicas and their history tables, drop the changelog
partitions every replica merged past and vacuum the changelog and the control tables rewritten
in place (tidelake.maintenance.control_upkeep), trim the merge log. Each step is
idempotent. The changelog and the merge log are maintained with delta-rs only (they have delta-rs
writers at the same time; Spark's S3 log store assumes one writer). The changelog is not compacted
here: the lander that writes a bucket compacts it once closed (tidelake.capture.landing.bucket_compaction),
and a second rewrite of the same files here could commit beside it. Owner: `tidelake maintenance`.

More: docs/internals.md#lake_upkeep.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError

from tidelake.capture.landing.changelog_retention import (
    DEFAULT_VACUUM_RETENTION_HOURS,
    delete_merged_changelog,
    open_changelog,
    vacuum_changelog,
)
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.history_table import history_checkpoint, history_path
from tidelake.lake.layout import LakeLayout
from tidelake.lake.lease import hold, replica_lease
from tidelake.lake.replica_catalog import ReplicaCatalog, ReplicaState
from tidelake.lake.schema_history import SchemaHistory
from tidelake.maintenance import replica_upkeep
from tidelake.maintenance.control_upkeep import vacuum_control_tables
from tidelake.maintenance.vacuum_hold import VacuumHeld, VacuumHold, held_retention_hours
from tidelake.merge.merge_log import DEFAULT_RETENTION, merge_log_path, open_merge_log, trim
from tidelake.merge.txn_confs import session_confs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
# Delta 4.x VACUUM ignores a RETAIN other than 0 hours while this is on (delta-io/delta DeltaSQLConf
# DELTA_VACUUM_RETENTION_WINDOW_IGNORE_ENABLED) and takes the table's deletedFileRetentionDuration
# instead: the retention asked for, or held for Iceberg, must be the one VACUUM uses.
RETENTION_WINDOW_CONF = "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled"
# VACUUM lists a table's files with as many tasks as this conf says (delta-io/delta VacuumCommand
# `gc`: DeltaFileOperations.recursiveListDirs with fileListingParallelism), Spark's default 10,000:
# on a small cluster that many tiny tasks cost minutes per table whatever its size. A replica
# has a few directories (its partitions), so unless the session sets it, VACUUM here lists with
# VACUUM_LISTING_TASKS.
LISTING_CONF = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
VACUUM_LISTING_TASKS = 8
_log = logging.getLogger(__name__)


@dataclass
class MaintenanceReport:
    optimized: dict[str, int] = field(default_factory=dict)  # path -> files removed by compaction
    vacuumed: list[str] = field(default_factory=list)
    changelog_rows_deleted: int = 0
    changelog_checkpoints: dict[int, int] = field(default_factory=dict)
    merge_log_rows_deleted: int = 0
    skipped: dict[str, str] = field(default_factory=dict)  # replica -> why (another writer holds its lease)
    held: dict[str, str] = field(default_factory=dict)  # path -> how a VacuumHold changed its VACUUM
    engines: dict[str, str] = field(default_factory=dict)  # path -> the engine of its upkeep (replica_upkeep)

    def by_engine(self) -> str:
        """How many tables each engine kept up, e.g. `6 on delta-rs, 1 on spark`."""
        counts = Counter(self.engines.values())
        return ", ".join(f"{n} on {engine}" for engine, n in sorted(counts.items())) or "none"


def changelog_checkpoints(layout: LakeLayout, history: SchemaHistory, catalog: ReplicaCatalog) -> dict[int, int]:
    """Physical id -> checkpoint of its replica, for every id the replica has merged (an id that
    a TRUNCATE or DROP PARTITION retired before the checkpoint has all its events below it too).
    A history table behind its replica (docs/history.md#exactly-once) holds it back: it still
    reads the changelog from its own checkpoint."""
    out: dict[int, int] = {}
    for key, entry in catalog.entries().items():
        if entry.state == ReplicaState.STOPPED or key not in history.tables():
            continue
        checkpoint = read_checkpoint(entry.path, layout.storage_options)
        if checkpoint is None:
            continue
        behind = history_checkpoint(history_path(layout, entry.path), layout.storage_options)
        checkpoint = min(checkpoint, behind) if behind is not None else checkpoint
        for event in history.ddl_events(key):
            if event.commit_ts > checkpoint:
                break
            for pid in (*event.physical_ids_before, *event.physical_ids_after):
                out[pid] = checkpoint
    return out


def _held_hours(layout: LakeLayout, label: str, path: str, hold: VacuumHold | None, asked: float,
                 report: MaintenanceReport) -> float | None:
    """The retention to VACUUM `path` with: `asked`, or longer to keep the files `hold` needs;
    None (not vacuumed) when no retention keeps them. Either is a line in `report.held`."""
    if hold is None:
        return asked
    try:
        needed = held_retention_hours(path, layout.storage_options, hold, time.time_ns() // 1_000_000)
    except VacuumHeld as exc:
        report.held[path] = f"{label} not vacuumed: {exc}"
        return None
    if needed <= asked:
        return asked
    report.held[path] = (f"{label} vacuumed keeping {needed:.1f} hours of removed files, not {asked:g}: "
                         f"{hold.holder} shows Delta version {hold.version}")
    return needed


def _upkeep_replica(spark: SparkSession, layout: LakeLayout, key: int, label: str, paths: list[str],
                    report: MaintenanceReport, optimize: bool, vacuum_retention_hours: float | None,
                    holds: Mapping[str, VacuumHold]) -> None:
    """Compact and vacuum one replica and its history table under the replica's lease; skipped,
    with the holder in `report.skipped`, while another writer holds it. A path in `holds` keeps the
    files of its held version (tidelake.maintenance.vacuum_hold)."""
    with hold(layout, {key: (replica_lease(key), label)}) as leases:
        if key in leases.refused:
            report.skipped[label] = str(leases.refused[key])
            return
        with leases.fencing(key):
            tables = {path: DeltaTable(path, storage_options=layout.storage_options) for path in paths}
            engines = {path: replica_upkeep.upkeep_engine(table) for path, table in tables.items()}
            report.engines.update(engines)
            for path in paths if optimize else ():
                report.optimized[path] = replica_upkeep.compact(spark, path, tables[path], engines[path])
            for path in paths if vacuum_retention_hours is not None else ():
                hours = _held_hours(layout, label, path, holds.get(path), vacuum_retention_hours, report)
                if hours is None:
                    continue
                replica_upkeep.vacuum(spark, path, tables[path], engines[path], hours)
                report.vacuumed.append(path)


MAINTENANCE_LEASE = "maintenance"  # the lake's maintenance pass (tidelake.lake.lease)


def run_maintenance(
    spark: SparkSession,
    layout: LakeLayout,
    vacuum_retention_hours: float = DEFAULT_VACUUM_RETENTION_HOURS,
    optimize: bool = True,
    vacuum: bool = True,
    changelog_retention: bool = True,
    merge_log: bool = True,
    merge_log_retention: timedelta = DEFAULT_RETENTION,
    vacuum_holds: Mapping[str, VacuumHold] | None = None,
) -> MaintenanceReport:
    """One maintenance pass over the lake; each step is idempotent, so a retried run is safe. One
    pass at a time per lake (its lease): a second one refuses at once in one line (LeaseHeld)
    instead of taking the replicas the first has not reached yet. `vacuum_holds`: replica path ->
    the older version whose files its VACUUM must keep (the Iceberg snapshots' versions)."""
    with hold(layout, {MAINTENANCE_LEASE: (MAINTENANCE_LEASE, f"maintenance of {layout.root}")}) as run:
        if MAINTENANCE_LEASE in run.refused:
            raise run.refused[MAINTENANCE_LEASE]
        return _maintain(spark, layout, vacuum_retention_hours, optimize, vacuum, changelog_retention, merge_log,
                         merge_log_retention, vacuum_holds or {})


def _maintain(spark: SparkSession, layout: LakeLayout, vacuum_retention_hours: float, optimize: bool, vacuum: bool,
              changelog_retention: bool, merge_log: bool, merge_log_retention: timedelta,
              holds: Mapping[str, VacuumHold]) -> MaintenanceReport:
    report = MaintenanceReport()
    history = SchemaHistory.load(layout)
    catalog = ReplicaCatalog(layout)
    if changelog_retention:
        report.changelog_checkpoints = changelog_checkpoints(layout, history, catalog)
        report.changelog_rows_deleted = delete_merged_changelog(layout, report.changelog_checkpoints)
    replicas: dict[int, tuple[str, list[str]]] = {}  # key -> (label, the replica and its history table)
    for key, entry in catalog.entries().items():
        if read_checkpoint(entry.path, layout.storage_options) is not None:
            scd2 = history_path(layout, entry.path)
            replicas[key] = (f"replica of {entry.db}.{entry.name}",
                             [entry.path, *([scd2] if history_checkpoint(scd2, layout.storage_options) is not None else [])])
    confs = {}
    if vacuum and vacuum_retention_hours < DEFAULT_VACUUM_RETENTION_HOURS:
        confs[RETENTION_CHECK_CONF] = "false"
    if vacuum:
        confs[RETENTION_WINDOW_CONF] = "false"
    if vacuum and spark.conf.get(LISTING_CONF, None) is None:
        confs[LISTING_CONF] = str(VACUUM_LISTING_TASKS)
    with session_confs(spark, confs):
        for key, (label, paths) in replicas.items():
            _upkeep_replica(spark, layout, key, label, paths, report, optimize, vacuum_retention_hours if vacuum else None,
                            holds)
    changelog = open_changelog(layout)
    if vacuum and changelog is not None:
        vacuum_changelog(changelog, vacuum_retention_hours)
        report.vacuumed.append(layout.changelog)
        report.engines[layout.changelog] = replica_upkeep.DELTA_RS
    if vacuum:
        for path in vacuum_control_tables(layout):
            report.vacuumed.append(path)
            report.engines[path] = replica_upkeep.DELTA_RS
    log = open_merge_log(layout) if merge_log else None
    if log is not None:
        try:
            report.merge_log_rows_deleted, report.optimized[merge_log_path(layout)] = trim(log, merge_log_retention)
            report.engines[merge_log_path(layout)] = replica_upkeep.DELTA_RS
        except CommitFailedError as exc:  # a merge run appended meanwhile: the next run trims
            _log.warning("merge log upkeep lost a commit race, left for the next run: %s", exc)
    return report

