"""The changes a changelog flush landed, named in its commit: the distinct (physical table, commit
ts) pairs of its rows in the commitInfo under STAMPS_KEY, so a reader learns when each change
landed from the log alone instead of reading the commit's data files. Every reader of the
changelog's log parses the entry, so it names at most MAX_STAMPS pairs: the tables it leaves out,
and every table of an older release's commit, are read from their files. A new format takes a new
key. Owner: the changelog writer writes it (tidelake.capture.landing.changelog_writer);
freshness (tidelake.status.freshness.landed_stamps) reads it.

More: docs/internals.md#flush_stamps.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from itertools import accumulate

STAMPS_KEY = "tidelake.commit_ts"
MAX_STAMPS = 10_000  # pairs named in one commit at most (docs/internals.md#flush_stamps)
log = logging.getLogger(__name__)


def stamps_metadata(pairs: Iterable[tuple[int, int]]) -> dict[str, str]:
    """The commitInfo entry naming the (physical table, commit ts) `pairs` of a flush: JSON, per
    table id its ts ascending, the first whole and each next one as the step from the one before
    (TSO steps are short numbers). Past MAX_STAMPS pairs the tables with the most are left out
    (a reader reads their files); each table named is named whole. At most 2 x MAX_STAMPS pairs
    are held while collecting, whatever the flush's size."""
    by_table: dict[int, set[int]] = {}
    left_out: set[int] = set()
    held, last = 0, None
    for pair in pairs:
        if pair == last:  # a transaction's rows come together
            continue
        last = pair
        table_id, ts = pair
        if table_id in left_out:
            continue
        seen = by_table.setdefault(table_id, set())
        if ts not in seen:
            seen.add(ts)
            held += 1
            if held > 2 * MAX_STAMPS:  # leave the busiest tables out until half of that is held
                for busiest in sorted(by_table, key=lambda t: len(by_table[t]), reverse=True):
                    held -= len(by_table.pop(busiest))
                    left_out.add(busiest)
                    if held <= MAX_STAMPS:
                        break
    encoded, named = {}, 0
    for table_id, stamps in sorted(by_table.items(), key=lambda item: (len(item[1]), item[0])):
        named += len(stamps)
        if named > MAX_STAMPS:
            break
        ordered = sorted(stamps)
        encoded[str(table_id)] = ordered[:1] + [b - a for a, b in zip(ordered, ordered[1:])]
    return {STAMPS_KEY: json.dumps(encoded, separators=(",", ":"))}


def stamps_of(commit_info: Mapping[str, object], where: str = "a changelog commit") -> dict[int, list[int]] | None:
    """Per physical table id it names, the commit ts a changelog commit landed of that table, from
    its commitInfo (a table it does not name: read its files); None when the commit names none, or
    names them in a form this release does not read (a warning naming `where`)."""
    value = commit_info.get(STAMPS_KEY)
    if value is None:
        return None
    try:
        named = json.loads(value)
        if not isinstance(named, dict):
            raise ValueError("not an object")
        stamps = {}
        for table_id, steps in named.items():
            if not isinstance(steps, list) or not steps or not all(type(step) is int and step > 0 for step in steps):
                raise ValueError(f"table {table_id}: not a list of positive whole numbers")
            stamps[int(table_id)] = list(accumulate(steps))
        return stamps
    except (TypeError, ValueError) as exc:
        log.warning("%s has an unreadable %s entry (%s); its files are read instead", where, STAMPS_KEY, exc)
        return None
