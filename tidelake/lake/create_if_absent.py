"""Create-if-absent, the one atomic write the lake's writers outside delta-rs rely on, per store: a
local folder links a complete, synced temporary file to the name (link(2) fails with EEXIST, and a
reader never sees half of it); S3 takes a PUT with `If-None-Match: *` (412 when the key exists).
With it the boto3 client that reaches the bucket as delta-rs does. Owner: the lake; used by the
lease records (tidelake.lake.lease_store) and the commit files of tidelake.lake.table_folder.

More: docs/internals.md#create_if_absent.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from tidelake.lake.object_store import setting_of

CONFLICT_CODES = ("PreconditionFailed", "ConditionalRequestConflict")


def create_local(path: Path, body: bytes) -> bool:
    """Create `path` holding `body` only if no file has that name: a staged, synced file linked to
    it (link(2) fails with EEXIST; a reader never sees half of it). False when it exists."""
    staged = staged_file(path.parent, body)
    try:
        os.link(staged, path)
    except FileExistsError:
        return False
    finally:
        staged.unlink()
    return True


def create_s3(client, bucket: str, key: str, body: bytes) -> str | None:
    """PUT `key` holding `body` only if absent (`If-None-Match: *`); its ETag, None when it exists."""
    try:
        answer = client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
    except ClientError as exc:
        if error_code(exc) in CONFLICT_CODES:
            return None
        raise
    return answer["ETag"]


def staged_file(folder: Path, body: bytes) -> Path:
    """A new hidden file in `folder` holding `body`, synced, for the caller to link or rename into place."""
    staged = folder / f".staged-{uuid.uuid4().hex}"
    try:
        with open(staged, "xb") as out:
            out.write(body)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:  # a full disk: no empty file left behind (a lease renewal stages one each time)
        staged.unlink(missing_ok=True)
        raise
    return staged


def s3_client(storage_options: dict[str, str] | None):
    """A boto3 S3 client for the bucket delta-rs reaches with `storage_options` (same endpoint,
    credentials and addressing), for the small conditional writes delta-rs does not offer."""
    options = storage_options or {}
    return boto3.client(
        "s3", endpoint_url=setting_of(options, "endpoint"), region_name=setting_of(options, "region"),
        aws_access_key_id=setting_of(options, "access_key_id"),
        aws_secret_access_key=setting_of(options, "secret_access_key"),
        aws_session_token=setting_of(options, "session_token"),
        # The addressing delta-rs uses (object_store: path style unless virtual_hosted_style_request).
        config=Config(connect_timeout=10, read_timeout=20, retries={"mode": "standard", "max_attempts": 3},
                      s3={"addressing_style": "virtual" if (setting_of(options, "virtual_hosted_style_request")
                                                            or "").lower() == "true" else "path"}),
    )


def error_code(exc: ClientError) -> str:
    """The S3 error code of a boto3 error ("PreconditionFailed", "NoSuchKey", ...)."""
    return str(exc.response.get("Error", {}).get("Code", ""))
