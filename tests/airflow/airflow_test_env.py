"""A throwaway AIRFLOW_HOME and auth setup, applied when first imported (by conftest.py), i.e.
before anything imports Airflow, whose config is read once at import."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="tidelake-airflow-home-"))
ADMIN_PASSWORD = "tidelake-test-admin"
VIEWER_PASSWORD = "tidelake-test-viewer"

os.environ.update(
    {
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME / 'airflow.db'}",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,watcher:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(AIRFLOW_HOME / "passwords.json"),
        "AIRFLOW__API_AUTH__JWT_SECRET": "tidelake-tests-jwt-secret-" + "x" * 64,
    }
)
(AIRFLOW_HOME / "passwords.json").write_text(json.dumps({"admin": ADMIN_PASSWORD, "watcher": VIEWER_PASSWORD}))


def write_changefeed(folder: Path, changefeed_id: str = "tests", shards: int = 1, extra: str = "") -> Path:
    """A changefeed config whose lake is `folder/lake` (PD is never contacted by these tests);
    `extra` is appended TOML (e.g. a [merge] section)."""
    path = folder / f"{changefeed_id}.toml"
    path.write_text(
        f'[changefeed]\nid = "{changefeed_id}"\n[upstream]\npd = ["127.0.0.1:1"]\n'
        f'[lake]\nroot = "lake"\n[puller]\nshards = {shards}\n{extra}'
    )
    return path
