"""monitoring/: the Prometheus alert rules and the Grafana dashboard use only metric names and
labels that the code exports, read from real prometheus-client registries (a puller runner's, the
merge metrics file's and the freshness metrics file's), and the alerts the operators need are there."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import yaml

from tidelake import tso
from tidelake.capture.changefeed.puller_metrics import PullerMetrics, PullerState
from tidelake.merge.merge_log import MergeLogEntry, MergeStatus
from tidelake.merge.merge_metrics import merge_registry
from tidelake.status.freshness import QUANTILES, STAGES, FreshnessReport, StageFigures
from tidelake.status.freshness_metrics import freshness_registry

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "monitoring" / "prometheus" / "tidelake-alerts.yml"
DASHBOARD = ROOT / "monitoring" / "grafana" / "tidelake-dashboard.json"
SAMPLE_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
PROMQL_WORDS = {"le"}  # histogram bucket label


def exported() -> tuple[set[str], set[str]]:
    """(sample names, label names) of a runner's registry and of the merge metrics."""
    now = tso.from_datetime(datetime.now(timezone.utc))
    state = PullerState("cf1", {110: now}, now, 3, 1 << 30, {110: {"replicating": 1}}, {"not_leader": 1}, {1: 1},
                        now, now, 600.0, prewrite_memory_bytes=1 << 20, prewrite_spilled_rows=5)
    metrics = PullerMetrics(lambda: state)
    for counter in (metrics.lander.rows, metrics.lander.bytes, metrics.lander.flushes, metrics.lander.flush_failures):
        counter.labels(changefeed="cf1").inc()
    metrics.lander.flush_seconds.labels(changefeed="cf1").observe(0.1)
    metrics.lander.buffered_bytes.labels(changefeed="cf1").set(1)
    metrics.lander.table_rows.labels(changefeed="cf1", table_id="110").inc()
    metrics.lander.table_bytes.labels(changefeed="cf1", table_id="110").inc()
    entry = MergeLogEntry("r", 1, "db.t", MergeStatus.MERGED, now - 1, now, 1, 0, 1, 1, 1.0, None,
                          datetime.now(timezone.utc), datetime.now(timezone.utc))
    figures = StageFigures(1, 1, dict.fromkeys(QUANTILES, 1.0), 1.0, 1.0)
    freshness = FreshnessReport("lake", 300, 0, 2, True, dict.fromkeys(STAGES, figures))
    names, labels = set(), set()
    for registry in (metrics.registry, merge_registry({1: entry}), freshness_registry(freshness)):
        for family in registry.collect():
            names.update(family.name + s for s in SAMPLE_SUFFIXES[family.type])
            for sample in family.samples:
                labels.update(sample.labels)
    return names, labels


def metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\btidelake_[a-z_]+\b", expr))


def grouping_labels(expr: str) -> set[str]:
    return {label.strip() for group in re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", expr)
            for label in group.split(",") if label.strip()}


def test_every_metric_and_label_in_the_alert_rules_is_exported():
    names, labels = exported()
    rules = {r["alert"]: r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    for name, rule in rules.items():
        expr = rule["expr"]
        assert metric_names(expr) and metric_names(expr) <= names, (name, metric_names(expr) - names)
        assert grouping_labels(expr) <= labels | PROMQL_WORDS, (name, grouping_labels(expr) - labels)
        assert expr.count("(") == expr.count(")"), name
        assert rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]["summary"]
    # what operators asked for: lag over a threshold, a stuck table, GC safepoint close to the checkpoint
    assert "tidelake_puller_table_resolved_lag_seconds" in rules["TidelakeTableLagHigh"]["expr"]
    assert "changes(tidelake_puller_table_resolved_time_seconds" in rules["TidelakeTableStuck"]["expr"]
    assert metric_names(rules["TidelakeGCSafepointNearCheckpoint"]["expr"]) == {
        "tidelake_puller_checkpoint_time_seconds", "tidelake_upstream_gc_safepoint_time_seconds"}
    assert "tidelake_merge_checkpoint_time_seconds" in rules["TidelakeReplicaLagHigh"]["expr"]


def test_every_dashboard_query_uses_exported_metrics_and_labels():
    names, labels = exported()
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    used = set()
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            expr = target["expr"]
            used |= metric_names(expr)
            assert metric_names(expr) <= names, (panel["title"], metric_names(expr) - names)
            assert grouping_labels(expr) <= labels | PROMQL_WORDS, panel["title"]
            assert set(re.findall(r"\{\{(\w+)\}\}", target["legendFormat"])) <= labels, panel["title"]
    variable = next(v for v in dashboard["templating"]["list"] if v["name"] == "changefeed")
    assert metric_names(variable["definition"]) <= names
    # the list: lag, rows and bytes landed, regions, errors, reconnects, memory, flush latency, merges;
    # issue #31: freshness per stage
    for needed in ("tidelake_puller_table_resolved_lag_seconds", "tidelake_lander_table_rows_total",
                   "tidelake_lander_bytes_total", "tidelake_puller_regions", "tidelake_puller_region_errors_total",
                   "tidelake_puller_stream_reconnects_total", "tidelake_lander_buffered_bytes",
                   "tidelake_lander_flush_seconds_bucket", "tidelake_merge_lag_seconds", "tidelake_merge_rows_applied",
                   "tidelake_freshness_seconds", "tidelake_freshness_pending_changes"):
        assert needed in used, needed


def test_the_metrics_tables_of_the_docs_list_every_exported_metric_and_nothing_else():
    names, _ = exported()
    families = {n for n in names if not n.endswith(("_bucket", "_count", "_sum"))}
    families |= {n[:-len("_bucket")] for n in names if n.endswith("_bucket")}  # a histogram by its name
    section = (ROOT / "docs" / "operations.md").read_text().split("## Metrics", 1)[1].split("\n## ", 1)[0]
    listed = {name for row in section.splitlines() if row.startswith("| `tidelake_")
              for name in re.findall(r"`(tidelake_[a-z_]+)`", row.split(" | ")[0])}
    assert listed == families, (sorted(families - listed), sorted(listed - families))
