"""Changing `[puller].shards` of a changefeed that has already run.

Each shard lands under its own puller name and owns one partition of the watermarks table, and
readers fold every partition with a minimum (tidelake.lake.watermarks). A shard of a new layout
must therefore not start afresh: it would replay from the changefeed's start, and the old
layout's partitions, frozen once their pullers stop, would hold every table back for ever.

Instead a new shard with no partition of its own adopts the old layout's durable watermarks: per
table the lowest any old shard claims (every commit at or below it has landed, so starting there
loses nothing; what lands twice collapses in merge, invariant 5), and the lowest DDL resolved ts.
Once every shard of the new layout has a partition, and the old partitions stayed unchanged
between two looks (their pullers have stopped), shard 0 deletes them and removes the old shards'
GC service safepoints.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from tidelake.lake.lander import APP_ID_PREFIX
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import Watermarks, delete_pullers, read_by_puller

log = logging.getLogger(__name__)


def shard_suffix(index: int, count: int) -> str:
    """What a shard adds to the changefeed id in its puller name and GC service id."""
    return "" if count == 1 else f"-shard{index}of{count}"


def layout_of(puller: str, changefeed_id: str) -> int | None:
    """The shard count of a puller of this changefeed; None for another changefeed's."""
    name = APP_ID_PREFIX + changefeed_id
    if puller == name:
        return 1
    match = re.fullmatch(re.escape(name) + r"-shard(\d+)of(\d+)", puller)
    return int(match.group(2)) if match else None


def _previous(by_puller: dict[str, Watermarks], changefeed_id: str, count: int) -> dict[str, Watermarks]:
    return {name: marks for name, marks in by_puller.items()
            if layout_of(name, changefeed_id) not in (None, count)}


@dataclass(frozen=True)
class Adoption:
    """Where a shard of a new layout starts: the previous layout's durable watermarks."""

    table_resolved: dict[int, int]
    ddl_resolved: int
    previous: tuple[str, ...]


def adopt(by_puller: dict[str, Watermarks], changefeed_id: str, count: int) -> Adoption | None:
    """The previous layouts' watermarks folded by minimum; None when there is none."""
    previous = _previous(by_puller, changefeed_id, count)
    if not previous:
        return None
    tables: dict[int, int] = {}
    for marks in previous.values():
        for pid, ts in marks.table_resolved.items():
            tables[pid] = min(tables.get(pid, ts), ts)
    return Adoption(tables, min(m.ddl_resolved for m in previous.values()), tuple(sorted(previous)))


def retirable(by_puller: dict[str, Watermarks], changefeed_id: str, count: int) -> list[str]:
    """The previous layouts' pullers, once every shard of the current layout has a partition."""
    current = {APP_ID_PREFIX + changefeed_id + shard_suffix(i, count) for i in range(count)}
    if not current <= set(by_puller):
        return []
    return sorted(_previous(by_puller, changefeed_id, count))


class Retirement:
    """Shard 0's removal of the previous layout's partitions and GC service safepoints."""

    def __init__(self, layout: LakeLayout, changefeed_id: str, count: int, gc_service_id: str,
                 remove_safepoint: Callable[[str], None]) -> None:
        self._layout = layout
        self._cf = changefeed_id
        self._count = count
        self._gc_service_id = gc_service_id
        self._remove_safepoint = remove_safepoint
        self._seen: dict[str, Watermarks] | None = None
        self.done = False

    def poll(self) -> None:
        by_puller = read_by_puller(self._layout)
        if not _previous(by_puller, self._cf, self._count):
            self.done = True
            return
        old = retirable(by_puller, self._cf, self._count)
        seen = {name: by_puller[name] for name in old}
        if not old or seen != self._seen:
            if self._seen is not None and old and set(seen) == set(self._seen):
                log.warning("previous pullers of changefeed %s still write their watermarks (%s): stop them",
                            self._cf, ", ".join(old))
            self._seen = seen
            return
        try:
            delete_pullers(self._layout, old)
            for name in old:
                self._remove_safepoint(self._gc_service_id + name[len(APP_ID_PREFIX + self._cf):])
        except Exception:  # a lost commit race or PD unreachable: the next poll tries again
            log.warning("retiring the previous pullers of changefeed %s failed; retrying", self._cf, exc_info=True)
            return
        log.info("changefeed %s now runs %d shards; retired the watermarks and GC safepoints of %s",
                 self._cf, self._count, ", ".join(old))
        self.done = True
