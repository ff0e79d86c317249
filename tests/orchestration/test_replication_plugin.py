"""The Replication plugin inside the real Airflow api-server app: mounted with its nav view,
and both routes refuse anonymous and forged callers but serve a logged-in Airflow user (bearer
token or the UI's cookie)."""

from __future__ import annotations

import pytest
from airflow_test_env import ADMIN_PASSWORD, VIEWER_PASSWORD
from installed_metadata import installed

pytestmark = pytest.mark.airflow

REPORT = {
    "changefeed": "tests",
    "lake": "/lake",
    "ddl_resolved_ts": 463_000_000_000_000_000,
    "now_source": "wall_clock",
    "tables": [],
    "apply_runs": [],
    "syncpoints": [],
}


@pytest.fixture
def client(airflow_db, changefeed, monkeypatch, tmp_path):
    """The api-server app of an Airflow whose plugins folder is empty: the plugin comes from the
    installed package's entry point."""
    from airflow.api_fastapi.app import create_app, purge_cached_app
    from fastapi.testclient import TestClient

    import tidelake.orchestration.airflow.replication_app as replication_app

    monkeypatch.setattr(replication_app, "page_report", lambda feed: {**REPORT, "changefeed": feed.config.changefeed_id})
    with installed(tmp_path / "site", monkeypatch):
        purge_cached_app()
        with TestClient(create_app("core")) as test_client:
            yield test_client
        purge_cached_app()


def token(client, username, password) -> str:
    response = client.post("/auth/token", json={"username": username, "password": password})
    assert response.status_code == 201, response.text
    return response.json()["access_token"]


ROUTES = ("/tidelake/api/status", "/tidelake/replication")


@pytest.mark.parametrize("route", ROUTES)
def test_anonymous_and_forged_callers_are_refused(client, route):
    assert client.get(route).status_code == 401
    assert client.get(route, headers={"Authorization": "Bearer not-a-jwt"}).status_code == 403
    client.cookies.set("_token", "forged.jwt.value")
    assert client.get(route).status_code == 403


def test_a_logged_in_user_gets_json_and_page(client):
    headers = {"Authorization": f"Bearer {token(client, 'watcher', VIEWER_PASSWORD)}"}
    response = client.get("/tidelake/api/status", headers=headers)
    assert response.status_code == 200
    assert response.json() == [REPORT]
    page = client.get("/tidelake/replication", headers=headers)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "Changefeed tests" in page.text


def test_status_of_a_real_empty_lake(airflow_db, changefeed):
    from tidelake.orchestration.changefeeds import load_changefeeds
    from tidelake.orchestration.page_report import page_report

    (feed,) = load_changefeeds()
    report = page_report(feed)
    assert report["changefeed"] == "tests"
    assert report["lake"] == str(changefeed.parent / "lake")
    assert report["tables"] == [] and report["apply_runs"] == [] and report["syncpoints"] == []


def test_the_ui_cookie_authenticates_the_embedded_page(client):
    client.cookies.set("_token", token(client, "admin", ADMIN_PASSWORD))
    assert client.get("/tidelake/replication").status_code == 200


def test_unknown_changefeed_is_404(client):
    headers = {"Authorization": f"Bearer {token(client, 'admin', ADMIN_PASSWORD)}"}
    response = client.get("/tidelake/api/status", params={"changefeed": "nope"}, headers=headers)
    assert response.status_code == 404
    assert "nope" in response.json()["detail"]


def test_plugin_registers_the_replication_view(client):
    headers = {"Authorization": f"Bearer {token(client, 'admin', ADMIN_PASSWORD)}"}
    plugins = client.get("/api/v2/plugins", headers=headers).json()["plugins"]
    ours = next(p for p in plugins if p["name"] == "tidelake_replication")
    view = ours["external_views"][0]
    assert (view["name"], view["href"], view["url_route"]) == ("Replication", "/tidelake/replication", "replication")
