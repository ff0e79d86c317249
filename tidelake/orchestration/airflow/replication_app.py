"""The FastAPI app behind the Airflow "Replication" page and its JSON endpoint.

Plugin apps are mounted on the api-server without Airflow's authentication (docs/stack.md §7),
so every route here depends on Airflow's own `requires_access_view`: it resolves the user from
the `Authorization: Bearer` JWT or the UI's `_token` cookie exactly as /api/v2 does (401 without
a credential, 403 for an invalid one or a user the auth manager refuses), then asks the
configured auth manager whether the user may see plugin views. The page is embedded by the UI
in an iframe of the same origin, so the UI's cookie authenticates it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
from airflow.api_fastapi.core_api.security import requires_access_view
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse

from tidelake.errors import InputError
from tidelake.orchestration.changefeeds import Changefeed, load_changefeeds
from tidelake.orchestration.plugin_views import render_page

SYNCPOINTS_SHOWN = 10

StatusSource = Callable[[Changefeed], dict[str, Any]]


def lake_status(feed: Changefeed) -> dict[str, Any]:
    """`tidelake status --json` of one changefeed plus what the page adds: the changefeed id and
    each table's recent lag (`lag_history`, seconds after each of its last merges) and the latest
    syncpoints (newest first: ts, number of tables in the cut, tables left out and why)."""
    from tidelake.lake.layout import LakeLayout
    from tidelake.lake.status import collect_status
    from tidelake.lake.syncpoints import read_syncpoints
    from tidelake.orchestration.lag_history import lag_history

    layout = LakeLayout.from_config(feed.config.lake)
    report = collect_status(layout).to_json()
    history = lag_history(layout)
    for table in report["tables"]:
        table["lag_history"] = history.get(table["table_key"], [])
    syncpoints = [
        {"ts": sp.ts, "tables": len(sp.replicas), "excluded": sp.excluded}
        for sp in read_syncpoints(layout)[-SYNCPOINTS_SHOWN:]
    ]
    return {"changefeed": feed.config.changefeed_id, **report, "syncpoints": syncpoints[::-1]}


def create_app(status_source: StatusSource | None = None) -> FastAPI:
    """The plugin app; `status_source` (default: lake_status) serves the reports."""
    app = FastAPI(
        title="tidelake replication",
        dependencies=[Depends(requires_access_view(AccessView.PLUGINS))],
    )

    def reports(changefeed: str | None) -> list[dict[str, Any]]:
        try:
            feeds = load_changefeeds()
        except InputError as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from None
        if changefeed is not None:
            feeds = [f for f in feeds if f.config.changefeed_id == changefeed]
            if not feeds:
                raise HTTPException(status_code=404, detail=f"no changefeed {changefeed!r} is configured")
        source = status_source or lake_status
        return [source(feed) for feed in feeds]

    @app.get("/api/status")
    def status_json(changefeed: str | None = Query(default=None)) -> list[dict[str, Any]]:
        """Status of every configured changefeed (or one), as `tidelake status --json`."""
        return reports(changefeed)

    @app.get("/replication", response_class=HTMLResponse)
    def replication_page(changefeed: str | None = Query(default=None)) -> str:
        return render_page(reports(changefeed))

    return app
