"""A changefeed config kept as TOML text by Airflow, as a file: the extra `changefeed_toml` of a
connection, or the value of a Variable. The tasks, the Spark jobs and the trigger read a config
file, so the DAG parse (and each task, which parses its DAG file first) writes the text to
`config_file(conn_id)` or `variable_config_file(name)` on their host (replaced whole, only when it
changed) after checking it as load_config does. Relative paths in it resolve against that folder,
so such a config names absolute ones. Bad input is one InputError line naming the connection id
or Variable and the field. Owner: the DAG factory and its tasks (airflow.hooks.config_source).
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


def variable_config_file(name: str) -> Path:
    """Where the config of Airflow Variable `name` is written on this host (a folder of its own: a
    connection id and a Variable may share a name)."""
    return Path(tempfile.gettempdir()) / "tidelake-config" / "variables" / f"{name}.toml"


def write_config_text(conn_id: str, extra: Mapping[str, Any]) -> Path:
    """The connection's config checked and written to config_file(conn_id); its path."""
    text = extra.get(FIELD)
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"connection {conn_id!r}: extra {FIELD}: missing or empty (the changefeed config's TOML text)")
    return write_checked(config_file(conn_id), text, f"connection {conn_id!r}: extra {FIELD}")


def variable_config_path(name: str, value: Any) -> str:
    """The config path of Airflow Variable `name` holding `value`: one line is a file's path,
    several lines the TOML text, checked and written to variable_config_file(name)."""
    text = str(value)
    if "\n" not in text.strip():
        return text.strip()
    return str(write_checked(variable_config_file(name), text, f"Airflow Variable {name!r}"))


def write_checked(path: Path, text: str, where: str) -> Path:
    """`text` checked as a changefeed config and written to `path`; errors start with `where`."""
    if path.is_file() and path.read_text() == text:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.toml")
    partial.write_text(text)
    try:
        load_config(partial)
    except InputError as exc:
        partial.unlink()
        raise InputError(f"{where}: {str(exc).removeprefix(str(partial) + ': ')}") from None
    partial.replace(path)
    return path
