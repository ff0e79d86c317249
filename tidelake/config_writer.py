"""Write a changefeed config: the one place that turns settings into the TOML tidelake.config reads.

The demos, the benchmarks and the tests all write changefeeds; building the same document here
and reading it back through load_config keeps them on the format users write by hand
(examples/changefeed.toml), with its validation.
Owner: the test kit (demos, nemesis, benches, tests).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tidelake.config import ChangefeedConfig, load_config, parse_config

Document = dict[str, dict[str, Any]]


def changefeed_document(changefeed_id: str, pd: Sequence[str], lake_root: str | Path, *,
                        rules: Sequence[str] | None = None, start_ts: int | None = None,
                        gc_ttl: str | None = None, puller: Mapping[str, Any] | None = None,
                        merge: Mapping[str, Any] | None = None,
                        lake: Mapping[str, Any] | None = None,
                        spark: Mapping[str, Any] | None = None,
                        iceberg: Mapping[str, Any] | None = None) -> Document:
    """The config as nested tables; sections with nothing set are left out (their defaults apply)."""
    doc: Document = {"changefeed": {"id": changefeed_id}}
    if start_ts is not None:
        doc["changefeed"]["start_ts"] = start_ts
    doc["upstream"] = {"pd": list(pd)}
    if gc_ttl is not None:
        doc["upstream"]["gc_ttl"] = gc_ttl
    if rules is not None:
        doc["filter"] = {"rules": list(rules)}
    doc["lake"] = {"root": str(lake_root), **(lake or {})}
    if puller:
        doc["puller"] = dict(puller)
    if merge:
        doc["merge"] = dict(merge)
    if spark:
        doc["spark"] = dict(spark)
    if iceberg:
        doc["iceberg"] = dict(iceberg)
    return doc


def to_toml(doc: Mapping[str, Mapping[str, Any]], comment: str | None = None) -> str:
    """TOML text of a config document (tables of scalars, string lists and sub-tables)."""
    lines = [f"# {line}" for line in comment.splitlines()] if comment else []
    _table(lines, "", doc)
    return "\n".join(lines).lstrip("\n") + "\n"


def write_config(path: Path, doc: Mapping[str, Mapping[str, Any]], comment: str | None = None) -> Path:
    """Write `doc` to `path`, checked first by reading it back as users' files are read."""
    path.write_text(to_toml(doc, comment))
    load_config(path)
    return path


def config_from_document(doc: Mapping[str, Mapping[str, Any]], source: str = "changefeed.toml") -> ChangefeedConfig:
    """Validate a document without a file (relative lake roots resolve against the working folder)."""
    return parse_config(json.loads(json.dumps(doc)), source)


def _table(lines: list[str], name: str, values: Mapping[str, Any]) -> None:
    scalars = {k: v for k, v in values.items() if not isinstance(v, Mapping)}
    if name:
        lines.append("")
        lines.append(f"[{name}]")
    lines.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars.items())
    for key, sub in values.items():
        if isinstance(sub, Mapping):
            _table(lines, f"{name}.{_key(key)}" if name else _key(key), sub)


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (str, Path)):
        return json.dumps(str(value))  # JSON string escapes are TOML basic-string escapes
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} {value!r} into a changefeed config")
