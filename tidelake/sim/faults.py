"""Fault injection for the simulated cluster: one API per fault and named profiles for the CLI.

Each fault is something a production TiKV/PD cluster does to a CDC client: region splits and
merges (epoch_not_match, region_not_found), leader transfers (not_leader), aborted EventFeed
streams, server_is_busy bursts, a slow store, a store restart, PD unavailable for a while (a PD
restart or a lost quorum: TSO and region lookups fail, the stores keep serving), a COMMIT delivered before its
PREWRITE during the incremental scan (docs/wire.md#commits-need-their-prewrite) and duplicated rows. A seeded
scheduler thread draws faults from a profile; every temporary fault is undone on time, and all
of them on stop(), so a run always ends on a healthy cluster.
"""

from __future__ import annotations

import heapq
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tidelake.codec.keys import TABLE_PREFIX_LEN
from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.errors import InputError
from tidelake.sim.regions import raw_bound

log = logging.getLogger(__name__)

FAULT_KINDS = (
    "split", "merge", "transfer_leader", "reset_streams", "server_busy", "slow_store", "restart_store",
    "commit_before_prewrite", "duplicate_delivery", "pd_unavailable",
)


@dataclass(frozen=True)
class FaultProfile:
    """Fault kinds with weights, drawn on average every `interval_s`; durations of temporary faults."""

    name: str
    description: str
    interval_s: float
    weights: tuple[tuple[str, int], ...]
    busy_ms: int = 500
    slow_ms: int = 200
    window_s: float = 3.0
    store_down_s: float = 3.0
    pd_down_s: float = 2.0


PROFILES: dict[str, FaultProfile] = {
    p.name: p
    for p in (
        FaultProfile("none", "no faults", 0.0, ()),
        FaultProfile("light", "region churn every ~5 s: splits, merges, leader transfers", 5.0,
                     (("split", 3), ("merge", 2), ("transfer_leader", 3))),
        FaultProfile("tour", "a little of each kind every ~3 s: splits, leader transfers, short busy bursts, "
                     "now and then a stream reset (the one-process demo)", 3.0,
                     (("split", 3), ("transfer_leader", 3), ("server_busy", 2), ("reset_streams", 1)), busy_ms=300),
        FaultProfile("regions", "heavy region churn every ~1 s: splits, merges, leader transfers", 1.0,
                     (("split", 4), ("merge", 3), ("transfer_leader", 3))),
        FaultProfile("cdc", "CDC stream faults every ~2 s: resets, busy, commit-before-prewrite, duplicates", 2.0,
                     (("reset_streams", 3), ("server_busy", 2), ("commit_before_prewrite", 2),
                      ("duplicate_delivery", 2), ("slow_store", 1))),
        FaultProfile("chaos", "every fault kind every ~1 s, store restarts and PD outages included", 1.0,
                     (("split", 4), ("merge", 3), ("transfer_leader", 3), ("reset_streams", 2), ("server_busy", 2),
                      ("slow_store", 1), ("restart_store", 1), ("commit_before_prewrite", 1),
                      ("duplicate_delivery", 1), ("pd_unavailable", 1))),
    )
}


def get_profile(name: str) -> FaultProfile:
    if name not in PROFILES:
        raise InputError(f"unknown fault profile {name!r} (known: {', '.join(PROFILES)})")
    return PROFILES[name]


class FaultInjector:
    """Applies faults to a SimCluster, by name (`apply`) or drawn from a profile by a thread."""

    def __init__(self, cluster: Any, profile: FaultProfile | str = "none", seed: int = 0) -> None:
        self.cluster = cluster
        self.profile = get_profile(profile) if isinstance(profile, str) else profile
        self.applied: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._mu = threading.Lock()
        self._undo: list[tuple[float, int, Callable[[], None]]] = []  # heap of (due, seq, fn)
        self._seq = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- scheduler ---------------------------------------------------------------------------

    def start(self) -> None:
        if not self.profile.weights:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="sim-faults", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop drawing faults and undo every temporary one now."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._run_undo(until=float("inf"))

    def _loop(self) -> None:
        kinds = [k for k, _ in self.profile.weights]
        weights = [w for _, w in self.profile.weights]
        next_at = time.monotonic() + self._rng.expovariate(1 / self.profile.interval_s)
        while not self._stop.is_set():
            self._run_undo(until=time.monotonic())
            if time.monotonic() >= next_at:
                try:
                    self.apply(self._rng.choices(kinds, weights=weights)[0])
                except Exception:  # a fault that cannot apply now (e.g. region moved) is skipped
                    log.exception("fault injection failed")
                next_at = time.monotonic() + self._rng.expovariate(1 / self.profile.interval_s)
            self._stop.wait(min(0.05, max(0.0, next_at - time.monotonic())))

    def _later(self, delay_s: float, fn: Callable[[], None]) -> None:
        with self._mu:
            self._seq += 1
            heapq.heappush(self._undo, (time.monotonic() + delay_s, self._seq, fn))

    def _run_undo(self, until: float) -> None:
        while True:
            with self._mu:
                if not self._undo or self._undo[0][0] > until:
                    return
                _, _, fn = heapq.heappop(self._undo)
            fn()

    # ---- faults ------------------------------------------------------------------------------

    def apply(self, kind: str) -> str | None:
        """Apply one fault now; returns what was done, or None when the cluster offers no target."""
        action = getattr(self, f"_{kind}", None)
        if kind not in FAULT_KINDS or action is None:
            raise InputError(f"unknown fault kind {kind!r} (known: {', '.join(FAULT_KINDS)})")
        done = action()
        if done is not None:
            with self._mu:
                self.applied[kind] += 1
            log.info("fault: %s", done)
        return done

    def _live_stores(self) -> list[int]:
        return [s for s in sorted(self.cluster.store_addresses) if self.cluster.store_is_up(s)]

    def _split(self) -> str | None:
        """Split a random region holding at least two keys at its middle key (TiKV split checker)."""
        regions = self.cluster.regions.all()
        self._rng.shuffle(regions)
        for region in regions:
            lo, hi = region.raw_range()
            middle = self.cluster.mvcc.middle_key(lo, hi)
            if middle is None or encode_bytes(middle) == region.start_key:
                continue
            left, right = self.cluster.split_region(region.id, encode_bytes(middle))
            return f"split region {region.id} -> {left.id}, {right.id}"
        return None

    def _merge(self) -> str | None:
        """Merge two neighbours inside one table (PD does not merge across table boundaries by default)."""
        regions = sorted(self.cluster.regions.all(), key=lambda r: r.start_key)
        pairs = [(a, b) for a, b in zip(regions, regions[1:]) if not _is_table_boundary(b.start_key)]
        if not pairs:
            return None
        left, right = self._rng.choice(pairs)
        merged = self.cluster.merge_regions(left.id, right.id)
        return f"merge regions {left.id} + {right.id} -> {merged.id}"

    def _transfer_leader(self) -> str | None:
        live = set(self._live_stores())
        candidates = [(r, s) for r in self.cluster.regions.all() for s in r.store_ids()
                      if s != r.leader_store_id and s in live]
        if not candidates:
            return None
        region, store = self._rng.choice(candidates)
        self.cluster.transfer_leader(region.id, store)
        return f"transfer leader of region {region.id} to store {store}"

    def _reset_streams(self) -> str | None:
        store = self._pick_store()
        if store is None:
            return None
        self.cluster.faults.reset_streams(store)
        return f"reset EventFeed streams of store {store}"

    def _server_busy(self) -> str | None:
        store = self._pick_store()
        if store is None:
            return None
        self.cluster.faults.make_busy(store, self.profile.busy_ms)
        return f"store {store} server_is_busy for {self.profile.busy_ms} ms"

    def _slow_store(self) -> str | None:
        store = self._pick_store()
        if store is None:
            return None
        self.cluster.faults.set_slow(store, self.profile.slow_ms)
        self._later(self.profile.window_s, lambda: self.cluster.faults.set_slow(store, 0))
        return f"store {store} slowed by {self.profile.slow_ms} ms for {self.profile.window_s} s"

    def _restart_store(self) -> str | None:
        live = self._live_stores()
        if len(live) < 2 or len(live) < len(self.cluster.store_addresses):
            return None  # keep a quorum: one store down at a time, never the last one
        store = self._rng.choice(live)
        self.cluster.stop_store(store)
        self._later(self.profile.store_down_s, lambda: self.cluster.start_store(store))
        return f"stop store {store} for {self.profile.store_down_s} s"

    def _pd_unavailable(self) -> str | None:
        if not self.cluster.pd_is_up:
            return None
        self.cluster.stop_pd()
        self._later(self.profile.pd_down_s, self.cluster.start_pd)
        return f"PD unavailable for {self.profile.pd_down_s} s"

    def _commit_before_prewrite(self) -> str | None:
        return self._toggle("commit_before_prewrite")

    def _duplicate_delivery(self) -> str | None:
        return self._toggle("duplicate_delivery")

    def _toggle(self, knob: str) -> str:
        setattr(self.cluster.faults, knob, True)
        self._later(self.profile.window_s, lambda: setattr(self.cluster.faults, knob, False))
        return f"{knob} on for {self.profile.window_s} s"

    def _pick_store(self) -> int | None:
        live = self._live_stores()
        return self._rng.choice(live) if live else None


def _is_table_boundary(encoded: bytes) -> bool:
    """True when a region key is exactly `EncodeBytes('t' + EncodeInt(id))` (docs/encoding.md#raw-keys-and-encoded-keys-pd-regions-cdc)."""
    raw = raw_bound(encoded)
    return len(raw) == TABLE_PREFIX_LEN and raw[:1] == b"t"
