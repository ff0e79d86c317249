"""Replicas' Delta log handles kept from run to run by the merge follower: a pass brings each log up
to date (a listing of any writer's new commits, made only when the next commit file exists)
instead of replaying it, and reads the recorded checkpoint only when the log moved. A kept handle
is used again only for the same table, path and log: a folder replaced under that path (a log
restarted at version 0) is told by the commit file at the handle's version, read when kept and
when taken, and is opened afresh. At most `max_handles`, none used `idle_s` after it was kept;
cleared when the follower stops.
Owner: tidelake.merge.follow (one per follower); its runs' table merges take and give back.

More: docs/internals.md#follow.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from deltalake import DeltaTable

from tidelake.lake.checkpoint import MERGE_APP_ID, open_replica
from tidelake.lake.delta_commits import DeltaLog, commit_name
from tidelake.lake.schema_history import TableKey

log = logging.getLogger(__name__)

MAX_HANDLES = 2048  # handles kept at most: one grows with its replica's files (figures: bench/README.md)
IDLE_S = 900.0  # a handle unused this long is dropped (three follower sweeps)


@dataclass
class ReplicaHandle:
    """One replica's log as `table` loaded it, and the checkpoint recorded as of one of its versions."""

    path: str
    table: DeltaTable
    storage_options: dict[str, str] | None = None
    known: tuple[int, int | None] | None = None  # (Delta version, the checkpoint recorded as of it)
    delta_log: DeltaLog = field(init=False, repr=False)  # the folder's files, read by name

    def __post_init__(self) -> None:
        self.delta_log = DeltaLog(self.table.table_uri, self.storage_options)

    @classmethod
    def open(cls, path: str, storage_options: dict[str, str] | None = None) -> ReplicaHandle | None:
        """The replica at `path` opened (its log replayed once), None when there is none."""
        table = open_replica(path, storage_options)
        return None if table is None else cls(path, table, storage_options)

    def commit_digest(self) -> bytes | None:
        """A digest of the commit file of the handle's version as the store holds it now (one read
        of one small file: a version's commit file is created once, delta-io/delta PROTOCOL.md
        "Delta Log Entries");
        None when there is none (a shorter log replaced this one, or it was cleaned up)."""
        try:
            return hashlib.blake2b(self.delta_log.read_bytes(commit_name(self.table.version())), digest_size=16).digest()
        except FileNotFoundError:
            return None

    def refresh(self) -> None:
        """Bring the handle to the log's newest version, as a listing of the log does; the listing
        (update_incremental: on a local store, every file of the log folder) is made only when the
        commit file after the handle's version exists. A writer creates version n+1 only once n
        exists, and a commit the handle has not seen is younger than the handle's last look, far
        within the log's retention (ReplicaHandles bounds a kept handle's age), so no cleanup has
        removed it: whether one file exists tells whether the log moved."""
        if self.delta_log.has_version(self.table.version() + 1):
            self.table.update_incremental()

    def checkpoint(self) -> int | None:
        """The checkpoint recorded as of the handle's version: read (a walk of the log's txns) only
        when the handle moved since the last read or own commit."""
        version = self.table.version()
        if self.known is None or self.known[0] != version:
            self.known = (version, self.table.transaction_version(MERGE_APP_ID))
        return self.known[1]

    def committed(self, version_before: int, hi: int) -> None:
        """The caller's delta-rs commit recording `hi` left the handle at its commit: when that is
        the one version after `version_before`, no other writer's came between and the checkpoint
        is `hi` there; otherwise it is read at the next `checkpoint`."""
        if self.table.version() == version_before + 1:
            self.known = (version_before + 1, hi)


@dataclass
class _Kept:
    handle: ReplicaHandle
    commit: bytes  # the digest of the handle's version's commit file when kept
    used_at: float


class ReplicaHandles:
    """Handles by table, at most `max_handles`, the least recently kept dropped first. A pool, not a
    cache: `take` removes the handle (a DeltaTable is one thread's at a time) and `keep` puts it back
    as the newest, and `expire` drops by the time of the keep; so a plain OrderedDict, not a cache
    library's mapping, whose reads leave the entry in and whose time-bound entries vanish on read.
    Thread-safe: a run's table threads take and keep different tables at once."""

    def __init__(self, max_handles: int = MAX_HANDLES, idle_s: float = IDLE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_handles, self.idle_s, self.clock = max_handles, idle_s, clock
        self._kept: OrderedDict[TableKey, _Kept] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

    def take(self, key: TableKey, path: str, storage_options: dict[str, str] | None = None) -> ReplicaHandle | None:
        """The table's replica at `path` as of now: its kept handle brought up to date when it is of
        that path and that log still, else opened afresh; None when there is no replica at `path`.
        Until kept again, the handle is the caller's alone."""
        with self._lock:
            kept = self._kept.pop(key, None)
        if kept is not None and self.clock() - kept.used_at > self.idle_s:
            kept = None  # older than expire() keeps any: not followed, whenever the last sweep ran
        if kept is not None and kept.handle.path == path:
            try:
                if kept.handle.commit_digest() == kept.commit:
                    kept.handle.refresh()
                    return kept.handle
                log.info("replica %s: its log is not the one its kept handle read (folder replaced); opened "
                         "afresh", path)
            except Exception:  # noqa: BLE001 - a log that cannot be followed is opened afresh, which reports it
                log.info("replica %s: its kept handle cannot follow its log; opened afresh", path, exc_info=True)
        return ReplicaHandle.open(path, storage_options)

    def keep(self, key: TableKey, handle: ReplicaHandle) -> None:
        """Keep the handle for the table's next take (the caller is done with it)."""
        try:
            commit = handle.commit_digest()
        except Exception:  # noqa: BLE001 - not kept: the next take opens the log afresh
            log.debug("replica %s: handle not kept", handle.path, exc_info=True)
            return
        if commit is None:
            return
        with self._lock:
            self._kept[key] = _Kept(handle, commit, self.clock())
            self._kept.move_to_end(key)
            while len(self._kept) > self.max_handles:
                self._kept.popitem(last=False)

    def expire(self) -> None:
        """Drop the handles unused for `idle_s` (tables with no work for a while)."""
        cutoff = self.clock() - self.idle_s
        with self._lock:
            for key in [k for k, kept in self._kept.items() if kept.used_at < cutoff]:
                del self._kept[key]

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()

