"""A single thread running callables at or after a due time.

Region division and request sending go through one thread so PD lookups and stream setup never
block the threads that read TiKV's streams, and retries are simply tasks due later.
Owner: the EventFeed client.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable


class DelayedTasks:
    def __init__(self, name: str, on_error: Callable[[BaseException], None]) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._on_error = on_error
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, fn: Callable[[], None], delay_s: float = 0.0) -> None:
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + delay_s, next(self._seq), fn))
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        break
                    self._cond.wait(None if not self._heap else self._heap[0][0] - now)
                if self._stopped:
                    return
                _, _, fn = heapq.heappop(self._heap)
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - reported to the owner, which decides
                self._on_error(exc)
