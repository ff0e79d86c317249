"""Whether the lake's store has room for a flush: a local filesystem's free space, checked before a
write, and the store's refusal read from a failed one (ENOSPC, EDQUOT, HTTP 507 Insufficient
Storage, HTTP 503 Slow Down). A flush the store has no room for is retried as it is, and the
lander says why in one line instead of a trace per attempt: nothing buffered is dropped. The
delta-rs merge writer checks a window the same way before it writes, so a full disk fails the
table before any file is written. Every command's one-line failure names a refusal too
(tidelake.lake.damage.explain_failure), and exits 75 for it (tidelake.errors.EXIT_TRY_LATER).
Owner: the lander (tidelake.capture.landing.lander).
"""

from __future__ import annotations

import errno
import re
import shutil
import uuid
from urllib.parse import urlparse

from tidelake.errors import EXIT_TRY_LATER, TidelakeError
from tidelake.lake.create_if_absent import s3_client
from tidelake.lake.object_store import is_s3, local_root

# Room a flush needs besides its rows: its Delta commit files, and a checkpoint now and then.
FLUSH_OVERHEAD_BYTES = 1 << 20

_STORE_FULL = "the object store has no room (HTTP 507 Insufficient Storage)"
_STORE_BUSY = "the object store refuses writes for now (HTTP 503)"
# How the engines word a refusal (delta-rs/object_store, pyarrow, Python), most specific first.
_REFUSALS = (
    (re.compile(r"No space left on device|os error 28\b|\bENOSPC\b", re.I), "the lake's filesystem is full"),
    (re.compile(r"Disk quota exceeded|os error 122\b|\bEDQUOT\b", re.I), "the lake's disk quota is used up"),
    (re.compile(r"\b507\b[^\n]{0,40}Insufficient Storage|Insufficient ?Storage", re.I), _STORE_FULL),
    (re.compile(r"\b503\b[^\n]{0,40}(Slow ?Down|Service Unavailable)|\bSlowDown\b", re.I), _STORE_BUSY),
)
_ERRNOS = {errno.ENOSPC: "the lake's filesystem is full", errno.EDQUOT: "the lake's disk quota is used up"}
# An S3 client's error that carries the HTTP answer (botocore ClientError.response) is judged by its
# status: its text names only the store's error code (MinIO's XMinioStorageFull for 507).
_STATUSES = {507: _STORE_FULL, 503: _STORE_BUSY}


class NoRoomError(TidelakeError):
    """The store cannot take the flush now; the same flush lands once it can."""

    exit_code = EXIT_TRY_LATER


def refusal(exc: BaseException) -> str | None:
    """The store's refusal behind `exc` (or an exception it was raised from), in a few words; None
    when `exc` is another failure."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, NoRoomError):
            return _ERRNOS[errno.ENOSPC]
        if isinstance(current, OSError) and current.errno in _ERRNOS:
            return _ERRNOS[current.errno]
        response = getattr(current, "response", None)
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) else None
        if status in _STATUSES:
            return _STATUSES[status]
        try:
            text = str(current)
        except Exception:  # noqa: BLE001 - an engine that can no longer describe its error (a dead JVM)
            text = ""
        for pattern, cause in _REFUSALS:
            if pattern.search(text):
                return cause
        current = current.__cause__ or current.__context__
    return None


def check_room(root: str, nbytes: int, what: str = "a flush") -> None:
    """Raise NoRoomError when the local filesystem under `root` has less free space than `what` (a
    lander's flush, a merge window) of `nbytes` bytes in memory may take (its rows plus
    FLUSH_OVERHEAD_BYTES); object stores are judged by their answer to the write instead."""
    directory = local_root(root)
    if directory is None:
        return
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    free = shutil.disk_usage(directory).free
    need = nbytes + FLUSH_OVERHEAD_BYTES
    if free < need:
        raise NoRoomError(f"the lake's filesystem is full: {free / 2**20:.1f} MiB free under {root}, "
                          f"{what} of {nbytes / 2**20:.1f} MiB needs up to {need / 2**20:.1f} MiB")


def probe_room(root: str, storage_options: dict[str, str] | None) -> None:
    """Raise the store's refusal if it takes no write now, at the cost of one small object: a local
    folder by its free space (check_room of nothing), an S3 bucket by a PUT and DELETE of
    `<root>/_tidelake/room-probe/<random>`; other object stores are not asked. The lander retries a
    paused flush only after this passes: a delta-rs write the store refuses makes object_store's
    BufWriter print a Rust panic (apache/arrow-rs-object-store issue 810), one per try otherwise."""
    if not is_s3(root):
        check_room(root, 0)
        return
    url = urlparse(root)
    key = "/".join(p for p in (url.path.strip("/"), "_tidelake/room-probe", uuid.uuid4().hex) if p)
    client = s3_client(storage_options)
    client.put_object(Bucket=url.netloc, Key=key, Body=b"room?")
    client.delete_object(Bucket=url.netloc, Key=key)
