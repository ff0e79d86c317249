"""The Replication page: HTML rendered from `tidelake status --json` reports.

It renders the JSON form of the status report, the same document the plugin's JSON endpoint
serves, so the page never shows anything the API does not. Jinja2 (an Airflow dependency)
autoescapes every value: table names and DDL queries come from upstream users.
Owner: the Airflow plugin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from typing import Any

import jinja2

from tidelake import tso
from tidelake.orchestration.page_report import CHART_TABLES, charted_tables

URL_PREFIX = "/tidelake"  # where the api-server mounts the plugin's app
PAGE_PATH = f"{URL_PREFIX}/replication"
SPARK_WIDTH = 160
SPARK_HEIGHT = 28
CHART_WIDTH = 560
CHART_HEIGHT = 160
FRESHNESS_QUANTILES = ("p50", "p95", "p99")
FRESHNESS_BAR = 9  # height of one quantile's bar
FRESHNESS_ROW = 3 * FRESHNESS_BAR + 8  # a stage's group of bars and the gap below it
# Distinguishable on white and for the common colour-vision deficiencies (Okabe-Ito).
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#f0e442")


def sparkline_points(values: Sequence[float], width: int = SPARK_WIDTH, height: int = SPARK_HEIGHT) -> str:
    """SVG polyline points of `values` scaled into width x height (0 at the bottom, y grows down)."""
    if not values:
        return ""
    top = max(max(values), 1e-9)
    step = width / max(len(values) - 1, 1)
    return " ".join(
        f"{i * step:.1f},{height - (max(v, 0.0) / top) * (height - 2) - 1:.1f}" for i, v in enumerate(values)
    )


@dataclass(frozen=True)
class Series:
    """One table's line in the lag chart."""

    label: str
    color: str
    points: str
    last_lag_s: float


@dataclass(frozen=True)
class LagChart:
    """Lag over time of the worst tables, on one time axis (plot coordinates, 0,0 top left)."""

    series: list[Series]
    max_lag_s: float
    start: datetime
    end: datetime
    left_out: int


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    title: str


@dataclass(frozen=True)
class ThroughputChart:
    """Changes applied per second of each merge run, one bar per run, oldest first."""

    bars: list[Bar]
    max_rate: float
    last: Mapping[str, Any]


def _plot_y(value: float, top: float, height: float) -> float:
    return height - (max(value, 0.0) / top) * height


def lag_chart(tables: Sequence[Mapping[str, Any]], width: int = CHART_WIDTH, height: int = CHART_HEIGHT,
              limit: int = CHART_TABLES) -> LagChart | None:
    """The charted tables (`charted_tables`), each a polyline of its lag history over the time
    span all of them cover; None when no table has a point yet."""
    shown = [(t["table"], [(datetime.fromisoformat(p["at"]), p["lag_s"]) for p in t["lag_history"]])
             for t in charted_tables(tables, limit) if t["lag_history"]]
    if not shown:
        return None
    start = min(points[0][0] for _, points in shown)
    end = max(points[-1][0] for _, points in shown)
    span = max((end - start).total_seconds(), 1e-9)
    top = max(max(lag for _, lag in points) for _, points in shown) or 1.0
    series = []
    for i, (name, points) in enumerate(shown):
        coords = " ".join(
            f"{(at - start).total_seconds() / span * width:.1f},{_plot_y(lag, top, height):.1f}" for at, lag in points
        )
        series.append(Series(name, PALETTE[i % len(PALETTE)], coords, points[-1][1]))
    return LagChart(series, top, start, end, sum(1 for t in tables if t.get("lag_recent")) - len(shown))


def throughput_chart(runs: Sequence[Mapping[str, Any]], width: int = CHART_WIDTH,
                     height: int = CHART_HEIGHT) -> ThroughputChart | None:
    """A bar per merge run of its changes per second of wall time; None before the first run."""
    if not runs:
        return None
    top = max(max(run["changes_per_s"] for run in runs), 1e-9)
    slot = width / len(runs)
    bars = []
    for i, run in enumerate(runs):
        y = _plot_y(run["changes_per_s"], top, height)
        title = (f"{run['finished_at']}: {run['changes']} changes over {run['tables']} tables "
                 f"in {run['seconds']:.1f} s")
        bars.append(Bar(i * slot + slot * 0.1, y, slot * 0.8, height - y, title))
    return ThroughputChart(bars, top, runs[-1])


@dataclass(frozen=True)
class FreshnessBar:
    """One quantile of one stage: a horizontal bar (plot coordinates, 0,0 top left)."""

    x: float
    y: float
    width: float
    height: float
    color: str
    title: str


@dataclass(frozen=True)
class StageRow:
    """A stage's row of the freshness chart: its label's y and what it has not shown yet."""

    stage: str
    y: float
    pending: int
    oldest_pending_s: float | None


@dataclass(frozen=True)
class FreshnessChart:
    """p50/p95/p99 seconds from upstream commit per stage (the page report's `freshness`), one
    group of bars per stage on one seconds axis."""

    rows: list[StageRow]
    bars: list[FreshnessBar]
    max_s: float
    height: float
    span_s: float
    changes: int
    colors: dict[str, str]


def freshness_chart(freshness: Mapping[str, Any] | None, width: int = CHART_WIDTH) -> FreshnessChart | None:
    """The chart of the page report's `freshness`; None when it has no figure to draw (no change
    landed in its span, or an error, which the page shows as its line)."""
    stages = (freshness or {}).get("stages") or {}
    values = [figures[q] for figures in stages.values() for q in FRESHNESS_QUANTILES if figures.get(q) is not None]
    if not values:
        return None
    top = max(max(values), 1e-9)
    colors = dict(zip(FRESHNESS_QUANTILES, PALETTE))
    rows, bars = [], []
    for i, (stage, figures) in enumerate(stages.items()):
        y0 = i * FRESHNESS_ROW
        rows.append(StageRow(stage, y0 + FRESHNESS_ROW / 2, figures["pending"], figures["oldest_pending_s"]))
        for j, q in enumerate(FRESHNESS_QUANTILES):
            value = figures.get(q)
            if value is not None:
                bars.append(FreshnessBar(0.0, y0 + 2 + j * FRESHNESS_BAR, max(value, 0.0) / top * width,
                                         FRESHNESS_BAR - 1, colors[q], f"{stage} {q}: {format_lag(value)}"))
    return FreshnessChart(rows, bars, top, len(stages) * FRESHNESS_ROW, freshness["span_s"], freshness["changes"],
                          colors)


def format_ts(ts: int | None) -> str:
    """A TSO as the time it stands for (UTC, seconds); '-' when absent."""
    if not ts:
        return "-"
    return f"{tso.to_datetime(ts):%Y-%m-%d %H:%M:%S}"


def format_clock(at: datetime) -> str:
    """A chart axis time: UTC, to the second."""
    return f"{at.astimezone(timezone.utc):%H:%M:%S}"


def format_lag(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(
            lambda name: resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")
        ),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(ts=format_ts, lag=format_lag, sparkline=sparkline_points,
                       clock=format_clock)
    return env


_ENV = _environment()


def render_page(reports: Sequence[Mapping[str, Any]], now: datetime | None = None) -> str:
    """The whole page for the given changefeed status reports; a report {"changefeed", "error"} is
    its one line."""
    generated = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M:%S UTC")
    charts = [
        None if "error" in report else
        {"lag": lag_chart(report["tables"]), "throughput": throughput_chart(report["apply_runs"]),
         "freshness": freshness_chart(report.get("freshness"))}
        for report in reports
    ]
    return _ENV.get_template("replication.html").render(
        reports=reports, charts=charts, generated=generated, spark_width=SPARK_WIDTH, spark_height=SPARK_HEIGHT,
        chart_width=CHART_WIDTH, chart_height=CHART_HEIGHT,
    )
