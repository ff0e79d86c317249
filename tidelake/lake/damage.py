"""Damaged lake files, named; shared by the merge (a table's failure) and every command (tidelake.cli):
which table, which log version or data file, what it affects and how to recover, in one line (a
Rust backtrace or a Java stack names none of them).

Looked for only after a read or a merge failed, so its cost (parsing every log line and listing
every data file of the lake's Delta tables) is paid on the failure path. Local lakes only: an
object store is not listed here and its failures keep their own first line.
Owner: the commands (tidelake.cli) and the merge, on their failure paths.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable

from tidelake.errors import TidelakeError
from tidelake.lake.layout import TIDELAKE_DIR, LakeLayout
from tidelake.lake.object_store import local_root
from tidelake.lake.store_room import refusal

_DELTA_LOG = "_delta_log"


class LakeDamagedError(TidelakeError):
    """A lake file is truncated or missing: the line says which, what it affects and the way out."""


@dataclass(frozen=True)
class Damage:
    table: str  # the Delta table's path
    problem: str  # what is wrong, naming the file or log version
    affected: str
    recovery: str

    def line(self) -> str:
        return f"damaged lake table {self.table}: {self.problem}; affects {self.affected}; recovery: {self.recovery}"


def _tables(root: str) -> list[str]:
    """The lake's Delta tables: its control tables first (a damaged watermark explains the rest),
    then the replicas (`<db>/<table>`)."""
    control = os.path.join(root, TIDELAKE_DIR)
    found = [os.path.join(control, n) for n in sorted(os.listdir(control))] if os.path.isdir(control) else []
    for db in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if db == TIDELAKE_DIR or not os.path.isdir(os.path.join(root, db)):
            continue
        found += [os.path.join(root, db, t) for t in sorted(os.listdir(os.path.join(root, db)))]
    return [t for t in found if os.path.isdir(os.path.join(t, _DELTA_LOG))]


def _broken_commit(table: str) -> tuple[int, str] | None:
    """(version, file) of the first commit file whose lines are not all JSON."""
    log = os.path.join(table, _DELTA_LOG)
    for name in sorted(os.listdir(log)):
        if not name.endswith(".json") or not name.removesuffix(".json").isdigit():
            continue
        path = os.path.join(log, name)
        try:
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    if line.strip():
                        json.loads(line)
        except (ValueError, UnicodeDecodeError):
            return int(name.removesuffix(".json")), path
    return None


def _missing_file(table: str) -> str | None:
    """A data file the table's current version references but the folder no longer holds. The log
    names it by a percent-encoded URI relative to the table (PROTOCOL.md "Add File and Remove
    File"), its name on disk that unquoted; file_uris() escapes the table's folder but keeps the
    log's escapes in the name, so no one decoding of it names the file."""
    try:
        logged = pa.table(DeltaTable(table).get_add_actions()).column("path").to_pylist()
    except Exception:  # noqa: BLE001 - an unreadable log is reported by _broken_commit, not here
        return None
    for name in logged:
        path = local_root(name) if "://" in name else Path(table, unquote(name))
        if path is not None and not path.exists():
            return str(path)
    return None


def _what(table: str) -> tuple[str, bool]:
    """(what the table holds, whether it is a replica)."""
    name = os.path.basename(table)
    if os.path.basename(os.path.dirname(table)) == TIDELAKE_DIR:
        return f"the {name} control table", False
    return f"the replica {os.path.basename(os.path.dirname(table))}.{name}", True


def _log_damage(table: str, version: int, path: str) -> Damage:
    what, replica = _what(table)
    problem = f"commit {version} ({path}) is truncated or not JSON"
    if replica:
        return Damage(table, problem, what, f"move {path} aside (Delta then reads version {version - 1}), "
                      "then `tidelake merge` catches the replica up again from its checkpoint")
    if os.path.basename(table) == "watermarks":
        return Damage(table, problem, f"{what}: every reader and the puller", f"move {path} aside: version "
                      f"{version - 1} holds older watermarks, still true, and the puller's next flush rewrites them")
    return Damage(table, problem, f"{what}: every reader and the puller", f"restore {path} from a backup; without "
                  "one, move it aside and bootstrap every replica again (`tidelake bootstrap`): what it held is lost")


def _file_damage(table: str, missing: str) -> Damage:
    what, replica = _what(table)
    problem = f"data file {missing} is missing"
    if replica:
        return Damage(table, problem, what, "restore an earlier version from Delta history "
                      f"(`RESTORE TABLE delta.`{table}` TO VERSION AS OF <v>`) and merge again, or "
                      f"`tidelake merge --rebuild {what.removeprefix('the replica ')}` while the changelog holds "
                      "all its changes")
    partition = next((p for p in missing.split(os.sep) if p.startswith("table_id=")), None)
    affected = f"{what}, table id {partition.removeprefix('table_id=')}" if partition else what
    return Damage(table, problem, affected, "restore the file from a backup; without one, bootstrap the affected "
                  "table again (`tidelake bootstrap --table DB.TABLE` after moving its replica aside): its changes "
                  "in that file are lost")


def find_damage(layout: LakeLayout) -> Damage | None:
    """The first truncated commit or missing data file in the lake's Delta tables, if any."""
    directory = local_root(layout.root)
    if directory is None or not directory.is_dir():
        return None
    root = str(directory)
    for table in _tables(root):
        broken = _broken_commit(table)
        if broken is not None:
            return _log_damage(table, *broken)
        missing = _missing_file(table)
        if missing is not None:
            return _file_damage(table, missing)
    return None


def first_line(exc: BaseException) -> str:
    """The line of an error worth showing: for a JVM error the Java exception's own message,
    never the py4j call it travelled through."""
    text = str(exc)
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            text = str(java.toString())
        except Exception:  # noqa: BLE001 - the gateway may be gone; fall back to the Python text
            pass
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else '(no message)'}"


def explain_failure(layout: LakeLayout, exc: BaseException) -> str:
    """One line for a failure that touched the lake: the damage if a file is broken or missing,
    the store's refusal (no room) before the error's first line, else that first line."""
    damage = find_damage(layout)
    if damage is not None:
        return damage.line()
    cause = refusal(exc)
    return f"{cause}: {first_line(exc)}" if cause is not None else first_line(exc)
