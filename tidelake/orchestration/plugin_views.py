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
        {"lag": lag_chart(report["tables"]), "throughput": throughput_chart(report["apply_runs"])}
        for report in reports
    ]
    return _ENV.get_template("replication.html").render(
        reports=reports, charts=charts, generated=generated, spark_width=SPARK_WIDTH, spark_height=SPARK_HEIGHT,
        chart_width=CHART_WIDTH, chart_height=CHART_HEIGHT,
    )
