"""Fixed pool of worker threads; all work for one key (a subscription) runs on the same thread, in
order, so a region's rows come before the resolved ts that covers them. Queues are bounded: a
slow sink blocks the stream readers, and gRPC flow control slows TiKV down. Owner: the EventFeed
client.

More: docs/internals.md#region_workers.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

_STOP = object()
STOP_WAIT_S = 10.0  # how long stop() waits for the workers, all together


class RegionWorkers:
    def __init__(self, count: int, on_error: Callable[[BaseException], None], queue_size: int = 64) -> None:
        if count < 1:
            raise ValueError("need at least one region worker")
        self._queues: list[queue.Queue] = [queue.Queue(maxsize=queue_size) for _ in range(count)]
        self._on_error = on_error
        self._stopped = False
        self._threads = [
            threading.Thread(target=self._run, args=(q,), name=f"region-worker-{i}", daemon=True)
            for i, q in enumerate(self._queues)
        ]

    @property
    def count(self) -> int:
        return len(self._queues)

    def index_of(self, key: int) -> int:
        return key % len(self._queues)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def submit(self, index: int, fn: Callable[[], None]) -> None:
        """Queue work for a worker; blocks while its queue is full (backpressure), not after stop."""
        while not self._stopped:
            try:
                self._queues[index].put(fn, timeout=0.5)
                return
            except queue.Full:
                continue

    def stop(self) -> None:
        self._stopped = True
        for q in self._queues:
            while True:  # drop pending work so the stop marker cannot block behind a full queue
                try:
                    while True:
                        q.get_nowait()
                except queue.Empty:
                    pass
                try:
                    q.put_nowait(_STOP)
                    break
                except queue.Full:
                    continue
        # One deadline for all: a worker blocked in the sink (a full memory quota) ends only when
        # the sink closes, after this returns; waiting 10 s for each such worker made a stop
        # take 10 s per blocked worker.
        deadline = time.monotonic() + STOP_WAIT_S
        current = threading.current_thread()
        for thread in self._threads:
            if thread.is_alive() and thread is not current:
                thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def _run(self, q: queue.Queue) -> None:
        while True:
            fn = q.get()
            if fn is _STOP:
                return
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - the owner turns it into a fatal feed error
                self._on_error(exc)
