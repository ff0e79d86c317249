"""What the Replication page shows for one changefeed: its status report and the page's additions.

Kept apart from the Airflow app so it is built and tested without a web server, and so a page can
be rendered from a lake alone (tools/page_screenshot.py). Owner: the Airflow plugin.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tidelake.config import IcebergConfig
from tidelake.consumers.iceberg.catalog_view import last_snapshots
from tidelake.consumers.iceberg.iceberg_catalog import existing_catalog
from tidelake.errors import TidelakeError
from tidelake.lake.layout import LakeLayout
from tidelake.lake.object_store import store_error
from tidelake.orchestration.changefeeds import Changefeed
from tidelake.orchestration.merge_history import merge_history
from tidelake.status.freshness import RECENT_SPAN_S, collect_freshness
from tidelake.status.status_report import collect_status
from tidelake.syncpoint.records import read_syncpoints

SYNCPOINTS_SHOWN = 10
# The freshness figures cost about what a small merge run does (bench/README.md, row "freshness
# metrics after a merge run"): the api-server computes them at most once a minute per lake.
FRESHNESS_CACHE_S = 60.0
_freshness_cache: dict[tuple[str, float], tuple[float, dict[str, Any]]] = {}
_freshness_locks: dict[tuple[str, float], threading.Lock] = {}  # one per lake and span: a slow lake holds only its own
_locks_lock = threading.Lock()
CHART_TABLES = 8  # lines on the lag chart
PAGE_VERSION = 3


def charted_tables(tables: Sequence[Mapping[str, Any]], limit: int = CHART_TABLES) -> list[Mapping[str, Any]]:
    """The `limit` tables the lag chart draws: the highest lag after their last merge first
    (`lag_recent`); the page report gives only these their `lag_history`."""
    merged = [t for t in tables if t.get("lag_recent")]
    return sorted(merged, key=lambda t: -t["lag_recent"][-1])[:limit]


def page_report(feed: Changefeed) -> dict[str, Any]:
    """`tidelake status --json` of one changefeed plus what the page adds (`page_version` 2):
    the changefeed id; each table's `lag_recent` (its lag after each of its last merges, oldest
    first: the row's sparkline) and `lag_history` ({"at", "lag_s"} of the same merges) for the
    CHART_TABLES tables the lag chart draws, [] for the others; the last merge runs' throughput
    (`apply_runs`); the stretch of the merge log both cover (`history_window`: {"since",
    "until", "hours"}, null before the first merge), the latest syncpoints (newest first: ts,
    number of tables in the cut, tables left out and why), `freshness` (freshness_report; version
    3) and, with [iceberg] enabled, `iceberg`: the last Iceberg snapshot per table (iceberg_report).
    Version 1 (no `page_version`) had `lag_history` on every table and no `lag_recent`: with
    1,000 tables that was 48,000 timestamped points made and serialized for 8 lines drawn."""
    layout = LakeLayout.from_config(feed.config.lake)
    report = collect_status(layout).to_json()
    history = merge_history(layout)
    recent = history.recent_lags()
    for table in report["tables"]:
        table["lag_recent"] = recent.get(table["table_key"], [])
    charted = history.lag(t["table_key"] for t in charted_tables(report["tables"]))
    for table in report["tables"]:
        table["lag_history"] = [point.to_json() for point in charted.get(table["table_key"], [])]
    apply_runs = [run.to_json() for run in history.runs]
    syncpoints = [
        {"ts": sp.ts, "tables": len(sp.replicas), "excluded": sp.excluded}
        for sp in read_syncpoints(layout)[-SYNCPOINTS_SHOWN:]
    ]
    page = {"changefeed": feed.config.changefeed_id, "page_version": PAGE_VERSION, **report,
            "apply_runs": apply_runs, "history_window": history.window_json(), "syncpoints": syncpoints[::-1],
            "freshness": freshness_report(layout)}
    if feed.config.iceberg.enabled:
        page["iceberg"] = iceberg_report(layout, feed.config.iceberg)
    return page


def iceberg_report(layout: LakeLayout, config: IcebergConfig) -> dict[str, Any]:
    """{"tables": tidelake.consumers.iceberg.catalog_view.last_snapshots, "error": null}, or no
    tables and the one-line error when the catalog cannot be read (the rest of the page still shows)."""
    try:
        catalog = existing_catalog(layout, config)
        return {"tables": last_snapshots(catalog, layout) if catalog is not None else [], "error": None}
    except TidelakeError as exc:
        return {"tables": [], "error": str(exc)}


def freshness_report(layout: LakeLayout, span_s: float = RECENT_SPAN_S,
                     max_age_s: float = FRESHNESS_CACHE_S) -> dict[str, Any]:
    """`tidelake freshness --json` over the last `span_s` for all tables, without its per-table
    figures (the chart draws the stages), and "error": null; or the one-line error and no stages
    when the figures cannot be computed (the rest of the page still shows). Figures computed less
    than `max_age_s` ago for the lake are reused: every viewer's page refreshes every 30 s."""
    key = (layout.root, span_s)
    with _locks_lock:
        lock = _freshness_locks.setdefault(key, threading.Lock())
    with lock:  # held while computing: viewers of this lake arriving meanwhile wait for these figures
        cached = _freshness_cache.get(key)
        if cached is not None and time.monotonic() - cached[0] < max_age_s:
            return cached[1]
        try:
            report = collect_freshness(layout, span_s).to_json()
            figures = {name: value for name, value in report.items() if name != "tables"} | {"error": None}
        except Exception as exc:  # noqa: BLE001 - a lake the figures cannot be read from is one line on the page
            figures = {"span_s": span_s, "changes": 0, "syncpoints": False, "stages": {}, "error": store_error(exc)}
        _freshness_cache[key] = (time.monotonic(), figures)  # an error too: not read again for a minute
        return figures
