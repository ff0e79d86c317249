"""The Replication page renders what the status JSON says, escaped, with a lag sparkline."""

from __future__ import annotations

from datetime import datetime, timezone

from tidelake import tso
from tidelake.orchestration.plugin_views import (
    format_lag,
    render_page,
    sparkline_points,
)

TS = tso.from_datetime(datetime(2026, 5, 1, 8, 0, 5, tzinfo=timezone.utc))


def table(**overrides):
    base = {
        "table": "shop.orders", "table_key": 7, "state": "active", "reason": None, "path": "/l/shop/orders",
        "physical_ids": [7], "resolved_ts": TS + 10, "barrier_ts": TS + 5, "checkpoint_ts": TS, "lag_seconds": 4.5,
        "bound": "barrier", "blocked": None, "last_error": None, "lag_history": [3.0, 9.0, 4.5],
        "pending_ddl": {"job_id": 3, "commit_ts": TS + 6, "commit_utc": "x", "action": "add column",
                        "query": "ALTER TABLE orders ADD c INT /* <script> */"},
        "last_merge": {"run_id": "r", "status": "merged", "finished_at": "2026-05-01T08:00:09Z",
                       "duration_s": 2.5, "rows_in": 120, "rows_out": 118, "checkpoint_after": TS, "reason": None},
    }
    return {**base, **overrides}


def report(*tables):
    return {"changefeed": "shop", "lake": "s3a://lake/prod", "ddl_resolved_ts": TS + 20, "now_source": "wall_clock",
            "tables": list(tables), "syncpoints": [{"ts": TS, "tables": 2, "excluded": {"shop.old": "stopped"}}]}


def test_page_shows_watermarks_ddl_and_last_merge_escaped():
    page = render_page([report(table())], now=datetime(2026, 5, 1, 8, 1, tzinfo=timezone.utc))
    assert "Changefeed shop" in page
    assert "2026-05-01 08:00:05" in page  # checkpoint as UTC time
    assert f'title="{TS}"' in page  # and its TSO on hover
    assert "add column" in page and "&lt;script&gt;" in page and "<script>" not in page
    assert "120 changes" in page and "2.5 s" in page
    assert "<polyline" in page
    assert "shop.old: stopped" in page  # a syncpoint lists the tables left out of its cut


def test_stopped_table_shows_its_reason_and_empty_lake_says_so():
    stopped = table(state="stopped", last_error="unsupported DDL: modify column type", lag_history=[],
                    pending_ddl=None, last_merge=None, blocked="stopped by an unsupported DDL")
    page = render_page([report(stopped)])
    assert "(stopped)" in page and "unsupported DDL: modify column type" in page
    assert "<polyline" not in page
    assert "No replicated tables yet." in render_page([report()])


def test_sparkline_scales_into_the_box():
    points = [tuple(map(float, p.split(","))) for p in sparkline_points([0.0, 5.0, 10.0], width=100, height=20).split()]
    assert [x for x, _ in points] == [0.0, 50.0, 100.0]
    assert points[0][1] == 19.0 and points[2][1] == 1.0  # zero at the bottom, the maximum at the top
    assert sparkline_points([]) == ""


def test_lag_formatting():
    assert format_lag(None) == "-"
    assert format_lag(4.25) == "4.2 s"
    assert format_lag(600) == "10.0 min"
    assert format_lag(3 * 3600) == "3.0 h"
