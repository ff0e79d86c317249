"""Which changefeeds the DAG files build DAGs for, and what those DAGs are called.

The config paths come from the environment (`TIDELAKE_CONFIG`, several separated by the OS path
separator) rather than an Airflow Variable, because the DAG shape depends on them at parse time
(puller shards, the table choices of the trigger form), and Airflow advises against Variable
reads in top-level DAG code: every parse would query the metadata DB. Adding a changefeed is
adding a config path: no code change. The first config is the primary changefeed and keeps the
plain DAG ids (`tidelake_merge`); the others get `tidelake_merge__<changefeed id>`, so adding a
second changefeed never renames the first one's DAGs or loses their history.
Owner: the DAG files and the Airflow plugin.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from tidelake.config import ChangefeedConfig, load_config
from tidelake.errors import InputError

CONFIG_ENV = "TIDELAKE_CONFIG"


@dataclass(frozen=True)
class Changefeed:
    """One configured changefeed as the DAG files see it."""

    config_path: str
    config: ChangefeedConfig
    primary: bool
    # The Airflow connection whose extras hold the config, written to config_path on each host
    # (tidelake.orchestration.config_text); None: config_path is the user's file.
    config_conn_id: str | None = None
    # The Airflow Variable holding the config's text or path (read again by the Replication page);
    # None: neither.
    config_variable: str | None = None

    def dag_id(self, kind: str) -> str:
        base = f"tidelake_{kind}"
        return base if self.primary else f"{base}__{self.config.changefeed_id}"


def config_paths(env: Mapping[str, str] | None = None) -> list[str]:
    """Config paths named by TIDELAKE_CONFIG; a missing variable is an error the DAG import shows."""
    env = os.environ if env is None else env
    raw = env.get(CONFIG_ENV, "")
    paths = [p.strip() for p in raw.split(os.pathsep) if p.strip()]
    if not paths:
        raise InputError(
            f"{CONFIG_ENV} is not set: point it at a changefeed TOML file "
            f"(several separated by '{os.pathsep}'), e.g. {CONFIG_ENV}=/opt/tidelake/changefeed.toml"
        )
    return paths


def load_changefeeds(env: Mapping[str, str] | None = None) -> list[Changefeed]:
    """Load and validate every configured changefeed; changefeed ids must be unique."""
    feeds: list[Changefeed] = []
    seen: dict[str, str] = {}
    for index, path in enumerate(config_paths(env)):
        config = load_config(path)
        if config.changefeed_id in seen:
            raise InputError(
                f"{CONFIG_ENV}: changefeed id {config.changefeed_id!r} is used by both "
                f"{seen[config.changefeed_id]} and {path}"
            )
        seen[config.changefeed_id] = path
        feeds.append(Changefeed(config_path=str(path), config=config, primary=index == 0))
    return feeds
