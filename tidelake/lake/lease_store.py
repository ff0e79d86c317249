"""Where lease records live, one per fencing token: a local folder's files or an S3 prefix's objects.
A record is created only if absent (tidelake.lake.create_if_absent: a local hard link, an S3 PUT
with `If-None-Match: *`), so two takers of one token cannot both win; a holder rewrites only its
own record (S3: `If-Match` on its ETag). Owner: tidelake.lake.lease.

More: docs/internals.md#lease_store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlparse

from botocore.exceptions import ClientError

from tidelake.lake.create_if_absent import CONFLICT_CODES, create_local, create_s3, error_code, s3_client, staged_file
from tidelake.lake.object_store import is_s3, local_root

RECORD_SUFFIX = ".json"
_MISSING_CODES = ("NoSuchKey", "404")


@dataclass(frozen=True)
class StoredRecord:
    body: bytes
    version: str  # what overwrite() must be given: an ETag on S3, the file's inode/mtime locally


class LeaseStore(Protocol):
    """A lease's records: one per fencing token, named by it, under the lease's folder."""

    def tokens(self, lease: str) -> list[int]:
        """The tokens of `lease`'s records, ascending."""
        ...

    def create(self, lease: str, token: int, body: bytes) -> str | None:
        """Create the record of `token` holding `body`; its version, or None when it exists already."""
        ...

    def read(self, lease: str, token: int) -> StoredRecord | None:
        """The record of `token`; None when there is none."""
        ...

    def overwrite(self, lease: str, token: int, body: bytes, version: str) -> str | None:
        """Replace the record of `token` if it is still `version`; its new version, or None
        when it changed or is gone."""
        ...

    def delete(self, lease: str, token: int) -> None:
        """Remove the record of `token` (no error when it is gone)."""
        ...


def record_name(token: int) -> str:
    """Fixed width, so the names sort as the tokens do."""
    return f"{token:020d}{RECORD_SUFFIX}"


def token_of(name: str) -> int | None:
    stem = name[:-len(RECORD_SUFFIX)] if name.endswith(RECORD_SUFFIX) else ""
    return int(stem) if stem.isdigit() else None


class LocalLeaseStore:
    """Records as files under a local folder."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)

    def tokens(self, lease: str) -> list[int]:
        try:
            names = os.listdir(self.root / lease)
        except FileNotFoundError:
            return []
        return sorted(t for t in map(token_of, names) if t is not None)

    def create(self, lease: str, token: int, body: bytes) -> str | None:
        folder = self.root / lease
        folder.mkdir(parents=True, exist_ok=True)
        if not create_local(folder / record_name(token), body):
            return None
        return self._version(folder / record_name(token))

    def read(self, lease: str, token: int) -> StoredRecord | None:
        path = self.root / lease / record_name(token)
        try:
            return StoredRecord(path.read_bytes(), self._version(path))
        except FileNotFoundError:
            return None

    def overwrite(self, lease: str, token: int, body: bytes, version: str) -> str | None:
        # Only the holder rewrites its record, so a check then an atomic rename is enough here.
        current = self.read(lease, token)
        if current is None or current.version != version:
            return None
        folder = self.root / lease
        os.replace(staged_file(folder, body), folder / record_name(token))
        written = self.read(lease, token)
        return written.version if written is not None else None

    def delete(self, lease: str, token: int) -> None:
        (self.root / lease / record_name(token)).unlink(missing_ok=True)

    @staticmethod
    def _version(path: Path) -> str:
        stat = path.stat()
        return f"{stat.st_ino}:{stat.st_mtime_ns}"



class S3LeaseStore:
    """Records as objects under the lake's prefix, written with S3 conditional PUTs."""

    def __init__(self, root: str, storage_options: dict[str, str] | None) -> None:
        url = urlparse(root)
        self.bucket, self.prefix = url.netloc, url.path.strip("/")
        self.client = s3_client(storage_options)

    def _key(self, lease: str, token: int | None = None) -> str:
        folder = f"{self.prefix}/{lease}/" if self.prefix else f"{lease}/"
        return folder if token is None else folder + record_name(token)

    def tokens(self, lease: str) -> list[int]:
        found = []
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self._key(lease))
        for page in pages:
            found += [t for o in page.get("Contents", []) if (t := token_of(o["Key"].rsplit("/", 1)[-1])) is not None]
        return sorted(found)

    def create(self, lease: str, token: int, body: bytes) -> str | None:
        return create_s3(self.client, self.bucket, self._key(lease, token), body)

    def read(self, lease: str, token: int) -> StoredRecord | None:
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self._key(lease, token))
        except ClientError as exc:
            if error_code(exc) in _MISSING_CODES:
                return None
            raise
        return StoredRecord(answer["Body"].read(), answer["ETag"])

    def overwrite(self, lease: str, token: int, body: bytes, version: str) -> str | None:
        try:
            answer = self.client.put_object(Bucket=self.bucket, Key=self._key(lease, token), Body=body,
                                            IfMatch=version)
        except ClientError as exc:
            if error_code(exc) in (*CONFLICT_CODES, *_MISSING_CODES):
                return None
            raise
        return answer["ETag"]

    def delete(self, lease: str, token: int) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(lease, token))


def lease_store(root: str, storage_options: dict[str, str] | None) -> LeaseStore | None:
    """The store of the lease records under `root` (the lake's leases folder); None for an object
    store other than S3 (no conditional write wired yet: its writers are not fenced)."""
    if is_s3(root):
        return S3LeaseStore(root, storage_options)
    directory = local_root(root)
    return None if directory is None else LocalLeaseStore(str(directory))
