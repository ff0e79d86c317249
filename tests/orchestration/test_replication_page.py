"""The Replication page renders what the status JSON says, escaped, with a lag sparkline."""

from __future__ import annotations

import shutil
import subprocess
from datetime import datetime, timedelta, timezone

import pytest
from PIL import Image

from tidelake import tso
from tidelake.lake.layout import LakeLayout
from tidelake.merge.merge_log import MergeLogEntry, MergeStatus, append_entries
from tidelake.orchestration.merge_history import merge_history
from tidelake.orchestration.plugin_views import (
    CHART_HEIGHT,
    PALETTE,
    format_lag,
    freshness_chart,
    lag_chart,
    render_page,
    sparkline_points,
    throughput_chart,
)

TS = tso.from_datetime(datetime(2026, 5, 1, 8, 0, 5, tzinfo=timezone.utc))


def history(*lags, start_minute=0):
    return [{"at": f"2026-05-01T08:{start_minute + i:02d}:00+00:00", "lag_s": lag} for i, lag in enumerate(lags)]


def lags(*values, start_minute=0):
    """A charted table's `lag_recent` and `lag_history`, as the page report gives them."""
    return {"lag_recent": list(values), "lag_history": history(*values, start_minute=start_minute)}


RUNS = [{"run_id": "a", "finished_at": "2026-05-01T08:00:09+00:00", "tables": 2, "changes": 200, "seconds": 4.0,
         "changes_per_s": 50.0},
        {"run_id": "b", "finished_at": "2026-05-01T08:01:09+00:00", "tables": 1, "changes": 100, "seconds": 1.0,
         "changes_per_s": 100.0}]


def table(**overrides):
    base = {
        "table": "shop.orders", "table_key": 7, "state": "active", "reason": None, "path": "/l/shop/orders",
        "physical_ids": [7], "resolved_ts": TS + 10, "barrier_ts": TS + 5, "checkpoint_ts": TS, "lag_seconds": 4.5,
        "bound": "barrier", "blocked": None, "last_error": None, **lags(3.0, 9.0, 4.5),
        "pending_ddl": {"job_id": 3, "commit_ts": TS + 6, "commit_utc": "x", "action": "add column",
                        "query": "ALTER TABLE orders ADD c INT /* <script> */"},
        "last_merge": {"run_id": "r", "status": "merged", "finished_at": "2026-05-01T08:00:09Z",
                       "duration_s": 2.5, "rows_in": 120, "rows_out": 118, "checkpoint_after": TS, "reason": None},
    }
    return {**base, **overrides}


def report(*tables):
    return {"changefeed": "shop", "lake": "s3a://lake/prod", "ddl_resolved_ts": TS + 20, "now_source": "wall_clock",
            "tables": list(tables), "apply_runs": RUNS, "syncpoints": [{"ts": TS, "tables": 2, "excluded": {"shop.old": "stopped"}}]}


def test_page_shows_watermarks_ddl_and_last_merge_escaped():
    page = render_page([report(table())], now=datetime(2026, 5, 1, 8, 1, tzinfo=timezone.utc))
    assert "Changefeed shop" in page
    assert "2026-05-01 08:00:05" in page  # checkpoint as UTC time
    assert f'title="{TS}"' in page  # and its TSO on hover
    assert "add column" in page and "&lt;script&gt;" in page and "<script>" not in page
    assert "120 changes" in page and "2.5 s" in page
    assert "<polyline" in page
    assert "shop.old: stopped" in page  # a syncpoint lists the tables left out of its cut
    assert 'data-table="shop.orders"' in page and "Apply throughput" in page
    assert "last run: 100 changes over 1 table in 1.0 s (100 changes/s)" in page
    window = {"since": "2026-05-01T04:01:09+00:00", "until": "2026-05-01T08:01:09+00:00", "hours": 4.0}
    assert "Merge history of the last 4 hours before the newest merge (2026-05-01 08:01 UTC)" in render_page(
        [{**report(table()), "history_window": window}])


def test_stopped_table_shows_its_reason_and_empty_lake_says_so():
    stopped = table(state="stopped", last_error="unsupported DDL: modify column type", lag_recent=[],
                    lag_history=[],
                    pending_ddl=None, last_merge=None, blocked="stopped by an unsupported DDL")
    page = render_page([report(stopped)])
    assert "(stopped)" in page and "unsupported DDL: modify column type" in page
    assert '<li class="bad"><strong>shop.orders</strong>: unsupported DDL: modify column type</li>' in page
    assert "<polyline" not in page and "No merge has recorded a checkpoint yet." in page
    empty = render_page([{**report(), "apply_runs": []}])
    assert "No replicated tables yet." in empty and "No merge run yet." in empty


def test_a_changefeed_whose_config_cannot_be_read_is_one_line_and_the_others_still_show():
    broken = {"changefeed": "gone", "error": "changefeed 'gone': DAG 'tidelake_puller__gone': config_path: <gone.toml>: "
                                             "cannot read config"}
    page = render_page([broken, report(table())])
    assert "Changefeed gone" in page and "Changefeed shop" in page
    assert '<p class="bad">changefeed &#39;gone&#39;: DAG &#39;tidelake_puller__gone&#39;: config_path: ' \
           "&lt;gone.toml&gt;: cannot read config</p>" in page
    assert "shop.orders" in page


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


def test_lag_chart_keeps_the_worst_tables_on_one_time_axis():
    tables = [table(table=f"db.t{i}", **lags(1.0, float(i), start_minute=i)) for i in range(10)]
    tables.append(table(table="db.never", lag_recent=[], lag_history=[]))
    chart = lag_chart(tables, width=100, height=50, limit=3)
    assert [s.label for s in chart.series] == ["db.t9", "db.t8", "db.t7"]  # highest lag after the last merge
    assert chart.left_out == 7 and chart.max_lag_s == 9.0
    assert (chart.start.minute, chart.end.minute) == (7, 10)  # the span the shown tables cover
    first = [tuple(map(float, p.split(","))) for p in chart.series[0].points.split()]
    assert first[0][0] == round(200 / 3, 1) and first[-1] == (100.0, 0.0)  # db.t9 from 08:09 to 08:10, at the top
    assert lag_chart([table(lag_recent=[], lag_history=[])]) is None


def test_throughput_bars_scale_to_the_fastest_run():
    chart = throughput_chart(RUNS, width=100)
    assert [round(b.height, 6) for b in chart.bars] == [CHART_HEIGHT / 2, CHART_HEIGHT]
    assert [b.x for b in chart.bars] == [5.0, 55.0] and chart.max_rate == 100.0
    assert "200 changes over 2 tables in 4.0 s" in chart.bars[0].title
    assert throughput_chart([]) is None


def stage(p50, p95, p99, pending=0, oldest=None):
    shown = 0 if p50 is None else 5
    return {"shown": shown, "pending": pending, "p50": p50, "p95": p95, "p99": p99, "max": p99,
            "oldest_pending_s": oldest}


FRESHNESS = {"lake": "s3a://lake/prod", "span_s": 300, "now_ms": 0, "changes": 7, "syncpoints": False,
             "versions_read": {}, "error": None,
             "stages": {"landed": stage(1.0, 2.0, 2.5), "covered": stage(1.5, 2.5, 3.0),
                        "merged": stage(4.0, 8.0, 10.0, pending=2, oldest=42.0)}}


def test_freshness_bars_scale_to_the_slowest_quantile_per_stage():
    chart = freshness_chart(FRESHNESS, width=100)
    assert [r.stage for r in chart.rows] == ["landed", "covered", "merged"] and chart.max_s == 10.0
    widths = {b.title: round(b.width, 6) for b in chart.bars}
    assert widths == {"landed p50: 1.0 s": 10.0, "landed p95: 2.0 s": 20.0, "landed p99: 2.5 s": 25.0,
                      "covered p50: 1.5 s": 15.0, "covered p95: 2.5 s": 25.0, "covered p99: 3.0 s": 30.0,
                      "merged p50: 4.0 s": 40.0, "merged p95: 8.0 s": 80.0, "merged p99: 10.0 s": 100.0}
    # each stage's bars sit in its own row, below the previous stage's
    assert max(b.y + b.height for b in chart.bars[:3]) <= min(b.y for b in chart.bars[3:6])
    assert len({b.color for b in chart.bars}) == 3
    only_pending = {**FRESHNESS, "stages": {"landed": stage(1.0, 1.0, 1.0), "merged": stage(None, None, None, 3, 9.0)}}
    assert [b.title for b in freshness_chart(only_pending).bars] == ["landed p50: 1.0 s", "landed p95: 1.0 s",
                                                                     "landed p99: 1.0 s"]
    assert freshness_chart({**FRESHNESS, "stages": {}}) is None and freshness_chart(None) is None


def test_the_page_draws_the_freshness_chart_or_says_why_not():
    page = render_page([{**report(table()), "freshness": FRESHNESS}])
    assert 'id="freshness-chart"' in page and "changes landed in the last 5.0 min" in page
    assert page.count('class="quantile"') == 9 and "<title>merged p99: 10.0 s</title>" in page
    assert "7 changes; merged: 2 pending (oldest 42.0 s)" in page
    quiet = render_page([{**report(table()), "freshness": {**FRESHNESS, "changes": 0, "stages": {}}}])
    assert "No change landed in the last 5.0 min." in quiet and 'class="quantile"' not in quiet
    broken = render_page([{**report(table()), "freshness": {**FRESHNESS, "stages": {}, "error": "lake <x>: gone"}}])
    assert '<p class="bad">lake &lt;x&gt;: gone</p>' in broken
    assert 'id="freshness-chart"' not in render_page([report(table())])  # a report from before page_version 3


def test_the_page_reports_freshness_of_a_lake_or_its_error_in_one_line(tmp_path, monkeypatch):
    from tidelake.orchestration import page_report

    layout = LakeLayout(str(tmp_path / "lake"))
    assert page_report.freshness_report(layout) == {"lake": layout.root, "span_s": page_report.RECENT_SPAN_S,
                                                    "now_ms": pytest.approx(datetime.now().timestamp() * 1000, abs=60_000),
                                                    "changes": 0, "syncpoints": False,
                                                    "stages": {s: {"shown": 0, "pending": 0, "p50": None, "p95": None,
                                                                   "p99": None, "max": None, "oldest_pending_s": None}
                                                               for s in ("landed", "covered", "merged")},
                                                    "versions_read": {"changelog": 0, "watermarks": 0, "replicas": 0,
                                                                      "syncpoints": 0},
                                                    "error": None}

    def broken(*_args):
        raise OSError("Generic error\n  ↳ connection refused")

    monkeypatch.setattr(page_report, "collect_freshness", broken)
    assert page_report.freshness_report(layout)["error"] is None  # computed a moment ago: reused
    report = page_report.freshness_report(layout, max_age_s=0)
    assert report["stages"] == {} and report["error"] == "Generic error: connection refused"


def chromium_screenshot(html: str, out_dir, width: int = 1400, height: int = 1000) -> Image.Image:
    """The page as headless Chromium draws it (Debian's chromium; `make test` installs it)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("headless Chromium is needed for the page test: apt-get install chromium")
    page, png = out_dir / "page.html", out_dir / "page.png"
    page.write_text(html, encoding="utf-8")
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--force-color-profile=srgb",
         f"--window-size={width},{height}", f"--screenshot={png}", page.as_uri()],
        check=True, capture_output=True, timeout=120,
    )
    return Image.open(png).convert("RGB")


def pixels_near(image: Image.Image, color: str, tolerance: int = 8) -> list[tuple[int, int]]:
    target = tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))
    width = image.width
    return [
        (i % width, i // width)
        for i, rgb in enumerate(image.get_flattened_data())
        if all(abs(a - b) <= tolerance for a, b in zip(rgb, target))
    ]


def test_a_real_browser_draws_the_lag_lines_and_throughput_bars(tmp_path):
    """From a real merge log to pixels: each table's lag line and the run bars are drawn, inside
    the charts, in the colours the legend gives them."""
    layout = LakeLayout(str(tmp_path / "lake"))
    t0 = datetime(2026, 5, 1, 8, 0, tzinfo=timezone.utc)
    for minute in range(6):
        finished = t0 + timedelta(minutes=minute, seconds=20)
        append_entries(layout, [
            MergeLogEntry(run_id=f"run{minute}", table_key=key, table_name=f"shop.t{key}", status=MergeStatus.MERGED,
                          checkpoint_before=None, checkpoint_after=tso.from_datetime(finished - timedelta(seconds=key * (10 + 5 * minute))),
                          windows=1, ddls_applied=0, rows_in=100 * key * (minute + 1), rows_out=0, duration_s=5.0,
                          reason=None, started_at=finished - timedelta(seconds=5 * key), finished_at=finished)
            for key in (1, 2, 3)
        ])
    history = merge_history(layout)
    recent, points = history.recent_lags(), history.lag()
    tables = [table(table=f"shop.t{key}", table_key=key, lag_recent=recent[key],
                    lag_history=[p.to_json() for p in points[key]]) for key in (1, 2, 3)]
    runs = [r.to_json() for r in history.runs]
    html = render_page([{**report(*tables), "apply_runs": runs}])
    image = chromium_screenshot(html, tmp_path)

    bars = pixels_near(image, "#6a4c93")
    assert len(bars) > 500, "the throughput bars were not drawn"
    # Both charts stand on one baseline; the legend swatches (same colours as the lines) are below it.
    baseline = max(y for _, y in bars)
    leftmost_bar = min(x for x, _ in bars)
    for color in PALETTE[:3]:
        line = [(x, y) for x, y in pixels_near(image, color) if y <= baseline]
        xs = sorted({x for x, _ in line})
        assert len(xs) > 300, f"no lag line in {color} across the chart"
        assert xs[-1] < leftmost_bar  # in the lag chart, left of the throughput chart
        # Lag grows over time for each table: its right end is drawn higher than its left end.
        left = min(y for x, y in line if x == xs[0])
        right = min(y for x, y in line if x == xs[-1])
        assert right < left, f"the lag line in {color} does not rise"


def test_the_page_shows_the_last_iceberg_snapshot_per_table_or_why_it_cannot():
    published = {"tables": [{"table": "shop.orders", "syncpoint_ts": TS, "snapshot_id": 4242,
                             "published_at": "2026-05-01T08:00:09.123000+00:00"}], "error": None}
    page = render_page([{**report(table()), "iceberg": published}])
    assert "<h3>Iceberg</h3>" in page
    assert (f'<td>shop.orders</td><td class="num" title="{TS}">2026-05-01 08:00:05</td>\n      '
            '<td class="num">4242</td><td class="num">2026-05-01 08:00:09</td>') in page
    down = render_page([{**report(table()), "iceberg": {"tables": [], "error": "Iceberg catalog <db>: refused"}}])
    assert '<p class="bad">Iceberg catalog &lt;db&gt;: refused</p>' in down and "No table published as Iceberg yet." in down
    assert "<h3>Iceberg</h3>" not in render_page([report(table())])  # [iceberg] not enabled


def test_the_iceberg_report_reads_the_lakes_tables_from_the_catalog(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    from tidelake.config import IcebergConfig
    from tidelake.consumers.iceberg.iceberg_catalog import open_catalog
    from tidelake.consumers.iceberg.sync import sync_iceberg
    from tidelake.lake.replica_catalog import ReplicaCatalog
    from tidelake.orchestration.page_report import iceberg_report
    from tidelake.syncpoint.records import ReplicaAt, Syncpoint, record_syncpoint

    layout = LakeLayout(str(tmp_path / "lake"))
    assert iceberg_report(layout, IcebergConfig(enabled=True)) == {"tables": [], "error": None}  # nothing published
    path = ReplicaCatalog(layout).assign(1, "shop", "orders", TS - 10).path
    write_deltalake(path, pa.table({"id": [1, 2]}))
    assert record_syncpoint(layout, Syncpoint(TS, [ReplicaAt(1, "shop", "orders", path, 0)]))
    catalog = open_catalog(layout, IcebergConfig())
    (published,) = sync_iceberg(catalog, layout).published
    other = LakeLayout(str(tmp_path / "other"))  # another lake publishing to the same catalog
    items = ReplicaCatalog(other).assign(1, "shop", "items", TS - 10).path
    write_deltalake(items, pa.table({"id": [3]}))
    assert record_syncpoint(other, Syncpoint(TS, [ReplicaAt(1, "shop", "items", items, 0)]))
    shared = IcebergConfig(catalog_uri=f"sqlite:///{tmp_path / 'lake' / '_tidelake' / 'iceberg' / 'catalog.db'}")
    assert len(sync_iceberg(open_catalog(other, shared), other).published) == 1
    before = datetime.now(timezone.utc)
    ((entry,), error) = iceberg_report(layout, IcebergConfig(enabled=True)).values()
    assert error is None
    assert (entry["table"], entry["syncpoint_ts"], entry["snapshot_id"]) == ("shop.orders", TS, published.snapshot_id)
    assert before - timedelta(minutes=5) < datetime.fromisoformat(entry["published_at"]) <= before
    unreachable = IcebergConfig(enabled=True, catalog_uri="postgresql+psycopg2://u:s3cret@127.0.0.1:9/c?connect_timeout=2")
    down = iceberg_report(layout, unreachable)
    assert down["tables"] == [] and down["error"].startswith("Iceberg catalog postgresql+psycopg2://u:***@127.0.0.1:9/")


def test_a_real_browser_draws_the_freshness_bars_to_scale(tmp_path):
    """Each stage's p99 bar in its colour, the merged one (10 s) four times as long as landed's (2.5 s)."""
    html = render_page([{**report(table()), "apply_runs": [], "freshness": FRESHNESS}])
    image = chromium_screenshot(html, tmp_path, height=700)
    p99 = pixels_near(image, PALETTE[2])
    rows: dict[int, list[int]] = {}
    for x, y in p99:
        rows.setdefault(y, []).append(x)
    spans = sorted({(min(xs), max(xs)) for xs in rows.values() if len(xs) > 20})  # bars, not the legend swatch
    lengths = sorted({right - left + 1 for left, right in spans})
    assert len(lengths) >= 3, lengths  # landed, covered and merged p99 bars
    assert lengths[-1] / lengths[0] == pytest.approx(10.0 / 2.5, rel=0.05)
