"""The changes a changelog flush landed, named in its commit: the distinct (physical table, commit
ts) pairs of its rows in the commitInfo under STAMPS_KEY, so a reader learns when each change
landed from the log alone instead of reading the commit's data files. A flush of more than
MAX_STAMPS pairs leaves them out, as do commits of older releases: readers then read the files.
Owner: the changelog writer writes it (tidelake.capture.landing.changelog_writer); freshness
(tidelake.status.freshness.landed_stamps) reads it.

More: docs/internals.md#flush_stamps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from itertools import accumulate

STAMPS_KEY = "tidelake.commit_ts"
MAX_STAMPS = 50_000  # pairs named in one commit: keeps a commit file within a few hundred KiB


def stamps_metadata(pairs: Iterable[tuple[int, int]]) -> dict[str, str]:
    """The commitInfo entry naming the (physical table, commit ts) `pairs` of a flush, empty when
    they are more than MAX_STAMPS: JSON, per table id its ts ascending, the first whole and each
    next one as the step from the one before (TSO steps are short numbers)."""
    by_table: dict[int, set[int]] = {}
    count = 0
    for table_id, ts in pairs:
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


def stamps_of(commit_info: Mapping[str, object]) -> dict[int, list[int]] | None:
    """Per physical table id, the commit ts a changelog commit landed, from its commitInfo; None
    when the commit does not name them (read its files instead)."""
    value = commit_info.get(STAMPS_KEY)
    if not isinstance(value, str):
        return None
    return {int(table_id): list(accumulate(steps)) for table_id, steps in json.loads(value).items()}
