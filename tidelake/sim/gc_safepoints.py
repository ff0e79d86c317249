"""PD's GC safepoint state: service safepoints with TTL and the cluster GC safepoint.

Classic PD algorithm (docs/metadata.md#server-semantics): the minimum over live service safepoints bounds
GC; a service may not set a value below that minimum (no error: the reply just shows the minimum);
"gc_worker" always exists; the cluster GC safepoint never moves backwards.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

GC_WORKER = "gc_worker"
_NEVER = 2**63 - 1  # expire_at of gc_worker (TTL = MaxInt64)


@dataclass(frozen=True)
class ServiceSafePoint:
    service_id: str
    safe_point: int
    expire_at: int  # unix seconds


class GcSafePoints:
    def __init__(self, clock_s=None) -> None:
        self._clock_s = clock_s or (lambda: int(time.time()))
        self._mu = threading.Lock()
        self._services: dict[str, ServiceSafePoint] = {}
        self._gc_safe_point = 0

    def update_service(self, service_id: str, ttl_s: int, safe_point: int) -> tuple[ServiceSafePoint, int]:
        """PD `UpdateServiceGCSafePoint`; returns (the minimum service, its remaining TTL in seconds)."""
        with self._mu:
            now = self._clock_s()
            if ttl_s <= 0:
                self._services.pop(service_id, None)
            current_min = self._min_locked(now)
            if ttl_s > 0 and safe_point >= current_min.safe_point:
                self._services[service_id] = ServiceSafePoint(service_id, safe_point, min(now + ttl_s, _NEVER))
                current_min = self._min_locked(now)
            return current_min, current_min.expire_at - now

    def min_service_safe_point(self) -> int:
        with self._mu:
            return self._min_locked(self._clock_s()).safe_point

    def services(self) -> list[ServiceSafePoint]:
        with self._mu:
            self._min_locked(self._clock_s())
            return sorted(self._services.values(), key=lambda s: (s.safe_point, s.service_id))

    @property
    def gc_safe_point(self) -> int:
        with self._mu:
            return self._gc_safe_point

    def advance_gc_safe_point(self, safe_point: int) -> int:
        """PD `UpdateGCSafePoint`: never lowers the value; returns the value in force."""
        with self._mu:
            self._gc_safe_point = max(self._gc_safe_point, safe_point)
            return self._gc_safe_point

    def _min_locked(self, now: int) -> ServiceSafePoint:
        for sid in [sid for sid, s in self._services.items() if s.expire_at <= now]:
            del self._services[sid]
        if GC_WORKER not in self._services:
            floor = min((s.safe_point for s in self._services.values()), default=self._gc_safe_point)
            self._services[GC_WORKER] = ServiceSafePoint(GC_WORKER, floor, _NEVER)
        return min(self._services.values(), key=lambda s: s.safe_point)
