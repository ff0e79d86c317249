"""Which tables have covered work: changes in the changelog within (checkpoint, upper] of the merge
planner (tidelake.merge.table_plan.plan_table, as the merge DAG plans), or a DDL at a barrier the
watermarks let them pass. A table whose window holds no change is not work (its replica is as
fresh as the watermarks say) unless the window ends at a DDL's barrier or a sweep asks for the
windows of the stale tables (a checkpoint more than `stale_s` behind its window's end).
Only a plan: run_merge reads the watermarks again and enforces min(resolved, barrier, cap) itself.
Owner: the merge follower.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tidelake import tso
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.control import ControlTables
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog, ReplicaState
from tidelake.lake.schema_history import TableKey
from tidelake.merge.changelog_snapshot import ChangelogSnapshot
from tidelake.merge.table_plan import BOUND_BARRIER, BOUND_CAP, plan_table
from tidelake.merge.window_spec import leaves_replica_unchanged

_MAX_TS = (1 << 63) - 1


@dataclass(frozen=True)
class TableWork:
    """One look at the lake: the tables with work now, each table's checkpoint as read or known,
    and whether some table has work the watermarks do not cover yet (landed changes above its
    upper that the cap does not hold, a DDL waiting for its barrier, a table blocked by them)."""

    tables: tuple[TableKey, ...]
    checkpoints: Mapping[TableKey, int | None]
    waiting: bool


def find_work(layout: LakeLayout, control: ControlTables, changelog: ChangelogSnapshot,
              known: Mapping[TableKey, int | None], cap: int | None, stale_s: float | None = None) -> TableWork:
    """Plan every table of the history from its checkpoint in `known` (read from its replica when
    missing) with `control` read before `changelog` (invariant 2), up to `cap`; `stale_s` (a
    sweep): a stale table, whose window ends more than `stale_s` after its checkpoint, counts,
    changes or not, so a quiet replica's checkpoint moves on while a fresh one's is left alone."""
    watermarks, history = control.watermarks, control.history
    entries = ReplicaCatalog(layout).entries()
    tables: list[TableKey] = []
    checkpoints: dict[TableKey, int | None] = {}
    waiting = False
    for key in history.tables():
        entry = entries.get(int(key))
        if entry is not None and entry.state != ReplicaState.ACTIVE:
            continue
        if key in known:
            checkpoint = known[key]
        else:
            checkpoint = None if entry is None else read_checkpoint(entry.path, layout.storage_options)
        checkpoints[key] = checkpoint
        plan = plan_table(key, checkpoint, watermarks, history, cap, passes=leaves_replica_unchanged)
        if plan.at_barrier:
            tables.append(key)
            continue
        if checkpoint is None:  # waits for its bootstrap: nothing the watermarks can change
            continue
        if plan.reason is not None:
            waiting = True
            continue
        upper = plan.upper if plan.upper is not None else checkpoint
        ids = plan.physical_ids
        # A window up to a DDL's barrier is work without changes: the DDL follows it.
        stale = stale_s is not None and tso.physical_ms(upper) - tso.physical_ms(checkpoint) > stale_s * 1000
        if plan.chunks and (stale or plan.bound == BOUND_BARRIER or changelog.file_stats(ids, checkpoint, upper)):
            tables.append(key)
        if plan.bound != BOUND_CAP and (changelog.file_stats(ids, upper, _MAX_TS)
                                        or history.next_ddl_after(key, upper) is not None):
            waiting = True
    return TableWork(tuple(tables), checkpoints, waiting)
