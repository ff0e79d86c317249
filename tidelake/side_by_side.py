"""One step over many items on a few threads, for I/O-bound steps (store round trips, delta-rs
commits): every step started ends before side_by_side returns or raises, an interrupt included
(the steps not started are cancelled), then the first error is raised. Owner: the stages that
fan out per table (merge runs, lease takes and releases).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def side_by_side(step: Callable[[T], R], items: Sequence[T], workers: int, name: str) -> list[R]:
    """`step` of each item, up to `workers` at once on threads named `name`, results in the items'
    order; one at a time on the caller's thread when `workers` < 2 or there is one item."""
    if workers < 2 or len(items) < 2:
        return [step(item) for item in items]
    pool = ThreadPoolExecutor(min(workers, len(items)), thread_name_prefix=name)
    try:
        futures = [pool.submit(step, item) for item in items]
        wait_all(futures)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise errors[0]
    return [f.result() for f in futures]
