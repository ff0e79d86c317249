"""A puller restarted while a DDL job runs: TiDB has written the job's first steps' meta, the job is
done only later. The restarted puller must feed the tables as the finished jobs left them, so the
job leaves (and joins) the same ids it would have without the restart. Oracle: the simulator's
MVCC write records and its own job; the restart's ts is the durable DDL watermark."""

from __future__ import annotations

import threading

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
from tidelake.capture.changefeed.ddl_puller import JobRowDecoder
from tidelake.capture.changefeed.puller_runner import Shard
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.capture.changefeed.running_jobs import running_jobs
from tidelake.codec.keys import DDL_JOB_TABLE_ID, record_key
from tidelake.codec.row_v2 import encode_row_v2
from tidelake.config import parse_config
from tidelake.lake.layout import DdlSource, LakeLayout
from tidelake.lake.watermarks import read_by_puller
from tidelake.sim.tidb.ddl import DDLExecutor
from tidelake.sim.tidb.session import SimTiDB
from tidelake.sim.tidb.sql_errors import SqlError
from tidelake.upstream.kv_snapshot import SnapshotReader
from tidelake.upstream.pd_client import PDClient
from tidelake.wait import wait_until


class HeldLastStep:
    """Holds the next DDL job of the thread it is given before its last step's transaction, outside
    the simulator's schema lock: the job's earlier steps have committed their meta, the job is not
    done, and DML and other DDL go on meanwhile."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        self.thread: threading.Thread | None = None
        self._entries = 0
        self._hold_at: int | None = None

    def install(self, tidb: SimTiDB, monkeypatch) -> None:
        """Count the job thread's entries into the executor's schema lock: its job row's, then one
        per step; wait before the last step's."""
        lock, gate, run = tidb._schema_lock, self, DDLExecutor._run

        class Gated:
            def __enter__(self):
                gate._entering()
                return lock.__enter__()

            def __exit__(self, *exc):
                return lock.__exit__(*exc)

        def counted(executor, plan):
            if threading.current_thread() is gate.thread and gate._hold_at is None:
                gate._entries, gate._hold_at = 0, len(plan.steps) + 1
            return run(executor, plan)

        monkeypatch.setattr(tidb, "_schema_lock", Gated())
        monkeypatch.setattr(DDLExecutor, "_run", counted)

    def _entering(self) -> None:
        if threading.current_thread() is not self.thread or self._hold_at is None:
            return
        self._entries += 1
        if self._entries == self._hold_at:
            self.reached.set()
            assert self.release.wait(60), "the test never released the job"


@pytest.fixture
def hold():
    held = HeldLastStep()
    yield held
    held.release.set()  # a failed test must not leave the job's thread waiting


JOBS = {
    "drop partition": lambda tidb: tidb.drop_partition("shop", "events", "p1"),
    "rename out of the filter": lambda tidb: tidb.rename_table("shop", "events", "events", new_db="other"),
    "reorganize partition": lambda tidb: tidb.reorganize_partition("shop", "events", ["p1"],
                                                                   [("p1a", ["150"]), ("p1b", ["200"])]),
    "remove partitioning": lambda tidb: tidb.remove_partitioning("shop", "events"),
}


def events_table(tidb: SimTiDB) -> None:
    tidb.create_database("shop")
    tidb.create_database("other")
    tidb.create_table("shop", "events", [("id", "bigint"), ("v", "varchar(20)")], primary_key=["id"],
                      partition={"type": "range", "column": "id", "bounds": [("p0", 100), ("p1", 200)]})


def write(tidb: SimTiDB, ids: range) -> int:
    with tidb.txn() as t:
        for i in ids:
            t.insert("shop", "events", {"id": i, "v": f"v{i}"})
    return t.commit_ts


def replicated_ids_at(tidb: SimTiDB, ts: int) -> list[int]:
    """The physical ids of shop.events in TiDB's meta at `ts` (the filter is shop.*)."""
    try:
        return tidb.table_info_at("shop", "events", ts).physical_ids()
    except SqlError:
        return []


def job_in_background(tidb: SimTiDB, monkeypatch, hold: HeldLastStep, job) -> tuple[threading.Thread, dict]:
    """Start `job`; return once its last step is reached (and held)."""
    hold.install(tidb, monkeypatch)
    done: dict = {}
    thread = threading.Thread(target=lambda: done.update(job=job(tidb)))
    hold.thread = thread
    thread.start()
    assert hold.reached.wait(30)
    return thread, done


def finish(hold: HeldLastStep, thread: threading.Thread, done: dict, lake, run: PullerThread) -> int:
    """Let the held job take its last step; its finished ts, once the DDL watermark passed it."""
    hold.release.set()
    thread.join(30)
    finished = done["job"].finished_ts
    wait_resolved(lake, {}, finished, run)
    return finished


def assert_fed_until(lake, ids: list[int], finished: int) -> None:
    """Every id was fed up to the job (the merge's barrier is finished - 1)."""
    resolved = watermarks(lake).table_resolved
    assert all(resolved[pid] >= finished - 1 for pid in ids), (resolved, finished)


@pytest.mark.parametrize("job", JOBS.values(), ids=JOBS.keys())
def test_a_puller_restarted_inside_a_job_that_removes_ids_feeds_them_until_the_job_is_done(
        sim, tmp_path, monkeypatch, hold, job):
    lake = tmp_path / "lake"
    tidb = SimTiDB(sim)
    events_table(tidb)
    ids = tidb.table_info("shop", "events").physical_ids()
    with PullerThread(make_config(sim, lake)) as run:
        start = start_ts(lake, run)
        write(tidb, range(95, 105))
        thread, done = job_in_background(tidb, monkeypatch, hold, job)
        mid_job = sim.tso.next()
        # TiDB's meta already shows the job's first step: the puller's schema snapshot would too.
        assert replicated_ids_at(tidb, mid_job) != ids
        wait_resolved(lake, dict.fromkeys(ids, mid_job), mid_job, run)
    assert run.error is None
    restart_at = watermarks(lake).ddl_resolved
    assert restart_at >= mid_job
    with PullerThread(make_config(sim, lake)) as run:
        wait_resolved(lake, {}, restart_at, run)
        finished = finish(hold, thread, done, lake, run)
    assert run.error is None
    # Fed up to the job, so its rows up to there are complete (the merge's barrier is finished - 1).
    assert_fed_until(lake, ids, finished)
    assert {r for r in changelog(lake) if r[0] in ids} == set().union(*(oracle(sim, pid, start) for pid in ids))
    job_rows = [r for r in ddl_rows(lake) if r["source"] == DdlSource.JOB and r["job_id"] == done["job"].id]
    assert [r["commit_ts"] for r in job_rows] == [finished]


def test_the_running_jobs_at_a_ts_are_those_past_their_first_step_and_not_done(sim, monkeypatch, hold):
    tidb = SimTiDB(sim)
    events_table(tidb)
    table_id = tidb.table_info("shop", "events").id
    before = sim.tso.next()
    thread, done = job_in_background(tidb, monkeypatch, hold, JOBS["drop partition"])
    mid_job = sim.tso.next()
    hold.release.set()
    thread.join(30)
    after = sim.tso.next()
    pd = PDClient([sim.pd_address])
    with SnapshotReader(pd) as reader:
        decoder = JobRowDecoder.load(reader, mid_job)
        (running,) = running_jobs(reader, decoder, mid_job)
        assert running.job.id == done["job"].id and running.table_ids == {table_id}
        assert running_jobs(reader, decoder, before) == []
        assert running_jobs(reader, decoder, after) == []
        assert reader.get(record_key(DDL_JOB_TABLE_ID, done["job"].id), mid_job) is not None
    pd.close()


@pytest.mark.parametrize("text, ids", [(b"", set()), (b"7", {7}), (b"7,9", {7, 9})])
def test_the_table_ids_of_a_job_row_are_read_from_its_column(text, ids):
    value = encode_row_v2({4: text, 5: b"{}"})
    assert JobRowDecoder(None).table_ids(value) == ids


def test_a_reload_job_finishing_while_another_job_runs_leaves_that_jobs_tables_as_they_were_fed(
        sim, tmp_path, monkeypatch, hold):
    """A RENAME TABLES swap (the tracker reloads the schema at its finished ts) while a DROP
    PARTITION of another table is between its steps, no restart: the schema at the swap already
    lacks the dropping partition, which must still be fed until the DROP is done."""
    lake = tmp_path / "lake"
    tidb = SimTiDB(sim)
    events_table(tidb)
    for name in ("a", "b"):
        tidb.create_table("shop", name, [("id", "bigint")], primary_key=["id"])
    ids = tidb.table_info("shop", "events").physical_ids()
    with PullerThread(make_config(sim, lake)) as run:
        start = start_ts(lake, run)
        write(tidb, range(95, 105))
        thread, done = job_in_background(tidb, monkeypatch, hold, JOBS["drop partition"])
        # TiDB runs jobs on different tables at once; the simulator's one DDL lock would not.
        monkeypatch.setattr(tidb, "_ddl_lock", threading.RLock())
        swapped = tidb.rename_tables([("shop", "a", "shop", "tmp"), ("shop", "b", "shop", "a"),
                                      ("shop", "tmp", "shop", "b")]).finished_ts
        wait_resolved(lake, {}, swapped, run)
        finished = finish(hold, thread, done, lake, run)
    assert run.error is None
    assert_fed_until(lake, ids, finished)
    assert {r for r in changelog(lake) if r[0] in ids} == set().union(*(oracle(sim, pid, start) for pid in ids))


def test_a_shard_restarting_inside_a_job_waits_for_shard_0_to_land_the_ddl_history_up_to_its_restart(
        sim, tmp_path, monkeypatch, hold):
    """Shard 1 restores the job's tables from the `ddl` table, which only shard 0 lands: with shard
    0 behind (stopped earlier) it refuses in one line after its wait, and goes on once shard 0 runs."""
    lake = tmp_path / "lake"
    tidb = SimTiDB(sim)
    events_table(tidb)
    ids = tidb.table_info("shop", "events").physical_ids()
    doc = config_doc(sim, lake)
    doc["puller"]["shards"] = 2
    config = parse_config(doc, "test.toml")
    with PullerThread(config, Shard(1, 2), first_run_wait_s=30) as second:
        with PullerThread(config, Shard(0, 2)) as first:
            start = start_ts(lake, first)
            write(tidb, range(95, 105))
            thread, done = job_in_background(tidb, monkeypatch, hold, JOBS["drop partition"])
            mid_job = sim.tso.next()
            wait_resolved(lake, dict.fromkeys(ids, mid_job), mid_job, first)
        ahead = sim.tso.next()
        wait_until(lambda: shard_ddl(lake, 1) >= ahead, 30, "shard 1's DDL watermark past shard 0's")
    assert first.error is None and second.error is None
    with PullerThread(config, Shard(1, 2), first_run_wait_s=2) as alone:
        wait_until(lambda: alone.error is not None, 30, "shard 1 to refuse")
    assert "for shard 0 to land the DDL history up to ts" in str(alone.error)
    assert "restarts inside DDL job(s)" in str(alone.error) and "start shard 0 first" in str(alone.error)
    with PullerThread(config, Shard(1, 2), first_run_wait_s=30) as second, PullerThread(config, Shard(0, 2)) as first:
        wait_resolved(lake, {}, ahead, second)
        finished = finish(hold, thread, done, lake, second)
    assert first.error is None and second.error is None
    assert_fed_until(lake, ids, finished)
    assert {r for r in changelog(lake) if r[0] in ids} == set().union(*(oracle(sim, pid, start) for pid in ids))


def shard_ddl(lake, index: int) -> int:
    """Shard `index` of 2's own durable DDL watermark."""
    marks = read_by_puller(LakeLayout(str(lake)))
    return next((m.marks.ddl_resolved for name, m in marks.items() if name.endswith(f"-shard{index}of2")), 0)


def test_a_puller_restarted_inside_a_rename_tables_swap_with_an_unselected_table_feeds_each_side_by_its_name(
        sim, tmp_path, monkeypatch, hold):
    """RENAME TABLES swaps shop.a (in the filter) with other.x (not in it) through other.tmp; the
    puller restarts while the job is held before its step. Until the job is done shop.a's id is
    fed and other.x's is not; from the job on the swapped ids trade places."""
    lake = tmp_path / "lake"
    tidb = SimTiDB(sim)
    tidb.create_database("shop")
    tidb.create_database("other")
    tidb.create_table("shop", "a", [("id", "bigint")], primary_key=["id"])
    tidb.create_table("other", "x", [("id", "bigint")], primary_key=["id"])
    a_id, x_id = tidb.table_info("shop", "a").id, tidb.table_info("other", "x").id

    def insert(ids: range, a: tuple[str, str], x: tuple[str, str]) -> int:
        """Rows into the tables now named `a` (ids) and `x` (ids + 1000)."""
        with tidb.txn() as t:
            for i in ids:
                t.insert(*a, {"id": i})
                t.insert(*x, {"id": i + 1000})
        return t.commit_ts

    named = (("shop", "a"), ("other", "x"))
    swap = [("shop", "a", "other", "tmp"), ("other", "x", "shop", "a"), ("other", "tmp", "other", "x")]
    with PullerThread(make_config(sim, lake)) as run:
        start = start_ts(lake, run)
        insert(range(0, 5), *named)
        thread, done = job_in_background(tidb, monkeypatch, hold, lambda t: t.rename_tables(swap))
        before_step = insert(range(5, 10), *named)
        wait_resolved(lake, {a_id: before_step}, before_step, run)
    assert run.error is None
    restart_at = watermarks(lake).ddl_resolved
    with PullerThread(make_config(sim, lake)) as run:
        wait_resolved(lake, {}, restart_at, run)
        finished = finish(hold, thread, done, lake, run)
        after = insert(range(10, 15), *reversed(named))  # the swap traded the names
        wait_resolved(lake, {x_id: after}, after, run)
    assert run.error is None and restart_at < finished
    assert_fed_until(lake, [a_id], finished)
    landed = set(changelog(lake))
    assert {r for r in landed if r[0] == a_id} == {r for r in oracle(sim, a_id, start) if r[2] < finished}
    assert {r for r in landed if r[0] == x_id} == {r for r in oracle(sim, x_id, start) if r[2] > finished}
