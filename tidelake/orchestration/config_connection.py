"""A changefeed config kept in an Airflow connection's extras (extra `changefeed_toml`, the TOML
text), as a file: the tasks, the Spark jobs and the trigger read a config file, so the DAG parse and
each task write the connection's text to `config_file(conn_id)` on their host (replaced whole, only
when it changed) after checking it as load_config does. Relative paths in it resolve against that
folder, so such a config names absolute ones. Bad input is one InputError line naming the
connection id and the field. Owner: the DAG factory and its tasks (airflow.hooks.config_source).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tidelake.config import load_config
from tidelake.errors import InputError

FIELD = "changefeed_toml"


def config_file(conn_id: str) -> Path:
    """Where the config of connection `conn_id` is written on this host."""
    return Path(tempfile.gettempdir()) / "tidelake-config" / f"{conn_id}.toml"


def write_config_text(conn_id: str, extra: Mapping[str, Any]) -> Path:
    """The connection's config checked and written to config_file(conn_id); its path."""
    text = extra.get(FIELD)
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"connection {conn_id!r}: extra {FIELD}: missing or empty (the changefeed config's TOML text)")
    path = config_file(conn_id)
    if path.is_file() and path.read_text() == text:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.toml")
    partial.write_text(text)
    try:
        load_config(partial)
    except InputError as exc:
        partial.unlink()
        raise InputError(f"connection {conn_id!r}: extra {FIELD}: {str(exc).removeprefix(str(partial) + ': ')}") from None
    partial.replace(path)
    return path
