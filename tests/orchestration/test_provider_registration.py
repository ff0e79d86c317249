"""tidelake as an Airflow provider: Airflow's own discovery (entry point scan, schema validation,
hook import and its coherence checks) accepts the entry points pyproject.toml declares
(installed_metadata publishes them as an install would)."""

from __future__ import annotations

import pytest
from installed_metadata import installed

import tidelake
from tidelake.orchestration.airflow.provider_info import get_provider_info


@pytest.fixture
def installed_provider(tmp_path, monkeypatch):
    """Fresh provider managers that scan a sys.path holding tidelake's would-be installed metadata."""
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    with installed(tmp_path, monkeypatch):
        yield ProvidersManager(), ProvidersManagerTaskRuntime()


def test_providers_manager_lists_tidelake(installed_provider):
    manager, _ = installed_provider
    manager.initialize_providers_list()
    provider = manager.providers["tidelake"]
    assert provider.version == tidelake.__version__
    assert provider.data["package-name"] == "tidelake"


def test_connection_form_offers_tidb_pd(installed_provider):
    manager, _ = installed_provider
    types = {meta.connection_type: meta for meta in manager.iter_connection_type_hook_ui_metadata()}
    assert types["tidb_pd"].hook_name == "TiDB PD"
    assert "password" in types["tidb_pd"].field_behaviour["hidden_fields"]
    widgets = manager._connection_form_widgets_from_metadata
    assert widgets["extra__tidb_pd__tls_private_key"].is_sensitive
    assert not widgets["extra__tidb_pd__tls_ca"].is_sensitive
    assert {name.removeprefix("extra__tidb_pd__") for name in widgets if name.startswith("extra__tidb_pd__")} == {
        "pd_endpoints", "cluster", "tls_ca", "tls_cert", "tls_private_key"}


def test_task_runtime_imports_the_hook(installed_provider):
    """The task side resolves the connection type to the hook class, whose own conn_type, hook
    name and conn id attribute agree with the provider info (Airflow only warns when they do not)."""
    from tidelake.orchestration.airflow.hooks.tidb_pd import TiDBPDHook

    _, runtime = installed_provider
    hook = runtime.hooks["tidb_pd"]
    assert hook is not None and hook.hook_class_name == f"{TiDBPDHook.__module__}.TiDBPDHook"
    assert (hook.connection_type, hook.hook_name, hook.connection_id_attribute_name) == (
        "tidb_pd", "TiDB PD", "tidb_pd_conn_id")


def test_listed_modules_and_triggers_import(installed_provider):
    """Every module the provider info names exists (Airflow only logs a warning when one does not)."""
    import importlib

    manager, _ = installed_provider
    manager.initialize_providers_triggers()
    triggers = {t.trigger_class_name for t in manager.trigger if t.package_name == "tidelake"}
    assert triggers == {"tidelake.orchestration.airflow.new_data_trigger"}
    info = get_provider_info()
    for section in ("hooks", "operators", "triggers"):
        for entry in info[section]:
            for module in entry["python-modules"]:
                importlib.import_module(module)


def test_the_plugin_loads_from_the_entry_point(installed_provider):
    """Airflow's plugins manager finds the Replication plugin through the `airflow.plugins` entry
    point, with no file in the plugins folder, once; the provider info names the same class."""
    from pathlib import Path

    from airflow import plugins_manager, settings

    from tidelake.orchestration.airflow.replication_plugin import TidelakeReplicationPlugin

    manager, _ = installed_provider
    manager.initialize_providers_plugins()
    listed = [p for p in manager.plugins if p.provider_name == "tidelake"]
    assert [(p.name, p.plugin_class) for p in listed] == [
        ("tidelake_replication", "tidelake.orchestration.airflow.replication_plugin.TidelakeReplicationPlugin")]
    plugins, errors = plugins_manager._get_plugins()
    assert [type(p) for p in plugins if p.name == "tidelake_replication"] == [TidelakeReplicationPlugin]
    assert not any(Path(settings.PLUGINS_FOLDER).rglob("*.py"))
    assert not errors


@pytest.mark.airflow
def test_api_server_serves_the_connection_form(installed_provider, airflow_db, changefeed):
    """The api-server's hook_meta endpoint, from which the UI draws its connection form, offers
    tidb_pd with its fields (password hidden, the key a password field). Not a browser check."""
    from airflow.api_fastapi.app import create_app, purge_cached_app
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService
    from airflow_test_env import ADMIN_PASSWORD
    from fastapi.testclient import TestClient

    HookMetaService.hook_meta_data.cache_clear()  # cached per process; a fresh manager is installed
    purge_cached_app()
    try:
        with TestClient(create_app("core")) as client:
            login = client.post("/auth/token", json={"username": "admin", "password": ADMIN_PASSWORD})
            response = client.get("/ui/connections/hook_meta",
                                  headers={"Authorization": f"Bearer {login.json()['access_token']}"})
    finally:
        HookMetaService.hook_meta_data.cache_clear()
    assert response.status_code == 200, response.text
    (form,) = [hook for hook in response.json() if hook["connection_type"] == "tidb_pd"]
    assert form["hook_name"] == "TiDB PD"
    assert form["standard_fields"]["password"]["hidden"] and not form["standard_fields"]["host"]["hidden"]
    assert form["standard_fields"]["host"]["title"] == "PD host"
    extras = form["extra_fields"]
    assert set(extras) == {"pd_endpoints", "cluster", "tls_ca", "tls_cert", "tls_private_key"}
    assert extras["tls_private_key"]["schema"]["format"] == "password"
