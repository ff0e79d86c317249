"""Rebuild one replica from the retained changelog: a new, empty replica merged from the CREATE,
refused (with the reason, before any write) unless the changelog still holds every change of
the table since its CREATE. The rebuilt replica gets a new folder; the old one stays for its
readers. Owner: `tidelake merge --rebuild` and the merge DAG's rebuild param.

More: docs/internals.md#rebuild.
"""

from __future__ import annotations

import re
import time

from deltalake import DeltaTable

from tidelake.codec.ddl_job import ActionType
from tidelake.lake.delta_commits import DeltaLog
from tidelake.lake.layout import DdlSource, LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog, ReplicaEntry, ReplicaState
from tidelake.lake.schema_history import SchemaHistory, TableKey

_CREATES = frozenset({ActionType.CREATE_TABLE, ActionType.CREATE_TABLES})
_TABLE_ID = re.compile(r"table_id\s*(?:=\s*(\d+)|IN\s*\(([^)]*)\))", re.IGNORECASE)


def physical_ids_ever(history: SchemaHistory, table: TableKey) -> set[int]:
    """Every physical id the table had (partitions, truncates): all hold changelog rows of it."""
    ids: set[int] = set()
    for event in history.ddl_events(table):
        ids.update(event.physical_ids_before)
        ids.update(event.physical_ids_after)
    return ids


def deleted_ids(predicate: str) -> set[int] | None:
    """Physical ids a changelog DELETE predicate names; None when it names none (then it may have
    touched any table). delta-rs normalizes predicates, e.g. `commit_bucket < 'x' AND (table_id =
    105 OR table_id = 2)`, so ids are read wherever they appear."""
    ids: set[int] = set()
    for single, listed in _TABLE_ID.findall(predicate):
        if single:
            ids.add(int(single))
        else:
            ids.update(int(v) for v in re.findall(r"\d+", listed))
    return ids or None


def rebuild_refusal(layout: LakeLayout, history: SchemaHistory, table: TableKey) -> str | None:
    """Why the table cannot be rebuilt from the changelog; None when it can."""
    db, name = history.current_name(table)
    events = history.ddl_events(table)
    first = events[0] if events else None
    if first is None or first.source != DdlSource.JOB or first.action not in _CREATES:
        how = "no DDL history" if first is None else f"{first.action_name} ({first.source}) at {first.commit_ts}"
        return (f"{db}.{name} did not enter the changefeed by CREATE TABLE ({how}): its earlier rows are not "
                f"in the changelog; rebuild it with the bootstrap (tidelake bootstrap / tidelake_bootstrap)")
    if not DeltaTable.is_deltatable(layout.changelog, storage_options=layout.storage_options):
        return None  # no changes landed yet: nothing was deleted either
    changelog = DeltaLog(layout.changelog, layout.storage_options)
    ids = physical_ids_ever(history, table)
    newest, walked = changelog.latest_version(), -1
    for version, info in changelog.commit_infos():  # one at a time: flush commits name their changes
        walked = version
        if not info:
            return (f"changelog version {version} has no commitInfo: cannot tell whether it deleted changes of "
                    f"{db}.{name}; rebuild it with the bootstrap instead")
        if str(info.get("operation", "")).upper() != "DELETE":
            continue
        predicate = str((info.get("operationParameters") or {}).get("predicate", ""))
        named = deleted_ids(predicate)
        if named is None or named & ids:
            return (f"changelog retention deleted changes of {db}.{name} (changelog version {version}: "
                    f"{predicate}): rebuild it with the bootstrap instead")
    if walked < 0:
        return (f"the changelog's Delta log no longer reaches its first version (log cleanup): cannot show that "
                f"{db}.{name}'s changes since its CREATE were all kept")
    if newest is None or walked < newest:  # versions gone: a log cleanup while they were read, or before
        return (f"the changelog's Delta log misses versions after {walked} (its newest: {newest}; a log cleanup): "
                f"cannot show that {db}.{name}'s changes since its CREATE were all kept")
    return None


def start_rebuild(layout: LakeLayout, history: SchemaHistory, table: TableKey) -> ReplicaEntry:
    """Point the catalog at a new empty folder for the table (the caller checked rebuild_refusal)."""
    catalog = ReplicaCatalog(layout)
    db, name = history.current_name(table)
    entry = catalog.get(table)
    base = layout.replica_path(db, name) if entry is None else entry.path.split("__rebuilt_")[0]
    path = f"{base}__rebuilt_{time.time_ns() // 1_000_000}"
    rebuilt = ReplicaEntry(int(table), db, name, path, ReplicaState.ACTIVE, None, 0)
    catalog.upsert([rebuilt])
    return rebuilt
