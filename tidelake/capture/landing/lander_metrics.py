"""The lander's Prometheus metrics, on a registry of the caller's choice.

A puller runner gives each lander its own registry (several shards in one process, tests) and
serves it (tidelake.capture.changefeed.puller_metrics); a lander built without one counts on the
process's default registry, created once. Owner: the lander.
"""

from __future__ import annotations

import threading

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

# Flushes take from a few ms (watermarks only) to tens of seconds (a full flush to object storage).
FLUSH_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, float("inf"))


class LanderMetrics:
    """Rows and bytes landed (in all and per table), flushes, flush latency, bytes buffered; labelled by changefeed."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["changefeed"]
        self.rows = Counter("tidelake_lander_rows_total", "Row changes landed", labels, registry=registry)
        self.bytes = Counter("tidelake_lander_bytes_total", "Key+value+old value bytes landed", labels,
                             registry=registry)
        per_table = ["changefeed", "table_id"]
        self.table_rows = Counter("tidelake_lander_table_rows_total", "Row changes landed, per physical table",
                                  per_table, registry=registry)
        self.table_bytes = Counter("tidelake_lander_table_bytes_total", "Bytes landed, per physical table",
                                   per_table, registry=registry)
        self.flushes = Counter("tidelake_lander_flushes_total", "Flushes that landed", labels, registry=registry)
        self.flush_failures = Counter("tidelake_lander_flush_failures_total", "Failed flushes", labels,
                                      registry=registry)
        self.flush_seconds = Histogram("tidelake_lander_flush_seconds", "Flush latency", labels,
                                       registry=registry, buckets=FLUSH_BUCKETS)
        self.compacted_files = Counter("tidelake_lander_compacted_files_total",
                                       "Small changelog files of closed commit buckets rewritten into large ones",
                                       labels, registry=registry)
        self.buffered_bytes = Gauge("tidelake_lander_buffered_bytes",
                                    "Memory of the rows buffered or in a flush (bytes plus ~300 B per row): "
                                    "what the memory quota and flush_size count", labels, registry=registry)


_default: LanderMetrics | None = None
_default_lock = threading.Lock()


def default_lander_metrics() -> LanderMetrics:
    """The metrics of landers built without a registry, on prometheus_client's default one."""
    global _default
    with _default_lock:
        if _default is None:
            _default = LanderMetrics(REGISTRY)
        return _default
