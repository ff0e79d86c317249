"""Changing `[puller].shards` of a changefeed that has already run: a new shard adopts the old
layout's durable watermarks (per table the lowest any old shard claims, so nothing is lost and
duplicates collapse in merge), and shard 0 removes the old shards' safepoints and partitions once
they have stopped. Owner: the changefeed's shards.

More: docs/internals.md#reshard.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from tidelake.capture.landing.lander import APP_ID_PREFIX
from tidelake.capture.landing.watermark_writer import delete_pullers
from tidelake.config import SHARD_SUFFIX
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import PullerMarks, read_by_puller

log = logging.getLogger(__name__)


def shard_suffix(index: int, count: int) -> str:
    """What a shard adds to the changefeed id in its puller name and GC service id."""
    return "" if count == 1 else f"-shard{index}of{count}"


def layout_of(puller: str, changefeed_id: str) -> int | None:
    """The shard count of a puller of this changefeed; None for another changefeed's."""
    name = APP_ID_PREFIX + changefeed_id
    if puller == name:
        return 1
    match = SHARD_SUFFIX.fullmatch(puller[len(name):]) if puller.startswith(name) else None
    return int(match.group(2)) if match else None


def ddl_landed(by_puller: dict[str, PullerMarks], changefeed_id: str) -> int:
    """How far the `ddl` table holds every job: the highest DDL watermark of a shard 0 of any
    layout of the changefeed (only shard 0 lands DDL rows; the others' DDL watermarks say how far
    they pulled jobs, not that the rows are landed)."""
    return max((m.marks.ddl_resolved for name, m in by_puller.items()
                if (count := layout_of(name, changefeed_id)) is not None
                and name == APP_ID_PREFIX + changefeed_id + shard_suffix(0, count)), default=0)


def other_changefeeds(by_puller: dict[str, PullerMarks], changefeed_id: str) -> list[str]:
    """The ids of the other changefeeds whose pullers hold watermarks in the lake. A lake holds one
    changefeed: the merge folds every puller's watermarks, so a second changefeed's would hold the
    first's tables back (and an abandoned one's for ever)."""
    return sorted({SHARD_SUFFIX.sub("", name[len(APP_ID_PREFIX):]) for name in by_puller
                   if name.startswith(APP_ID_PREFIX) and layout_of(name, changefeed_id) is None})


def previous_layouts(by_puller: dict[str, PullerMarks], changefeed_id: str, count: int) -> dict[str, PullerMarks]:
    """The partitions of this changefeed's pullers under another shard count."""
    return {name: rows for name, rows in by_puller.items()
            if layout_of(name, changefeed_id) not in (None, count)}


def missing_shards(by_puller: dict[str, PullerMarks], changefeed_id: str, count: int) -> list[int]:
    """Shards of the current layout that have no partition yet."""
    return [i for i in range(count) if APP_ID_PREFIX + changefeed_id + shard_suffix(i, count) not in by_puller]


@dataclass(frozen=True)
class Adoption:
    """Where a shard of a new layout starts: the previous layouts' durable watermarks."""

    table_resolved: dict[int, int]
    ddl_resolved: int
    previous: tuple[str, ...]


def adopt(by_puller: dict[str, PullerMarks], changefeed_id: str, count: int) -> Adoption | None:
    """The previous layouts' watermarks folded by minimum; None when there is none."""
    previous = previous_layouts(by_puller, changefeed_id, count)
    if not previous:
        return None
    tables: dict[int, int] = {}
    for rows in previous.values():
        for pid, ts in rows.marks.table_resolved.items():
            tables[pid] = min(tables.get(pid, ts), ts)
    ddl = min(rows.marks.ddl_resolved for rows in previous.values())
    return Adoption(tables, ddl, tuple(sorted(previous)))


class Retirement:
    """Shard 0's removal of the previous layouts' partitions and GC service safepoints; the runner
    polls it every half grace period for as long as it runs (an old puller started again by
    mistake is found and, once stopped, retired too)."""

    def __init__(self, layout: LakeLayout, changefeed_id: str, count: int, gc_service_id: str,
                 remove_safepoint: Callable[[str], None], grace_s: float,
                 now: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
        self._layout = layout
        self._cf = changefeed_id
        self._count = count
        self._gc_service_id = gc_service_id
        self._remove_safepoint = remove_safepoint
        self._grace = timedelta(seconds=grace_s)
        self._now = now
        self._said: tuple[frozenset[int], frozenset[str]] = (frozenset(), frozenset())

    @property
    def poll_interval_s(self) -> float:
        return self._grace.total_seconds() / 2

    def poll(self) -> None:
        try:
            self._look()
        except Exception:  # a lost commit race, the lake or PD unreachable: the next poll tries again
            log.warning("retiring the previous pullers of changefeed %s failed; retrying", self._cf, exc_info=True)

    def _look(self) -> None:
        by_puller = read_by_puller(self._layout)
        old = sorted(previous_layouts(by_puller, self._cf, self._count))
        if not old:
            return
        missing = frozenset(missing_shards(by_puller, self._cf, self._count))
        cutoff = self._now() - self._grace
        running = frozenset(name for name in old if by_puller[name].updated_at > cutoff)
        if missing or running:
            self._say_why_not((missing, running))
            return
        for name in old:  # safepoints first: a retry finds the partitions and removes again
            self._remove_safepoint(self._gc_service_id + name[len(APP_ID_PREFIX + self._cf):])
        delete_pullers(self._layout, old)
        log.info("changefeed %s now runs %d shards; retired the watermarks and GC safepoints of %s",
                 self._cf, self._count, ", ".join(old))

    def _say_why_not(self, why: tuple[frozenset[int], frozenset[str]]) -> None:
        """Once per change of reason: merge waits on the old rows meanwhile."""
        if why == self._said:
            return
        self._said = why
        missing, running = why
        if missing:
            log.warning("changefeed %s: shard(s) %s of its %d-shard layout have not started; until they land "
                        "their watermarks, merge waits on the previous layout's", self._cf,
                        ", ".join(f"{i}/{self._count}" for i in sorted(missing)), self._count)
        else:
            log.warning("changefeed %s now runs %d shards, but %s rewrote watermarks in the last %.0fs: "
                        "stop them; their rows are retired once they stay unchanged", self._cf, self._count,
                        ", ".join(sorted(running)), self._grace.total_seconds())
