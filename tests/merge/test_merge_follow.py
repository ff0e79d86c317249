"""The merge follower (tidelake.merge.follow) on a lake fed through the real Lander (lake_fixtures):
new changes reach the replica within a pass and it then equals the upstream replay; an idle poll
opens the watermarks table only; only tables with covered work are merged; the follower takes the
syncpoints and stops at the cap until it has; a second follower is refused in one line; SIGTERM
ends `tidelake merge --follow` within seconds with its lease released. No Spark: the windows are
small, so delta-rs writes them on the driver; the session is None and anything that used it fails."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace

import deltalake
import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake, path_of, put, shop_lake, sorted_rows

from tidelake import failpoints
from tidelake.cli import follow_run, main
from tidelake.config_writer import changefeed_document, write_config
from tidelake.errors import EXIT_TRY_LATER
from tidelake.lake.checkpoint import checkpoint_at_version, read_checkpoint, version_at_checkpoint
from tidelake.lake.lease import hold, live_holder, merge_follower_lease, replica_lease
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.schema_history import TableKey
from tidelake.merge import follow
from tidelake.merge.follow import Follower, FollowerRunning, FollowOptions
from tidelake.merge.merge_run import run_merge
from tidelake.syncpoint.follow_cut import FollowerCuts
from tidelake.syncpoint.records import boundary_at_or_below, next_boundary, read_syncpoints

@pytest.fixture
def lake(tmp_path):
    lake = shop_lake(str(tmp_path / "lake"))
    yield lake
    lake.close()


def replica_rows(lake: FedLake, table: str) -> list[dict]:
    return sorted_rows(DeltaTable(path_of(lake, table)).to_pyarrow_table().to_pylist())


def follower(lake: FedLake, lines: list[str], cuts: FollowerCuts | None = None) -> Follower:
    return Follower(None, lake.layout, FollowOptions(threads=1), lines.append, cuts)


def test_new_changes_reach_the_replica_in_one_pass_and_an_idle_poll_reads_the_watermarks_only(lake, monkeypatch):
    lines: list[str] = []
    f = follower(lake, lines)
    put(lake, "orders", range(1, 30), "a")
    put(lake, "items", range(1, 5), "i")
    first = lake.resolve()
    assert f.poll() == "pass"  # the first look reads every replica and creates them
    assert replica_rows(lake, "orders") == lake.expected_rows("shop", "orders", first)
    assert replica_rows(lake, "items") == lake.expected_rows("shop", "items", first)

    put(lake, "orders", range(20, 40), "b")
    with lake.txn() as t:
        t.delete("shop", "orders", {"id": 3, "note": "a3"})
    upper = lake.resolve()
    lines.clear()
    assert f.poll() == "pass"
    assert read_checkpoint(path_of(lake, "orders")) == upper
    assert replica_rows(lake, "orders") == lake.expected_rows("shop", "orders", upper)
    # only the table with changes was merged: the quiet one keeps its checkpoint
    assert read_checkpoint(path_of(lake, "items")) == first
    (line,) = lines
    assert line.startswith("merge pass 2: 1 of 1 tables merged, 1 windows, 0 DDLs, 21 changes in "), line
    assert "worst replica lag " in line and "(shop.orders)" in line

    opened: list[str] = []
    real_init = deltalake.DeltaTable.__init__

    def spy(self, table_uri, *args, **kwargs):
        opened.append(str(table_uri))
        real_init(self, table_uri, *args, **kwargs)

    monkeypatch.setattr(deltalake.DeltaTable, "__init__", spy)
    assert f.poll() == "idle"
    assert opened == [lake.layout.watermarks]
    assert len(lines) == 1  # an idle poll is quiet until the heartbeat is due
    f.options = replace(f.options, heartbeat_s=0.0)
    assert f.poll() == "idle"
    assert lines[-1].startswith("merge follower: idle; watermarks ") and lines[-1].endswith("s ago"), lines


def test_changes_landed_before_their_watermarks_are_merged_once_covered(lake):
    lines: list[str] = []
    f = follower(lake, lines)
    start = lake.resolve()
    f.poll()
    put(lake, "orders", range(1, 10), "a")
    uncovered = lake.up.ts
    lake.lander.flush()  # landed, not covered: nothing to merge yet, but the follower waits for it
    lake.resolve(uncovered - 1)
    f.poll()
    assert read_checkpoint(path_of(lake, "orders")) == start  # an empty window is not work
    assert replica_rows(lake, "orders") == []
    upper = lake.resolve()  # only the watermarks move, nothing lands: the waiting work is taken
    assert f.poll() == "pass"
    assert replica_rows(lake, "orders") == lake.expected_rows("shop", "orders", upper)


class _Clock:
    """The `time` module as tidelake.merge.follow sees it, its monotonic clock moved by the test."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def monotonic(self) -> float:
        return self.now

    def __getattr__(self, name: str):
        return getattr(time, name)


def test_a_sweep_merges_the_quiet_windows_of_stale_replicas_only(lake, monkeypatch):
    """A sweep (every sweep_s of the follower's monotonic clock) moves a quiet replica's checkpoint
    once it is more than half a sweep behind its window's end, and commits nothing to one merged since."""
    clock = _Clock()
    monkeypatch.setattr(follow, "time", clock)
    lines: list[str] = []
    f = Follower(None, lake.layout, FollowOptions(threads=1, sweep_s=120.0), lines.append)
    first = lake.resolve()
    f.poll()  # the first look is a sweep: both replicas created and merged to `first`
    assert read_checkpoint(path_of(lake, "orders")) == read_checkpoint(path_of(lake, "items")) == first
    items_versions = DeltaTable(path_of(lake, "items")).version()
    lake.up.ts += 40_000 << 18  # 40 s on: less than half a sweep after `first`
    put(lake, "orders", range(1, 3), "a")
    mid = lake.resolve()
    clock.now += 120.0  # a sweep is due
    assert f.poll() == "pass"
    assert read_checkpoint(path_of(lake, "orders")) == mid  # merged for its change
    assert read_checkpoint(path_of(lake, "items")) == first  # quiet, 40 s behind: left alone
    assert DeltaTable(path_of(lake, "items")).version() == items_versions
    lake.up.ts += 40_000 << 18  # 80 s after `first`, 40 s after `mid`
    last = lake.resolve()
    clock.now += 60.0  # half a sweep since the last: only the watermarks moved, nothing is due
    assert f.poll() == "idle"
    assert read_checkpoint(path_of(lake, "items")) == first
    clock.now += 60.0  # a sweep since the last
    assert f.poll() == "pass"
    assert read_checkpoint(path_of(lake, "items")) == last  # more than half a sweep behind: moved on
    assert read_checkpoint(path_of(lake, "orders")) == mid  # merged 40 s ago: left alone
    assert replica_rows(lake, "orders") == lake.expected_rows("shop", "orders", last)
    lake.up.ts += 80_000 << 18  # both more than half a sweep behind
    later = lake.resolve()
    clock.now += 120.0  # the next sweep is due a sweep after the last one, not after the first
    assert f.poll() == "pass"
    assert read_checkpoint(path_of(lake, "items")) == read_checkpoint(path_of(lake, "orders")) == later


def test_a_pass_takes_at_most_pass_tables_the_ones_merged_longest_ago_first(lake):
    """The tables a pass leaves out make the next poll pass whether or not the watermarks moved; among
    tables with work, the one merged longest ago goes first. (A table the next look would not find
    again, owed alone: the sweep tests below.)"""
    lines: list[str] = []
    f = Follower(None, lake.layout, FollowOptions(threads=1, pass_tables=1), lines.append)
    first = lake.resolve()
    assert f.poll() == "pass"  # the first look: orders (the history's first), items owed
    assert lines[-1].endswith("; 1 tables with work waiting for the next passes"), lines
    assert read_checkpoint(path_of(lake, "orders")) == first
    assert ReplicaCatalog(lake.layout).find("shop", "items") is None
    assert f.poll() == "pass"  # nothing moved upstream: the table left out is taken (its CREATE waits at a barrier)
    assert read_checkpoint(path_of(lake, "items")) == first
    assert f.poll() == "idle"

    put(lake, "orders", range(1, 4), "a")
    only_orders = lake.resolve()
    assert f.poll() == "pass"  # orders merged at passes 1 and 3, items at 2
    put(lake, "orders", range(4, 6), "b")
    put(lake, "items", range(1, 3), "i")
    both = lake.resolve()
    assert f.poll() == "pass"  # items, merged longest ago, before orders (the history's first)
    assert read_checkpoint(path_of(lake, "items")) == both
    assert read_checkpoint(path_of(lake, "orders")) == only_orders
    assert replica_rows(lake, "items") == lake.expected_rows("shop", "items", both)
    assert f.poll() == "pass"
    assert read_checkpoint(path_of(lake, "orders")) == both
    assert replica_rows(lake, "orders") == lake.expected_rows("shop", "orders", both)
    assert f.poll() == "idle"


def test_a_pass_takes_a_share_of_many_tables_and_never_fewer_than_pass_tables(lake):
    """Each pass's look plans every table, so at many tables a pass takes 1 / PASS_SHARE of them,
    not pass_tables: the looks per visit of every table stay PASS_SHARE whatever the table count."""
    f = Follower(None, lake.layout, FollowOptions(threads=1, pass_tables=3), [].append)
    keys = tuple(TableKey(i) for i in range(100, 140))
    f._seen.known = dict.fromkeys(keys, 0)
    f._seen.turns = {key: 1000 - int(key) for key in keys}  # the last keys merged longest ago
    tables, left = f._take(keys, time.monotonic())
    assert len(tables) == 40 // follow.PASS_SHARE and tables[0] == TableKey(139)
    assert set(tables) | set(left) == set(keys) and not set(tables) & set(left)
    tables, left = f._take(keys[:8], time.monotonic())
    assert (len(tables), len(left)) == (3, 5)  # a quarter of 8 is fewer than pass_tables


def both_replicas_then_changes_to_both(lake: FedLake, f: Follower) -> int:
    """Two polls of a follower taking one table a pass create both replicas; then a transaction on
    each table, covered: the upper both are due to reach."""
    lake.resolve()
    f.poll()
    f.poll()
    put(lake, "orders", range(1, 3), "a")
    put(lake, "items", range(1, 3), "i")
    return lake.resolve()


def test_failing_tables_left_out_wait_for_their_retry_instead_of_a_pass_after_pass(lake, monkeypatch):
    """A table whose merge failed is kept out for RETRY_S: the tables a pass leaves out make the next
    poll pass only while one of them may be taken, so failing tables are not tried back to back."""
    clock = _Clock()
    monkeypatch.setattr(follow, "time", clock)
    lines: list[str] = []
    f = Follower(None, lake.layout, FollowOptions(threads=1, pass_tables=1), lines.append)
    upper = both_replicas_then_changes_to_both(lake, f)

    def store_away(name, owner):
        raise OSError("the store is away")

    with failpoints.armed(["merge.before_commit"], store_away):
        assert f.poll() == "pass"  # orders fails; items waits for the next pass
        assert "1 failed (shop.orders: " in lines[-1] and "retried in 30s" in lines[-1], lines
        assert f.poll() == "pass"  # items fails; orders waits for its retry
        assert f.poll() == "idle"  # both wait for their retry: no pass after pass
        clock.now += follow.RETRY_S
    assert f.poll() == "pass"
    assert f.poll() == "pass"
    assert read_checkpoint(path_of(lake, "orders")) == read_checkpoint(path_of(lake, "items")) == upper
    assert replica_rows(lake, "items") == lake.expected_rows("shop", "items", upper)


def test_a_table_whose_retry_falls_due_during_a_pass_is_taken_at_the_next_poll(lake, monkeypatch):
    """orders fails and waits RETRY_S; the pass after it (items) runs past that time: with nothing
    landing upstream, the next poll still passes and takes orders, not the sweep minutes later."""
    clock = _Clock()
    monkeypatch.setattr(follow, "time", clock)
    f = Follower(None, lake.layout, FollowOptions(threads=1, pass_tables=1), [].append)
    upper = both_replicas_then_changes_to_both(lake, f)
    orders = path_of(lake, "orders")

    def fail_orders_then_take_long(name, owner):
        if owner == orders:
            raise OSError("the store is away")
        clock.now += follow.RETRY_S  # items' merge outlasts orders' wait

    with failpoints.armed(["merge.before_commit"], fail_orders_then_take_long):
        assert f.poll() == "pass"  # orders fails
        assert f.poll() == "pass"  # items, while orders' retry falls due
    assert f.poll() == "pass"
    assert read_checkpoint(orders) == read_checkpoint(path_of(lake, "items")) == upper


def test_a_sweeps_quiet_window_that_fails_is_retried_without_waiting_for_the_next_sweep(lake, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(follow, "time", clock)
    f = Follower(None, lake.layout, FollowOptions(threads=1, sweep_s=120.0), [].append)
    lake.resolve()
    f.poll()
    lake.up.ts += 80_000 << 18  # both quiet, more than half a sweep behind
    later = lake.resolve()
    clock.now += 120.0
    items = path_of(lake, "items")

    def fail_items(name, owner):
        if owner == items:
            raise OSError("the store is away")

    with failpoints.armed(["merge.before_commit"], fail_items):
        assert f.poll() == "pass"  # the sweep: orders moves on, items fails
    assert read_checkpoint(path_of(lake, "orders")) == later and read_checkpoint(items) < later
    assert f.poll() == "idle"  # items waits for its retry
    clock.now += follow.RETRY_S
    assert f.poll() == "pass"  # not a sweep, yet items' quiet window is taken again
    assert read_checkpoint(items) == later


def test_a_table_left_out_and_merged_by_another_run_gets_no_empty_window(lake, monkeypatch):
    """A table owed by a pass is owed only while its checkpoint stays the one the pass left it at: a
    cut, or a merge by hand seen at the next sweep, that moved it settles the debt."""
    clock = _Clock()
    monkeypatch.setattr(follow, "time", clock)
    f = Follower(None, lake.layout, FollowOptions(threads=1, sweep_s=120.0, pass_tables=1), [].append)
    lake.resolve()
    f.poll()
    f.poll()
    put(lake, "orders", range(1, 3), "a")
    put(lake, "items", range(1, 3), "i")
    lake.resolve()
    assert f.poll() == "pass"  # orders; items owed
    run_merge(None, lake.layout, write_log=False)  # by hand: items merged
    versions = DeltaTable(path_of(lake, "items")).version()
    later = lake.resolve()  # the watermarks move on, nothing lands
    clock.now += 120.0  # the sweep reads every checkpoint again
    f.poll()
    assert DeltaTable(path_of(lake, "items")).version() == versions  # no empty window committed
    assert read_checkpoint(path_of(lake, "items")) < later


def test_a_sweep_left_out_of_its_pass_merges_its_quiet_windows_at_the_next(lake, monkeypatch):
    """A quiet table's window is work at a sweep only: when the sweep's pass fails, or has no room
    for it, a later pass (no sweep) still takes it."""
    clock = _Clock()
    monkeypatch.setattr(follow, "time", clock)
    f = Follower(None, lake.layout, FollowOptions(threads=1, sweep_s=120.0, pass_tables=1), [].append)
    first = lake.resolve()
    f.poll()
    f.poll()
    assert read_checkpoint(path_of(lake, "orders")) == read_checkpoint(path_of(lake, "items")) == first
    lake.up.ts += 80_000 << 18  # both quiet, more than half a sweep behind
    later = lake.resolve()
    clock.now += 120.0
    real_merge = follow.run_merge

    def store_away(*args, **kwargs):
        monkeypatch.setattr(follow, "run_merge", real_merge)
        raise OSError("the store is away")

    monkeypatch.setattr(follow, "run_merge", store_away)
    with pytest.raises(OSError):
        f.poll()  # the sweep's pass fails: both tables are still owed
    assert f.poll() == "pass"  # not a sweep: one of the two, owed
    assert f.poll() == "pass"  # the other
    assert read_checkpoint(path_of(lake, "orders")) == read_checkpoint(path_of(lake, "items")) == later
    assert f.poll() == "idle"


def test_a_follower_started_after_a_merge_run_commits_nothing_to_the_replicas_it_merged(lake):
    put(lake, "orders", range(1, 5), "a")
    merged = lake.resolve()
    run_merge(None, lake.layout, write_log=False)
    versions = {t: DeltaTable(path_of(lake, t)).version() for t in ("orders", "items")}
    lake.up.ts += 5_000 << 18
    lake.resolve()
    f = follower(lake, [])
    f.poll()  # its first look is a sweep: every replica's checkpoint read, none stale
    assert {t: DeltaTable(path_of(lake, t)).version() for t in ("orders", "items")} == versions
    assert read_checkpoint(path_of(lake, "orders")) == read_checkpoint(path_of(lake, "items")) == merged


@pytest.mark.spark
def test_a_ddl_of_a_quiet_table_is_applied_at_the_next_pass_not_at_the_sweep(lake, spark):
    """No change lands between the table's checkpoint and its DDL: the window up to the barrier is
    still work, so the DDL (applied with Spark) follows as soon as the watermarks pass it."""
    lines: list[str] = []
    f = Follower(spark, lake.layout, FollowOptions(threads=1), lines.append)
    lake.resolve()
    f.poll()
    ddl_ts = lake.ddl(lake.up.add_column("shop", "items", ("extra", "int")))
    put(lake, "orders", range(1, 3), "a")  # something else lands, so the look is not idle
    lake.resolve()
    assert f.poll() == "pass"
    assert read_checkpoint(path_of(lake, "items")) >= ddl_ts, lines
    assert "extra" in DeltaTable(path_of(lake, "items")).schema().to_arrow().names


def test_the_follower_takes_the_syncpoints_and_stops_at_the_cap_until_it_has(lake):
    lines: list[str] = []
    cuts = FollowerCuts(lake.layout, 1)
    f = follower(lake, lines, cuts)
    lake.up.ts += 2000 << 18  # two seconds after the CREATEs: the first boundary below has both tables
    put(lake, "orders", range(1, 10), "a")
    lake.resolve()
    f.poll()  # merges past the boundary below: the first cut waits for the one above
    assert read_syncpoints(lake.layout) == []
    lake.up.ts += 1000 << 18
    lake.resolve()
    f.poll()  # the DDL watermark passed a new boundary: the first cut, above every checkpoint
    (first,) = read_syncpoints(lake.layout)
    assert any(line.startswith(f"syncpoint {first.ts} (") and line.endswith(": 2 replicas") for line in lines), lines
    assert {r.name for r in first.replicas} == {"orders", "items"}

    boundary = next_boundary(first.ts, 1)
    put(lake, "orders", range(5, 15), "b")
    lake.up.ts = boundary + (3000 << 18)  # three seconds past the next boundary
    put(lake, "orders", range(1, 3), "c")
    upper = lake.resolve()
    f.poll()  # the pass stops at the cap (the next boundary); the cut then takes the latest one
    path = path_of(lake, "orders")
    capped = version_at_checkpoint(path, boundary)
    assert capped is not None and checkpoint_at_version(path, capped) == boundary
    cut = boundary_at_or_below(upper, 1)
    recorded = read_syncpoints(lake.layout)
    assert [s.ts for s in recorded] == [first.ts, cut]
    orders = DeltaTable(path)
    orders.load_as_version({r.name: r.version for r in recorded[1].replicas}["orders"])
    assert sorted_rows(orders.to_pyarrow_table().to_pylist()) == lake.expected_rows("shop", "orders", cut)
    f.poll()
    assert read_checkpoint(path_of(lake, "orders")) == upper
    assert replica_rows(lake, "orders") == lake.expected_rows("shop", "orders", upper)


def test_a_follower_fed_without_pause_still_takes_its_first_cut(lake):
    """Merging on with no cap, the replicas would always be past the boundary the first cut aims at
    before every table reached it; the cap before the first cut lets the cut happen."""
    cuts = FollowerCuts(lake.layout, 1)
    f = follower(lake, [], cuts)
    lake.up.ts += 2000 << 18
    for i in range(12):  # a change and a flush every 400 ms of upstream time, a poll after each
        put(lake, "orders", range(i, i + 2), "n")
        lake.up.ts += 400 << 18
        lake.resolve()
        f.poll()
    assert read_syncpoints(lake.layout), "no cut in 4.8 s of upstream time at a 1 s interval"


def test_a_first_cut_that_cannot_be_taken_holds_no_merge_back(lake):
    """A replica held by another writer fails every cut; the other replicas still go on past the
    cap before the first cut (each attempt merges them to the boundary it aims at)."""
    cuts = FollowerCuts(lake.layout, 1)
    f = follower(lake, [], cuts)
    lake.up.ts += 2000 << 18
    first_cap = next_boundary(lake.resolve(), 1)  # where the passes stop until the first cut
    f.poll()  # creates both replicas
    items = ReplicaCatalog(lake.layout).find("shop", "items").table_key
    with hold(lake.layout, {"items": (replica_lease(items), "items")}):
        for i in range(12):
            put(lake, "orders", range(i, i + 2), "n")
            lake.up.ts += 400 << 18
            lake.resolve()
            f.poll()
    assert read_syncpoints(lake.layout) == []
    assert read_checkpoint(path_of(lake, "orders")) > first_cap + (1000 << 18)


def test_a_second_follower_is_refused_in_one_line_naming_the_first(lake, tmp_path, capfd):
    lines: list[str] = []
    first = follower(lake, lines)
    config = write_config(tmp_path / "cf.toml", changefeed_document("cf", ["127.0.0.1:1"], lake.layout.root))
    started = threading.Event()
    first.say = lambda line: (lines.append(line), started.set())
    runner = threading.Thread(target=first.run)
    runner.start()
    try:
        assert started.wait(30)
        assert live_holder(lake.layout, merge_follower_lease()) is not None
        with pytest.raises(FollowerRunning) as refused:
            follower(lake, []).run()
        assert "another merge follower runs on " in str(refused.value)
        assert refused.value.exit_code == EXIT_TRY_LATER
        capfd.readouterr()
        assert main(["merge", "--follow", "--config", str(config)]) == EXIT_TRY_LATER
        out, err = capfd.readouterr()
        (line,) = err.splitlines()
        assert line.startswith("tidelake: error: another merge follower runs on ") and f"pid {os.getpid()})" in line
        assert "holds lease merge-follower token 1" in line
    finally:
        first.stop.set()
        runner.join(30)
    assert live_holder(lake.layout, merge_follower_lease()) is None  # released on the way out


def test_sigterm_ends_the_follow_command_within_seconds_and_releases_its_lease(lake, tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(follow_run, "get_session", lambda *args, **kwargs: None)
    monkeypatch.setattr(follow_run, "release_session", lambda session: None)
    put(lake, "orders", range(1, 5), "a")
    upper = lake.resolve()
    config = write_config(tmp_path / "cf.toml", changefeed_document("cf", ["127.0.0.1:1"], lake.layout.root))
    sent: list[float] = []

    def terminate_once_merged() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            entry = ReplicaCatalog(lake.layout).find("shop", "orders")
            if entry is not None and read_checkpoint(entry.path) == upper:
                break
            time.sleep(0.1)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=terminate_once_merged)
    killer.start()
    assert main(["merge", "--follow", "--threads", "1", "--config", str(config)]) == 0
    ended = time.monotonic()
    killer.join()
    assert ended - sent[0] < 5
    out, _ = capfd.readouterr()
    assert "merge pass 1: 2 of 2 tables merged" in out and out.rstrip().endswith("merge follower: stopped after 1 passes")
    assert live_holder(lake.layout, merge_follower_lease()) is None
    with hold(lake.layout, {"f": (merge_follower_lease(), "test")}) as leases:  # free for the next follower
        assert "f" in leases.held


FOLLOW_WITHOUT_SPARK = """
import sys
from tidelake.lake.layout import LakeLayout
from tidelake.merge.follow import Follower, FollowOptions
Follower(None, LakeLayout(sys.argv[1]), FollowOptions(threads=1), print).run()
"""


def test_a_follower_killed_mid_pass_leaves_what_the_next_one_carries_on_from(lake):
    """SIGKILL right after the first window's commit (the other table not even created): its leases
    stay unreleased, and the next follower on this host takes them over and finishes the pass."""
    put(lake, "orders", range(1, 20), "a")
    put(lake, "items", range(1, 5), "i")
    upper = lake.resolve()
    env = {**os.environ, "TIDELAKE_FAILPOINTS": "merge.after_commit=kill"}
    killed = subprocess.run([sys.executable, "-c", FOLLOW_WITHOUT_SPARK, lake.layout.root], env=env,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert "failpoint merge.after_commit: kill" in killed.stderr
    assert read_checkpoint(path_of(lake, "orders")) == upper
    assert ReplicaCatalog(lake.layout).find("shop", "items") is None
    assert live_holder(lake.layout, merge_follower_lease()) is None  # its process is gone: not waited for

    lines: list[str] = []
    f = follower(lake, lines)
    assert f.poll() == "pass"
    for table in ("orders", "items"):
        assert read_checkpoint(path_of(lake, table)) == upper
        assert replica_rows(lake, table) == lake.expected_rows("shop", table, upper)


def test_single_run_choices_with_follow_are_refused_in_one_line(lake, capfd):
    lake.resolve()
    assert main(["merge", "--follow", "--table", "shop.orders", "--lake", lake.layout.root]) == 2
    _, err = capfd.readouterr()
    assert err.splitlines() == ["tidelake: error: --follow merges every table as the watermarks advance; --table "
                                "is for a single run"]
    assert live_holder(lake.layout, merge_follower_lease()) is None
