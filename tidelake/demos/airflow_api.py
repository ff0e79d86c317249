"""The few calls of Airflow's REST API the demo makes (docs/stack.md#airflow-testing-dags-processes-local-auth: a JWT from /auth/token)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote


class AirflowApi:

    def __init__(self, base_url: str, passwords_file: Path) -> None:
        self.base_url = base_url
        self.passwords_file = passwords_file
        self._token: str | None = None

    def component_health(self) -> dict[str, bool]:
        """Whether each of scheduler, triggerer, dag_processor heartbeats within Airflow's health
        thresholds (the /monitor/health a liveness probe reads); {} when the API does not answer."""
        try:
            health = self._call("GET", "/api/v2/monitor/health", auth=False)
        except (OSError, urllib.error.URLError, ValueError):
            return {}
        return {part: (health.get(part) or {}).get("status") == "healthy"
                for part in ("scheduler", "triggerer", "dag_processor")}

    def healthy(self) -> bool:
        try:
            health = self._call("GET", "/api/v2/monitor/health", auth=False)
        except (OSError, urllib.error.URLError, ValueError):
            return False
        return all(health.get(part, {}).get("status") == "healthy" for part in ("metadatabase", "scheduler"))

    def password(self) -> str:
        return json.loads(self.passwords_file.read_text())["admin"]

    def dag(self, dag_id: str) -> dict | None:
        try:
            return self._call("GET", f"/api/v2/dags/{dag_id}")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def import_errors(self) -> list[dict[str, Any]]:
        """The DAG files' import errors the DAG processor recorded (filename, stack_trace)."""
        return self._call("GET", "/api/v2/importErrors?limit=100")["import_errors"]

    def put_connection(self, connection: dict[str, Any]) -> None:
        """Create the connection, or replace its fields when it exists."""
        try:
            self._call("POST", "/api/v2/connections", connection)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise
            self._call("PATCH", f"/api/v2/connections/{connection['connection_id']}", connection)

    def token(self) -> str:
        """The admin's JWT (what the UI keeps in its cookie)."""
        return self._login()

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self._call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": paused})

    def set_pool(self, name: str, slots: int, description: str) -> None:
        """Create the pool, or resize it when it exists."""
        body = {"name": name, "slots": slots, "description": description, "include_deferred": False}
        try:
            self._call("POST", "/api/v2/pools", body)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise
            self._call("PATCH", f"/api/v2/pools/{name}", body)

    def run_states(self, dag_id: str) -> dict[str, int]:
        return self._count_runs(dag_id, "state")

    def run_types(self, dag_id: str) -> dict[str, int]:
        """Runs by how they started: scheduled, manual, backfill, asset_triggered."""
        return self._count_runs(dag_id, "run_type")

    def _count_runs(self, dag_id: str, field: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for run in self.runs(dag_id):
            counts[run[field]] = counts.get(run[field], 0) + 1
        return counts

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> str:
        """A manual run with these params, now; its run id."""
        return self._call("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf})["dag_run_id"]

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        """Every run of the DAG (id, state, run type), oldest first."""
        return self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100&order_by=id")["dag_runs"]

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """The run's task instances (task_id, map_index, state, queued_when, start_date, end_date, duration)."""
        return self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances?limit=100")["task_instances"]

    def upstream_asset_events(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """The asset events an asset-triggered run consumed (uri, timestamp, extra); [] for other runs."""
        return self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/upstreamAssetEvents")["asset_events"]

    def asset_watchers(self, uri: str) -> list[dict[str, Any]]:
        """The watchers (name, trigger_id) registered for the asset `uri`: the DAG processor registers
        an AssetWatcher's trigger only when it parses the file with the DAG unpaused."""
        assets = self._call("GET", f"/api/v2/assets?uri_pattern={quote(uri, safe='')}&limit=100")["assets"]
        return [watcher for asset in assets if asset["uri"] == uri for watcher in asset["watchers"]]

    def succeeded(self, dag_id: str, task_id: str) -> int:
        """How many instances of the task (each mapped index counts) succeeded, over all runs."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/~/taskInstances?task_id={task_id}&state=success&limit=1"
        return self._call("GET", path)["total_entries"]

    def running_tasks(self, dag_id: str) -> list[dict[str, Any]]:
        """The DAG's task instances in state running now (task_id, map_index, run id, try number)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/~/taskInstances?state=running&limit=100"
        return self._call("GET", path)["task_instances"]

    def get_page(self, path: str) -> tuple[int, str]:
        """GET a page as the logged-in admin: its HTTP status and text (an error's body too)."""
        request = urllib.request.Request(self.base_url + path, headers={"Authorization": f"Bearer {self._login()}"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def _call(self, method: str, path: str, body: dict | None = None, auth: bool = True) -> Any:
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self._login()}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def _login(self) -> str:
        if self._token is None:
            body = json.dumps({"username": "admin", "password": self.password()}).encode()
            request = urllib.request.Request(self.base_url + "/auth/token", data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                self._token = json.loads(response.read())["access_token"]
        return self._token
