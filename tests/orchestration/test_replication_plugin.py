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


@pytest.fixture
def deployed(airflow_db, tmp_path, monkeypatch):
    """DAG files of the factory, parsed and stored in the metadata DB as the DAG processor stores
    them (the api-server parses none); their DAGs are deleted afterwards."""
    from airflow.api.common.delete_dag import delete_dag
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import sync_bag_to_db
    from airflow.models import DagBag

    monkeypatch.delenv("TIDELAKE_CONFIG", raising=False)
    DagBundlesManager().sync_bundles_to_db()
    stored = []

    def deploy(calls: dict[str, str]) -> None:
        dags = tmp_path / "dags"
        dags.mkdir(exist_ok=True)
        for name, call in calls.items():
            (dags / f"{name}.py").write_text(
                f"from tidelake.orchestration.airflow.dag_factory import changefeed_dags\n\n{call}\n")
        bag = DagBag(dag_folder=str(dags))
        assert not bag.import_errors
        sync_bag_to_db(bag, "dags-folder", None)
        stored.extend(bag.dag_ids)

    yield deploy
    for dag_id in stored:
        delete_dag(dag_id)


@pytest.fixture
def in_db(airflow_db):
    """Connections (their extra changefeed_toml) and Variables stored in the metadata DB, as the UI
    stores them; removed afterwards."""
    import json

    from airflow.models import Connection, Variable
    from airflow.utils.session import create_session

    stored: tuple[list[str], list[str]] = ([], [])

    def store(connections: dict[str, str], variables: dict[str, str]) -> None:
        with create_session() as session:
            for conn_id, text in connections.items():
                session.add(Connection(conn_id=conn_id, conn_type="generic", extra=json.dumps({"changefeed_toml": text})))
                stored[0].append(conn_id)
        for key, value in variables.items():
            Variable.set(key, value)
            stored[1].append(key)

    yield store
    with create_session() as session:
        for conn_id in stored[0]:
            session.query(Connection).filter(Connection.conn_id == conn_id).delete()
    for key in stored[1]:
        Variable.delete(key)


def test_the_page_lists_the_deployed_changefeeds_without_tidelake_config(client, deployed, in_db, tmp_path,
                                                                         monkeypatch):
    """The changefeeds come from the serialized DAGs' config records (a file path, a connection's
    extras, a Variable's text); one whose config went missing is one line naming it, the others
    still show."""
    import json

    from airflow_test_env import write_changefeed

    orders = write_changefeed(tmp_path, "orders")
    gone = write_changefeed(tmp_path, "gone")
    crm_text = write_changefeed(tmp_path, "crm").read_text()
    monkeypatch.setenv("AIRFLOW_CONN_TIDELAKE_TEST_CRM_CFG",
                       json.dumps({"conn_type": "generic", "extra": {"changefeed_toml": crm_text}}))
    billing_text = write_changefeed(tmp_path, "billing").read_text()
    monkeypatch.setenv("AIRFLOW_VAR_TIDELAKE_TEST_BILLING_CFG", billing_text)
    deployed({"orders": f"changefeed_dags('orders', config_path={str(orders)!r})",
              "billing": "changefeed_dags('billing', config_variable='tidelake_test_billing_cfg')",
              "gone": f"changefeed_dags('gone', config_path={str(gone)!r})",
              "crm": "changefeed_dags('crm', config_conn_id='tidelake_test_crm_cfg')"})
    gone.unlink()
    # the DAG processor read them from the environment; the api-server finds them in the metadata DB
    monkeypatch.delenv("AIRFLOW_CONN_TIDELAKE_TEST_CRM_CFG")
    monkeypatch.delenv("AIRFLOW_VAR_TIDELAKE_TEST_BILLING_CFG")
    in_db({"tidelake_test_crm_cfg": crm_text}, {"tidelake_test_billing_cfg": billing_text})
    headers = {"Authorization": f"Bearer {token(client, 'watcher', VIEWER_PASSWORD)}"}
    response = client.get("/tidelake/api/status", headers=headers)
    assert response.status_code == 200, response.text
    by_id = {report["changefeed"]: report for report in response.json()}
    assert sorted(by_id) == ["billing", "crm", "gone", "orders"]
    assert by_id["billing"] == {**REPORT, "changefeed": "billing"}
    assert by_id["orders"] == {**REPORT, "changefeed": "orders"} and by_id["crm"] == {**REPORT, "changefeed": "crm"}
    error = by_id["gone"]["error"]
    assert error == f"changefeed 'gone': DAG 'tidelake_puller__gone': config_path: {gone}: cannot read config: " \
        "No such file or directory"
    assert "\n" not in error and "Traceback" not in error
    page = client.get("/tidelake/replication", headers=headers)
    assert page.status_code == 200
    assert "Changefeed orders" in page.text and "Changefeed crm" in page.text and "Changefeed gone" in page.text
    assert "Traceback" not in page.text
    one = client.get("/tidelake/api/status", params={"changefeed": "crm"}, headers=headers)
    assert [report["changefeed"] for report in one.json()] == ["crm"]
