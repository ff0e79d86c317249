"""The tidelake_merge and tidelake_bootstrap trigger forms: their fields, and their validation
(into a MergeRequest, or a bootstrap job spec).

The form is plain JSON-schema (what Airflow's Param takes), so it is built and checked here
without Airflow. Airflow's own schema check catches wrong types; `parse_merge_request` catches
what a schema cannot say (unknown tables, contradicting fields, a Unix time typed where a TSO
belongs) and names the param in the message, because the message is all a user sees of a run
that failed at its first task. Owner: the merge and bootstrap DAGs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from tidelake import tso
from tidelake.errors import InputError
from tidelake.orchestration.job_spec import BootstrapJob

MAX_MERGE_GROUPS = 64
TABLE_NAME_PATTERN = r"^[^.\s]+\.[^.\s]+$"
DEFAULT_MERGE_GROUPS = 4
# A TSO's physical part is milliseconds since 1970; anything before TiDB existed was not
# typed as a TSO (typically it is a Unix time in seconds or milliseconds).
_EARLIEST_PLAUSIBLE_TSO = tso.from_datetime(datetime(2015, 1, 1, tzinfo=timezone.utc))


@dataclass(frozen=True)
class MergeRequest:
    """What one tidelake_merge run was asked to do, validated."""

    tables: tuple[str, ...] | None  # None: every replicated table
    until_ts: int | None  # None: as far as the watermarks allow
    dry_run: bool
    groups: int
    rebuild: str | None = None  # one db.table replayed into a new replica from its CREATE


def merge_param_schemas(
    known_tables: Sequence[str], default_groups: int = DEFAULT_MERGE_GROUPS
) -> dict[str, dict[str, Any]]:
    """JSON-schema of each trigger-form field (with its `default`), in form order; scheduled runs
    take the defaults, so `default_groups` ([merge].parallel_jobs) sizes them.

    `known_tables` (from the lake at parse time) become suggestions; the list may be stale or
    empty, so it never restricts the schema: `parse_merge_request` checks against the lake.
    """
    choices = {"examples": list(known_tables)} if known_tables else {}
    return {
        "tables": {
            "default": [],
            "type": "array",
            "items": {"type": "string"},
            "title": "Tables",
            "description": "Replica tables to merge, as db.table. Empty: all tables.",
            **choices,
        },
        "until_ts": {
            "default": None,
            "type": ["null", "integer"],
            "minimum": 1,
            "title": "Until TSO",
            "description": "Merge no further than this TiDB TSO (e.g. a snapshot's TSO). "
            "Empty: as far as the watermarks allow.",
            "section": "Limit",
        },
        "until_time": {
            "default": None,
            "type": ["null", "string"],
            "format": "date-time",
            "title": "Until time",
            "description": "Merge only changes committed before this time (UTC unless it has "
            "an offset). Use either this or Until TSO.",
            "section": "Limit",
        },
        "rebuild": {
            "default": None,
            "type": ["null", "string"],
            "title": "Rebuild table",
            "description": "db.table to replay into a new, empty replica from its CREATE TABLE, using the "
            "retained changelog (refused when changelog retention already removed some of its changes: "
            "use tidelake_bootstrap then). Merges only this table.",
            **choices,
        },
        "dry_run": {
            "default": False,
            "type": "boolean",
            "title": "Dry run",
            "description": "Plan and log what would be merged; write nothing.",
        },
        "groups": {
            "default": default_groups,
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_MERGE_GROUPS,
            "title": "Parallel Spark jobs",
            "description": "Tables are spread over at most this many Spark jobs.",
            "section": "Limit",
        },
    }


def parse_merge_request(params: Mapping[str, Any], known_tables: Sequence[str]) -> MergeRequest:
    """Validate trigger params against the lake's tables; any problem is one InputError naming
    the param."""
    unknown = sorted(set(params) - set(merge_param_schemas([])))
    if unknown:
        raise InputError(f"param {unknown[0]!r}: unknown (valid: {', '.join(merge_param_schemas([]))})")
    known = set(known_tables)
    tables = _tables(params.get("tables"), known)
    until_ts = _tso(params.get("until_ts"), "until_ts")
    until_time = _until_time(params.get("until_time"))
    if until_ts is not None and until_time is not None:
        raise InputError("params 'until_ts' and 'until_time': give one of them, not both")
    dry_run = params.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise InputError(f"param 'dry_run': expected true or false, got {dry_run!r}")
    groups = params.get("groups", DEFAULT_MERGE_GROUPS)
    if isinstance(groups, bool) or not isinstance(groups, int) or not 1 <= groups <= MAX_MERGE_GROUPS:
        raise InputError(f"param 'groups': expected an integer from 1 to {MAX_MERGE_GROUPS}, got {groups!r}")
    rebuild = _rebuild(params.get("rebuild"), known)
    if rebuild is not None and tables is not None:
        raise InputError("params 'rebuild' and 'tables': a rebuild merges only its own table, leave 'tables' empty")
    return MergeRequest(
        tables=tables if rebuild is None else (rebuild,),
        until_ts=until_ts if until_time is None else until_time,
        dry_run=dry_run,
        groups=groups,
        rebuild=rebuild,
    )


def _rebuild(value: Any, known: set[str]) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise InputError(f"param 'rebuild': expected one db.table name, got {value!r}")
    if value.strip() not in known:
        raise InputError(f"param 'rebuild': {_unknown_tables([value.strip()], known)}")
    return value.strip()


def _tables(value: Any, known: set[str]) -> tuple[str, ...] | None:
    if value is None or value == []:
        return None
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InputError(f"param 'tables': expected a list of db.table names, got {value!r}")
    names = tuple(dict.fromkeys(v.strip() for v in value))
    unknown = [name for name in names if name not in known]
    if unknown:
        raise InputError(f"param 'tables': {_unknown_tables(unknown, known)}")
    return names


def bootstrap_param_schemas() -> dict[str, dict[str, Any]]:
    """JSON-schema of the tidelake_bootstrap trigger form (with each field's `default`)."""
    return {
        "tables": {
            "default": [],
            "type": "array",
            "items": {"type": "string", "pattern": TABLE_NAME_PATTERN},
            "title": "Tables",
            "description": "db.table names. Empty: every table the changefeed's filter selects. A table "
            "outside the filter is added to the running changefeed.",
        },
        "at_ts": {
            "default": None,
            "type": ["null", "integer"],
            "minimum": 1,
            "title": "Snapshot TSO",
            "description": "Read the tables as of this TiDB TSO. Empty: PD's current TSO.",
        },
    }


def bootstrap_job(config_path: str, params: Mapping[str, Any]) -> BootstrapJob:
    """The bootstrap job spec of one run. Names need not be replicated yet (a new table is added to
    the running changefeed), so only their form is checked here; bootstrap checks the rest
    against the upstream schema."""
    at_ts = _tso(params.get("at_ts"), "at_ts")
    tables = params.get("tables") or []
    if not isinstance(tables, list) or not all(isinstance(t, str) for t in tables):
        raise InputError(f"param 'tables': expected a list of db.table names, got {tables!r}")
    names = tuple(dict.fromkeys(t.strip() for t in tables))
    for table in names:
        if not re.fullmatch(TABLE_NAME_PATTERN, table):
            raise InputError(f"param 'tables': {table!r} is not a db.table name")
    return BootstrapJob(config_path, names, at_ts)


def _tso(value: Any, param: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(f"param '{param}': expected a TSO (a positive integer), got {value!r}")
    if value >= tso.LIMIT:
        raise InputError(f"param '{param}': {value} is beyond what a TSO can hold (below 2^64)")
    if value < _EARLIEST_PLAUSIBLE_TSO:
        raise InputError(
            f"param '{param}': {value} is not a TSO (its time would be "
            f"{tso.to_datetime(value):%Y-%m-%d %H:%M:%S} UTC); a TSO is "
            f"milliseconds << 18, e.g. {tso.from_datetime(datetime.now(timezone.utc))} is now"
        )
    return value


def _until_time(value: Any) -> int | None:
    """Changes committed before `value`: the largest TSO below its first millisecond."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise InputError(f"param 'until_time': expected an ISO date-time string, got {value!r}")
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"param 'until_time': {value!r} is not an ISO date-time like 2026-05-01T12:00:00Z"
        ) from None
    latest = tso.to_datetime(tso.LIMIT - 1)
    try:
        ts = tso.from_datetime(when) - 1
    except (OverflowError, ValueError):
        ts = -1
    if not _EARLIEST_PLAUSIBLE_TSO <= ts < tso.LIMIT:
        raise InputError(f"param 'until_time': {value!r} is outside what a TSO can name "
                         f"({tso.to_datetime(_EARLIEST_PLAUSIBLE_TSO):%Y-%m-%d} to {latest:%Y-%m-%d} UTC)")
    return ts


def _unknown_tables(names: Sequence[str], known: set[str]) -> str:
    listed = ", ".join(sorted(known)[:20]) or "none yet"
    more = f" and {len(known) - 20} more" if len(known) > 20 else ""
    return f"unknown table {', '.join(names)} (replicated tables: {listed}{more})"
