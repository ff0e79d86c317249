"""PullerRunner: one puller shard of a changefeed, from PD and TiKV into the lake.

A first run starts at one TSO T (shards agree on it through shard 0's schema snapshot) and lands
"complete up to T" before opening the feed; a later run resumes from its durable watermarks, so
nothing is skipped past what is durable. Invariant 1 is the lander's: every resolved ts reaches
it after the rows it covers. Owner: the changefeed's shard.

More: docs/internals.md#puller_runner.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tidelake import tso
from tidelake.capture.changefeed.copied_rows import land_copied_rows
from tidelake.capture.changefeed.ddl_puller import (
    DdlPuller,
    Fence,
    JobRowDecoder,
    PulledJob,
)
from tidelake.capture.changefeed.filter_change import filter_change, request_joins, say_left
from tidelake.capture.changefeed.lake_registration import register_lake
from tidelake.capture.changefeed.puller_metrics import MetricsEndpoint, PullerMetrics, PullerState
from tidelake.capture.changefeed.reshard import Retirement, adopt, ddl_landed, other_changefeeds, shard_suffix
from tidelake.capture.changefeed.running_jobs import RunningJob, running_jobs, running_table_ids, tables_before
from tidelake.capture.changefeed.table_joins import TableJoins
from tidelake.capture.changefeed.upstream_identity import check_cluster, check_schema_version, remember_cluster
from tidelake.capture.eventfeed.client import EventFeedClient, FeedOptions
from tidelake.capture.eventfeed.prewrites import check_spill_dir
from tidelake.capture.eventfeed.prewrites import memory_for_quota as prewrite_memory_for_quota
from tidelake.capture.eventfeed.stale_locks import RegionLockResolver
from tidelake.capture.landing.app_txn import LakeConflictError
from tidelake.capture.landing.lander import Lander, LanderClosedError
from tidelake.capture.landing.resident_memory import ResidentGrowth
from tidelake.capture.puller_errors import PullerError
from tidelake.codec.keys import DDL_JOB_TABLE_ID, table_record_span_encoded
from tidelake.config import ChangefeedConfig
from tidelake.errors import InputError, StopRequested
from tidelake.lake.ddl_log import schema_version_at, snapshot_rows, start_snapshot_ts
from tidelake.lake.layout import LakeLayout
from tidelake.lake.lease import hold, puller_lease
from tidelake.lake.row_change import RowChange
from tidelake.lake.schema_history import SchemaHistory
from tidelake.lake.store_room import refusal
from tidelake.lake.watermarks import read_by_puller
from tidelake.upstream.gc_safepoint import GCSafepointKeeper
from tidelake.upstream.kv_snapshot import SnapshotReader
from tidelake.upstream.pd_client import PDClient
from tidelake.upstream.schema_snapshot import load_schema
from tidelake.upstream.schema_tracker import SchemaTracker, TrackedTable
from tidelake.upstream.upstream_errors import UpstreamError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`: it pulls the tables whose logical id the config maps to it."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise InputError(f"shard {self.index}/{self.count}: need 0 <= I < N")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """'I/N' as given to `tidelake pull --shard`."""
        index, sep, count = text.partition("/")
        if not sep or not index.strip().isdigit() or not count.strip().isdigit():
            raise InputError(f"--shard {text!r}: expected I/N like 0/4")
        return cls(int(index), int(count))

    @property
    def lands_ddl(self) -> bool:
        return self.index == 0

    def suffix(self) -> str:
        return shard_suffix(self.index, self.count)


@dataclass(frozen=True)
class RunOptions:
    max_run_s: float | None = None  # stop gracefully after this long (Airflow @continuous reruns us)
    progress_interval_s: float = 10.0
    gc_advance_interval_s: float = 10.0  # how often durable progress moves the GC safepoint up
    first_run_wait_s: float = 300.0  # shards > 0: how long to wait for shard 0's snapshot
    table_starts_poll_s: float = 2.0  # how often to look for tables bootstrap asks to add
    join_lead_s: float = 10.0  # shards > 1: how far ahead of PD's now an added table's join ts is
    # After a shard-count change: how long old shards' watermarks must stay unrewritten before
    # they are retired (None: 6 flush intervals, at least a minute; tidelake.capture.changefeed.reshard).
    retire_grace_s: float | None = None
    metrics_port: int | None = None  # serve /metrics here while running (0: a free port); None: no endpoint
    metrics_addr: str = "0.0.0.0"
    feed: FeedOptions = field(default_factory=FeedOptions)
    # The puller has its process to itself: its lander also holds back while the process's RSS grew
    # by more than the memory quota (tidelake.capture.landing.resident_memory; `tidelake pull` sets it).
    watch_rss: bool = False


@dataclass(frozen=True)
class Progress:
    elapsed_s: float
    tables: int
    rows: int
    rows_per_s: float
    bytes: int  # key + value + old value bytes of those rows
    mib_per_s: float
    ddl_lag_s: float
    table_lag_s: dict[int, float]  # physical id -> seconds behind PD's now
    buffered_bytes: int
    landing_paused: str | None = None  # why flushes wait for the store (tidelake.lake.store_room)


@dataclass(frozen=True)
class RunSummary:
    start_ts: int  # the DDL start ts of this run (S, or T on a first run)
    rows: int
    jobs: int
    table_resolved: dict[int, int]
    ddl_resolved: int
    left: str | None = None  # a stop that could not land or release everything says what here
    bytes: int = 0  # key + value + old value bytes of those rows


class PullerRunner:
    """Runs until stop(), the run-length limit, or a fatal feed error (re-raised by run())."""

    def __init__(
        self,
        config: ChangefeedConfig,
        shard: Shard = Shard(),
        options: RunOptions = RunOptions(),
        progress: Callable[[Progress], None] | None = None,
    ) -> None:
        if shard.count != config.puller.shards:
            raise InputError(
                f"{config.source}: [puller].shards is {config.puller.shards} but --shard says {shard.count} shards"
            )
        self.config = config
        self.shard = shard
        self.options = options
        self._progress = progress
        self._stop = threading.Event()
        self._mu = threading.Lock()
        self._actions: list[tuple[str, int, int]] = []  # ('subscribe'|'unsubscribe', physical id, ts)
        self._table_resolved: dict[int, int] = {}
        self._leaving: dict[int, int] = {}  # physical id -> finished ts of the job it leaves at
        self._draining: dict[int, int] = {}  # physical id -> L of its `filter` row: fed until L - 1
        self._table_joins: TableJoins | None = None
        self._reported_ddl = 0
        self._rows = 0
        self._jobs = 0
        self._lander: Lander | None = None
        self._ddl: DdlPuller | None = None
        self._retirement: Retirement | None = None
        self._feed: EventFeedClient | None = None
        self._keeper: GCSafepointKeeper | None = None
        self._reader: SnapshotReader | None = None
        self._gc_safepoint: int | None = None
        self.metrics = PullerMetrics(self.metrics_state)
        self.metrics_endpoint: MetricsEndpoint | None = None

    @property
    def feed_id(self) -> str:
        """The lander's changefeed id: one app id (and watermark partition) per shard."""
        return self.config.changefeed_id + self.shard.suffix()

    def stop(self) -> None:
        """Ask run() to flush and return; safe from a signal handler (only sets a flag)."""
        self._stop.set()

    # --- run -----------------------------------------------------------------------------

    def run(self) -> RunSummary:
        """Pull until stopped. A stop in any state (PD or stores unreachable, lake writes failing)
        ends retries at once (one last attempt each), flushes what it can, and returns with
        `left` saying what did not land; only errors that are not a stop are raised."""
        cfg = self.config
        started = time.monotonic()
        try:
            check_spill_dir(cfg.puller.spill_dir)
        except OSError as exc:
            raise InputError(f"{cfg.source}: [puller].spill_dir: cannot create a file in {cfg.puller.spill_dir!r} "
                             f"({exc.strerror or exc})") from None
        if self.options.metrics_port is not None:
            try:
                self.metrics_endpoint = MetricsEndpoint(self.metrics.registry, self.options.metrics_port,
                                                        self.options.metrics_addr)
            except OSError as exc:
                raise InputError(f"metrics endpoint on {self.options.metrics_addr}:{self.options.metrics_port}: "
                                 f"{exc.strerror or exc}") from None
        try:
            return self._run(cfg, started)
        finally:
            if self.metrics_endpoint is not None:
                self.metrics_endpoint.close()

    def _run(self, cfg: ChangefeedConfig, started: float) -> RunSummary:
        try:
            pd = PDClient(cfg.upstream.endpoints("tidelake pull"), cfg.upstream.tls,
                          caller_id=f"tidelake-pull-{self.feed_id}",
                          cancel=self._stop)
        except StopRequested as exc:
            return RunSummary(0, 0, 0, {}, 0, left=f"stopped before PD answered ({exc}); the lake is unchanged")
        layout = LakeLayout.from_config(cfg.lake)
        # One puller per shard: a second one waits out a lease it cannot take over at once (its
        # holder on another host may be dead), then refuses in one line naming the holder.
        wait_s = max(layout.leases.wait_s, layout.leases.ttl_s + layout.leases.renew_s)
        names = {self.feed_id: (puller_lease(self.feed_id), f"changefeed {self.feed_id}")}
        pulling = False  # from then on _pull owns `pd` and closes it
        try:
            try:  # before anything lands or the GC service safepoint is taken: not another lake's changefeed
                register_lake(pd, cfg, layout)
            except StopRequested as exc:
                return RunSummary(0, 0, 0, {}, 0, left=f"stopped before PD's etcd answered ({exc}); the lake is unchanged")
            with hold(layout, names, wait_s, self._stop) as leases:
                if self.feed_id in leases.refused:
                    raise leases.refused[self.feed_id]
                pulling = True
                return self._pull(cfg, pd, started, layout)
        finally:
            if not pulling:  # refused, or the lease store failed: nothing else closes it
                pd.close()

    def _pull(self, cfg: ChangefeedConfig, pd: PDClient, started: float, layout: LakeLayout) -> RunSummary:
        reader = self._reader = SnapshotReader(pd, cfg.upstream.tls)
        keeper = self._keeper = GCSafepointKeeper(pd, cfg.gc_service_id + self.shard.suffix(), cfg.upstream.gc_ttl_s)
        feed: EventFeedClient | None = None
        lander = self._lander = Lander(
            layout, self.feed_id, cfg.puller.memory_quota_bytes, cfg.puller.flush_interval_s,
            cfg.puller.flush_bytes, cfg.lake.commit_bucket_s, self.metrics.lander,
            compact_interval_s=cfg.puller.compact_interval_s,
            resident=ResidentGrowth() if self.options.watch_rss else None,
        )
        joins = self._table_joins = TableJoins(
            cfg.changefeed_id, (self.shard.index, self.shard.count), cfg.puller.shard_of, layout, lander, self._mu,
            self._feed_from, pd.get_ts, self.options.join_lead_s,
        )
        ddl_start, left = 0, None
        try:
            ddl_start, table_starts = self._prepare(pd, reader, keeper, layout, lander, started)
            keeper.start()
            if self.shard.lands_ddl:
                grace = self.options.retire_grace_s or max(60.0, 6 * cfg.puller.flush_interval_s)
                self._retirement = Retirement(layout, cfg.changefeed_id, self.shard.count, cfg.gc_service_id,
                                              lambda service: pd.update_service_gc_safepoint(service, 0, 0), grace)
            feed_options = replace(self.options.feed, spill_dir=cfg.puller.spill_dir,
                                   prewrite_memory_bytes=prewrite_memory_for_quota(
                                       cfg.puller.memory_quota_bytes, self.options.feed.prewrite_memory_bytes))
            feed = self._feed = EventFeedClient(pd, _Sink(self), feed_options, cfg.upstream.tls,
                                                lock_resolver=RegionLockResolver(pd, cfg.upstream.tls)).start()
            subscriptions = {DDL_JOB_TABLE_ID: feed.subscribe(DDL_JOB_TABLE_ID, _span(DDL_JOB_TABLE_ID), ddl_start)}
            for pid, ts in sorted(table_starts.items()):
                subscriptions[pid] = feed.subscribe(pid, _span(pid), ts)
            log.info("pulling %d tables of changefeed %s from ts %d", len(table_starts), self.feed_id, ddl_start)
            self._loop(pd, feed, keeper, lander, subscriptions, started)
        except StopRequested as exc:
            left = f"stopped while waiting ({exc})"
        finally:
            lander.refuse_rows()  # region workers waiting at a full quota end now, not after the feed's join timeout
            if feed is not None:
                feed.close()
            try:
                left = self._wind_down(lander, joins, keeper, left)
            finally:
                keeper.stop()
                reader.close()
                pd.close()
        # Region workers may fail because the wind-down ended their wait (the lander refusing rows, or
        # on a stop PD retries): what they held is above the durable watermarks, re-pulled next run.
        error = feed.error if feed else None
        stop_casualty = isinstance(error, LanderClosedError) or (
            self._stop.is_set() and isinstance(error, StopRequested))
        if feed is not None and feed.error is not None and not stop_casualty:
            raise feed.error
        tables, ddl = lander.durable_watermarks()
        return RunSummary(ddl_start, self._rows, self._jobs, tables, ddl, left, lander.payload_bytes_added())

    def _wind_down(self, lander: Lander, joins: TableJoins, keeper: GCSafepointKeeper, left: str | None) -> str | None:
        """Land what is buffered and move the GC safepoint; on a stop, a failure of either is
        reported in the returned `left` (full trace in the log) instead of raised."""
        notes = [left] if left else []
        try:
            lander.close()
        except LakeConflictError:
            raise
        except Exception as exc:
            if not self._stop.is_set():
                raise
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            if refusal(exc) is None:
                log.exception("final flush of %s failed", self.feed_id)
            notes.append(f"the final flush failed ({first}): {lander.buffered_bytes():,} buffered bytes not landed, "
                         "re-pulled from the durable watermarks by the next run")
            return "; ".join(notes)
        joins.confirm()  # landed by the close: bootstrap may go on
        try:
            self._advance_gc(keeper, lander)
        except (StopRequested, UpstreamError) as exc:
            if not self._stop.is_set():
                raise
            log.warning("GC safepoint of %s not advanced on stop: %s", self.feed_id, exc)
            notes.append("the GC safepoint was not advanced (PD did not answer); it still holds at the last one")
        return "; ".join(notes) or None

    def _prepare(self, pd: PDClient, reader: SnapshotReader, keeper: GCSafepointKeeper, layout: LakeLayout,
                 lander: Lander, started: float) -> tuple[int, dict[int, int]]:
        """Choose where each span starts; on a first run, land the snapshot at T first."""
        durable_tables, durable_ddl = lander.durable_watermarks()
        adopted = None
        if durable_ddl == 0:
            by_puller = read_by_puller(layout)
            others = other_changefeeds(by_puller, self.config.changefeed_id)
            if others:
                raise InputError(f"{self.config.source}: [changefeed] id is {self.config.changefeed_id!r}, but the lake "
                                 f"at {layout.root} is fed by changefeed {others[0]!r}: a lake holds one changefeed. "
                                 f"Set id = {others[0]!r} to go on with it, or give this changefeed its own [lake] root")
            adopted = adopt(by_puller, self.config.changefeed_id, self.shard.count)
        if adopted is not None:
            durable_tables, durable_ddl = dict(adopted.table_resolved), adopted.ddl_resolved
            log.info("changefeed %s ran with other shards before (%s): %s adopts their watermarks, DDL from ts %d",
                     self.config.changefeed_id, ", ".join(adopted.previous), self.feed_id, durable_ddl)
        first_run = durable_ddl == 0
        start = self._first_run_ts(pd, layout, started) if first_run else durable_ddl
        # Before anything lands: a wiped, restored or other cluster must not be re-recorded as new.
        now = pd.get_ts()
        check_cluster(layout, self.config.changefeed_id, ",".join(self.config.upstream.pd), pd.cluster_id, now,
                      max([durable_ddl, *durable_tables.values()]))
        keeper.ensure_not_below_gc(start)
        snapshot = load_schema(reader, start)
        check_schema_version(layout, pd.cluster_id, start, snapshot.schema_version, schema_version_at(layout, start))
        remember_cluster(layout, self.config.changefeed_id, pd.cluster_id, now)
        decoder = JobRowDecoder.load(reader, start)
        tracker = SchemaTracker(snapshot, self.config.filter.table_filter(), lambda ts: load_schema(reader, ts),
                                lambda ts: running_table_ids(reader, decoder, ts))
        if not first_run:
            running = running_jobs(reader, decoder, start)
            if running and not self.shard.lands_ddl:
                self._wait_for_ddl_rows(layout, start, running, started)
            _restore_running_jobs(tracker, running, layout)
        added = self._table_joins.restart(tracker, durable_tables, start)
        if added:
            tracker.add_tables(added)  # tables added to the running feed earlier stay in it
        draining: dict[int, int] = {}
        if not first_run:
            change = filter_change(tracker, layout, self.config.changefeed_id, durable_tables,
                                   self._table_joins.starts.latest(self.config.changefeed_id))
            tracker.hold_back(set(change.held))
            if self.shard.lands_ddl:
                request_joins(self._table_joins.starts, self.config.changefeed_id, change.unrequested)
                say_left(self.config.changefeed_id, change.left, change.leaving)
                lander.add_ddl(change.leaving)  # landed by the flusher, which retries a failed write
            draining = {pid: at for pid, (lid, at) in change.draining.items()
                        if self.config.puller.shard_of(lid) == self.shard.index and pid in durable_tables}
        self._ddl = DdlPuller(decoder, tracker, start)
        self._table_joins.attach(self._ddl)
        owned = self._owned(tracker.replicated())
        if first_run or adopted is not None:  # this shard's own rows first, so a restart resumes from them
            if first_run:
                if self.shard.lands_ddl:
                    lander.add_ddl(snapshot_rows(tracker, snapshot.schema_version))
                durable_tables = {pid: start for pid in owned}
            since = start if first_run else start_snapshot_ts(layout) or start
            for pid, table in owned.items():
                if pid not in durable_tables:  # its previous owner never landed a watermark
                    log.warning("table %s.%s (physical id %d): no previous shard claims it; pulled from the "
                                "changefeed's start ts %d", table.db, table.table, pid, since)
                    durable_tables[pid] = since
                lander.resolve(pid, durable_tables[pid])
            lander.resolve_ddl(start)
            lander.flush()
        starts = {}
        for pid, table in owned.items():
            if pid not in durable_tables:
                log.warning("table %s.%s (physical id %d) has no durable watermark: it joins at ts %d",
                            table.db, table.table, pid, start)
            starts[pid] = durable_tables.get(pid, start)
        for pid, at in draining.items():
            log.info("physical id %d leaves the changefeed at ts %d, after its last DDL: fed from %d until %d",
                     pid, at, durable_tables[pid], at - 1)
            starts[pid] = durable_tables[pid]
        self._draining = draining
        self._table_resolved = dict(starts)
        self._reported_ddl = start
        checkpoint = min([start, *starts.values()])
        if checkpoint < start:
            keeper.ensure_not_below_gc(checkpoint)
        return start, starts

    def _first_run_ts(self, pd: PDClient, layout: LakeLayout, started: float) -> int:
        """The lake's snapshot ts if one was landed (a shard 0 crash, or another shard), else
        shard 0 picks the config start ts or PD's now; other shards wait for shard 0.

        Every shard must start at the same T: a shard starting later at T' would take a table
        created in (T, T'] as present at T' and miss its rows in (CREATE, T']. Shard 0's start
        row (`snapshot_rows`) records T even when no table exists yet."""
        while True:
            landed = start_snapshot_ts(layout)
            if landed is not None:
                if self.config.start_ts is not None and self.config.start_ts != landed:
                    log.warning("the lake already starts at ts %d; config start ts %d is ignored",
                                landed, self.config.start_ts)
                return landed
            if self.shard.lands_ddl:
                now = pd.get_ts()
                if self.config.start_ts is not None and self.config.start_ts > now:
                    raise InputError(f"{self.config.source}: [changefeed].start_ts {self.config.start_ts} "
                                     f"is later than the upstream's current TSO {now}")
                return self.config.start_ts or now
            self._wait_for_shard_0(started, f"the starting schema snapshot in {layout.ddl}")

    def _wait_for_ddl_rows(self, layout: LakeLayout, start: int, running: list[RunningJob], started: float) -> None:
        """A shard > 0 restarting inside DDL jobs takes their tables from the lake's DDL history
        (running_jobs), which shard 0 lands: wait until it holds every job up to this shard's
        restart ts, as a first run waits for shard 0's snapshot."""
        while (landed := ddl_landed(read_by_puller(layout), self.config.changefeed_id)) < start:
            self._wait_for_shard_0(started, f"the DDL history up to ts {start} (it holds it up to ts {landed}; this "
                                   f"shard restarts inside DDL job(s) {', '.join(str(r.job.id) for r in running)})")

    def _wait_for_shard_0(self, started: float, what: str) -> None:
        """One second more of waiting for shard 0 to land `what`, or the stop or the refusal."""
        if self._stop.is_set():
            raise StopRequested(f"stopped while waiting for shard 0 to land {what}")
        if time.monotonic() - started > self.options.first_run_wait_s:
            raise PullerError(f"shard {self.shard.index}/{self.shard.count} waited {self.options.first_run_wait_s:.0f}s "
                              f"for shard 0 to land {what}: start shard 0 first")
        time.sleep(1.0)

    def _owned(self, tables: dict[int, TrackedTable]) -> dict[int, TrackedTable]:
        return {pid: t for pid, t in tables.items() if self.config.puller.shard_of(t.logical_id) == self.shard.index}

    def _loop(self, pd: PDClient, feed: EventFeedClient, keeper: GCSafepointKeeper, lander: Lander,
              subscriptions: dict[int, int], started: float) -> None:
        deadline = None if self.options.max_run_s is None else started + self.options.max_run_s
        next_gc = next_progress = next_join = next_retire = time.monotonic()
        last_rows, last_bytes, last_time = 0, 0, next_progress
        while not self._stop.is_set() and feed.error is None:
            self._apply_actions(feed, subscriptions)
            now = time.monotonic()
            if now >= next_gc:
                self._advance_gc(keeper, lander)
                if self.metrics_endpoint is not None:  # only its scrapes read the cluster safepoint
                    self._gc_safepoint = pd.get_gc_safepoint()
                next_gc = now + self.options.gc_advance_interval_s
            if self._retirement is not None and now >= next_retire:
                self._retirement.poll()
                next_retire = now + self._retirement.poll_interval_s
            if now >= next_join:
                self._table_joins.poll()
                next_join = now + self.options.table_starts_poll_s
            if self._progress is not None and now >= next_progress:
                rows, nbytes, seconds = self._rows, lander.payload_bytes_added(), max(now - last_time, 1e-3)
                rates = ((rows - last_rows) / seconds, (nbytes - last_bytes) / seconds / 2**20)
                self._progress(self._progress_report(pd, lander, now - started, (rows, nbytes), rates))
                last_rows, last_bytes, last_time = rows, nbytes, now
                next_progress = now + self.options.progress_interval_s
            if deadline is not None and now >= deadline:
                log.info("run length of %.0fs reached; flushing and stopping", self.options.max_run_s)
                break
            self._stop.wait(0.1)

    def _feed_from(self, tables: dict[int, TrackedTable], ts: int) -> list[int]:
        """Feed this shard's share of tables joining at `ts` (bootstrap requests; lock held)."""
        owned = self._owned(tables)
        for pid in owned:
            self._lander.resolve(pid, ts)
            self._table_resolved[pid] = ts
            self._actions.append(("subscribe", pid, ts))
        return sorted(owned)

    def _apply_actions(self, feed: EventFeedClient, subscriptions: dict[int, int]) -> None:
        with self._mu:
            actions, self._actions = self._actions, []
        for kind, pid, ts in actions:
            if kind == "subscribe" and pid not in subscriptions:
                subscriptions[pid] = feed.subscribe(pid, _span(pid), ts)
            elif kind == "unsubscribe" and pid in subscriptions:
                feed.unsubscribe(subscriptions.pop(pid))

    def _advance_gc(self, keeper: GCSafepointKeeper, lander: Lander) -> None:
        """Hold GC at the lowest durable ts a restart would read from (docs/metadata.md#who-registers-what)."""
        tables, ddl = lander.durable_watermarks()
        with self._mu:
            fed = [pid for pid in self._table_resolved if pid in tables]
        checkpoint = min([ddl, *(tables[pid] for pid in fed)])
        if checkpoint > 0:
            keeper.advance(checkpoint)

    def _progress_report(self, pd: PDClient, lander: Lander, elapsed: float, volume: tuple[int, int],
                         rates: tuple[float, float]) -> Progress:
        """Progress with (rows, bytes) so far and their rates (rows/s, MiB/s) since the last report."""
        now_ts = pd.get_ts()
        with self._mu:
            lags = {pid: tso.lag_seconds(ts, now_ts) for pid, ts in self._table_resolved.items()}
            ddl_lag = tso.lag_seconds(self._reported_ddl, now_ts)
        return Progress(elapsed, len(lags), volume[0], rates[0], volume[1], rates[1], ddl_lag, lags,
                        lander.buffered_bytes(), lander.paused())

    def metrics_state(self) -> PullerState | None:
        """What the metrics endpoint reads at a scrape (any thread); None before the lander exists."""
        lander, feed, keeper = self._lander, self._feed, self._keeper
        if lander is None:
            return None
        with self._mu:
            resolved, ddl, rows = dict(self._table_resolved), self._reported_ddl, self._rows
        errors, reconnects = feed.error_counts() if feed is not None else ({}, {})
        prewrite_bytes, spilled = feed.prewrite_usage() if feed is not None else (0, 0)
        return PullerState(
            self.feed_id, resolved, ddl, rows, self.config.puller.memory_quota_bytes,
            regions=feed.region_states() if feed is not None else {},
            region_errors=errors, stream_reconnects=reconnects,
            prewrite_memory_bytes=prewrite_bytes, prewrite_spilled_rows=spilled,
            checkpoint_ts=keeper.checkpoint if keeper is not None else None,
            gc_safepoint_ts=self._gc_safepoint, gc_ttl_s=self.config.upstream.gc_ttl_s,
        )

    # --- feed callbacks (region worker threads) ------------------------------------------

    def _on_rows(self, rows: list[RowChange]) -> None:
        if rows[0].table_id == DDL_JOB_TABLE_ID:
            with self._mu:
                self._ddl.on_rows(rows)
            return
        self._lander.add_rows(rows)
        with self._mu:
            self._rows += len(rows)

    def _on_table_resolved(self, table_id: int, ts: int) -> None:
        with self._mu:
            if table_id == DDL_JOB_TABLE_ID:
                for item in self._ddl.on_resolved(ts):
                    if isinstance(item, Fence):
                        self._table_joins.at_fence(item.ts)
                    else:
                        self._on_job(item)
            else:
                self._lander.resolve(table_id, ts)
                if table_id not in self._table_resolved:
                    return  # it left; the feed's unsubscribe is on its way
                self._table_resolved[table_id] = ts
                leave_at = self._leaving.get(table_id)
                if leave_at is not None and ts >= leave_at - 1:
                    self._leave(table_id, self._leaving)
                drain_to = self._draining.get(table_id)
                if drain_to is not None and ts >= drain_to - 1:
                    self._leave(table_id, self._draining)
            self._report_ddl_resolved()

    def _on_job(self, pulled: PulledJob) -> None:
        """Land the job's rows (shard 0) and move this shard's tables in or out of the feed. The
        rows a job rewrote (effect.copied) are landed first, before its `ddl` row, the new ids'
        resolved ts and this shard's DDL resolved ts (tidelake.capture.changefeed.copied_rows)."""
        self._jobs += 1
        finished = pulled.finished_ts
        joined = self._owned(pulled.effect.joined)
        copied = self._owned(pulled.effect.copied)
        if copied:
            count = land_copied_rows(self._reader, self._lander, copied, finished)
            log.info("DDL job %d rewrote %d rows of physical ids %s; landed as puts at %d", pulled.job.id, count,
                     sorted(copied), finished)
        if self.shard.lands_ddl and pulled.rows:
            self._lander.add_ddl(pulled.rows)
        for pid in self._owned(pulled.effect.left):
            self._leaving[pid] = finished
            if self._table_resolved.get(pid, 0) >= finished - 1:
                self._leave(pid, self._leaving)
        for pid in joined:
            if self._leaving.pop(pid, None) is not None:
                continue  # left and came back before its feed was closed: it never stopped
            # No row of a table is at or below the ts it joins at (docs/metadata.md#boundary-semantics).
            self._lander.resolve(pid, finished)
            start = max(finished, self._table_resolved.get(pid, 0))
            self._table_resolved[pid] = start
            self._actions.append(("subscribe", pid, start))

    def _leave(self, pid: int, pending: dict[int, int]) -> None:
        """Its feed closes: it reached the ts it leaves at (a DDL's, or a `filter` row's)."""
        del pending[pid]
        del self._table_resolved[pid]
        self._actions.append(("unsubscribe", pid, 0))

    def _report_ddl_resolved(self) -> None:
        """The job span's resolved ts, held below any table still leaving (see module doc)."""
        ts = min([self._ddl.resolved_ts, *(f - 1 for f in self._leaving.values())])
        if ts > self._reported_ddl:
            self._reported_ddl = ts
            self._lander.resolve_ddl(ts)


def _restore_running_jobs(tracker: SchemaTracker, running: list[RunningJob], layout: LakeLayout) -> None:
    """The tables of jobs running at the restart's ts as the finished jobs left them
    (tidelake.capture.changefeed.running_jobs)."""
    if not running:
        return
    before = tables_before(running, SchemaHistory.load(layout, jobs_until=tracker.ts))
    tracker.restore(before)
    log.info("DDL jobs %s were running at ts %d: tables %s taken as the lake's DDL history has them",
             [r.job.id for r in running], tracker.ts, sorted(before))


class _Sink:
    """EventFeedSink that forwards to the runner (kept apart so the runner has no feed methods)."""

    def __init__(self, runner: PullerRunner) -> None:
        self._runner = runner

    def on_rows(self, rows: list[RowChange]) -> None:
        if rows:
            self._runner._on_rows(rows)

    def on_resolved(self, table_id: int, span: tuple[bytes, bytes], ts: int) -> None:
        """Per-region progress is not needed: the table frontier covers it."""

    def on_table_resolved(self, table_id: int, ts: int) -> None:
        self._runner._on_table_resolved(table_id, ts)


def _span(table_id: int) -> tuple[bytes, bytes]:
    return table_record_span_encoded(table_id)  # docs/wire.md#key-encodings

