"""Allocator settings of a process that runs a puller: `tidelake pull`, and the Airflow task that
runs a shard in-process (tidelake.orchestration.airflow.puller_operator). Each keeps memory the
puller freed from staying resident, which its memory quota would otherwise have to absorb; a
value the user set in the environment wins.
Owner: `tidelake pull` and the Airflow puller operator, each for its own process.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

log = logging.getLogger(__name__)

# delta-rs allocates with its own jemalloc, which keeps freed pages for 10 s by default: under a
# backlog the puller's RSS then holds every recent flush's working memory. jemalloc reads this once, when delta-rs first allocates
# (at its import), so the puller sets it before importing deltalake; a value the user set wins.
# Only in a puller's own process: it would change every process that imports tidelake (Airflow's
# DAG parsing, polars).
JEMALLOC_ENV = "_RJEM_MALLOC_CONF"
JEMALLOC_CONF = "dirty_decay_ms:0,muzzy_decay_ms:0"

# glibc malloc gives each thread that allocates an arena of its own, up to 8 per core, and each
# arena keeps its freed memory: the puller's gRPC, region-worker and delta-rs I/O threads (dozens
# while catching up) then hold more RSS than with two arenas, at the same speed. glibc sizes its arena limit when a thread first needs a
# new arena, so the puller sets it (mallopt M_ARENA_MAX) before its threads start; a
# MALLOC_ARENA_MAX the user set wins. Only in a puller's process, as the jemalloc setting.
GLIBC_ARENAS_ENV = "MALLOC_ARENA_MAX"
GLIBC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc <malloc.h>

# pyarrow allocates with mimalloc by default, which kept each flush's freed Arrow buffers resident
# where neither glibc nor delta-rs's jemalloc could reuse them. From the system allocator they are
# glibc's free memory, which the lander gives back after each flush
# (tidelake/capture/landing/resident_memory.py). An
# ARROW_DEFAULT_MEMORY_POOL the user set wins. Only in a puller's process, as the jemalloc setting.
ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


def limit_malloc_arenas(arenas: int = GLIBC_ARENAS) -> bool:
    """mallopt(M_ARENA_MAX, arenas) unless MALLOC_ARENA_MAX is set; False where there is no glibc
    mallopt (musl, macOS) or it refused."""
    if os.environ.get(GLIBC_ARENAS_ENV):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return mallopt(_M_ARENA_MAX, arenas) == 1


def arrow_on_system_malloc() -> bool:
    """Make pyarrow's default memory pool the system allocator's unless ARROW_DEFAULT_MEMORY_POOL
    is set; False when it was left alone."""
    if os.environ.get(ARROW_POOL_ENV):
        return False
    import pyarrow as pa  # not at the top: this module is imported before the puller's heavy imports

    pa.set_memory_pool(pa.system_memory_pool())
    return True


def tune_allocators() -> bool:
    """Apply the three settings; True when deltalake was imported before, so its jemalloc setting
    came too late (the caller warns once its logging is set up)."""
    too_late = "deltalake" in sys.modules
    os.environ.setdefault(JEMALLOC_ENV, JEMALLOC_CONF)
    limit_malloc_arenas()
    arrow_on_system_malloc()
    return too_late


def warn_jemalloc_too_late(who: str) -> None:
    log.warning("deltalake was imported before %s set %s=%s: delta-rs keeps freed memory 10 s longer (more RSS "
                "under a backlog)", who, JEMALLOC_ENV, JEMALLOC_CONF)
