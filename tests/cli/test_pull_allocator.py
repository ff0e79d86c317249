"""delta-rs's jemalloc setting is the puller's alone: `tidelake pull` sets it before deltalake is
imported, importing tidelake elsewhere (DAG parsing, notebooks) leaves the environment alone."""

from __future__ import annotations

import os
import subprocess
import sys

from tidelake.cli.pull import JEMALLOC_CONF, JEMALLOC_ENV

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
