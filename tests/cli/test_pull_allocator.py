"""The allocator settings are the puller's alone: `tidelake pull` sets delta-rs's jemalloc before
deltalake is imported, limits glibc's arenas and puts pyarrow on the system allocator; importing
tidelake elsewhere (DAG parsing, notebooks) leaves the environment alone."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from tidelake.capture.changefeed.process_memory import (
    ARROW_POOL_ENV,
    GLIBC_ARENAS,
    GLIBC_ARENAS_ENV,
    JEMALLOC_CONF,
    JEMALLOC_ENV,
)

# Records the variable at the moment deltalake is first imported, then runs `tidelake pull` on a
# config that does not exist (it stops with exit 2 after the puller's imports).
PULL = f"""
import importlib.abc, os, sys
seen = []
class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "deltalake":
            seen.append(os.environ.get({JEMALLOC_ENV!r}))
        return None
sys.meta_path.insert(0, Watch())
PRELOAD
from tidelake.cli import main
rc = main(["pull", "--config", "/nonexistent/cf.toml"])
print(rc, seen)
"""


def _run(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != JEMALLOC_ENV}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_importing_tidelake_does_not_touch_the_allocator_setting():
    done = _run(f"import os, tidelake, tidelake.config, tidelake.cli; print(os.environ.get({JEMALLOC_ENV!r}))")
    assert done.returncode == 0 and done.stdout.strip() == "None", done.stderr


def test_pull_sets_it_before_deltalake_is_imported():
    done = _run(PULL.replace("PRELOAD", ""))
    assert done.stdout.strip() == f"2 [{JEMALLOC_CONF!r}]", done.stderr
    assert "deltalake was imported" not in done.stderr


def test_pull_warns_when_deltalake_came_first():
    done = _run(PULL.replace("PRELOAD", "import deltalake"))
    assert done.stdout.strip() == "2 [None]", done.stderr
    warnings = [line for line in done.stderr.splitlines() if "deltalake was imported before `tidelake pull`" in line]
    assert len(warnings) == 1 and "WARNING" in warnings[0]


# Starts 16 threads that each allocate through glibc malloc (a new thread takes a new arena while
# the limit allows), then counts the arenas glibc reports in malloc_info.
ARENAS = """
import ctypes, os, sys, tempfile, threading
from tidelake.capture.changefeed.process_memory import limit_malloc_arenas
print(limit_malloc_arenas())
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.fopen.restype = ctypes.c_void_p
barrier = threading.Barrier(16)
def allocate():
    barrier.wait()
    libc.free(libc.malloc(4096))
    barrier.wait()  # every thread holds its arena until all allocated
threads = [threading.Thread(target=allocate) for _ in range(16)]
for t in threads: t.start()
for t in threads: t.join()
path = tempfile.mktemp()
fp = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(fp))
libc.fclose(ctypes.c_void_p(fp))
print(open(path).read().count("<heap nr="))
"""


def _arenas(env: dict[str, str]) -> tuple[str, int]:
    done = subprocess.run([sys.executable, "-c", ARENAS], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    limited, heaps = done.stdout.split()
    return limited, int(heaps)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="M_ARENA_MAX is glibc's")
def test_pull_limits_glibc_to_two_arenas_unless_the_user_chose():
    env = {k: v for k, v in os.environ.items() if k != GLIBC_ARENAS_ENV}
    assert _arenas(env) == ("True", GLIBC_ARENAS)
    # the check can fail: without the limit the same threads take arenas of their own
    assert _arenas({**env, GLIBC_ARENAS_ENV: "6"}) == ("False", 6)


# `tidelake pull` on a config that does not exist, then the pool pyarrow allocates from by default.
ARROW_POOL = """
from tidelake.cli import main
rc = main(["pull", "--config", "/nonexistent/cf.toml"])
import pyarrow as pa
print(rc, pa.default_memory_pool().backend_name)
"""


def test_pull_puts_pyarrow_on_the_system_allocator_unless_the_user_chose():
    env = {k: v for k, v in os.environ.items() if k != ARROW_POOL_ENV}
    done = subprocess.run([sys.executable, "-c", ARROW_POOL], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.split() == ["2", "system"], done.stderr
    chosen = subprocess.run([sys.executable, "-c", ARROW_POOL], capture_output=True, text=True,
                            env={**env, ARROW_POOL_ENV: "jemalloc"}, timeout=120)
    assert chosen.stdout.split() == ["2", "jemalloc"], chosen.stderr
