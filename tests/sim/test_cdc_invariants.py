"""Property test: docs/wire.md#invariants-a-simulated-tikv-cdc-server-must-respect invariants 1-6 over a seeded random workload with region churn.

A TiCDC-like client keeps one multiplexed stream per store, subscribes a span region by region,
and on every region error re-divides the failed range over the current regions (docs/wire.md#region-error-handling), re-registering with the last resolved ts as checkpoint. Each registration gets its own
request_id, so every message maps to exactly one subscription "incarnation". The ground truth is
every commit the MVCC store applied.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from dataclasses import dataclass, field

from cdc_harness import MiniCluster, Stream, register_request

from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.kvproto import cdcpb_pb2
from tidelake.sim.cdc_observed_range import ObservedRange
from tidelake.sim.mvcc import ApplyBatch, MvccError

T = cdcpb_pb2.Event.LogType
SPAN = (encode_bytes(b"k"), encode_bytes(b"l"))


@dataclass
class Incarnation:
    request_id: int
    region_id: int
    store_id: int
    checkpoint: int
    observed: ObservedRange
    items: list = field(default_factory=list)  # ("row", Row) | ("resolved", ts) | ("error", Error)
    done: bool = False

    def last_resolved(self) -> int:
        return max([ts for kind, ts in self.items if kind == "resolved"], default=self.checkpoint)


class Client:
    def __init__(self, cluster: MiniCluster) -> None:
        self.cluster = cluster
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.streams = {sid: Stream(addr) for sid, addr in cluster.addresses.items()}
        self.incarnations: dict[int, Incarnation] = {}
        self.bad_messages: list[str] = []
        self._next_request_id = 1
        self._stop = threading.Event()
        self._forwarders = [threading.Thread(target=self._forward, args=(sid, s), daemon=True)
                            for sid, s in self.streams.items()]
        for t in self._forwarders:
            t.start()
        self._worker = threading.Thread(target=self._run, daemon=True)
        self._worker.start()

    def _forward(self, store_id: int, stream: Stream) -> None:
        while not self._stop.is_set():
            try:
                msg = stream.received.get(timeout=0.1)
            except queue.Empty:
                continue
            if msg is None:
                return
            self.inbox.put((store_id, msg))

    def subscribe(self, rng: ObservedRange, checkpoint: int) -> None:
        for region in self.cluster.regions.scan(rng.start, rng.end):
            observed = ObservedRange.clip(rng.start, rng.end, region.start_key, region.end_key)
            if observed.is_empty():
                continue
            rid = self._next_request_id
            self._next_request_id += 1
            self.incarnations[rid] = Incarnation(rid, region.id, region.leader_store_id, checkpoint, observed)
            self.streams[region.leader_store_id].send(
                register_request(region, checkpoint, request_id=rid, start=observed.start, end=observed.end))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                store_id, msg = self.inbox.get(timeout=0.1)
            except queue.Empty:
                continue
            self.handle(store_id, msg)

    def handle(self, store_id: int, msg: cdcpb_pb2.ChangeDataEvent) -> None:
        if msg.HasField("resolved_ts"):
            if msg.events:  # invariant 5
                self.bad_messages.append("ResolvedTs shares a ChangeDataEvent with events")
            for region_id in msg.resolved_ts.regions:
                inc = self.incarnations.get(msg.resolved_ts.request_id)
                if inc is None or inc.region_id != region_id or inc.store_id != store_id:
                    self.bad_messages.append(f"resolved ts for unknown subscription {msg.resolved_ts}")
                    continue
                inc.items.append(("resolved", msg.resolved_ts.ts))
        for ev in msg.events:
            inc = self.incarnations.get(ev.request_id)
            if inc is None or inc.region_id != ev.region_id or inc.store_id != store_id:
                self.bad_messages.append(f"event for unknown subscription {ev.request_id}/{ev.region_id}")
                continue
            if ev.HasField("error"):
                inc.items.append(("error", ev.error))
                if not inc.done:
                    inc.done = True
                    self.subscribe(inc.observed, inc.last_resolved())
            else:
                inc.items.extend(("row", r) for r in ev.entries.entries)

    def frontier(self) -> int:
        """Min resolved ts over the live incarnations (they tile the span)."""
        live = [i for i in self.incarnations.values() if not i.done]
        return min((i.last_resolved() if any(k == "resolved" for k, _ in i.items) else 0) for i in live)

    def close(self) -> None:
        self._stop.set()
        for s in self.streams.values():
            s.close()


def check_incarnation(inc: Incarnation, commits: list[tuple[bytes, int, int]]) -> list[str]:
    """Invariants 1-4 and 6 for one subscription; returns the violations."""
    bad = []
    initialized_at = None
    prewrites: set[tuple[bytes, int]] = set()
    scan_committed: set[tuple[bytes, int, int]] = set()
    early_commits: list[tuple[bytes, int, int]] = []
    delivered: set[tuple[bytes, int, int]] = set()
    last_resolved = 0
    due = sorted((c for c in commits if c[2] > inc.checkpoint and inc.observed.contains_raw(c[0])),
                 key=lambda c: c[2])
    for pos, (kind, item) in enumerate(inc.items):
        if kind == "error":
            if pos != len(inc.items) - 1:
                bad.append(f"{inc.request_id}: messages after an Error (inv 6)")
            break
        if kind == "resolved":
            if initialized_at is None:
                bad.append(f"{inc.request_id}: resolved ts before INITIALIZED (inv 1)")
            if item < last_resolved:
                bad.append(f"{inc.request_id}: resolved ts went back {last_resolved} -> {item} (inv 4)")
            last_resolved = max(last_resolved, item)
            while due and due[0][2] <= item:  # each commit checked at the first resolved ts covering it
                c = due.pop(0)
                if c not in delivered:
                    bad.append(f"{inc.request_id}: commit {c} not sent before resolved ts {item} (inv 4)")
            continue
        row = item
        if row.type == T.INITIALIZED:
            if initialized_at is not None:
                bad.append(f"{inc.request_id}: second INITIALIZED (inv 1)")
            initialized_at = pos
            for c in early_commits:
                if (c[0], c[1]) not in prewrites and c not in scan_committed:
                    bad.append(f"{inc.request_id}: early COMMIT {c} neither matched nor covered (inv 3)")
            continue
        if not inc.observed.contains_raw(row.key):
            bad.append(f"{inc.request_id}: row key {row.key!r} outside the range (inv 8)")
        if row.type == T.PREWRITE:
            prewrites.add((row.key, row.start_ts))
        elif row.type in (T.COMMIT, T.COMMITTED):
            c = (row.key, row.start_ts, row.commit_ts)
            if row.commit_ts <= max(inc.checkpoint, last_resolved):
                bad.append(f"{inc.request_id}: {T.Name(row.type)} {c} at or below checkpoint/resolved (inv 2)")
            delivered.add(c)
            if row.type == T.COMMITTED and initialized_at is None:
                scan_committed.add(c)
            if row.type == T.COMMIT:
                if initialized_at is None:
                    early_commits.append(c)
                elif (row.key, row.start_ts) not in prewrites:
                    bad.append(f"{inc.request_id}: COMMIT {c} after INITIALIZED without PREWRITE (inv 3)")
    return bad


def _workload(cluster: MiniCluster, rng: random.Random, stop: threading.Event) -> None:
    while not stop.is_set():
        keys = rng.sample([b"k%03d" % i for i in range(60)], rng.randint(1, 4))
        start = cluster.tso.next()
        muts = [("delete", k, b"") if rng.random() < 0.2 else ("put", k, b"v%d" % rng.randrange(10**6)) for k in keys]
        try:
            cluster.mvcc.prewrite(muts, keys[0], start, 3000)
        except MvccError:
            continue
        time.sleep(rng.random() * 0.01)
        if rng.random() < 0.15:
            cluster.mvcc.rollback(keys, start)
        else:
            commit_ts = cluster.tso.next()
            time.sleep(rng.random() * 0.005)  # the commit RPC is in flight while resolved ts advances
            cluster.mvcc.commit(keys, start, commit_ts)


def _churn(cluster: MiniCluster, rng: random.Random, stop: threading.Event) -> None:
    while not stop.wait(0.05):
        regions = cluster.regions.scan(*SPAN)
        choice = rng.random()
        region = rng.choice(regions)
        if choice < 0.5:
            key = encode_bytes(b"k%03d" % rng.randrange(60))
            if region.contains(key) and key != region.start_key:
                cluster.regions.split(region.id, key)
        elif choice < 0.75:
            other = rng.choice([sid for _, sid in region.peers])
            cluster.regions.transfer_leader(region.id, other)
        elif len(regions) > 2:
            i = rng.randrange(len(regions) - 1)
            cluster.regions.merge(regions[i].id, regions[i + 1].id)


def test_invariants_hold_under_random_workload_and_region_churn():
    rng = random.Random(20260821)
    cluster = MiniCluster(n_stores=3, min_ts_interval_s=0.02)
    commits: list[tuple[bytes, int, int]] = []

    def record(batch: ApplyBatch) -> None:
        if batch.kind in ("commit", "one_pc"):
            commits.extend((e.key, e.start_ts, e.commit_ts) for e in batch.entries)

    cluster.mvcc.add_observer(record)
    cluster.regions.split(cluster.regions.all()[0].id, SPAN[0])
    client = Client(cluster)
    try:
        client.subscribe(ObservedRange(*SPAN), cluster.tso.next())
        stop = threading.Event()
        threads = [threading.Thread(target=_workload, args=(cluster, random.Random(rng.random()), stop))
                   for _ in range(3)]
        threads.append(threading.Thread(target=_churn, args=(cluster, random.Random(rng.random()), stop)))
        for t in threads:
            t.start()
        time.sleep(2.5)
        stop.set()
        for t in threads:
            t.join()
        target = cluster.tso.next()
        deadline = time.monotonic() + 10
        while client.frontier() < target and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.frontier() >= target, "resolved ts of the span never caught up"
    finally:
        client.close()
        cluster.close()
    assert not client.bad_messages
    assert len(client.incarnations) > 5  # the churn really forced re-subscriptions
    violations = [v for inc in client.incarnations.values() for v in check_incarnation(inc, commits)]
    assert not violations, violations[:10]
    span = ObservedRange(*SPAN)
    expected = {c for c in commits if span.contains_raw(c[0])}
    delivered = {(r.key, r.start_ts, r.commit_ts) for inc in client.incarnations.values()
                 for kind, r in inc.items if kind == "row" and r.type in (T.COMMIT, T.COMMITTED)}
    assert expected and expected <= delivered
