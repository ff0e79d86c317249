"""A Delta table's recent commits, read from its log: each version's commit time, the files it
added with data and the `txn` actions it recorded (Delta protocol "Delta Log Entries": commitInfo,
add, remove, txn). Only the versions committed within a span are read, newest first until one is
older, or those after a version already read, so the cost follows the span's commits, not the
table's history (`commit_infos` alone walks a whole log, one commitInfo kept at a time). Any store
delta-rs reaches; a local folder's files are read with plain file reads, one by one.
Owner: the lake contracts; `tidelake freshness`, the checkpoint walk (tidelake.lake.checkpoint),
the merge follower's replica handles and the rebuild check read them.

More: docs/internals.md#delta_commits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake.exceptions import TableNotFoundError
from deltalake.fs import DeltaStorageHandler

from tidelake.errors import InputError
from tidelake.lake.object_store import local_root

LOG_DIR = "_delta_log"
READ_AHEAD = 16  # commit files read at once while walking back or forward (object stores)
FIRST_READS = 2  # read one by one going forward before READ_AHEAD at once: most logs moved a version or two


def commit_name(version: int) -> str:
    """The commit file of `version` under the table folder (PROTOCOL.md "Delta Log Entries")."""
    return f"{LOG_DIR}/{version:020d}.json"


@dataclass(frozen=True)
class AddedFile:
    """A data file a commit added with `dataChange` (a compaction's rewritten files are not)."""

    path: str  # relative to the table's root, decoded
    partition: dict[str, str | None]
    min_values: dict[str, object] = field(default_factory=dict)
    max_values: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class DeltaCommit:
    """One version: its commit time, the files it added and the partitions it removed files from,
    the `txn` versions it recorded, by app id, and its commitInfo (the writer's own entries too)."""

    version: int
    timestamp_ms: int
    added: list[AddedFile]
    removed_partitions: list[dict[str, str | None]]
    txns: dict[str, int]
    info: dict[str, object] = field(default_factory=dict)


class DeltaLog:
    """The log and files of one Delta table at `path` (local or an object-store URI)."""

    def __init__(self, path: str, storage_options: dict[str, str] | None = None) -> None:
        self.path = path
        self.storage_options = storage_options
        # A local table's files are read with plain file reads: delta-rs' handler spends far more CPU
        # on a small file and takes the GIL back several times a read, stalling the other threads
        # of a busy process (figures: bench/README.md#current-figures, row "commit file read").
        self._local = local_root(path)
        self._handler: DeltaStorageHandler | None = None

    @property
    def _store(self) -> DeltaStorageHandler:
        if self._handler is None:  # made on first use: it refuses a root that is not a folder
            self._handler = DeltaStorageHandler(self.path, self.storage_options)
        return self._handler

    def latest_version(self, start: int | None = None) -> int | None:
        """The newest version, None when there is no table at `path`. Found by probing which
        commit files exist from the last checkpoint on (`start`, the caller's read of
        last_checkpoint, or read here): a few requests, whatever the table's files."""
        try:
            start = self.last_checkpoint() if start is None else start
        except TableNotFoundError:
            return None
        if not self.has_version(start):
            return None
        step, low = 1, start  # invariant: version `low` exists
        while self.has_version(low + step):
            low, step = low + step, step * 2
        high = low + step  # does not exist
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if self.has_version(mid) else (low, mid)
        return low

    def last_checkpoint(self) -> int:
        """The version of the log's last checkpoint (`_last_checkpoint`), 0 when none was written:
        every version from it on can be loaded."""
        try:
            return int(json.loads(self.read_bytes(f"{LOG_DIR}/_last_checkpoint"))["version"])
        except FileNotFoundError:
            return 0

    def has_version(self, version: int) -> bool:
        """Whether the commit file of `version` exists (a version is created once and complete): on
        an object store one HEAD (opening a file reads its size), where get_file_info would first
        LIST the name as a folder."""
        if self._local is not None:
            return (self._local / commit_name(version)).is_file()
        try:
            with self._store.open_input_file(commit_name(version)):
                return True
        except FileNotFoundError:
            return False

    def commits_since(self, since_ms: int, until_ms: int | None = None) -> list[DeltaCommit]:
        """The commits whose time is at or after `since_ms` (and at or before `until_ms`, when
        given), oldest first. Empty without a table."""
        return [c for c in self._walk_back(since_ms) if until_ms is None or c.timestamp_ms <= until_ms]

    def commits_after(self, version: int | None, until_ms: int | None = None) -> list[DeltaCommit]:
        """The commits after `version` (None: from the first), oldest first, up to the newest or to
        the last before one committed after `until_ms`. Empty without a table. The first FIRST_READS
        are read one by one (a log with one new version costs two reads), then READ_AHEAD at once
        on an object store."""
        found: list[DeltaCommit] = []
        start = 0 if version is None else version + 1
        if self._local is not None:
            if not self._local.is_dir():
                return found
        else:
            try:
                self._store  # noqa: B018 - made here: it refuses a root that is not a folder
            except TableNotFoundError:
                return found

        def take(commits: Iterable[DeltaCommit | None]) -> bool:
            for commit in commits:
                if commit is None or (until_ms is not None and commit.timestamp_ms > until_ms):
                    return False
                found.append(commit)
            return True

        if not take(self.commit(v) for v in range(start, start + FIRST_READS)):
            return found
        start += FIRST_READS
        with self._reads() as read_all:
            while take(read_all(self.commit, range(start, start + READ_AHEAD))):
                start += READ_AHEAD
        return found

    def _walk_back(self, since_ms: int) -> list[DeltaCommit]:
        newest = self.latest_version()
        found: list[DeltaCommit] = []
        if newest is None:
            return found
        with self._reads() as read_all:
            top = newest
            while top >= 0:
                versions = range(top, max(-1, top - READ_AHEAD), -1)
                for commit in read_all(self.commit, versions):
                    if commit is None or commit.timestamp_ms < since_ms:
                        return found[::-1]
                    found.append(commit)
                top -= READ_AHEAD
        return found[::-1]

    @contextmanager
    def _reads(self) -> Iterator[Callable[..., Iterator]]:
        """A `map` for reads of several commit files: lazy and one by one on a local folder (a read
        is a system call or two), READ_AHEAD at once on an object store (each waits on a request)."""
        if self._local is not None:
            yield map
            return
        with ThreadPoolExecutor(max_workers=READ_AHEAD) as pool:
            yield pool.map

    def commit_infos(self, start: int = 0) -> Iterator[tuple[int, dict[str, object]]]:
        """(version, commitInfo) of each version from `start` on, oldest first, until the first
        version whose commit file is missing (the newest's next, or one a cleanup removed: the
        caller compares with latest_version), one commit file read at a time (READ_AHEAD at once
        on an object store) and only its commitInfo kept ({} when it has none): memory stays flat
        over a whole log, where DeltaTable.history() holds every one."""
        version = start
        with self._reads() as read_all:
            while True:
                for found in read_all(self._info, range(version, version + READ_AHEAD)):
                    if found is None:
                        return
                    yield found
                version += READ_AHEAD

    def _info(self, version: int) -> tuple[int, dict[str, object]] | None:
        try:
            text = self.read_bytes(commit_name(version))
        except FileNotFoundError:
            return None
        for line in text.splitlines():
            if b'"commitInfo"' in line:
                action = json.loads(line)
                if "commitInfo" in action:
                    return version, action["commitInfo"]
        return version, {}

    def commit(self, version: int) -> DeltaCommit | None:
        """Version `version`'s commit, None when its log file is gone (cleaned up) or not written."""
        try:
            text = self.read_bytes(commit_name(version))
        except FileNotFoundError:
            return None
        timestamp = None
        added, removed, txns, info = [], [], {}, {}
        for line in text.splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "commitInfo" in action:
                info = action["commitInfo"]
                timestamp = info.get("inCommitTimestamp", info.get("timestamp"))
            elif "add" in action and action["add"].get("dataChange", True):
                add = action["add"]
                stats = json.loads(add["stats"]) if add.get("stats") else {}
                added.append(AddedFile(unquote(add["path"]), add.get("partitionValues") or {},
                                       stats.get("minValues") or {}, stats.get("maxValues") or {}))
            elif "remove" in action and action["remove"].get("dataChange", True):
                remove = action["remove"]  # partitionValues is optional there: else the path's
                removed.append(remove.get("partitionValues") or _partitions_of(unquote(remove["path"])))
            elif "txn" in action:
                txns[action["txn"]["appId"]] = int(action["txn"]["version"])
        if timestamp is None:  # commitInfo is optional in the protocol; tidelake's writers all write one
            raise InputError(f"{self.path}: log version {version} has no commitInfo timestamp: its commit time "
                             "is unknown")
        return DeltaCommit(version, int(timestamp), added, removed, txns, info)

    def read_file(self, path: str, columns: Sequence[str]) -> pa.Table:
        """`columns` of one data file (AddedFile.path, relative to the table's root: tidelake's
        writers never add a file by an absolute URI, which the protocol allows)."""
        return pq.read_table(pa.BufferReader(self.read_bytes(path)), columns=list(columns))

    def read_bytes(self, path: str) -> bytes:
        """The whole file at `path` under the table's root; FileNotFoundError when there is none."""
        if self._local is not None:
            return (self._local / path).read_bytes()
        with self._store.open_input_file(path) as source:
            return source.read()


def _partitions_of(path: str) -> dict[str, str | None]:
    """The `column=value` folders of a data file's relative path (Hive-style partitioning)."""
    parts = [p.split("=", 1) for p in path.split("/")[:-1] if "=" in p]
    return {k: None if v == "__HIVE_DEFAULT_PARTITION__" else v for k, v in parts}
