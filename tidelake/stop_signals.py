"""A stop event set by the first SIGTERM/SIGINT a long-running loop receives (the merge follower,
its Spark job): the loop finishes its step and stops; a second signal raises KeyboardInterrupt,
abandoning the step. Off the main thread (an Airflow task's worker thread) no handler is
installed: the caller's own stop then sets the event. Owner: the follower's runners.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


@contextmanager
def stop_on_signals(signals: Sequence[int] = (signal.SIGTERM, signal.SIGINT)) -> Iterator[threading.Event]:
    """The event for the block; the previous handlers come back afterwards."""
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, on_signal) for sig in signals}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
