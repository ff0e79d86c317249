"""PullerRunner: start ts and GC, resume after a stop or a SIGKILL, graceful SIGTERM, shards."""

from __future__ import annotations

import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.capture.pull_harness import (  # noqa: F401 (sim is a fixture)
    changelog,
    config_doc,
    ddl_rows,
    make_config,
    oracle,
    sim,
    start_ts,
    wait_resolved,
    watermarks,
)
from tests.capture.tidb_writes import TiDBWrites
from tidelake.capture.changefeed.puller_runner import PullerRunner, RunOptions, Shard
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.cli import main
from tidelake.config import parse_config
from tidelake.config_writer import write_config
from tidelake.errors import EXIT_TRY_LATER, InputError
from tidelake.lake.layout import DdlSource, LakeLayout
from tidelake.lake.watermarks import read_by_puller
from tidelake.upstream.upstream_errors import BelowGCSafepointError
from tidelake.wait import wait_until

SHOP = 2
REPO = str(Path(__file__).resolve().parents[3])


def shop(sim, *table_ids: int) -> TiDBWrites:
    tidb = TiDBWrites(sim)
    tidb.create_db(SHOP, "shop")
    for table_id in table_ids:
        tidb.create_table(SHOP, table_id, f"t{table_id}")
    return tidb


def some_rows(tidb: TiDBWrites, rng: random.Random, table_id: int, n: int = 3) -> int:
    return max(tidb.rows(table_id, {h: rng.randbytes(6) for h in rng.sample(range(30), 2)}) for _ in range(n))


def test_start_ts_below_the_gc_safepoint_is_refused_clearly(sim, tmp_path, capsys):
    shop(sim, 110)
    old = sim.tso.next()
    sim.gc_safe_points.update_service("gc_worker", 2**63 - 1, sim.tso.next())
    config = make_config(sim, tmp_path / "lake", start_ts=old)
    with pytest.raises(BelowGCSafepointError, match=f"start ts {old} is below the GC safepoint"):
        PullerRunner(config).run()
    path = write_config(tmp_path / "cf.toml", config_doc(sim, tmp_path / "lake", start_ts=old))
    assert main(["pull", "--config", str(path), "--max-run-seconds", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"start ts {old} is below the GC safepoint" in err[0]


def test_configured_start_ts_and_resume_after_a_stop(sim, tmp_path):
    rng = random.Random(1)
    lake = tmp_path / "lake"
    tidb = shop(sim, 110)
    some_rows(tidb, rng, 110)
    start = sim.tso.next()
    some_rows(tidb, rng, 110)  # after the configured start ts, before the puller runs: must land
    progress = []
    config = make_config(sim, lake, start_ts=start)
    with PullerThread(config, progress_interval_s=0.2) as run:
        run.runner._progress = progress.append
        created = tidb.create_table(SHOP, 111, "t111")
        last = max(some_rows(tidb, rng, 110), some_rows(tidb, rng, 111))
        wait_resolved(lake, {110: last, 111: last}, created, run)
        wait_until(lambda: progress and progress[-1].tables == 2, 10, "a progress report")
    assert run.summary.start_ts == start and run.summary.jobs == 1
    assert progress[-1].rows >= 6 and set(progress[-1].table_lag_s) == {110, 111}

    # while stopped: DML, a new table, a truncate and a drop
    created2 = tidb.create_table(SHOP, 112, "t112")
    some_rows(tidb, rng, 112)
    some_rows(tidb, rng, 111)
    truncated = tidb.truncate_table(110, 113)
    dropped = tidb.drop_table(111)
    last = max(some_rows(tidb, rng, 113), some_rows(tidb, rng, 112))
    resumed_from = watermarks(lake).ddl_resolved
    with PullerThread(config, gc_advance_interval_s=0.2) as run:
        wait_resolved(lake, {112: last, 113: last}, dropped, run)
    assert run.summary.start_ts == resumed_from
    assert run.error is None

    expected = set().union(*(oracle(sim, t, start) for t in (110, 111, 112, 113)))
    assert set(changelog(lake)) == expected
    ddl = ddl_rows(lake)
    assert {r["commit_ts"] for r in ddl if r["source"] == DdlSource.SNAPSHOT} == {start}
    jobs = [(r["job_id"], r["commit_ts"]) for r in ddl if r["source"] == DdlSource.JOB]
    finished = {ts: job_id for job_id, ts in tidb.finished.items()}
    assert sorted(jobs) == sorted((finished[ts], ts) for ts in (created, created2, truncated, dropped))
    # GC is held just below what a restart would read from, no further back
    w = watermarks(lake)
    held = next(s for s in sim.gc_safe_points.services() if s.service_id == "tidelake-cf1")
    live = [w.ddl_resolved, w.table_resolved[112], w.table_resolved[113]]
    assert start - 1 < held.safe_point <= min(live) - 1


def test_a_table_that_joined_is_complete_after_a_restart_even_if_its_feed_never_reported(sim, tmp_path):
    """The new table's only store stays busy for the whole first run: its own resolved ts never
    arrives, while the DDL resolved ts moves far past its creation. The restart must still feed
    it from its creation ts, not from the DDL resolved ts it resumes the schema at."""
    rng = random.Random(6)
    lake = tmp_path / "lake"
    tidb = shop(sim, 110)
    sim.split_table(113)
    sim.split_table(114)
    for table_id, store in ((110, 1), (113, 2), (114, 1)):  # only t113 on store 2, which stays busy
        sim.transfer_leader(sim.split_table(table_id).id if table_id != 110 else sim.regions.locate(b"").id, store)
    sim.faults.make_busy(2, 120_000)
    config = make_config(sim, lake)
    with PullerThread(config) as run:
        start = wait_resolved(lake, {}, 1, run) and watermarks(lake).ddl_resolved
        created = tidb.create_table(SHOP, 113, "t113")
        early = some_rows(tidb, rng, 113)
        last = some_rows(tidb, rng, 110)
        wait_resolved(lake, {110: last}, last, run)
        assert watermarks(lake).table_resolved[113] == created  # joined there; its feed never reported
    sim.faults.clear()
    assert watermarks(lake).ddl_resolved > early
    with PullerThread(config) as run:
        wait_resolved(lake, {113: early}, 0, run)
    assert set(changelog(lake)) == oracle(sim, 110, start) | oracle(sim, 113, start)


def pull_process(config_path, *extra):
    return subprocess.Popen([sys.executable, "-m", "tidelake", "pull", "--config", str(config_path), *extra],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Writer(threading.Thread):
    """Keeps committing to two tables (and one DDL) while pullers come and go."""

    def __init__(self, tidb: TiDBWrites, seed: int) -> None:
        super().__init__(daemon=True)
        self.tidb, self.rng = tidb, random.Random(seed)
        self.done = threading.Event()
        self.last = 0

    def run(self) -> None:
        n = 0
        while not self.done.is_set():
            n += 1
            table = 110 if n % 2 else (111 if 111 in self.tidb.tables else 110)
            self.last = some_rows(self.tidb, self.rng, table, 1)
            if n == 40:
                self.tidb.create_table(SHOP, 111, "t111")
            time.sleep(0.01)


@pytest.mark.slow
def test_sigkill_at_any_point_then_restart_loses_nothing(sim, tmp_path):
    lake = tmp_path / "lake"
    tidb = shop(sim, 110)
    path = write_config(tmp_path / "cf.toml", config_doc(sim, lake, flush="200ms"))
    first = pull_process(path)
    start = wait_until(lambda: watermarks(lake).ddl_resolved, 30, "the first flush")
    writer = Writer(tidb, 3)
    writer.start()
    rng = random.Random(5)
    proc = first
    for _ in range(3):
        time.sleep(rng.uniform(0.5, 2.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc = pull_process(path)
    time.sleep(1.0)
    writer.done.set()
    writer.join()
    wait_resolved(lake, {110: writer.last, 111: writer.last})
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err

    expected = oracle(sim, 110, start) | oracle(sim, 111, start)
    landed = changelog(lake)
    assert set(landed) == expected
    assert {(r[1], r[2]) for r in landed} == {(r[1], r[2]) for r in expected}


def test_a_second_puller_of_the_shard_waits_then_refuses_in_one_line_and_the_first_goes_on(sim, tmp_path):
    """Two `tidelake pull` of one shard (docs/operations.md#writer-leases): the second waits out the
    shard's lease, then exits 75 naming the first; the first keeps landing, and nothing is lost."""
    lake = tmp_path / "lake"
    tidb = shop(sim, 110)
    doc = config_doc(sim, lake)
    doc["lake"].update({"lease_ttl": "2s", "lease_renew": "500ms"})
    path = write_config(tmp_path / "cf.toml", doc)
    first = pull_process(path)
    start = wait_until(lambda: watermarks(lake).ddl_resolved, 30, "the first flush")
    second = pull_process(path)
    _, err = second.communicate(timeout=120)
    assert second.returncode == EXIT_TRY_LATER, err
    holder = (rf"changefeed cf1 is being written by `tidelake pull --config {re.escape(str(path))}` "
              rf"\(host {re.escape(socket.gethostname())}, pid {first.pid}\) since \S+: lease puller-cf1 token 1 ")
    waiting, refused = [line for line in err.splitlines() if line.strip()]
    assert re.search(r"WARNING tidelake\.lake\.lease: waiting up to [23]s for " + holder, waiting), err
    assert re.fullmatch("tidelake: error: " + holder + r"expires in \d+s unless renewed; waited [23]s", refused), err

    last = some_rows(tidb, random.Random(9), 110, 3)
    wait_resolved(lake, {110: last})  # the first puller is still the one landing
    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert set(changelog(lake)) == oracle(sim, 110, start)


def test_another_changefeed_id_on_a_fed_lake_is_refused_in_one_line_and_lands_nothing(sim, tmp_path):
    """A lake holds one changefeed (its pullers' watermarks are folded together): a config whose id
    changed under an existing lake is refused before anything lands, naming the lake's changefeed."""
    lake = tmp_path / "lake"
    tidb = shop(sim, 110)
    first = PullerThread(make_config(sim, lake)).start()
    wait_resolved(lake, {110: some_rows(tidb, random.Random(3), 110)}, runner=first)
    first.stop()
    landed = watermarks(lake)

    renamed = PullerThread(make_config(sim, lake, id="orders")).start()
    wait_until(lambda: not renamed.thread.is_alive(), 30, "the refusal")
    renamed.stop()
    assert isinstance(renamed.error, InputError), renamed.error
    assert "\n" not in str(renamed.error)
    assert ("[changefeed] id is 'orders', but the lake at " + str(lake) + " is fed by changefeed 'cf1': a lake "
            "holds one changefeed. Set id = 'cf1' to go on with it") in str(renamed.error)
    assert list(read_by_puller(LakeLayout(str(lake)))) == ["tidelake-puller/cf1"]
    assert watermarks(lake) == landed


CRASH_AFTER = """
import os, sys
from tidelake.capture.landing import changelog_writer, ddl_writer, watermark_writer
target = {"changelog": changelog_writer.ChangelogWriter.append, "ddl": ddl_writer.DdlWriter.insert,
          "watermarks": watermark_writer.WatermarkWriter.write}[sys.argv[1]]
owner = target.__qualname__.split(".")[0]
module = {"ChangelogWriter": changelog_writer, "DdlWriter": ddl_writer, "WatermarkWriter": watermark_writer}[owner]
calls = []
def crash_after(self, *args, **kwargs):
    result = target(self, *args, **kwargs)
    calls.append(1)
    if len(calls) == int(sys.argv[2]):
        os._exit(9)  # the commit landed; the process dies before the rest of the flush
    return result
setattr(getattr(module, owner), target.__name__, crash_after)
from tidelake.cli import main
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize("step, nth", [("changelog", 1), ("ddl", 2), ("watermarks", 3)])
def test_crash_between_the_commits_of_a_flush_then_restart(sim, tmp_path, step, nth):
    rng = random.Random(8)
    lake = tmp_path / "lake"
    tidb = shop(sim, 110)
    path = write_config(tmp_path / "cf.toml", config_doc(sim, lake, flush="300ms"))
    crashing = subprocess.Popen([sys.executable, "-c", CRASH_AFTER, step, str(nth), "pull", "--config", str(path)],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    start = wait_until(lambda: watermarks(lake).ddl_resolved or crashing.poll() is not None, 30, "the first flush")
    assert crashing.poll() is None, crashing.communicate()[1]
    some_rows(tidb, rng, 110)
    created = tidb.create_table(SHOP, 111, "t111")
    last = some_rows(tidb, rng, 111)
    assert crashing.wait(30) == 9, crashing.communicate()[1]
    last = max(last, some_rows(tidb, rng, 110))
    proc = pull_process(path)
    wait_resolved(lake, {110: last, 111: last}, created)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0, proc.communicate()[1]
    landed = changelog(lake)
    assert set(landed) == oracle(sim, 110, start) | oracle(sim, 111, start)
    jobs = [(r["job_id"], r["commit_ts"]) for r in ddl_rows(lake) if r["source"] == DdlSource.JOB]
    assert jobs == [(tidb.next_job_id, created)]


def test_sigterm_flushes_what_was_pulled_and_exits_zero(sim, tmp_path):
    lake = tmp_path / "lake"
    tidb = shop(sim, 110)
    path = write_config(tmp_path / "cf.toml", config_doc(sim, lake, flush="1h"))
    proc = pull_process(path, "--progress-interval", "0.5")
    start = wait_until(lambda: watermarks(lake).ddl_resolved, 30, "the first flush")
    last = some_rows(tidb, random.Random(2), 110, 5)
    time.sleep(2.0)  # several resolved-ts ticks; nothing is flushed before the shutdown (1h interval)
    assert watermarks(lake).table_resolved[110] == start
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "pull cf1: 1 tables" in err and "stopped" in err
    assert watermarks(lake).table_resolved[110] >= last
    assert set(changelog(lake)) == oracle(sim, 110, start)


def test_shards_split_tables_by_logical_id_and_share_one_start(sim, tmp_path):
    rng = random.Random(4)
    lake = tmp_path / "lake"
    tidb = shop(sim, 110, 111)
    doc = config_doc(sim, lake)
    doc["puller"]["shards"] = 2
    config = parse_config(doc, "test.toml")
    with PullerThread(config, Shard(1, 2), first_run_wait_s=30) as second, PullerThread(config, Shard(0, 2)) as first:
        start = wait_resolved(lake, {110: 1, 111: 1}, 1, first) and watermarks(lake).ddl_resolved
        created = tidb.create_table(SHOP, 113, "t113")
        last = max(some_rows(tidb, rng, t) for t in (110, 111, 113))
        wait_resolved(lake, {110: last, 111: last, 113: last}, created, second)
    assert first.error is None and second.error is None
    assert set(first.summary.table_resolved) == {110}  # 110 % 2 == 0
    assert set(second.summary.table_resolved) == {111, 113}
    assert set(changelog(lake)) == oracle(sim, 110, start) | oracle(sim, 111, start) | oracle(sim, 113, start)
    jobs = [r for r in ddl_rows(lake) if r["source"] == DdlSource.JOB]
    assert [(r["job_id"], r["commit_ts"]) for r in jobs] == [(tidb.next_job_id, created)]  # landed by shard 0 only


def test_shards_of_a_feed_started_on_an_empty_cluster_share_its_start(sim, tmp_path):
    """No database yet: shard 0's start snapshot selects nothing, and its start row is what the
    other shard reads to start at the same ts (without it shard 1 waited for shard 0 forever)."""
    rng = random.Random(5)
    lake = tmp_path / "lake"
    doc = config_doc(sim, lake)
    doc["puller"]["shards"] = 2
    config = parse_config(doc, "test.toml")
    with PullerThread(config, Shard(1, 2), first_run_wait_s=20) as second, PullerThread(config, Shard(0, 2)) as first:
        wait_resolved(lake, {}, 1, first)
        tidb = shop(sim, 110, 111)
        last = max(some_rows(tidb, rng, t) for t in (110, 111))
        wait_resolved(lake, {110: last, 111: last}, last, second)
    assert first.error is None and second.error is None
    start = first.summary.start_ts
    assert second.summary.start_ts == start
    assert [(r["action_name"], r["table_id"]) for r in ddl_rows(lake)
            if r["source"] == DdlSource.SNAPSHOT and r["commit_ts"] == start] == [("none", 0)]
    assert set(first.summary.table_resolved) == {110} and set(second.summary.table_resolved) == {111}
    assert set(changelog(lake)) == oracle(sim, 110, start) | oracle(sim, 111, start)


def test_shard_must_match_the_config(sim, tmp_path):
    with pytest.raises(Exception, match=r"\[puller\].shards is 1 but --shard says 2"):
        PullerRunner(make_config(sim, tmp_path / "lake"), Shard(0, 2), RunOptions())


def test_a_requested_table_is_marked_joined_only_once_its_join_is_durable(sim, tmp_path, monkeypatch):
    """Bootstrap reads the table at J as soon as it sees `joined`. Were the puller to die before
    landing the join (the table's schema row at J, its watermark J), the restart would feed the
    table while the DDL history never learns of it: its replica could never be merged."""
    from tidelake.capture.landing.watermark_writer import WatermarkWriter
    from tidelake.lake.layout import LakeLayout
    from tidelake.lake.table_starts import StartState, TableStarts

    lake = tmp_path / "lake"
    tidb = shop(sim, 110)
    tidb.create_db(3, "other")
    tidb.create_table(3, 120, "t120")
    config = make_config(sim, lake)
    starts = TableStarts(LakeLayout(str(lake)))
    real_write = WatermarkWriter.write

    def lake_unavailable(*args, **kwargs):
        raise OSError("object store unavailable")

    def state():
        return {s.request_id: s for s in starts.latest("cf1")}[request.request_id]

    with PullerThread(config, table_starts_poll_s=0.1) as run:
        wait_resolved(lake, {110: 1}, 1, run)
        monkeypatch.setattr(WatermarkWriter, "write", lake_unavailable)
        request = starts.request("cf1", "other", "t120")
        time.sleep(2.0)  # many polls of the join loop, every flush failing
        assert state().state != StartState.JOINED
        monkeypatch.setattr(WatermarkWriter, "write", real_write)
        joined = wait_until(lambda: state().state == StartState.JOINED and state(), 30, "the join", None)
        assert run.error is None
    snapshot = [r for r in ddl_rows(lake) if r["source"] == DdlSource.SNAPSHOT and r["table_id"] == 120]
    assert [r["commit_ts"] for r in snapshot] == [joined.start_ts]
    assert watermarks(lake).table_resolved[120] >= joined.start_ts


def test_with_shards_a_requested_table_joins_at_one_scheduled_ts_between_the_same_jobs(sim, tmp_path):
    """Shard 0 lands the table's schema at J and its later DDL, the owner shard its data from J.
    A TRUNCATE landing between the schedule and J must be in the schema both start from, and
    only DDL after J in the table's history."""
    from deltalake import DeltaTable

    from tidelake.lake.layout import LakeLayout
    from tidelake.lake.table_starts import StartState, TableStarts, table_starts_path

    rng = random.Random(5)
    lake = tmp_path / "lake"
    tidb = shop(sim, 110, 111)
    tidb.create_db(3, "other")
    tidb.create_table(3, 120, "t120")  # owned by shard 0 (120 % 2)
    tidb.create_table(3, 121, "t121")  # owned by shard 1
    doc = config_doc(sim, lake)
    doc["puller"]["shards"] = 2
    config = parse_config(doc, "test.toml")
    starts = TableStarts(LakeLayout(str(lake)))
    options = {"table_starts_poll_s": 0.2, "join_lead_s": 3.0}
    with PullerThread(config, Shard(0, 2), **options) as first, \
            PullerThread(config, Shard(1, 2), first_run_wait_s=30, **options) as second:
        wait_resolved(lake, {110: 1, 111: 1}, 1, first)
        for table_id in (120, 121):
            some_rows(tidb, rng, table_id)
        requests = [starts.request("cf1", "other", "t120"), starts.request("cf1", "other", "t121")]

        def latest():
            states = {s.request_id: s for s in starts.latest("cf1")}
            return [states[r.request_id] for r in requests]

        scheduled = wait_until(lambda: all(s.state == StartState.SCHEDULED for s in latest()) and latest(), 30, "schedule")
        truncated = tidb.truncate_table(121, 131)  # 131 % 2: still shard 1's
        join_ts = {s.table: s.start_ts for s in scheduled}
        assert truncated < join_ts["t121"], "the TRUNCATE must land before the join ts for this test"
        wait_until(lambda: all(s.state == StartState.JOINED for s in latest()), 30, "both joined",
                 lambda: first.error or second.error)
        assert {s.table: s.start_ts for s in latest()} == join_ts
        last = max(some_rows(tidb, rng, table_id) for table_id in (120, 131))
        recreated = tidb.truncate_table(131, 141)  # after J: a job of the table's history, fed by shard 1
        last = max(last, some_rows(tidb, rng, 141))
        wait_resolved(lake, {120: last, 141: last}, recreated, second)
    assert first.error is None and second.error is None
    assert {120} <= set(first.summary.table_resolved) and not {121, 131, 141} & set(first.summary.table_resolved)
    assert {131, 141} <= set(second.summary.table_resolved) and 120 not in second.summary.table_resolved
    rows = ddl_rows(lake)
    snapshot = sorted((r["table_id"], r["commit_ts"]) for r in rows if r["source"] == DdlSource.SNAPSHOT and r["schema_id"] == 3)
    assert snapshot == sorted([(120, join_ts["t120"]), (131, join_ts["t121"])])
    jobs = [(r["table_id"], r["commit_ts"]) for r in rows if r["source"] == DdlSource.JOB and r["schema_id"] == 3]
    assert jobs == [(131, recreated)]  # TRUNCATE of 131 (which becomes 141); the earlier one is before J
    landed = {row for row in changelog(lake) if row[0] in (120, 121, 131, 141)}
    expected = oracle(sim, 120, join_ts["t120"]) | oracle(sim, 131, join_ts["t121"]) | oracle(sim, 141, recreated)
    assert landed == expected
    history = DeltaTable(table_starts_path(LakeLayout(str(lake)))).to_pyarrow_table().to_pylist()
    for request in requests:
        marks = [r["state"] for r in sorted(history, key=lambda r: r["updated_at"]) if r["request_id"] == request.request_id]
        assert marks == ["requested", "scheduled", "schema_landed", "joined"]


def test_with_shards_the_lake_unreachable_during_join_polls_delays_a_join_without_stopping_a_shard(
        sim, tmp_path, monkeypatch):
    """A dead S3 endpoint refuses connections and object_store gives up within seconds: a poll of
    the bootstrap requests then fails, and the next one takes the request up where it stood."""
    from tidelake.lake.table_starts import StartState, TableStarts

    rng = random.Random(6)
    lake, tidb, config, starts = sharded_join_setup(sim, tmp_path)
    real_latest, real_mark, failed = TableStarts.latest, TableStarts.mark, []

    def refused(*args, **kwargs):
        failed.append(1)
        raise OSError("Generic S3 error: tcp connect error: Connection refused (os error 111)")

    def state(request):
        return {s.request_id: s for s in real_latest(starts, "cf1")}[request.request_id]

    options = {"table_starts_poll_s": 0.2, "join_lead_s": 1.0}
    with PullerThread(config, Shard(0, 2), **options) as first, \
            PullerThread(config, Shard(1, 2), first_run_wait_s=30, **options) as second:
        def no_error():
            for shard in (first, second):
                if shard.error is not None:
                    raise shard.error

        wait_resolved(lake, {110: 1, 111: 1}, 1, first)
        monkeypatch.setattr(TableStarts, "latest", refused)
        monkeypatch.setattr(TableStarts, "mark", refused)
        request = starts.request("cf1", "other", "t121")
        wait_until(lambda: len(failed) >= 10, 30, "failed polls", no_error)
        assert first.error is None and second.error is None and state(request).state == StartState.REQUESTED
        monkeypatch.setattr(TableStarts, "latest", real_latest)
        monkeypatch.setattr(TableStarts, "mark", real_mark)
        wait_until(lambda: state(request).state == StartState.JOINED, 30, "the join", no_error)
        joined = state(request).start_ts
        last = max(some_rows(tidb, rng, t) for t in (110, 111, 121))
        wait_resolved(lake, {110: last, 111: last, 121: last}, 1, second)
    assert first.error is None and second.error is None
    landed = {row for row in changelog(lake) if row[0] == 121}
    assert landed == oracle(sim, 121, joined) and landed


def sharded_join_setup(sim, tmp_path):
    from tidelake.lake.layout import LakeLayout
    from tidelake.lake.table_starts import TableStarts

    lake = tmp_path / "lake"
    tidb = shop(sim, 110, 111)
    tidb.create_db(3, "other")
    tidb.create_table(3, 121, "t121")  # owned by shard 1
    doc = config_doc(sim, lake)
    doc["puller"]["shards"] = 2
    return lake, tidb, parse_config(doc, "test.toml"), TableStarts(LakeLayout(str(lake)))


def request_state(starts, request):
    return {s.request_id: s for s in starts.latest("cf1")}[request.request_id]


def test_with_shards_an_owner_stopped_across_the_join_ts_joins_exactly_there_when_restarted(sim, tmp_path):
    """The owner's restart replays DDL from its durable ts, below J, so its fence still holds."""
    from tidelake.lake.table_starts import StartState

    rng = random.Random(6)
    lake, tidb, config, starts = sharded_join_setup(sim, tmp_path)
    options = {"table_starts_poll_s": 0.2, "join_lead_s": 1.0}
    with PullerThread(config, Shard(0, 2), **options) as first:
        with PullerThread(config, Shard(1, 2), first_run_wait_s=30, **options) as second:
            wait_resolved(lake, {110: 1, 111: 1}, 1, first)
        assert second.error is None
        request = starts.request("cf1", "other", "t121")
        landed = wait_until(lambda: request_state(starts, request).state == StartState.SCHEMA_LANDED
                          and request_state(starts, request), 30, "schema landed by shard 0")
        before = some_rows(tidb, rng, 121)  # rows on both sides of J while the owner is down
        wait_until(lambda: first.runner._ddl.resolved_ts > landed.start_ts + (2 << 18), 30, "shard 0 past J")
        assert before > 0
        with PullerThread(config, Shard(1, 2), **options) as again:
            joined = wait_until(lambda: request_state(starts, request).state == StartState.JOINED
                              and request_state(starts, request), 30, "joined after the restart")
            last = some_rows(tidb, rng, 121)
            wait_resolved(lake, {121: last}, 0, again)
    assert joined.start_ts == landed.start_ts and again.error is None
    landed_rows = {row for row in changelog(lake) if row[0] == 121}
    assert landed_rows == oracle(sim, 121, joined.start_ts)


@pytest.mark.parametrize("crashing, mark", [(0, "schema_landed"), (1, "joined")])
def test_with_shards_a_shard_stopped_after_its_part_landed_but_before_its_mark_confirms_on_restart(
        sim, tmp_path, monkeypatch, crashing, mark):
    """The mark is appended only after the part it claims is durable; a shard stopped between
    the two finds its part in the lake (the schema row at J, its own watermarks) and marks it."""
    from tidelake.lake.table_starts import StartState, TableStarts

    rng = random.Random(7)
    lake, tidb, config, starts = sharded_join_setup(sim, tmp_path)
    options = {"table_starts_poll_s": 0.2, "join_lead_s": 1.0}
    real_mark = TableStarts.mark
    runners = {}
    lost = threading.Event()

    def mark_then_die(self, start, state, start_ts=None, reason=None):
        if state != mark or lost.is_set():
            return real_mark(self, start, state, start_ts, reason)
        lost.set()  # the part landed; the process dies before its mark is appended
        runners[crashing].runner.stop()
        return start

    monkeypatch.setattr(TableStarts, "mark", mark_then_die)
    with PullerThread(config, Shard(0, 2), **options) as first, \
            PullerThread(config, Shard(1, 2), first_run_wait_s=30, **options) as second:
        runners.update({0: first, 1: second})
        wait_resolved(lake, {110: 1, 111: 1}, 1, first)
        some_rows(tidb, rng, 121)
        request = starts.request("cf1", "other", "t121")
        wait_until(lost.is_set, 30, f"shard {crashing}'s part landed")
        runners[crashing].thread.join(60)
        assert request_state(starts, request).state != mark
        some_rows(tidb, rng, 121)  # while the shard is down
        with PullerThread(config, Shard(crashing, 2), **options) as again:
            joined = wait_until(lambda: request_state(starts, request).state == StartState.JOINED
                              and request_state(starts, request), 30, "joined after the restart")
            last = some_rows(tidb, rng, 121)
            wait_resolved(lake, {121: last}, 0, again if crashing else second)
    assert first.error is None and second.error is None and again.error is None
    assert {row for row in changelog(lake) if row[0] == 121} == oracle(sim, 121, joined.start_ts)
    snapshot = [r["commit_ts"] for r in ddl_rows(lake) if r["source"] == DdlSource.SNAPSHOT and r["table_id"] == 121]
    assert snapshot == [joined.start_ts]


def test_with_shards_a_shard_that_saw_the_schedule_after_passing_it_refuses(sim, tmp_path):
    from tidelake.lake.table_starts import MISSED_JOIN, StartState

    lake, _, config, starts = sharded_join_setup(sim, tmp_path)
    with PullerThread(config, Shard(0, 2), table_starts_poll_s=0.2, join_lead_s=0.5) as first, \
            PullerThread(config, Shard(1, 2), first_run_wait_s=30, table_starts_poll_s=3600) as second:
        wait_resolved(lake, {110: 1, 111: 1}, 1, first)
        wait_until(lambda: second.runner._ddl is not None and second.runner._ddl.resolved_ts > 0, 30, "shard 1 up")
        request = starts.request("cf1", "other", "t121")
        scheduled = wait_until(lambda: request_state(starts, request).state == StartState.SCHEDULED
                             and request_state(starts, request), 30, "scheduled")
        wait_until(lambda: second.runner._ddl.resolved_ts > scheduled.start_ts, 30, "shard 1 past J")
        second.runner._table_joins.poll()  # its own poll comes only every hour
        refused = request_state(starts, request)
    assert refused.state == StartState.MISSED and MISSED_JOIN in refused.reason and "shard 1/2" in refused.reason
    assert first.error is None and second.error is None


def test_changing_the_shard_count_adopts_the_previous_watermarks_and_retires_them(sim, tmp_path):
    """Shards 1 -> 2: the new shards start where the old puller's durable watermarks are (no
    replay from the changefeed's start, no re-landed snapshot), nothing committed while no puller
    ran is lost, and the old partition (which would hold every table back for ever) and its GC
    service safepoint are removed once both new shards have written theirs."""
    from tidelake.lake.watermarks import read_by_puller

    rng = random.Random(8)
    lake = tmp_path / "lake"
    layout = LakeLayout(str(lake))
    tidb = shop(sim, 110, 111)
    doc = config_doc(sim, lake)
    with PullerThread(parse_config(doc, "test.toml")) as one:
        begin = start_ts(lake, one)
        last = max(some_rows(tidb, rng, table_id) for table_id in (110, 111))
        wait_resolved(lake, {110: last, 111: last}, 1, one)
    assert one.error is None and begin < last
    frozen = read_by_puller(layout)
    assert list(frozen) == ["tidelake-puller/cf1"]
    snapshot = sorted((r["table_id"], r["commit_ts"]) for r in ddl_rows(lake) if r["source"] == DdlSource.SNAPSHOT)
    some_rows(tidb, rng, 110)  # committed while no puller runs
    assert "tidelake-cf1" in {s.service_id for s in sim.gc_safe_points.services()}
    doc["puller"]["shards"] = 2
    config = parse_config(doc, "test.toml")
    with PullerThread(config, Shard(0, 2), retire_grace_s=0.5) as first, PullerThread(config, Shard(1, 2)) as second:
        last = max(some_rows(tidb, rng, table_id) for table_id in (110, 111))
        wait_resolved(lake, {110: last, 111: last}, 1, first)
        wait_until(lambda: set(read_by_puller(layout)) == {"tidelake-puller/cf1-shard0of2",
                                                         "tidelake-puller/cf1-shard1of2"}, 30,
                 "the old partition retired", lambda: first.error or second.error)
    assert first.error is None and second.error is None
    old = frozen["tidelake-puller/cf1"].marks
    assert first.summary.start_ts == second.summary.start_ts == old.ddl_resolved > begin
    assert sorted((r["table_id"], r["commit_ts"]) for r in ddl_rows(lake) if r["source"] == DdlSource.SNAPSHOT) == snapshot
    assert "tidelake-cf1" not in {s.service_id for s in sim.gc_safe_points.services()}
    for table_id in (110, 111):
        landed = {row for row in changelog(lake) if row[0] == table_id}
        assert landed == oracle(sim, table_id, begin)
    assert watermarks(lake).table_resolved[110] >= last


def test_after_a_shard_count_change_a_table_no_old_shard_claimed_is_pulled_from_the_changefeed_start(sim, tmp_path):
    """Shard 1 of the old 2-shard layout never ran, so table 111 has no watermark anywhere: the
    new single shard must pull it from the changefeed's start, not from the adopted DDL ts."""
    rng = random.Random(9)
    lake = tmp_path / "lake"
    tidb = shop(sim, 110, 111)  # 111 % 2: shard 1's
    doc = config_doc(sim, lake)
    doc["puller"]["shards"] = 2
    with PullerThread(parse_config(doc, "test.toml"), Shard(0, 2)) as lone:
        begin = start_ts(lake, lone)
        last = max(some_rows(tidb, rng, table_id) for table_id in (110, 111))
        wait_resolved(lake, {110: last}, last, lone)
    assert lone.error is None and 111 not in watermarks(lake).table_resolved
    doc["puller"]["shards"] = 1
    with PullerThread(parse_config(doc, "test.toml"), retire_grace_s=0.5) as one:
        last = max(some_rows(tidb, rng, table_id) for table_id in (110, 111))
        wait_resolved(lake, {110: last, 111: last}, last, one)
    assert one.error is None
    for table_id in (110, 111):
        assert {row for row in changelog(lake) if row[0] == table_id} == oracle(sim, table_id, begin)


def test_a_spill_dir_gone_since_the_config_was_read_stops_the_puller_at_start(tmp_path):
    spill = tmp_path / "spill"
    spill.mkdir()
    doc = {"changefeed": {"id": "cf"}, "upstream": {"pd": ["127.0.0.1:1"]}, "lake": {"root": str(tmp_path / "lake")},
           "puller": {"spill_dir": str(spill)}}
    config = parse_config(doc, "test.toml")
    spill.rmdir()
    with pytest.raises(InputError, match=r"^test\.toml: \[puller\]\.spill_dir: cannot create a file in .*spill"):
        PullerRunner(config).run()
