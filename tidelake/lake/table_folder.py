"""A Delta table's folder as a writer outside delta-rs sees it: whole files read and put by name,
and a commit file created only if no writer created that version first, the put-if-absent every
Delta writer relies on (delta-io/delta PROTOCOL.md "Delta Log Entries"), with the lake's
create-if-absent (tidelake.lake.create_if_absent): a local folder links a staged, synced file into
place; S3 puts with If-None-Match. Other stores: none wired (`of`).
Owner: the lake; tidelake.merge.writers.file_rewrite writes through it.

More: docs/internals.md#table_folder.
"""

from __future__ import annotations

import threading
from urllib.parse import unquote, urlparse

from tidelake.lake.delta_commits import commit_name
from tidelake.lake.create_if_absent import create_local, create_s3, s3_client
from tidelake.lake.object_store import is_s3, local_root


_clients: dict[tuple[tuple[str, str], ...], object] = {}
_clients_lock = threading.Lock()


def _client(storage_options: dict[str, str] | None):
    """One boto3 client per storage options, made under a lock (making one is not thread-safe;
    using one is), kept for the process: a client per window costs milliseconds and a connection."""
    key = tuple(sorted((storage_options or {}).items()))
    with _clients_lock:
        if key not in _clients:
            _clients[key] = s3_client(storage_options)
        return _clients[key]


class TableFolder:
    """Files of the table at one URI, by their paths relative to it."""

    def __init__(self, table_uri: str, storage_options: dict[str, str] | None = None) -> None:
        url = urlparse(table_uri)
        self.s3 = is_s3(table_uri)
        self.local = local_root(table_uri)
        self.bucket, self.prefix = url.netloc, unquote(url.path).strip("/")
        self._client = _client(storage_options) if self.s3 else None

    @classmethod
    def of(cls, table_uri: str, storage_options: dict[str, str] | None = None) -> TableFolder | None:
        """The folder, None for a store without a conditional create wired here."""
        return cls(table_uri, storage_options) if is_s3(table_uri) or local_root(table_uri) is not None else None

    def _key(self, path: str) -> str:
        return f"{self.prefix}/{path}" if self.prefix else path

    def read(self, path: str) -> bytes:
        """The whole file at `path`, for the writer that replaces it: one GET with the process's
        client on S3, where DeltaLog.read_bytes (any store delta-rs reaches) pays a storage handler
        per table and a HEAD before each GET."""
        if self.local is not None:
            return (self.local / path).read_bytes()
        return self._client.get_object(Bucket=self.bucket, Key=self._key(path))["Body"].read()

    def put(self, path: str, data: bytes) -> None:
        """Write a file under a name no other writer uses (a new data file)."""
        if self.local is None:
            self._client.put_object(Bucket=self.bucket, Key=self._key(path), Body=data)
            return
        target = self.local / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def create_commit(self, version: int, body: bytes) -> bool:
        """Create commit `version` holding `body`; False, writing nothing, when it exists already
        (another writer's commit won that version)."""
        name = commit_name(version)
        if self.local is None:
            return create_s3(self._client, self.bucket, self._key(name), body) is not None
        return create_local(self.local / name, body)
