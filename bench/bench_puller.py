"""End-to-end puller throughput from a replayed CDC recording, against two ceilings in the same run.

1. Record (untimed): a 1-store SimCluster with CDC recording on; a live EventFeedClient subscribes
   each region of --tables tables pre-split into --regions regions, while seeded Percolator transactions
   (--txn-rows rows, --update-ratio of them updates with old values, --value-bytes values) are
   written straight into the simulator's MVCC store; the stores' CDC service turns them into
   PREWRITE/COMMIT rows and resolved ts exactly as for any subscriber, and records every event.
2. Serve the recording with `tidelake sim-replay` in its own process (one core of its own), which
   answers each region registration with the region's recorded history, without pacing.
3. Measure, --repeats times each, the same recording through:
   (a) grpc ceiling   one EventFeedV2 stream, every region registered, responses received and
                      parsed by gRPC/protobuf, rows only counted: the transport's limit;
   (b) state ceiling  RegionFeedState (prewrite/commit matching, resolved ts) alone over the
                      pre-parsed events, one thread: the per-row Python cost of the protocol;
   (c) puller         EventFeedClient (PD region division, store stream, region workers, state
                      machines, span frontier) into a counting sink, until every row arrived and
                      every table's resolved ts reached its last recorded value;
   (d) lander alone   the rows (b) produced, Lander.add_rows + resolve + flush into a temp lake;
   (e) puller+lander  (c) with the real Lander as the sink, until the lake's watermarks are durable.
   Ratios are (c)/(a), (c)/(b) and (e)/(c). Rows are committed row changes; MB are key + value +
   old value bytes of those rows (what the lake stores), MiB = 2^20, GiB = 2^30.

Each stage and each run reports rows/s, MiB/s and CPU seconds per GiB. CPU is this process's
(`time.process_time`: every thread, gRPC's own included); the replay server is a child process
whose CPU `process_time` does not count, sampled separately through psutil and reported beside
it ("replay CPU s"), so CPU s per GiB is the puller's cost alone, the simulator's taken out.

Presets (`--preset`) name the two row shapes of issue #31; explicit flags override them:
  narrow  --value-bytes 64, --rows 300000: ~100 B per committed row (19 B key + 64 B value + the
          updates' 64 B old value at --update-ratio 0.3)
  wide    --value-bytes 1600, --rows 100000: ~2 KiB per committed row (19 + 1600 + 0.3 x 1600)

PD for the replay is answered from the recording itself (each recorded region piece, leader on the
replay store): the EventFeed wire protocol is real, PD lookups are local.

    .venv/bin/python bench/bench_puller.py [--preset narrow|wide] [--rows 60000] [--txn-rows 10] [--tables 2]
        [--regions 4] [--value-bytes 200] [--update-ratio 0.3] [--repeats 3] [--workers 4] [--seed 0]
        [--json out.json] [--profile PREFIX]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deltalake import DeltaTable  # noqa: E402

from bench._common import (  # noqa: E402
    MIB,
    RssSampler,
    Timer,
    markdown_table,
    median,
    print_environment,
    write_json,
)
from tidelake.capture.eventfeed.client import EventFeedClient, FeedOptions  # noqa: E402
from tidelake.capture.eventfeed.region_state import RegionFeedState  # noqa: E402
from tidelake.codec.keys import (  # noqa: E402
    from_region_key,
    record_key,
    table_id_of,
    table_record_span_encoded,
    to_region_key,  # noqa: E402
)
from tidelake.kvproto import cdcpb_pb2, cdcpb_pb2_grpc, metapb_pb2  # noqa: E402
from tidelake.capture.landing.lander import Lander  # noqa: E402
from tidelake.lake.layout import LakeLayout  # noqa: E402
from tidelake.sim.cluster import SimCluster  # noqa: E402
from tidelake.sim.replay import RegionHistory, load_histories, record_options  # noqa: E402
from tidelake.upstream.channels import make_channel  # noqa: E402
from tidelake.upstream.pd_client import PDClient, RegionInfo  # noqa: E402

FIRST_TABLE_ID = 1000
REPLAY_STORE_ID = 1
WAIT_S = 600.0
GIB = 2**30
DEFAULTS = {"rows": 60_000, "value_bytes": 200}
PRESETS = {"narrow": {"rows": 300_000, "value_bytes": 64}, "wide": {"rows": 100_000, "value_bytes": 1600}}


# ---- 1. recording ---------------------------------------------------------------------------


class _NullSink:
    def on_rows(self, rows) -> None:
        pass

    def on_resolved(self, table_id, span, ts) -> None:
        pass

    def on_table_resolved(self, table_id, ts) -> None:
        pass


def _wait_resolved(feed: EventFeedClient, subscriptions: list[int], ts: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while any(feed.table_resolved_ts(s) < ts for s in subscriptions):
        feed.wait(0.05)
        if time.monotonic() > deadline:
            raise TimeoutError(f"recording: resolved ts of {subscriptions} stuck below {ts}")


def record(directory: Path, rows: int, txn_rows: int, tables: int, regions: int, value_bytes: int,
           update_ratio: float, seed: int) -> Path:
    """Write the workload with a live subscriber and return the recording file."""
    rng = random.Random(seed)
    table_ids = [FIRST_TABLE_ID + i for i in range(tables)]
    handles_per_table = max(regions, rows // tables)
    options = {**record_options(directory), "min_ts_interval_s": 0.1}
    cluster = SimCluster(n_stores=1, seed=seed, split_check_interval_s=0, gc_interval_s=0, cdc_options=options)
    with cluster:
        for tid in table_ids:
            cluster.split_table(tid)
            cluster.split_table(tid + 1)
            for i in range(1, regions):
                key = to_region_key(record_key(tid, i * handles_per_table // regions))
                cluster.split_region(cluster.regions.locate(key).id, key)
        pd = PDClient([cluster.pd_address])
        try:
            with EventFeedClient(pd, _NullSink(), FeedOptions(workers=2)) as feed:
                start_ts = cluster.tso.next()
                # One subscription per region: sim/replay.py keys a recorded history by (stream,
                # request id), and a subscription's regions share its request id (see README).
                subscriptions = [
                    feed.subscribe(tid, (max(r.start_key, span[0]), r.end_key if r.end_key and r.end_key < span[1]
                                         else span[1]), start_ts)
                    for tid in table_ids
                    for span in [table_record_span_encoded(tid)]
                    for r in cluster.regions.scan(span[0], span[1], 1024)
                ]
                _wait_resolved(feed, subscriptions, start_ts + 1)
                _write(cluster, rng, table_ids, handles_per_table, rows, txn_rows, value_bytes, update_ratio)
                _wait_resolved(feed, subscriptions, cluster.tso.next())
        finally:
            pd.close()
    return Path(options["record_path"])


def _write(cluster: SimCluster, rng: random.Random, table_ids: list[int], handles: int, rows: int,
           txn_rows: int, value_bytes: int, update_ratio: float) -> None:
    """Percolator 2PC transactions; inserts take fresh handles in random order across regions."""
    fresh = {tid: rng.sample(range(handles), handles) for tid in table_ids}
    written: dict[int, list[int]] = {tid: [] for tid in table_ids}
    tso, mvcc = cluster.tso, cluster.mvcc
    done = 0
    while done < rows:
        tid = rng.choice(table_ids)
        batch: dict[bytes, bytes] = {}
        for _ in range(min(txn_rows, rows - done)):
            if written[tid] and (not fresh[tid] or rng.random() < update_ratio):
                handle = rng.choice(written[tid])
            else:
                handle = fresh[tid].pop()
                written[tid].append(handle)
            batch[record_key(tid, handle)] = rng.randbytes(value_bytes)
        keys = list(batch)
        start_ts = tso.next()
        mvcc.prewrite([("put", k, v) for k, v in batch.items()], keys[0], start_ts, 3000)
        mvcc.commit(keys, start_ts, tso.next())
        done += len(keys)


# ---- 2. replay server and what the recording holds ------------------------------------------


@dataclass
class Workload:
    histories: dict[int, RegionHistory]
    serialized: dict[int, list[bytes | int]]  # region -> serialized Event or resolved ts
    table_of_region: dict[int, int]
    start_ts: dict[int, int]  # table -> subscription start ts
    final_ts: dict[int, int]  # table -> last recorded resolved ts (min over its regions)
    entry_rows: int  # rows of every kind on the wire (PREWRITE, COMMIT, INITIALIZED, ...)
    resolved_items: int


def load_workload(path: Path) -> Workload:
    histories = load_histories([path])
    table_of_region, start_ts, final_ts = {}, {}, {}
    serialized: dict[int, list[bytes | int]] = {}
    entry_rows = resolved_items = 0
    for region_id, history in histories.items():
        tid = table_id_of(from_region_key(history.request.start_key))
        table_of_region[region_id] = tid
        start_ts[tid] = min(start_ts.get(tid, history.request.checkpoint_ts), history.request.checkpoint_ts)
        last = 0
        items: list[bytes | int] = []
        for item in history.items:
            if isinstance(item, int):
                last = item
                resolved_items += 1
                items.append(item)
            else:
                entry_rows += len(item.entries.entries)
                items.append(item.SerializeToString())
        serialized[region_id] = items
        final_ts[tid] = min(final_ts.get(tid, last), last)
    return Workload(histories, serialized, table_of_region, start_ts, final_ts, entry_rows, resolved_items)


class ReplayServer:
    """`tidelake sim-replay` in a child process (so it does not share our GIL)."""

    def __init__(self, recording: Path) -> None:
        # Its stderr (gRPC's notes about cancelled streams) goes to a file, shown only if it fails.
        self._log = recording.with_suffix(".replay.log")
        with open(self._log, "w") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "tidelake", "sim-replay", str(recording)],
                                         stdout=subprocess.PIPE, stderr=log, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("replay: "):
            self.close()
            raise RuntimeError(f"sim-replay did not start: {line!r} {self._log.read_text()[-2000:]}")
        self.address = line.split()[1]
        self.ps = psutil.Process(self.proc.pid)

    def cpu_s(self) -> float:
        times = self.ps.cpu_times()
        return times.user + times.system

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class RecordedPD:
    """PD answers for the replay: the recorded region pieces, all led by the replay store."""

    def __init__(self, workload: Workload, address: str) -> None:
        peer = metapb_pb2.Peer(id=1, store_id=REPLAY_STORE_ID)
        self._regions = sorted(
            (RegionInfo(metapb_pb2.Region(id=h.region_id, start_key=h.request.start_key,
                                          end_key=h.request.end_key, region_epoch=h.request.region_epoch,
                                          peers=[peer]), peer)
             for h in workload.histories.values()),
            key=lambda r: r.region.start_key)
        first = next(iter(workload.histories.values()))
        self.cluster_id = first.request.header.cluster_id
        self._store = metapb_pb2.Store(id=REPLAY_STORE_ID, address=address, version="8.5.0",
                                       state=metapb_pb2.Up)

    def scan_regions(self, start_enc: bytes, end_enc: bytes, limit: int = 1024) -> list[RegionInfo]:
        found = [r for r in self._regions
                 if (not r.region.end_key or r.region.end_key > start_enc)
                 and (not end_enc or r.region.start_key < end_enc)]
        return found[:limit]

    def batch_scan_regions(self, ranges: list[tuple[bytes, bytes]], limit: int = 1024) -> list[RegionInfo]:
        """Regions overlapping any of `ranges`, each once, in key order, at most `limit`: what the
        feed asks PD's BatchScanRegions (tidelake.upstream.pd_client)."""
        found: dict[int, RegionInfo] = {}
        for start, end in ranges:
            for info in self.scan_regions(start, end, limit):
                found.setdefault(info.region.id, info)
        return sorted(found.values(), key=lambda r: r.region.start_key)[:limit]

    def get_store(self, store_id: int) -> metapb_pb2.Store:
        return self._store

    def get_all_stores(self) -> list[metapb_pb2.Store]:
        return [self._store]


# ---- 3. the measured paths ------------------------------------------------------------------


def grpc_ceiling(workload: Workload, address: str) -> int:
    """Receive and parse every event on one multiplexed stream; returns entry rows received."""
    channel = make_channel(address, None)
    requests = [
        cdcpb_pb2.ChangeDataRequest(region_id=h.region_id, request_id=i + 1, region_epoch=h.request.region_epoch,
                                    checkpoint_ts=h.request.checkpoint_ts, start_key=h.request.start_key,
                                    end_key=h.request.end_key)
        for i, h in enumerate(workload.histories.values())
    ]
    # Half-closing after the registrations is fine here: the replay server still sends every history.
    stream = cdcpb_pb2_grpc.ChangeDataStub(channel).EventFeedV2(
        iter(requests), metadata=(("features", "stream-multiplexing"),))
    rows = resolved = 0
    try:
        for response in stream:
            for event in response.events:
                rows += len(event.entries.entries)
            if response.HasField("resolved_ts"):
                resolved += 1
            if rows >= workload.entry_rows and resolved >= workload.resolved_items:
                break
    finally:
        stream.cancel()
        channel.close()
    return rows


def parsed_histories(workload: Workload) -> dict[int, list]:
    return {rid: [i if isinstance(i, int) else cdcpb_pb2.Event.FromString(i) for i in items]
            for rid, items in workload.serialized.items()}


def state_ceiling(workload: Workload, parsed: dict[int, list]) -> list:
    """RegionFeedState over pre-parsed events, region after region; returns the row changes."""
    out = []
    for region_id, items in parsed.items():
        request = workload.histories[region_id].request
        state = RegionFeedState(1, region_id, (request.start_key, request.end_key),
                                workload.start_ts[workload.table_of_region[region_id]], request.checkpoint_ts)
        for item in items:
            if isinstance(item, int):
                state.handle_resolved(item)
            else:
                out.extend(state.handle_rows(list(item.entries.entries)))
    return out


class _CountingSink:
    def __init__(self, expected_rows: int, final_ts: dict[int, int], lander: Lander | None = None) -> None:
        self.cond = threading.Condition()
        self.rows = 0
        self.resolved: dict[int, int] = {}
        self._expected = expected_rows
        self._final = final_ts
        self._lander = lander

    def on_rows(self, rows) -> None:
        if self._lander is not None:
            self._lander.add_rows(rows)
        with self.cond:
            self.rows += len(rows)

    def on_resolved(self, table_id, span, ts) -> None:
        pass

    def on_table_resolved(self, table_id: int, ts: int) -> None:
        if self._lander is not None:
            self._lander.resolve(table_id, ts)
        with self.cond:
            self.resolved[table_id] = ts
            if self._done():
                self.cond.notify_all()

    def _done(self) -> bool:
        return self.rows >= self._expected and all(self.resolved.get(t, 0) >= ts for t, ts in self._final.items())

    def wait(self, feed: EventFeedClient) -> None:
        deadline = time.monotonic() + WAIT_S
        with self.cond:
            while not self._done():
                if feed.error is not None:
                    raise feed.error
                if time.monotonic() > deadline:
                    raise TimeoutError(f"puller: {self.rows}/{self._expected} rows, resolved {self.resolved}")
                self.cond.wait(0.1)


def puller(workload: Workload, address: str, expected_rows: int, workers: int, lander: Lander | None = None) -> int:
    """The EventFeedClient path; with a lander, until its watermarks are durable."""
    sink = _CountingSink(expected_rows, workload.final_ts, lander)
    with EventFeedClient(RecordedPD(workload, address), sink, FeedOptions(workers=workers)) as feed:
        for tid, start in sorted(workload.start_ts.items()):
            feed.subscribe(tid, table_record_span_encoded(tid), start)
        sink.wait(feed)
    if lander is not None:
        lander.flush()
        durable, _ = lander.durable_watermarks()
        missing = {t: ts for t, ts in workload.final_ts.items() if durable.get(t, 0) < ts}
        if missing:
            raise RuntimeError(f"lander watermarks not durable after flush: {missing}")
    return sink.rows


def lander_alone(rows: list, workload: Workload, lander: Lander) -> None:
    """The rows the state ceiling produced, in region-worker-sized batches, then resolve and flush."""
    for first in range(0, len(rows), 256):
        lander.add_rows(rows[first:first + 256])
    for tid, ts in workload.final_ts.items():
        lander.resolve(tid, ts)
    lander.flush()
    lander.close()


def lake_rows(root: str) -> int:
    return DeltaTable(LakeLayout(root).changelog).to_pyarrow_table(columns=["commit_ts"]).num_rows


def profile_puller(workload: Workload, address: str, expected: int, workers: int, path: str,
                   lake: str | None = None, top: int = 30) -> None:
    """One more puller run (untimed, not in the figures; with a lander into `lake`, until its
    watermarks are durable) with cProfile on each thread's CPU clock in every thread it starts
    (stream receivers, region workers, the lander's flusher), so waiting costs nothing; writes
    the merged stats to `path` and prints the top entries by own CPU time. gRPC's C threads are
    not Python and do not show; the main thread only waits, and its flush is not profiled."""
    profilers: list[tuple[threading.Thread, cProfile.Profile]] = []
    original = threading.Thread.run

    def profiled(thread: threading.Thread) -> None:
        profiler = cProfile.Profile(time.thread_time)
        profilers.append((thread, profiler))
        profiler.enable()
        try:
            original(thread)
        finally:
            profiler.disable()

    threading.Thread.run = profiled  # type: ignore[method-assign]
    lander = None
    try:
        if lake is not None:
            lander = Lander(LakeLayout(lake), "bench", flush_interval_s=1.0)
        delivered = puller(workload, address, expected, workers, lander)
    finally:
        threading.Thread.run = original  # type: ignore[method-assign]
        if lander is not None:
            lander.close()
    if delivered != expected:
        raise RuntimeError(f"profiled puller run delivered {delivered} of {expected} rows")
    for thread, _ in profilers:
        thread.join(5)  # a profile is read once its thread has ended
    done = [profiler for thread, profiler in profilers if not thread.is_alive()]
    stats = pstats.Stats(*done)
    stats.dump_stats(path)
    print(f"\n## Profile of one {'puller+lander' if lander else 'puller'} run ({len(done)} of {len(profilers)} "
          f"threads ended), top {top} by own CPU time; stats in {path}\n")
    stats.sort_stats("tottime").print_stats(top)


# ---- driver ---------------------------------------------------------------------------------


def run(rows: int, txn_rows: int, tables: int, regions: int, value_bytes: int, update_ratio: float,
        repeats: int, workers: int, seed: int, profile: str | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-puller-") as tmp:
        started = time.perf_counter()
        recording = record(Path(tmp) / "rec", rows, txn_rows, tables, regions, value_bytes, update_ratio, seed)
        workload = load_workload(recording)
        print(f"\nrecorded {recording.stat().st_size / MIB:.1f} MiB in {time.perf_counter() - started:.1f} s: "
              f"{len(workload.histories)} regions, {workload.entry_rows:,} entry rows, "
              f"{workload.resolved_items:,} resolved ts")
        parsed = parsed_histories(workload)
        changes = state_ceiling(workload, parsed)
        expected = len(changes)
        payload = sum(len(r.key) + len(r.value) + len(r.old_value) for r in changes) / MIB
        server = ReplayServer(recording)
        try:
            results = _measure(workload, server, changes, expected, repeats, workers, tmp)
            if profile:
                profile_puller(workload, server.address, expected, workers, f"{profile}-puller.pstats")
                profile_puller(workload, server.address, expected, workers, f"{profile}-puller+lander.pstats",
                               f"{tmp}/lake-profile")
        finally:
            server.close()
    if any(r["rows"] != expected for r in results if r["path"] != "grpc ceiling"):
        raise RuntimeError(f"a path delivered a different row count than the {expected} committed rows: {results}")
    for r in results:
        r.update(_rates(expected, payload, r["wall_s"], r["cpu_s"]))
    return _report(results, expected, payload, workload)


def _rates(rows: int, payload_mib: float, wall_s: float, cpu_s: float) -> dict[str, float]:
    """One run's committed rows/s and MiB/s (wall) and this process's CPU seconds per GiB."""
    return {"rows_per_s": rows / wall_s, "mib_per_s": payload_mib / wall_s,
            "cpu_s_per_gib": cpu_s / (payload_mib * MIB / GIB)}


def _measure(workload: Workload, server: ReplayServer, changes: list, expected: int, repeats: int,
             workers: int, tmp: str) -> list[dict]:
    results = []

    def timed(path: str, fn, setup=lambda attempt: attempt) -> None:
        for attempt in range(repeats):
            arg = setup(attempt)
            server_cpu = server.cpu_s()
            with RssSampler() as rss, Timer() as timer:
                delivered = fn(arg)
            results.append({"path": path, "attempt": attempt, "rows": delivered, "wall_s": timer.wall_s,
                            "cpu_s": timer.cpu_s, "server_cpu_s": server.cpu_s() - server_cpu,
                            "rss_growth_mib": (rss.peak - rss.first) / MIB})

    def with_lander(lander: Lander) -> int:
        try:
            return puller(workload, server.address, expected, workers, lander)
        finally:
            lander.close()

    def alone(lander: Lander) -> int:
        lander_alone(changes, workload, lander)
        return expected

    def new_lander(name: str):
        # created untimed: opening/creating the three Delta tables is start-up, not throughput
        return lambda attempt: Lander(LakeLayout(f"{tmp}/lake-{name}-{attempt}"), "bench", flush_interval_s=1.0)

    timed("grpc ceiling", lambda _: grpc_ceiling(workload, server.address))
    # fresh parse per attempt (matching moves prewrite values into commits), outside the clock
    timed("state ceiling", lambda parsed: len(state_ceiling(workload, parsed)), lambda _: parsed_histories(workload))
    timed("puller", lambda _: puller(workload, server.address, expected, workers))
    timed("lander alone", alone, new_lander("alone"))
    timed("puller+lander", with_lander, new_lander("e2e"))
    for name in ("alone", "e2e"):
        for attempt in range(repeats):
            landed = lake_rows(f"{tmp}/lake-{name}-{attempt}")
            if landed != expected:
                raise RuntimeError(f"lake {name}-{attempt} holds {landed} rows, {expected} were committed")
    return results


def _report(results: list[dict], expected: int, payload_mib: float, workload: Workload) -> dict:
    summary: dict[str, dict] = {}
    by_path: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        by_path[r["path"]].append(r)
    for path, runs in by_path.items():
        wall = median(r["wall_s"] for r in runs)
        cpu = median(r["cpu_s"] for r in runs)
        summary[path] = {
            "wall_s": wall, "wall_min_s": min(r["wall_s"] for r in runs), "wall_max_s": max(r["wall_s"] for r in runs),
            "rows_per_s": expected / wall, "mib_per_s": payload_mib / wall,
            "cpu_s": cpu, "rows_per_cpu_s": expected / cpu if cpu else 0.0,
            "server_cpu_s": median(r["server_cpu_s"] for r in runs),
            "rss_growth_mib": max(r["rss_growth_mib"] for r in runs),
        }
        for rate in ("rows_per_s", "mib_per_s", "cpu_s_per_gib"):
            values = [r[rate] for r in runs]
            summary[path][rate] = median(values)
            summary[path][f"{rate}_min"] = min(values)
            summary[path][f"{rate}_max"] = max(values)
    s = summary
    ratios = {
        "puller / grpc ceiling (wall rows/s)": s["puller"]["rows_per_s"] / s["grpc ceiling"]["rows_per_s"],
        "puller / state ceiling (wall rows/s)": s["puller"]["rows_per_s"] / s["state ceiling"]["rows_per_s"],
        "puller / state ceiling (rows per CPU s)": s["puller"]["rows_per_cpu_s"] / s["state ceiling"]["rows_per_cpu_s"],
        "puller+lander / puller (wall rows/s)": s["puller+lander"]["rows_per_s"] / s["puller"]["rows_per_s"],
        "puller+lander / lander alone (wall rows/s)":
            s["puller+lander"]["rows_per_s"] / s["lander alone"]["rows_per_s"],
        "grpc ceiling / puller (CPU s per GiB)": s["grpc ceiling"]["cpu_s_per_gib"] / s["puller"]["cpu_s_per_gib"],
        "state ceiling / puller (CPU s per GiB)": s["state ceiling"]["cpu_s_per_gib"] / s["puller"]["cpu_s_per_gib"],
    }
    replayed = ("grpc ceiling", "puller", "puller+lander")
    print(f"\n## Puller throughput: {expected:,} committed rows, {payload_mib:.1f} MiB key+value+old value "
          f"({payload_mib * MIB / expected:,.0f} B per row), {len(workload.histories)} regions, "
          f"median (min..max) of {len(next(iter(by_path.values())))}\n")
    print(markdown_table(
        ["path", "rows/s", "MiB/s", "our CPU s per GiB", "median s", "our CPU s", "rows per CPU s", "replay CPU s",
         "peak RSS growth MiB"],
        [[p, f"{v['rows_per_s']:,.0f} ({v['rows_per_s_min']:,.0f}..{v['rows_per_s_max']:,.0f})",
          f"{v['mib_per_s']:.1f} ({v['mib_per_s_min']:.1f}..{v['mib_per_s_max']:.1f})",
          f"{v['cpu_s_per_gib']:.2f} ({v['cpu_s_per_gib_min']:.2f}..{v['cpu_s_per_gib_max']:.2f})",
          v["wall_s"], v["cpu_s"], v["rows_per_cpu_s"], v["server_cpu_s"] if p in replayed else "-",
          v["rss_growth_mib"]] for p, v in summary.items()]))
    print()
    print(markdown_table(
        ["path", "run", "rows/s", "MiB/s", "our CPU s per GiB", "wall s", "replay CPU s"],
        [[r["path"], r["attempt"], r["rows_per_s"], r["mib_per_s"], r["cpu_s_per_gib"], r["wall_s"],
          r["server_cpu_s"] if r["path"] in replayed else "-"] for r in results]))
    print()
    print(markdown_table(["ratio", "value"], [[k, v] for k, v in ratios.items()]))
    load_end = round(os.getloadavg()[0], 1)
    print(f"\n# load at the end {load_end}")
    return {"rows": expected, "payload_mib": payload_mib, "bytes_per_row": payload_mib * MIB / expected,
            "regions": len(workload.histories), "entry_rows": workload.entry_rows, "load_avg_1m_end": load_end,
            "paths": summary, "ratios": ratios, "runs": results}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS),
                        help="row shape (issue #31): narrow ~100 B rows, wide ~2 KiB rows; sets --rows, --value-bytes")
    parser.add_argument("--rows", type=int, help=f"row changes written while recording (default {DEFAULTS['rows']})")
    parser.add_argument("--txn-rows", type=int, default=10)
    parser.add_argument("--tables", type=int, default=2)
    parser.add_argument("--regions", type=int, default=4, help="regions per table")
    parser.add_argument("--value-bytes", type=int, help=f"bytes of each value (default {DEFAULTS['value_bytes']})")
    parser.add_argument("--update-ratio", type=float, default=0.3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4, help="EventFeedClient region workers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results as JSON here")
    parser.add_argument("--profile", metavar="PREFIX", help="after the measured runs, profile one puller run and "
                        "one puller+lander run (cProfile): PREFIX-puller.pstats, PREFIX-puller+lander.pstats")
    args = parser.parse_args(argv)
    for name, value in PRESETS.get(args.preset, DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    env = print_environment()
    results = run(args.rows, args.txn_rows, args.tables, args.regions, args.value_bytes, args.update_ratio,
                  args.repeats, args.workers, args.seed, args.profile)
    write_json(args.json, "puller", env, results)
    return results


if __name__ == "__main__":
    main()
