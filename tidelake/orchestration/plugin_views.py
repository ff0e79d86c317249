"""The Replication page: HTML rendered from `tidelake status --json` reports.

It renders the JSON form of the status report, the same document the plugin's JSON endpoint
serves, so the page never shows anything the API does not. Jinja2 (an Airflow dependency)
autoescapes every value: table names and DDL queries come from upstream users.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from importlib import resources
from typing import Any

import jinja2

from tidelake import tso

SPARK_WIDTH = 160
SPARK_HEIGHT = 28


def sparkline_points(values: Sequence[float], width: int = SPARK_WIDTH, height: int = SPARK_HEIGHT) -> str:
    """SVG polyline points of `values` scaled into width x height (0 at the bottom, y grows down)."""
    if not values:
        return ""
    top = max(max(values), 1e-9)
    step = width / max(len(values) - 1, 1)
    return " ".join(
        f"{i * step:.1f},{height - (max(v, 0.0) / top) * (height - 2) - 1:.1f}" for i, v in enumerate(values)
    )


def format_ts(ts: int | None) -> str:
    """A TSO as the time it stands for (UTC, seconds); '-' when absent."""
    if not ts:
        return "-"
    return f"{tso.to_datetime(ts):%Y-%m-%d %H:%M:%S}"


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
    env.filters.update(ts=format_ts, lag=format_lag, sparkline=sparkline_points)
    return env


_ENV = _environment()


def render_page(reports: Sequence[Mapping[str, Any]], now: datetime | None = None) -> str:
    """The whole page for the given changefeed status reports."""
    generated = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M:%S UTC")
    return _ENV.get_template("replication.html").render(
        reports=reports, generated=generated, spark_width=SPARK_WIDTH, spark_height=SPARK_HEIGHT
    )
