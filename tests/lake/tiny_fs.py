"""A lake's filesystem that really fills up: a tmpfs of a few MiB mounted for one test, filled to
the last byte by a ballast file, and grown back with `mount -o remount,size=...` as an operator
grows a volume (issue #32 item 3). Mounting needs root, as CI has; elsewhere the test fails saying
so rather than passing without a full disk (a faked ENOSPC is what tests/capture/changefeed/test_stop.py
already covers). Owner: the full-lake tests.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"`mount {' '.join(args)}` failed ({done.stderr.strip() or done.returncode}): the full-lake "
                    "tests need root to mount a small tmpfs, as CI runs them")


@contextmanager
def tiny_tmpfs(folder: Path, size: str = "4m") -> Iterator[Path]:
    """`folder` as a tmpfs of `size`, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.fail("the full-lake tests need root to mount a small tmpfs (CI runs them as root); "
                    "run them as root or in a container")
    folder.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder))
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path, name: str = "ballast", leave: int = 0) -> Path:
    """Write a ballast file under `folder` until the filesystem refuses even a page, then give
    back `leave` bytes (whole pages); its path."""
    path = folder / name
    with open(path, "ab", buffering=0) as out:
        for size in (1 << 20, 1 << 16, 1 << 12):
            chunk = b"\0" * size
            try:
                while True:
                    out.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    if leave:
        os.truncate(path, max(path.stat().st_size - leave, 0))
    return path


def free_bytes(folder: Path) -> int:
    stat = os.statvfs(folder)
    return stat.f_bavail * stat.f_frsize


def grow(folder: Path, size: str) -> None:
    """Give the filesystem room again, as growing the volume does."""
    _mount("-o", f"remount,size={size}", str(folder))
