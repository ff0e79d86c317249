"""A throwaway AIRFLOW_HOME and auth setup, applied when first imported (by conftest.py), i.e.
before anything imports Airflow, whose config is read once at import."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from tidelake.config_writer import changefeed_document, write_config

REPO = Path(__file__).resolve().parents[2]
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="tidelake-airflow-home-"))
ADMIN_PASSWORD = "tidelake-test-admin"
VIEWER_PASSWORD = "tidelake-test-viewer"

os.environ.update(
    {
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        # empty: the Replication plugin comes from the package's entry point (installed_metadata)
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(AIRFLOW_HOME / "plugins"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME / 'airflow.db'}",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,watcher:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(AIRFLOW_HOME / "passwords.json"),
        "AIRFLOW__API_AUTH__JWT_SECRET": "tidelake-tests-jwt-secret-" + "x" * 64,
    }
)
(AIRFLOW_HOME / "passwords.json").write_text(json.dumps({"admin": ADMIN_PASSWORD, "watcher": VIEWER_PASSWORD}))


def write_changefeed(folder: Path, changefeed_id: str = "tests", shards: int = 1, merge: dict | None = None,
                     spark: dict | None = None, iceberg: dict | None = None) -> Path:
    """A changefeed config whose lake is `folder/lake` (PD is never contacted by these tests)."""
    doc = changefeed_document(changefeed_id, ["127.0.0.1:1"], "lake", puller={"shards": shards}, merge=merge,
                              spark=spark, iceberg=iceberg)
    return write_config(folder / f"{changefeed_id}.toml", doc)
