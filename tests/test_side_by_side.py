"""tidelake.side_by_side: results in the items' order; a failing step is raised only after every
step started has ended, and the others still ran."""

from __future__ import annotations

import threading
import time

import pytest

from tidelake.side_by_side import side_by_side


def test_results_come_in_the_items_order_from_the_named_threads():
    names = set()

    def step(i: int) -> int:
        names.add(threading.current_thread().name)
        time.sleep(0.01 * (5 - i))  # later items finish first
        return i * i

    assert side_by_side(step, list(range(5)), 3, "fan") == [0, 1, 4, 9, 16]
    assert names and all(n.startswith("fan") for n in names)
    assert side_by_side(step, [3], 3, "fan") == [9]


def test_an_error_is_raised_after_every_started_step_ended():
    ended = []

    def step(i: int) -> None:
        if i == 0:
            raise OSError("the store went away")
        time.sleep(0.05)
        ended.append(i)

    with pytest.raises(OSError, match="went away"):
        side_by_side(step, list(range(6)), 3, "fan")
    assert sorted(ended) == [1, 2, 3, 4, 5]
