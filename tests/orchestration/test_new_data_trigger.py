"""[merge].run_on_new_data: the trigger fires when landed changes are covered, at most once per floor.

The end-to-end test runs the real puller against the simulator and the trigger as the triggerer
runs it (its async generator); the oracle is the simulator's MVCC: when an event says "changelog
version V, resolved R", every change committed before the writes stopped must be in the
changelog at V and at or below R, so the run it starts can apply all of it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from contextlib import ExitStack
from datetime import datetime, timedelta, timezone

import pytest
from deltalake import DeltaTable

from tests.capture.pull_harness import config_doc, oracle, start_ts
from tests.capture.tidb_writes import TiDBWrites
from tidelake import tso
from tidelake.codec.keys import record_key
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.config import load_config
from tidelake.config_writer import write_config
from tidelake.lake.layout import LakeLayout
from tidelake.lake.lease import hold, merge_follower_lease
from tidelake.lake.watermarks import Watermarks
from tidelake.orchestration.airflow.new_data_trigger import NewDataTrigger
from tidelake.orchestration.new_data_watch import PATIENCE_S, NewDataWatch
from tidelake.sim.cluster import SimCluster
from tidelake.wait import wait_until

SHOP, ORDERS = 2, 110
WALL = datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc)


def marks(version: int, resolved: dict[int, int], ddl: int) -> Watermarks:
    return Watermarks(resolved, ddl, version)


def ts(seconds: float) -> int:
    return tso.from_datetime(WALL + timedelta(seconds=seconds))


def test_what_landed_before_the_watch_started_is_left_to_the_schedule():
    watch = NewDataWatch(floor_s=0)
    assert watch.observe(marks(7, {1: ts(-1)}, ts(-1)), 0.0, WALL) is None
    assert watch.observe(marks(7, {1: ts(5)}, ts(5)), 1.0, WALL) is None  # watermarks alone are no new data


def test_new_changes_fire_once_every_watermark_covers_them_then_wait_for_the_floor():
    watch = NewDataWatch(floor_s=30)
    watch.observe(marks(7, {1: ts(-1), 2: ts(-1)}, ts(-1)), 0.0, WALL)
    assert watch.observe(marks(8, {1: ts(1), 2: ts(-1)}, ts(1)), 1.0, WALL) is None  # table 2 not there yet
    assert watch.observe(marks(8, {1: ts(1), 2: ts(0)}, ts(1)), 2.0, WALL) == {"changelog_version": 8, "resolved_ts": ts(0)}
    later = WALL + timedelta(seconds=3)
    assert watch.observe(marks(9, {1: ts(4), 2: ts(4)}, ts(4)), 3.0, later) is None  # within the floor
    assert watch.observe(marks(9, {1: ts(4), 2: ts(4)}, ts(4)), 32.0, later) == {"changelog_version": 9, "resolved_ts": ts(4)}
    assert watch.observe(marks(9, {1: ts(9), 2: ts(9)}, ts(9)), 70.0, later) is None


def test_versions_seen_later_keep_their_own_ts_so_steady_traffic_neither_delays_nor_drops():
    watch = NewDataWatch(floor_s=0)
    watch.observe(marks(1, {1: ts(-1)}, ts(-1)), 0.0, WALL)
    watch.observe(marks(2, {1: ts(-1)}, ts(-1)), 1.0, WALL)
    step = WALL + timedelta(seconds=2)
    # version 3 landed after version 2's ts: the watermarks cover 2, not 3
    assert watch.observe(marks(3, {1: ts(1)}, ts(1)), 2.0, step) == {"changelog_version": 2, "resolved_ts": ts(1)}
    assert watch.observe(marks(3, {1: ts(1.5)}, ts(1.5)), 3.0, step) is None
    assert watch.observe(marks(3, {1: ts(2)}, ts(2)), 4.0, step) == {"changelog_version": 3, "resolved_ts": ts(2)}


def test_a_lagging_table_delays_the_event_by_the_patience_at_most():
    watch = NewDataWatch(floor_s=0)
    watch.observe(marks(1, {1: ts(-1), 2: ts(-9)}, ts(-1)), 0.0, WALL)
    assert watch.observe(marks(2, {1: ts(1), 2: ts(-9)}, ts(1)), 1.0, WALL) is None
    assert watch.observe(marks(2, {1: ts(1), 2: ts(-9)}, ts(1)), PATIENCE_S, WALL) is None
    assert watch.observe(marks(2, {1: ts(1), 2: ts(-9)}, ts(1)), PATIENCE_S + 1.0, WALL) == {
        "changelog_version": 2, "resolved_ts": ts(-9)}


def test_an_unreadable_lake_is_waited_out_not_the_end_of_the_watch(tmp_path, monkeypatch):
    from tidelake.orchestration.airflow import new_data_trigger

    path = write_config(tmp_path / "cf.toml", config_doc_without_sim(tmp_path))
    polls = iter([OSError("connection refused")] * 3 + [marks(1, {1: 5}, 5)] + [OSError("throttled")] * 2
                 + [marks(2, {1: tso.from_datetime(datetime.now(timezone.utc) + timedelta(hours=1))}, 2**62)] * 100)

    def read(_layout):
        answer = next(polls)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(new_data_trigger, "read_watermarks", read)
    with TriggerThread(NewDataTrigger(config_path=str(path), floor_s=0, poll_s=0.01)) as trigger:
        (_, event), = trigger.wait_events(1)
    assert event["changelog_version"] == 2


def test_no_event_while_a_merge_follower_holds_its_lease_then_the_watch_resumes(tmp_path, monkeypatch):
    """A run started for new data while the follower merges it would merge nothing: the trigger
    stays quiet while the lease is live (it started with the lease held: no version seen before
    it), and once it is released the changes the follower left (the latest version) start a run."""
    from tidelake.orchestration.airflow import new_data_trigger

    path = write_config(tmp_path / "cf.toml", config_doc_without_sim(tmp_path))
    layout = LakeLayout.from_config(load_config(str(path)).lake)
    covered_later = tso.from_datetime(datetime.now(timezone.utc) + timedelta(hours=1))
    version = iter(range(1, 10_000))
    reads: list[int] = []

    def read(_layout):  # a new covered changelog version at every poll
        reads.append(next(version))
        return marks(reads[-1], {1: covered_later}, covered_later)

    monkeypatch.setattr(new_data_trigger, "read_watermarks", read)
    with ExitStack() as stack:
        lease = stack.enter_context(ExitStack())
        lease.enter_context(hold(layout, {"f": (merge_follower_lease(), "the merge follower")}))
        trigger = stack.enter_context(TriggerThread(NewDataTrigger(config_path=str(path), floor_s=0, poll_s=0.01)))
        time.sleep(0.5)  # ~50 polls with the lease live
        assert trigger.events == [] and reads == []
        lease.close()  # the follower ends while the trigger runs
        (_, event), = trigger.wait_events(1)
    # what landed while the follower ran, and what it left, is new data once covered: the first
    # version read after the lease (even by a trigger that saw none before it) starts a run
    assert event["changelog_version"] == 1


def config_doc_without_sim(tmp_path) -> dict:
    return {"changefeed": {"id": "cf1"}, "upstream": {"pd": ["127.0.0.1:1"]}, "lake": {"root": str(tmp_path / "lake")}}


class TriggerThread:
    """The trigger's run() on its own event loop, as the triggerer runs it; events with their time."""

    def __init__(self, trigger: NewDataTrigger) -> None:
        self.events: list[tuple[float, dict]] = []
        self.error: BaseException | None = None
        self._trigger = trigger
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        collect = asyncio.create_task(self._collect())
        await self._stop.wait()
        collect.cancel()
        await asyncio.gather(collect, return_exceptions=True)

    async def _collect(self) -> None:
        try:
            async for event in self._trigger.run():
                self.events.append((time.monotonic(), event.payload))
        except Exception as err:  # surfaced by wait_events
            self.error = err

    def __enter__(self) -> TriggerThread:
        self._thread.start()
        while self._stop is None:
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def wait_events(self, n: int, timeout: float = 30.0) -> list[tuple[float, dict]]:
        deadline = time.monotonic() + timeout
        while len(self.events) < n:
            if self.error is not None:
                raise self.error
            assert time.monotonic() < deadline, f"{len(self.events)} new-data events in {timeout} s, expected {n}"
            time.sleep(0.05)
        return self.events[:n]


def landed_at(lake: str, version: int | None = None) -> set[tuple]:
    """(table id, key, commit ts, op, value) of the changelog at `version` (None: the latest)."""
    table = DeltaTable(LakeLayout(lake).changelog, version=version).to_pyarrow_table(
        columns=["table_id", "key", "commit_ts", "op", "value"])
    return {(r["table_id"], r["key"], r["commit_ts"], r["op"], r["value"]) for r in table.to_pylist()}


@pytest.fixture
def sim():
    with SimCluster(n_stores=2, leader_failover_delay_s=0.2, split_check_interval_s=0, gc_interval_s=0,
                    server_workers=8, cdc_options={"min_ts_interval_s": 0.2}) as cluster:
        yield cluster


def test_events_wait_until_the_landed_changes_are_covered_and_keep_the_floor(sim, tmp_path):
    """A prewritten, uncommitted txn holds every watermark below its start ts (TiKV's resolved ts
    cannot pass a lock), so changes committed after it land but are not applicable: no event
    until it commits. Each event's changelog version is then fully covered by its resolved ts."""
    lake = tmp_path / "lake"
    path = write_config(tmp_path / "cf.toml", config_doc(sim, lake))
    tidb = TiDBWrites(sim)
    tidb.create_db(SHOP, "shop")
    tidb.create_table(SHOP, ORDERS, "orders")
    floor_s = 2.0
    with PullerThread(load_config(str(path))) as run:
        start = start_ts(lake, run)
        with TriggerThread(NewDataTrigger(config_path=str(path), floor_s=floor_s, poll_s=0.1)) as trigger:
            time.sleep(1.0)  # a few polls with nothing new: no event
            assert trigger.events == []
            for round_ in range(2):
                held = record_key(ORDERS, 1000 + round_)
                held_start = sim.tso.next()
                sim.mvcc.prewrite([("put", held, b"held")], held, held_start, 60_000)
                for handle in range(5):
                    tidb.rows(ORDERS, {10 * round_ + handle: f"r{round_}-{handle}".encode()})
                wait_until(lambda: landed_at(str(lake)) >= oracle(sim, ORDERS, start), 20, "the rows to land")
                time.sleep(1.0)  # landed, not covered: polls go by without an event
                assert len(trigger.events) == round_
                sim.mvcc.commit([held], held_start, sim.tso.next())
                _, event = trigger.wait_events(round_ + 1)[round_]
                covered = landed_at(str(lake), event["changelog_version"])
                assert oracle(sim, ORDERS, start) - {c for c in oracle(sim, ORDERS, start) if c[1] == held} <= covered
                assert max(change[2] for change in covered) <= event["resolved_ts"]
            (first, _), (second, _) = trigger.events[:2]
            assert second - first >= floor_s
    assert run.error is None
