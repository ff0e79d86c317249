"""The changes a changelog flush landed, named in its commit: the distinct (physical table, commit
ts) pairs of its rows in the commitInfo under STAMPS_KEY, so a reader learns when each change
landed from the log alone instead of reading the commit's data files. A flush of more than
MAX_STAMPS pairs leaves them out, as do commits of older releases: readers then read the files.
Every reader of the changelog's log parses the entry, so its size is bounded. A new format takes a
new key. Owner: the changelog writer writes it (tidelake.capture.landing.changelog_writer);
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
    """The commitInfo entry naming the (physical table, commit ts) `pairs` of a flush, empty when
    they are more than MAX_STAMPS: JSON, per table id its ts ascending, the first whole and each
    next one as the step from the one before (TSO steps are short numbers)."""
    by_table: dict[int, set[int]] = {}
    count, last = 0, None
    for pair in pairs:
        if pair == last:  # a transaction's rows come together
            continue
        last = pair
        table_id, ts = pair
        seen = by_table.setdefault(table_id, set())
        if ts not in seen:
            seen.add(ts)
            count += 1
            if count > MAX_STAMPS:
                return {}
    encoded = {}
    for table_id, stamps in sorted(by_table.items()):
        ordered = sorted(stamps)
        encoded[str(table_id)] = ordered[:1] + [b - a for a, b in zip(ordered, ordered[1:])]
    return {STAMPS_KEY: json.dumps(encoded, separators=(",", ":"))}


def stamps_of(commit_info: Mapping[str, object], where: str = "a changelog commit") -> dict[int, list[int]] | None:
    """Per physical table id, the commit ts a changelog commit landed, from its commitInfo; None
    when the commit does not name them, or names them in a form this release does not read (a
    warning naming `where`: the caller reads the commit's files instead)."""
    value = commit_info.get(STAMPS_KEY)
    if value is None:
        return None
    try:
        return {int(table_id): list(accumulate(int(step) for step in steps))
                for table_id, steps in json.loads(value).items()}
    except (TypeError, ValueError, AttributeError) as exc:
        log.warning("%s has an unreadable %s entry (%s); its files are read instead", where, STAMPS_KEY, exc)
        return None
