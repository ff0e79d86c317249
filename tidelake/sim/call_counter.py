"""Counts the RPCs a simulated server receives, by method name.

What a scale run needs to see: how many PD requests the puller makes per region and per table
(region lookups one by one or batched, store lookups, TSO streams). A streaming RPC counts once,
when it opens.
"""

from __future__ import annotations

import threading
from collections import Counter

import grpc


class CallCounter(grpc.ServerInterceptor):
    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._calls: Counter[str] = Counter()

    def intercept_service(self, continuation, handler_call_details):
        name = handler_call_details.method.rsplit("/", 1)[-1]
        with self._mu:
            self._calls[name] += 1
        return continuation(handler_call_details)

    def snapshot(self) -> dict[str, int]:
        """Calls so far by method (`GetRegion`, `ScanRegions`, `Tso`, ...)."""
        with self._mu:
            return dict(self._calls)
