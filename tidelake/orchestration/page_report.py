"""What the Replication page shows for one changefeed: its status report and the page's additions.

Kept apart from the Airflow app so it is built and tested without a web server, and so a page can
be rendered from a lake alone (tools/page_screenshot.py).
"""

from __future__ import annotations

from typing import Any

from tidelake.lake.layout import LakeLayout
from tidelake.lake.status import collect_status
from tidelake.lake.syncpoints import read_syncpoints
from tidelake.orchestration.changefeeds import Changefeed
from tidelake.orchestration.merge_history import merge_history

SYNCPOINTS_SHOWN = 10


def page_report(feed: Changefeed) -> dict[str, Any]:
    """`tidelake status --json` of one changefeed plus what the page adds: the changefeed id,
    each table's recent lag (`lag_history`: {"at", "lag_s"} after each of its last merges), the
    last merge runs' throughput (`apply_runs`), the stretch of the merge log both cover
    (`history_window`: {"since", "until", "hours"}, null before the first merge) and the latest
    syncpoints (newest first: ts, number of tables in the cut, tables left out and why)."""
    layout = LakeLayout.from_config(feed.config.lake)
    report = collect_status(layout).to_json()
    history = merge_history(layout)
    for table in report["tables"]:
        table["lag_history"] = [point.to_json() for point in history.lag.get(table["table_key"], [])]
    apply_runs = [run.to_json() for run in history.runs]
    syncpoints = [
        {"ts": sp.ts, "tables": len(sp.replicas), "excluded": sp.excluded}
        for sp in read_syncpoints(layout)[-SYNCPOINTS_SHOWN:]
    ]
    return {"changefeed": feed.config.changefeed_id, **report, "apply_runs": apply_runs,
            "history_window": history.window_json(), "syncpoints": syncpoints[::-1]}
