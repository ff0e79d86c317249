"""The lander's view of a store without room (tidelake.lake.store_room): refusals read
from the errors the engines raise, and a local filesystem's free space checked before a write."""

from __future__ import annotations

import errno
import shutil
from collections import namedtuple

import pytest

from tidelake.lake import store_room
from tidelake.lake.store_room import FLUSH_OVERHEAD_BYTES, NoRoomError, check_room, probe_room, refusal

FULL = "the lake's filesystem is full"


@pytest.mark.parametrize("error, cause", [
    # delta-rs on a full local filesystem, as raised (DeltaError's text)
    (Exception("Failed to parse parquet: External: Generic LocalFileSystem error: Unable to copy data to "
               "file: No space left on device (os error 28)"), FULL),
    (OSError(errno.ENOSPC, "No space left on device"), FULL),
    (OSError(errno.EDQUOT, "quota"), "the lake's disk quota is used up"),
    (Exception("Generic S3 error: Error performing PutObject in 2.1s, after 10 retries: Server returned "
               "non-2xx status code: 507 Insufficient Storage"), "the object store has no room (HTTP 507 Insufficient Storage)"),
    (Exception("Generic S3 error: ... status code: 503 Slow Down: <Code>SlowDown</Code>"),
     "the object store refuses writes for now (HTTP 503)"),
    (NoRoomError("the lake's filesystem is full: 1.0 MiB free"), FULL),
    (Exception("Generic S3 error: status code: 403 Forbidden"), None),
    (Exception("flush 503 of tidelake-puller/feed failed"), None),  # a number is no status
    (ValueError("schema mismatch"), None),
])
def test_refusals_are_read_from_the_engines_errors(error, cause):
    assert refusal(error) == cause


class _ClientError(Exception):
    """What botocore's ClientError carries: the HTTP answer, its text naming only the error code."""

    def __init__(self, status: int, code: str) -> None:
        super().__init__(f"An error occurred ({code}) when calling the PutObject operation: ...")
        self.response = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}


@pytest.mark.parametrize("status, code, cause", [
    (507, "XMinioStorageFull", "the object store has no room (HTTP 507 Insufficient Storage)"),
    (503, "ServiceUnavailable", "the object store refuses writes for now (HTTP 503)"),
    (412, "PreconditionFailed", None),
])
def test_an_s3_clients_refusal_is_read_from_its_http_status(status, code, cause):
    assert refusal(_ClientError(status, code)) == cause


def test_a_refusal_is_found_behind_the_error_raised_from_it():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("commit failed") from inner
    except RuntimeError as outer:
        assert refusal(outer) == FULL


def test_a_flush_needs_its_rows_and_the_commit_overhead_free(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    free = {"bytes": 0}
    monkeypatch.setattr(store_room.shutil, "disk_usage",
                        lambda path: usage(1 << 40, 0, free["bytes"]) if path == tmp_path else shutil.disk_usage(path))
    root = str(tmp_path / "lake" / "not" / "yet")  # the nearest existing directory is measured
    free["bytes"] = (1 << 20) + FLUSH_OVERHEAD_BYTES
    check_room(root, 1 << 20)
    free["bytes"] -= 1
    with pytest.raises(NoRoomError, match=r"filesystem is full: 2\.0 MiB free under .*, a flush of 1\.0 MiB needs up to 2\.0 MiB"):
        check_room(root, 1 << 20)
    check_room("s3://bucket/lake", 1 << 40)  # object stores answer the write instead


def test_a_local_probe_is_the_free_space_check(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(store_room.shutil, "disk_usage", lambda path: usage(1 << 40, 0, FLUSH_OVERHEAD_BYTES - 1))
    with pytest.raises(NoRoomError, match="a flush of 0.0 MiB needs up to 1.0 MiB"):
        probe_room(str(tmp_path), None)
