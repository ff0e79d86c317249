"""Is this path a tidelake lake? Shared by the commands, bootstrap and the merge DAG's plan, and
answered before Spark starts or PD is dialled.

A mistyped `--lake` must not turn `verify` into a silent pass over nothing, nor `status` into an
empty table: readers need the lake's own control tables (docs/design.md#lake-layout), writers at least a
root that can hold them (not a plain file, not under one, not some other Delta table).
Owner: the commands (tidelake.cli.target), bootstrap and the merge DAG's plan.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

from deltalake import DeltaTable

from tidelake.errors import InputError, StoreUnreachable
from tidelake.lake.layout import TIDELAKE_DIR, LakeLayout
from tidelake.lake.object_store import store_error

_DELTA_LOG = "_delta_log"
# What object_store (under delta-rs) says when the store gave no answer or a 5xx, as opposed to a
# 4xx (no such bucket, refused credentials): the same lake may answer later.
UNANSWERED = ("error sending request", "timed out", "connection reset", "non-2xx status code: 5",
              "status server error")


def _local_path(root: str) -> str | None:
    """The filesystem path of a local root, None for an object-store URI."""
    parsed = urlparse(root)
    if parsed.scheme in ("", "file") or len(parsed.scheme) == 1:  # one letter: a Windows drive
        return parsed.path if parsed.scheme == "file" else root
    return None


def _file_on_the_way(path: str) -> str | None:
    """The first plain file among `path`'s ancestors (a root under a file can never be a folder)."""
    parent = os.path.dirname(os.path.abspath(path))
    while parent and parent != os.path.dirname(parent):
        if os.path.exists(parent) and not os.path.isdir(parent):
            return parent
        parent = os.path.dirname(parent)
    return None


def check_lake_root(layout: LakeLayout) -> None:
    """A root a puller or bootstrap may create the lake in: missing or a folder that is not
    itself some other Delta table."""
    local = _local_path(layout.root)
    if local is None:
        if _reachable_delta_table(layout, layout.root):
            raise InputError(f"lake {layout.root} is a Delta table itself, not a tidelake lake")
        return
    blocker = _file_on_the_way(local)
    if blocker is not None:
        raise InputError(f"lake {layout.root} cannot be created: {blocker} is a file, not a folder")
    if os.path.exists(local) and not os.path.isdir(local):
        raise InputError(f"lake {layout.root} is a file, not a folder")
    if os.path.isdir(os.path.join(local, _DELTA_LOG)):
        raise InputError(f"lake {layout.root} is a Delta table itself, not a tidelake lake "
                         f"(a lake holds {TIDELAKE_DIR}/ and one folder per replicated database)")


def require_lake(layout: LakeLayout) -> None:
    """The lake a reader (verify, status, merge, snapshot-at) looks at exists and holds the
    control tables a puller or bootstrap creates; anything else is one InputError naming it."""
    check_lake_root(layout)
    local = _local_path(layout.root)
    if local is not None:
        if not os.path.exists(local):
            raise InputError(f"lake {layout.root} does not exist")
        if not os.listdir(local):
            raise InputError(f"lake {layout.root} is an empty folder, not a tidelake lake (run `tidelake pull` "
                             "or `tidelake bootstrap` on it first)")
        if not os.path.isdir(os.path.join(local, TIDELAKE_DIR)):
            raise InputError(f"lake {layout.root} has no {TIDELAKE_DIR}/ folder: not a tidelake lake")
    if not pulled_into(layout):
        raise InputError(f"lake {layout.root} holds no tidelake control table ({TIDELAKE_DIR}/watermarks, ddl or "
                         "changelog): not a tidelake lake, or nothing has been pulled into it yet")


def pulled_into(layout: LakeLayout) -> bool:
    """Whether a puller or bootstrap has created any control table in the lake yet."""
    control = (layout.watermarks, layout.ddl, layout.changelog)
    return any(_reachable_delta_table(layout, path) for path in control)


def _reachable_delta_table(layout: LakeLayout, path: str) -> bool:
    """Whether `path` is a Delta table; a store that cannot be read (no such bucket, wrong
    endpoint or credentials) is one InputError with what the store answered."""
    try:
        return DeltaTable.is_deltatable(path, storage_options=layout.storage_options)
    except Exception as exc:  # delta-rs raises its own types for unreachable stores
        message = f"lake {layout.root} cannot be read: {store_error(exc)}"
        if any(mark in message for mark in UNANSWERED):
            raise StoreUnreachable(message) from None
        raise InputError(message) from None
