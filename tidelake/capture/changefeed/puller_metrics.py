"""A puller runner's Prometheus metrics: its own registry, read by an HTTP endpoint.

Each runner has its own CollectorRegistry (not prometheus_client's default one), so several shards
in one process, or tests, never mix their series. The registry holds the lander's metrics
(tidelake.capture.landing.lander_metrics: rows, bytes, flushes, flush latency, bytes buffered) and a
collector that reads the runner's state at scrape time: per table resolved ts and lag, regions by
state, region errors by kind, stream reconnects, the memory quota, the prewrites waiting for their
commit (in memory and spilled to disk), and the GC safepoint held
against the upstream's. Timestamps are exported as Unix seconds (a TSO does not fit a float).
Owner: the puller runner, one registry per runner.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tidelake import tso
from tidelake.capture.landing.lander_metrics import LanderMetrics


@dataclass(frozen=True)
class PullerState:
    """What the runner knows at one instant (PullerRunner.metrics_state)."""

    feed_id: str
    table_resolved: dict[int, int]  # physical id -> resolved ts pulled (not yet necessarily landed)
    ddl_resolved: int
    rows_pulled: int
    memory_quota_bytes: int
    regions: dict[int, dict[str, int]] = field(default_factory=dict)  # table id -> state -> count
    region_errors: dict[str, int] = field(default_factory=dict)
    stream_reconnects: dict[int, int] = field(default_factory=dict)  # store id -> count
    checkpoint_ts: int | None = None  # the ts the service GC safepoint holds (safepoint = ts - 1)
    gc_safepoint_ts: int | None = None  # the upstream cluster's GC safepoint, as last read
    gc_ttl_s: float = 0.0
    prewrite_memory_bytes: int = 0  # unmatched prewrites held in memory (tidelake.capture.eventfeed.prewrites)
    prewrite_spilled_rows: int = 0  # and those in the spill file


def _seconds(ts: int) -> float:
    return tso.physical_ms(ts) / 1000


class _RunnerCollector(Collector):
    def __init__(self, state: Callable[[], PullerState | None]) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        s = self._state()
        if s is None:  # not running yet
            return
        now = time.time()
        cf = [s.feed_id]
        resolved = GaugeMetricFamily("tidelake_puller_table_resolved_time_seconds",
                                     "Unix time of the table's resolved ts pulled from TiKV",
                                     labels=["changefeed", "table_id"])
        lag = GaugeMetricFamily("tidelake_puller_table_resolved_lag_seconds",
                                "Seconds the table's resolved ts is behind the wall clock",
                                labels=["changefeed", "table_id"])
        for pid, ts in sorted(s.table_resolved.items()):
            resolved.add_metric([*cf, str(pid)], _seconds(ts))
            lag.add_metric([*cf, str(pid)], max(0.0, now - _seconds(ts)))
        yield resolved
        yield lag
        ddl_lag = GaugeMetricFamily("tidelake_puller_ddl_resolved_lag_seconds",
                                    "Seconds the DDL job span's resolved ts is behind the wall clock",
                                    labels=["changefeed"])
        ddl_lag.add_metric(cf, max(0.0, now - _seconds(s.ddl_resolved)))
        yield ddl_lag
        rows = CounterMetricFamily("tidelake_puller_rows", "Row changes pulled from TiKV this run",
                                   labels=["changefeed"])
        rows.add_metric(cf, s.rows_pulled)
        yield rows
        regions = GaugeMetricFamily("tidelake_puller_regions",
                                    "Region requests in flight by state: initializing (initial scan) or replicating",
                                    labels=["changefeed", "table_id", "state"])
        for pid, states in sorted(s.regions.items()):
            for state, count in sorted(states.items()):
                regions.add_metric([*cf, str(pid), state], count)
        yield regions
        errors = CounterMetricFamily("tidelake_puller_region_errors",
                                     "Region errors from TiKV by kind (not_leader, epoch_not_match, "
                                     "server_is_busy, ...; stream_broken for regions of a broken stream)",
                                     labels=["changefeed", "kind"])
        for kind, count in sorted(s.region_errors.items()):
            errors.add_metric([*cf, kind], count)
        yield errors
        reconnects = CounterMetricFamily("tidelake_puller_stream_reconnects",
                                         "EventFeed streams opened again to a store that had one",
                                         labels=["changefeed", "store_id"])
        for store, count in sorted(s.stream_reconnects.items()):
            reconnects.add_metric([*cf, str(store)], count)
        yield reconnects
        quota = GaugeMetricFamily("tidelake_puller_memory_quota_bytes",
                                  "The lander's memory quota ([puller].memory_quota)", labels=["changefeed"])
        quota.add_metric(cf, s.memory_quota_bytes)
        yield quota
        prewrites = GaugeMetricFamily("tidelake_puller_prewrite_memory_bytes",
                                      "Memory taken by prewrites waiting for their commit, all regions "
                                      "(bounded by the feed's prewrite budget)", labels=["changefeed"])
        prewrites.add_metric(cf, s.prewrite_memory_bytes)
        yield prewrites
        spilled = GaugeMetricFamily("tidelake_puller_prewrite_spilled_rows",
                                    "Prewrites waiting for their commit in the spill file ([puller].spill_dir)",
                                    labels=["changefeed"])
        spilled.add_metric(cf, s.prewrite_spilled_rows)
        yield spilled
        ttl = GaugeMetricFamily("tidelake_puller_gc_ttl_seconds", "TTL of the service GC safepoint the puller holds",
                                labels=["changefeed"])
        ttl.add_metric(cf, s.gc_ttl_s)
        yield ttl
        if s.checkpoint_ts is not None:
            checkpoint = GaugeMetricFamily("tidelake_puller_checkpoint_time_seconds",
                                           "Unix time of the durable checkpoint the service GC safepoint holds",
                                           labels=["changefeed"])
            checkpoint.add_metric(cf, _seconds(s.checkpoint_ts))
            yield checkpoint
        if s.gc_safepoint_ts is not None:
            gc = GaugeMetricFamily("tidelake_upstream_gc_safepoint_time_seconds",
                                   "Unix time of the upstream cluster's GC safepoint", labels=["changefeed"])
            gc.add_metric(cf, _seconds(s.gc_safepoint_ts))
            yield gc


class PullerMetrics:
    """One runner's registry: the lander's metrics plus the runner's state at scrape time."""

    def __init__(self, state: Callable[[], PullerState | None]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.lander = LanderMetrics(self.registry)
        self.registry.register(_RunnerCollector(state))


class MetricsEndpoint:
    """`/metrics` over HTTP for one registry, on its own daemon thread until close()."""

    def __init__(self, registry: CollectorRegistry, port: int, addr: str = "0.0.0.0") -> None:
        self._server, self._thread = start_http_server(port, addr, registry)

    @property
    def port(self) -> int:
        """The port it listens on (the one the OS chose when asked for port 0)."""
        return self._server.server_port

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
