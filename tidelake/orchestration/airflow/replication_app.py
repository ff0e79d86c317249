"""The FastAPI app behind the Airflow "Replication" page and its JSON endpoint.

Plugin apps are mounted on the api-server without Airflow's authentication (docs/stack.md#airflow-plugins),
so every route here depends on Airflow's own `requires_access_view`: it resolves the user from
the `Authorization: Bearer` JWT or the UI's `_token` cookie exactly as /api/v2 does (401 without
a credential, 403 for an invalid one or a user the auth manager refuses), then asks the
configured auth manager whether the user may see plugin views. The page is embedded by the UI
in an iframe of the same origin, so the UI's cookie authenticates it. Owner: the Airflow plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
from airflow.api_fastapi.core_api.security import requires_access_view
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse

from tidelake.errors import TidelakeError
from tidelake.orchestration.airflow.deployed_changefeeds import Unreadable, deployed_changefeeds, entry_id
from tidelake.orchestration.changefeeds import Changefeed
from tidelake.orchestration.page_report import page_report
from tidelake.orchestration.plugin_views import render_page

StatusSource = Callable[[Changefeed], dict[str, Any]]


def create_app(status_source: StatusSource | None = None) -> FastAPI:
    """The plugin app; `status_source` (default: page_report) serves the reports."""
    app = FastAPI(
        title="tidelake replication",
        dependencies=[Depends(requires_access_view(AccessView.PLUGINS))],
    )

    def reports(changefeed: str | None) -> list[dict[str, Any]]:
        entries = deployed_changefeeds()
        if changefeed is not None:
            entries = [e for e in entries if entry_id(e) == changefeed]
            if not entries:
                raise HTTPException(status_code=404, detail=f"no changefeed {changefeed!r} is deployed")
        return [report(e) for e in entries]

    def report(entry: Changefeed | Unreadable) -> dict[str, Any]:
        if isinstance(entry, Unreadable):
            return {"changefeed": entry.changefeed_id, "error": entry.error}
        try:
            return (status_source or page_report)(entry)
        except TidelakeError as exc:
            return {"changefeed": entry.config.changefeed_id, "error": f"changefeed {entry.config.changefeed_id!r}: {exc}"}

    @app.get("/api/status")
    def status_json(changefeed: str | None = Query(default=None)) -> list[dict[str, Any]]:
        """Status of every deployed changefeed (or one), as `tidelake status --json`; a changefeed
        whose config cannot be read is {"changefeed", "error"}."""
        return reports(changefeed)

    @app.get("/replication", response_class=HTMLResponse)
    def replication_page(changefeed: str | None = Query(default=None)) -> str:
        return render_page(reports(changefeed))

    return app
