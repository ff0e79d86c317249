"""Freshness per stage as a Prometheus textfile (`_tidelake/freshness_metrics.prom`, beside the
merge metrics): p50/p95/p99/max seconds and pending changes per stage over the changes landed in
the last RECENT_SPAN_S (tidelake.status.freshness), for node_exporter's textfile collector, at
most once a MIN_INTERVAL_S: after a merge run (computed afresh), and while a merge follower runs
(on its own thread, from a FreshnessTracker reading only the new log versions). The write is a
rename, so a reader never sees half a file; a lake on object storage gets no file. A failure to
compute it is a warning, never a failed merge.
Owner: the merge commands (`tidelake merge`, the DAG's merge job, the merge follower).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

from tidelake.lake.layout import LakeLayout
from tidelake.lake.object_store import store_error
from tidelake.merge.merge_metrics import merge_metrics_path, write_merge_metrics
from tidelake.status.freshness import QUANTILES, RECENT_SPAN_S, FreshnessReport, collect_freshness
from tidelake.status.freshness_tracker import FreshnessTracker

METRICS_FILE = "freshness_metrics.prom"
# A file younger than this is kept: reading the span's logs costs about as much as a small driver
# merge run (bench/README.md, row "freshness metrics after a merge run"), and runs at 1,000 tables
# or mapped over several groups end seconds apart.
MIN_INTERVAL_S = 60.0
log = logging.getLogger(__name__)


def freshness_metrics_path(layout: LakeLayout) -> str | None:
    """Where the file goes: beside the merge metrics file; None for an object-store lake."""
    merge_file = merge_metrics_path(layout)
    return None if merge_file is None else os.path.join(os.path.dirname(merge_file), METRICS_FILE)


def freshness_registry(report: FreshnessReport) -> CollectorRegistry:
    """The report's overall figures per stage; a stage that showed no change has no quantile sample."""
    registry = CollectorRegistry()
    seconds = Gauge("tidelake_freshness_seconds", "Seconds from upstream commit to the stage, per quantile, "
                    "over the changes the stage showed", ["stage", "quantile"], registry=registry)
    most = Gauge("tidelake_freshness_max_seconds", "Slowest change the stage showed", ["stage"], registry=registry)
    pending = Gauge("tidelake_freshness_pending_changes", "Changes landed in the span the stage has not shown yet",
                    ["stage"], registry=registry)
    oldest = Gauge("tidelake_freshness_oldest_pending_seconds", "Age of the oldest change the stage has not shown "
                   "(0: none pending)", ["stage"], registry=registry)
    Gauge("tidelake_freshness_changes", "Changes landed in the span", registry=registry).set(report.changes)
    Gauge("tidelake_freshness_span_seconds", "The span the figures are over", registry=registry).set(report.span_s)
    Gauge("tidelake_freshness_computed_time_seconds", "Unix time the figures were computed",
          registry=registry).set(report.now_ms / 1000)
    for stage in report.shown_stages:
        figures = report.stages[stage]
        for q in QUANTILES:
            if figures.quantiles[q] is not None:
                seconds.labels(stage, str(q / 100)).set(figures.quantiles[q])
        if figures.max_s is not None:
            most.labels(stage).set(figures.max_s)
        pending.labels(stage).set(figures.pending)
        oldest.labels(stage).set(figures.oldest_pending_s or 0)
    return registry


def write_freshness_metrics(layout: LakeLayout, span_s: float = RECENT_SPAN_S,
                            min_interval_s: float = MIN_INTERVAL_S) -> str | None:
    """Rewrite the lake's freshness metrics file unless it is younger than `min_interval_s`; its
    path, None when the lake is not local or the figures could not be computed (logged as a
    warning: the merge's own outcome stands)."""
    path = freshness_metrics_path(layout)
    if path is None:
        return None
    if _wait_s(path, min_interval_s) > 0:
        return path
    return path if _write(path, lambda: collect_freshness(layout, span_s), span_s) else None


def write_while_following(layout: LakeLayout, done: threading.Event, min_interval_s: float = MIN_INTERVAL_S) -> None:
    """The merge follower's side (its own thread): rewrite the merge metrics file from the merge
    log and this file from one FreshnessTracker as soon as this file is `min_interval_s` old (at
    once when there is none), and the merge metrics once more when `done` is set; nothing on an
    object-store lake. The merge log's read grows with the tables and passes of the last hours
    (merge_log.RECENT), so it is not each pass's. Never raises: a failed write is a warning."""
    path = freshness_metrics_path(layout)
    if path is None:
        return
    tracker = FreshnessTracker(layout, RECENT_SPAN_S)
    while not done.wait(_wait_s(path, min_interval_s)):
        _write_merge_metrics(layout)
        if not _write(path, tracker.report, RECENT_SPAN_S):
            done.wait(min_interval_s)  # the file kept its age: a whole interval before the next try
    _write_merge_metrics(layout)


def _write_merge_metrics(layout: LakeLayout) -> None:
    try:
        write_merge_metrics(layout)
    except Exception as exc:  # noqa: BLE001 - metrics never stop the follower
        log.warning("merge metrics not written: %s", store_error(exc))


def _wait_s(path: str, min_interval_s: float) -> float:
    """Seconds until the file at `path` is `min_interval_s` old (0: none there)."""
    try:
        return max(min_interval_s - (time.time() - os.path.getmtime(path)), 0.0)
    except OSError:
        return 0.0  # no file yet


def _write(path: str, figures: Callable[[], FreshnessReport], span_s: float) -> bool:
    started = time.monotonic()
    try:
        write_to_textfile(path, freshness_registry(figures()))
    except Exception as exc:  # noqa: BLE001 - metrics never fail the merge that asked for them
        log.warning("freshness metrics not written: %s", store_error(exc))
        return False
    log.info("freshness metrics over the last %.0fs written in %.2fs", span_s, time.monotonic() - started)
    return True
