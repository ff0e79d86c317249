"""Merge-run metrics as a Prometheus textfile (`_tidelake/merge_metrics.prom`, beside the merge log).

Merges are short batch runs, not servers to scrape: each run rewrites this file from the merge
log's latest entry of every table logged within merge_log.RECENT of its newest entry (a table no
run visited since, e.g. a dropped one, leaves the file), and node_exporter's textfile collector
(or any reader of the text format) serves it. Built from the log, not from the run, so mapped merge tasks that each
merge a group of tables all leave every table in the file; the write is a rename, so a reader
never sees half a file. A lake on object storage gets no file (the collector reads local files).
Owner: the merge run (tidelake.merge.merge_run) rewrites it.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

from tidelake import tso
from tidelake.lake.layout import LakeLayout
from tidelake.lake.object_store import local_root
from tidelake.merge.merge_log import MergeLogEntry, MergeStatus, last_entries

METRICS_FILE = "merge_metrics.prom"


def merge_metrics_path(layout: LakeLayout) -> str | None:
    """Where the file goes; None for an object-store lake."""
    directory = local_root(layout.tidelake_root)
    return None if directory is None else str(directory / METRICS_FILE)


def merge_registry(entries: dict[int, MergeLogEntry]) -> CollectorRegistry:
    """The metrics of each table's latest merge, labelled by table name and key."""
    registry = CollectorRegistry()
    labels = ["table", "table_key"]

    def gauge(name: str, doc: str, extra: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name, doc, [*labels, *extra], registry=registry)

    rows_applied = gauge("tidelake_merge_rows_applied", "Replica rows inserted, updated or deleted by the last run")
    rows_in = gauge("tidelake_merge_changes_merged", "Changes the last run merged, after collapsing per key")
    windows = gauge("tidelake_merge_windows", "Windows the last run merged")
    ddls = gauge("tidelake_merge_ddls_applied", "DDL jobs the last run applied at their barriers")
    duration = gauge("tidelake_merge_duration_seconds", "Wall time of the table's part of the last run")
    span = gauge("tidelake_merge_window_span_seconds", "Upstream time the last run advanced the checkpoint by")
    checkpoint = gauge("tidelake_merge_checkpoint_time_seconds", "Unix time of the replica's checkpoint after the run")
    lag = gauge("tidelake_merge_lag_seconds", "Seconds the replica's checkpoint was behind when the run finished")
    finished = gauge("tidelake_merge_finished_time_seconds", "Unix time the last run finished")
    status = gauge("tidelake_merge_status", "1 for the status of the last run (merged, idle, blocked, stopped, error)",
                   ("status",))
    for key, e in sorted(entries.items()):
        table = (e.table_name, str(key))
        rows_applied.labels(*table).set(e.rows_out)
        rows_in.labels(*table).set(e.rows_in)
        windows.labels(*table).set(e.windows)
        ddls.labels(*table).set(e.ddls_applied)
        duration.labels(*table).set(e.duration_s)
        finished.labels(*table).set(e.finished_at.timestamp())
        for s in MergeStatus:
            status.labels(*table, s.value).set(1 if e.status == s else 0)
        if e.checkpoint_after:
            after = tso.physical_ms(e.checkpoint_after) / 1000
            checkpoint.labels(*table).set(after)
            lag.labels(*table).set(max(0.0, e.finished_at.timestamp() - after))
            before = tso.physical_ms(e.checkpoint_before or e.checkpoint_after) / 1000
            span.labels(*table).set(max(0.0, after - before))
    return registry


def write_merge_metrics(layout: LakeLayout) -> str | None:
    """Rewrite the lake's merge metrics file from the merge log; returns its path (None: not local)."""
    path = merge_metrics_path(layout)
    if path is None:
        return None
    write_to_textfile(path, merge_registry(last_entries(layout)))
    return path
