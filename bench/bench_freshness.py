"""Freshness per change: from each change's upstream commit to its changelog, watermark, replica and syncpoint.

Per run (fresh simulator, lake and puller each; --runs runs per table count in --tables):
  setup    a SimCluster + SimTiDB in this process; a changefeed starts, then N tables
           `fresh.tNNNN (id BIGINT PRIMARY KEY, v VARCHAR)` are created (so merges create their
           replicas from the CREATE); `tidelake pull` runs as a child until every table is covered;
           then two `tidelake merge` passes, not measured: the first creates every replica (cold),
           the second has nothing but the watermarks' advance to merge (the pass's fixed cost).
  load     --duration s of changes at --rate changes/s in total, round-robin over the tables, each
           change its own transaction: an INSERT of a new id, or (--updates, --deletes fractions)
           an UPDATE or DELETE of a live id of that table. (table, id, commit ts) names each change.
  merger   `--merger loop`: `tidelake merge --config` passes back to back from the start of the load
           (a scheduler running as often as it can); with --syncpoint-interval, as the merge DAG
           runs them, each capped at the next boundary and followed by `tidelake syncpoint` when a
           cut may be due; on a warm Spark (`--spark warm`: one Spark Connect server
           for the whole bench, as the DAGs run) or a local Spark started by each pass (`local`).
           `--merger follow`: one `tidelake merge --follow` child for the load.
           `--merger airflow`: the production path: Airflow standalone with the changefeed's DAGs
           (tidelake.demos.on_airflow), tidelake_merge unpaused with [merge].run_on_new_data
           (--run-on-new-data; asset-triggered runs besides --merge-schedule), each merge task a
           Spark Connect client of the warm server; its runs, tasks and asset events read from the
           Airflow API before Airflow is stopped by its process tree (bench/_freshness_airflow.py).
           `--merger airflow-follow`: the same with [merge] follow = true, tidelake_merge_follow
           unpaused too: its task runs the merge follower on the warm server; the load starts once
           the follower holds its lease, and the merge DAG's runs leave the merge to it.
  drain    after the load, until every replica's checkpoint (and, with syncpoints, a cut) reaches
           the last change (--drain-timeout); then the merger finishes its pass and stops.
Post hoc, from the lake's own Delta logs read with deltalake (delta-rs, not tidelake's readers),
per change (bench/_freshness_stages.py): seconds from its commit (the physical part of its commit
ts) to the commit time of
  landed     the first changelog version whose added files hold its commit ts;
  covered    the first watermarks version where its table's resolved ts >= its commit ts;
  merged     the first replica version whose checkpoint (the merge's txn action) >= its commit ts;
  syncpoint  the first syncpoints version holding a cut ts >= its commit ts.
Reported: p50/p95/p99/max per stage, the achieved rate, the merge passes (count, wall p50/max, per
table), and merged p50 against the landed and covered p50 of the same run (what a merge could
reach at best); per table count, the median (min-max) over the runs. Load average at start and end.
With --merger airflow the passes are the merge DAG's runs, and the Airflow side is reported per run:
runs by type, their duration, asset event to run start, each task's share (bench/_freshness_airflow.py).

    flock /tmp/tidelake-spark.lock .venv/bin/python bench/bench_freshness.py [--tables 10,100]
        [--rate 200] [--duration 60] [--runs 3] [--merger loop|follow|airflow|airflow-follow] [--spark warm|local]
        [--run-on-new-data 15s] [--merge-schedule 1m]
        [--syncpoint-interval 0] [--flush-interval 5s] [--updates 0.2] [--deletes 0.1] [--merge-threads N] [--json PATH]
        [--keep-logs DIR]
Every merge runs Spark: run the bench under the shared Spark lock.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import counts, markdown_table, median, percentile, print_environment, write_json  # noqa: E402
from bench._freshness_stages import STAGES, Change, Reach, first_landing, out_of_order, stage_seconds, summarize  # noqa: E402
from tidelake.config_writer import changefeed_document, write_config  # noqa: E402
from bench._freshness_airflow import merge_tasks, run_passes, summarize_runs  # noqa: E402
from tidelake.demos import on_airflow  # noqa: E402
from tidelake.demos.installed_airflow import write_dag_file  # noqa: E402
from tidelake.demos.supervisor import Child, await_stage, free_port  # noqa: E402
from tidelake.lake.checkpoint import MERGE_APP_ID  # noqa: E402
from tidelake.lake.layout import LakeLayout  # noqa: E402
from tidelake.lake.lease import live_holder, merge_follower_lease  # noqa: E402
from tidelake.lake.watermarks import read_watermarks  # noqa: E402
from tidelake.merge.merge_log import merge_log_path  # noqa: E402
from tidelake.orchestration.assets import changelog_asset_uri  # noqa: E402
from tidelake.orchestration.merge_dag import syncpoint_cap, syncpoint_not_due  # noqa: E402
from tidelake.sim.cluster import SimCluster  # noqa: E402
from tidelake.sim.tidb.session import SimTiDB  # noqa: E402
from tidelake.spark import connect_server  # noqa: E402

DATABASE = "fresh"
MERGERS = ("loop", "follow", "airflow", "airflow-follow")


def tidelake_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "tidelake", *args]


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    return {**env, "PYSPARK_PYTHON": sys.executable, "COLUMNS": "200"}


# ---- the upstream and its load -----------------------------------------------------------------

class Upstream:
    """The simulator, the changefeed's start ts, then the N tables created after it."""

    def __init__(self, tables: int, seed: int) -> None:
        self.cluster = SimCluster(n_stores=3, seed=seed, gc_interval_s=0, split_check_interval_s=0)
        self.cluster.start()
        self.tidb = SimTiDB(self.cluster)
        self.tidb.create_database(DATABASE)
        self.start_ts = self.cluster.tso.next()
        self.names = [f"t{i:04d}" for i in range(tables)]
        for name in self.names:
            self.tidb.create_table(DATABASE, name, [("id", "bigint"), ("v", "varchar(64)")], primary_key=["id"])
        self.table_ids = {name: self.tidb.resolve_table(DATABASE, name)[1].id for name in self.names}
        self.created_ts = self.cluster.tso.next()

    def close(self) -> None:
        self.cluster.stop()


class Load:
    """`rate` changes/s for `duration_s`, round-robin over the tables, each change one transaction."""

    def __init__(self, up: Upstream, rate: float, duration_s: float, updates: float, deletes: float,
                 seed: int) -> None:
        self.up, self.rate, self.duration_s = up, rate, duration_s
        self.updates, self.deletes = updates, deletes
        self.changes: list[Change] = []
        self.errors = 0
        self.behind_s = 0.0  # how late the last change was against its schedule
        self.elapsed_s = 0.0
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="freshness-load", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._thread.join()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        live: dict[str, list[int]] = {name: [] for name in self.up.names}
        next_id: Counter[str] = Counter()
        began = time.monotonic()
        total = int(self.rate * self.duration_s)
        for i in range(total):
            if self._stop.is_set():
                break
            due = began + i / self.rate
            self._stop.wait(max(0.0, due - time.monotonic()))
            self.behind_s = max(0.0, time.monotonic() - due)
            name = self.up.names[i % len(self.up.names)]
            try:
                self.changes.append(self._change(name, live[name], next_id))
            except Exception:  # noqa: BLE001 - a failed statement is counted, the load goes on
                self.errors += 1
        self.elapsed_s = time.monotonic() - began

    def _change(self, name: str, live: list[int], next_id: Counter[str]) -> Change:
        draw = self._rng.random()
        op = "insert"
        if live and draw < self.deletes:
            op = "delete"
        elif live and draw < self.deletes + self.updates:
            op = "update"
        with self.up.tidb.txn() as txn:
            if op == "insert":
                next_id[name] += 1
                row_id = next_id[name]
                txn.insert(DATABASE, name, {"id": row_id, "v": f"insert {row_id}"})
            else:
                at = self._rng.randrange(len(live))
                row_id = live[at]
                if op == "update":
                    txn.update(DATABASE, name, {"id": row_id}, {"v": f"update {row_id} {time.monotonic_ns()}"})
                else:
                    txn.delete(DATABASE, name, {"id": row_id})
        if op == "insert":
            live.append(row_id)
        elif op == "delete":
            live[at] = live[-1]
            live.pop()
        return Change(name, row_id, op, txn.commit_ts)


# ---- the merger ----------------------------------------------------------------------------------

class LoopMerger:
    """`tidelake merge` passes back to back on a thread; with syncpoints, as the merge DAG runs them:
    each merge capped at the first boundary above the last cut, then `tidelake syncpoint` when one
    may be due (tidelake.orchestration.merge_dag). `stop` lets the running pass finish. A continuous
    merger would be a child started once with the same `spark_args` and stopped the same way."""

    def __init__(self, config: Path, spark_args: list[str], layout: LakeLayout, syncpoint_interval_s: int | None,
                 logs: Path, threads: int | None = None) -> None:
        self.config, self.spark_args, self.layout, self.logs = config, spark_args, layout, logs
        self.merge_args = ["--threads", str(threads)] if threads is not None else []  # the merge's default else
        self.syncpoint_interval_s = syncpoint_interval_s
        self.passes: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="freshness-merger", daemon=True)

    def one_pass(self, label: str) -> dict:
        began_at, started = time.time(), time.monotonic()
        cap = syncpoint_cap(self.layout, self.syncpoint_interval_s, None)
        merge = self._run_command(label, "merge", "--config", str(self.config), *self.spark_args, *self.merge_args,
                                  *(("--until-ts", str(cap)) if cap is not None else ()))
        done = {"label": label, "merge_s": time.monotonic() - started, "merge_exit": merge, "began_at": began_at,
                "ended_at": time.time()}
        if self.syncpoint_interval_s and syncpoint_not_due(self.layout, self.syncpoint_interval_s) is None:
            began = time.monotonic()
            done["syncpoint_exit"] = self._run_command(f"{label}-syncpoint", "syncpoint", "--config", str(self.config),
                                                       *self.spark_args)
            done["syncpoint_s"] = time.monotonic() - began
        return done

    def _run_command(self, label: str, *args: str) -> int:
        log = self.logs / f"{label}.log"
        child = Child(label, tidelake_command(*args), log, child_env())
        code = child.process.wait()
        child.stop(grace_s=5)
        if code not in (0, 75):  # 75: nothing could advance now (docs/operations.md#merge-exit-codes)
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            print(f"# {label}: `tidelake {args[0]}` exited {code}:\n{tail}", file=sys.stderr, flush=True)
        return code

    def start(self) -> None:
        self._thread.start()

    def check(self, stage: str) -> None:
        """Raises when the merger's process died (the loop's passes report their own exits)."""

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def close(self) -> None:
        """After a failed run: no further pass starts (the running one ends with its process)."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.passes.append(self.one_pass(f"pass-{len(self.passes) + 1}"))


class FollowMerger(LoopMerger):
    """`tidelake merge --follow` (tidelake.merge.follow), one child for the whole load on the same
    Spark; it takes the syncpoints itself. Its passes are not timed here (pass figures stay empty);
    the create and idle passes before the load are `tidelake merge` runs as for the loop."""

    def start(self) -> None:
        self._child = Child("follower", tidelake_command("merge", "--follow", "--config", str(self.config),
                                                         *self.spark_args, *self.merge_args),
                            self.logs / "follower.log", child_env())

    def stop(self) -> None:
        self._child.check("drain")  # still following: a follower that died is the run's failure
        self._child.stop(grace_s=60)

    def close(self) -> None:
        """After a failed run: the follower stopped if it was started and still runs."""
        child = getattr(self, "_child", None)
        if child is not None and child.process.poll() is None:
            child.stop(grace_s=60)


class AirflowMerger(LoopMerger):
    """The production path's merge (tidelake.demos.on_airflow, as `make demo` runs it): Airflow
    standalone with the changefeed's DAGs from the factory, only tidelake_merge unpaused: runs on
    its schedule and on new data ([merge].run_on_new_data: an asset event from the triggerer), one
    at a time, each merge task a Spark Connect client of the bench's warm server. The puller stays
    the bench's child, as for the other mergers, so landed and covered are the same process's. The
    passes are the DAG's runs as its API recorded them (`airflow`: bench/_freshness_airflow.py);
    the create and idle passes before the load are `tidelake merge` runs as for the loop."""

    def __init__(self, config: Path, spark_args: list[str], layout: LakeLayout, syncpoint_interval_s: int | None,
                 logs: Path, changefeed_id: str, remote: str, merge_schedule: str, startup_timeout_s: float) -> None:
        super().__init__(config, spark_args, layout, syncpoint_interval_s, logs)
        self.paths = on_airflow.DemoPaths(logs.parent)
        self.dags = on_airflow.DemoDags(suffix=f"__{changefeed_id}")
        self.remote, self.merge_schedule, self.startup_timeout_s = remote, merge_schedule, startup_timeout_s
        self.airflow: dict = {}
        self.task_passes: list[dict] = []
        self._say = on_airflow.Say()
        self._child: Child | None = None

    def start(self) -> None:
        """Airflow up with the DAG file written, the merge DAG parsed and unpaused (its first
        scheduled run starts now); returns before the load starts."""
        self.paths.airflow_home.mkdir()
        self.port = free_port(8080)
        env = on_airflow.airflow_env(self.paths, self.port, spark_remote=self.remote)
        write_dag_file(self.paths.dags_folder, self.dags.suffix.removeprefix("__"), self.config,
                       **on_airflow.dag_settings(on_airflow.AirflowDemoOptions(merge_schedule=self.merge_schedule)))
        self._child = on_airflow.standalone(self.paths, env, self.port, self._say)
        self.api = on_airflow.airflow_api(self.paths, self.port)
        checks = [self._child.check]
        on_airflow.await_airflow(self.api, self.startup_timeout_s, self._child.log, checks)
        on_airflow.set_writer_pool(self.api, self.config)
        on_airflow.unpause_when_parsed(self.api, (self.dags.merge,), self.startup_timeout_s, self._child.log, checks)
        # The new-data watcher's trigger is registered when the DAG processor next parses the file
        # with the DAG unpaused (up to [dag_processor] min_file_process_interval); the triggerer then
        # starts it, and its first poll only takes the baseline.
        from tidelake.orchestration.airflow.new_data_trigger import POLL_S  # imports Airflow: this merger only

        changelog = changelog_asset_uri(self.dags.suffix.removeprefix("__"))
        await_stage("new-data watcher", lambda: self.api.asset_watchers(changelog), self.startup_timeout_s,
                    self._child.log, checks, 2)
        time.sleep(2 * POLL_S)
        self._say(f"{self.dags.merge} unpaused, its new-data watcher registered; Airflow UI http://localhost:{self.port}")

    def check(self, stage: str) -> None:
        if self._child is not None:
            self._child.check(stage)

    def stop(self) -> None:
        """Let the runs running now finish (up to 5 minutes; pausing first would leave their
        unqueued tasks waiting), pause the merge DAG, read its runs from the API, then stop Airflow
        by its process tree (on_airflow.shutdown)."""
        try:
            self._child.check("drain")
            running = {r["dag_run_id"] for r in self.api.runs(self.dags.merge) if r["state"] == "running"}
            began = time.monotonic()
            while running and time.monotonic() - began < 300:
                time.sleep(2)
                running &= {r["dag_run_id"] for r in self.api.runs(self.dags.merge) if r["state"] == "running"}
            self.api.set_paused(self.dags.merge, True)
            runs = [{**run, "tasks": self.api.task_instances(self.dags.merge, run["dag_run_id"]),
                     "events": (self.api.upstream_asset_events(self.dags.merge, run["dag_run_id"])
                                if run["run_type"] == "asset_triggered" else [])}
                    for run in self.api.runs(self.dags.merge)]
        finally:
            self.close()
        self.airflow = summarize_runs(runs)
        self.passes = run_passes(runs)
        self.task_passes = merge_tasks(runs)

    def close(self) -> None:
        if self._child is not None:
            child, self._child = self._child, None
            on_airflow.shutdown([child], self.port, self.paths, self.dags, self._say)


class AirflowFollowMerger(AirflowMerger):
    """The production path with the merge follower ([merge] follow = true): as AirflowMerger, and
    the factory's tidelake_merge_follow unpaused too, its one task running the follower against
    the bench's warm server (tidelake.orchestration.airflow.dags.merge_follow). The load starts
    once the follower holds its lease; the scheduled and asset-triggered merge runs then leave the
    merge to it, and are reported as for AirflowMerger. The follower's passes are not timed (as
    FollowMerger's); `airflow.follow` says when its task ran and how it ended."""

    @property
    def follow_dag(self) -> str:
        return f"tidelake_merge_follow{self.dags.suffix}"

    def start(self) -> None:
        super().start()
        unpaused = time.monotonic()
        on_airflow.unpause_when_parsed(self.api, (self.follow_dag,), self.startup_timeout_s, self._child.log,
                                       [self._child.check])
        await_stage("merge follower lease", lambda: live_holder(self.layout, merge_follower_lease()),
                    self.startup_timeout_s, self._child.log, [self._child.check], 1)
        self.follow_started_s = time.monotonic() - unpaused
        self._say(f"{self.follow_dag} unpaused, its follower holds the lease after {self.follow_started_s:.1f}s")

    def stop(self) -> None:
        """The follower still holding its lease (a follower that died fails the run), its DAG's runs
        and task read, then the merge DAG's runs as AirflowMerger reads them; Airflow's shutdown
        stops the follower's task, which lets its pass finish."""
        if self._child is not None and live_holder(self.layout, merge_follower_lease()) is None:
            raise RuntimeError(f"the merge follower of {self.follow_dag} lost its lease during the load; "
                               f"see {self.paths.airflow_home}")
        follow = [{**run, "tasks": self.api.task_instances(self.follow_dag, run["dag_run_id"])}
                  for run in self.api.runs(self.follow_dag)]
        super().stop()
        self.follow = {"started_after_unpause_s": self.follow_started_s, "runs": len(follow),
                       "task_states": sorted(t["state"] for run in follow for t in run["tasks"])}
        self.airflow["follow"] = self.follow
        self.passes, self.task_passes = [], []


# ---- the run -----------------------------------------------------------------------------------

def one_run(tables: int, run_no: int, args: argparse.Namespace, tmp: Path, spark_args: list[str]) -> dict:
    workdir = tmp / f"t{tables}-r{run_no}"
    logs = workdir / "logs"
    logs.mkdir(parents=True)
    load_start = os.getloadavg()
    up = Upstream(tables, args.seed + run_no)
    puller = merger = None
    try:
        lake = workdir / "lake"
        layout = LakeLayout(str(lake))
        puller_conf = {"flush_interval": args.flush_interval} if args.flush_interval else None
        merge_conf = {"syncpoint_interval": f"{args.syncpoint_interval}s"} if args.syncpoint_interval else {}
        spark_conf = None
        if args.merger.startswith("airflow"):  # as the demo's changefeed (on_airflow.write_demo_changefeed)
            merge_conf.update(run_on_new_data=args.run_on_new_data, parallel_jobs=1,
                              **({"follow": True} if args.merger == "airflow-follow" else {}))
            spark_conf = {"remote": spark_args[1]}
        changefeed_id = f"fresh{tables}r{run_no}"
        config = write_config(workdir / "fresh.toml", changefeed_document(
            changefeed_id, [up.cluster.pd_address], lake, rules=[f"{DATABASE}.*"], start_ts=up.start_ts,
            gc_ttl="1h", puller=puller_conf, merge=merge_conf or None, spark=spark_conf))
        puller = Child("puller", tidelake_command("pull", "--config", str(config), "--progress-interval", "30"),
                       logs / "puller.log", child_env())
        covered_s = _await_covered(layout, up, puller, args.start_timeout)
        if args.merger.startswith("airflow"):
            merger = (AirflowFollowMerger if args.merger == "airflow-follow" else AirflowMerger)(
                config, spark_args, layout, args.syncpoint_interval or None, logs, changefeed_id, spark_args[1],
                args.merge_schedule, args.start_timeout)
        else:
            merger = (FollowMerger if args.merger == "follow" else LoopMerger)(
                config, spark_args, layout, args.syncpoint_interval or None, logs, args.merge_threads)
        create_pass = merger.one_pass("create")
        idle_pass = merger.one_pass("idle")
        if create_pass["merge_exit"] not in (0, 75):
            raise RuntimeError(f"the first merge pass exited {create_pass['merge_exit']}; see {logs}/create.log")
        load = Load(up, args.rate, args.duration, args.updates, args.deletes, args.seed + run_no)
        merger.start()
        load.start()
        load.join()
        drained_s = _drain(layout, up, load, merger, puller, args)
        merger.stop()
    finally:
        if merger is not None:
            merger.close()
        if puller is not None:
            puller.stop(grace_s=30)
        up.close()
        if args.keep_logs is not None:
            keep_logs(workdir, args.keep_logs / workdir.name)
    started = time.monotonic()
    per_change, reads = measure(layout, up, load.changes, bool(args.syncpoint_interval))
    result = run_result(tables, run_no, args, load, per_change, merger.passes, create_pass, idle_pass)
    result.update(pass_split(layout, merger.passes))
    if isinstance(merger, AirflowMerger):
        tasks = pass_split(layout, merger.task_passes)
        result["airflow"] = {**merger.airflow, "merge_task_outside_run_s_p50": tasks["outside_run_s_p50"],
                             "merge_task_in_run_s_p50": tasks["in_run_s_p50"]}
    result.update(covered_at_start_s=covered_s, drained_s=drained_s, lake_read_s=time.monotonic() - started,
                  versions=reads, load_start=load_start, load_end=os.getloadavg())
    return result


def keep_logs(workdir: Path, into: Path) -> None:
    """Copy a run's logs (its children's, and Airflow's task logs with --merger airflow*) into
    `into`; a failed copy is a warning, never the run's failure."""
    for part, name in ((workdir / "logs", "."), (workdir / "airflow_home" / "logs", "airflow")):
        if part.is_dir():
            try:
                shutil.copytree(part, into / name, dirs_exist_ok=True)
            except OSError as exc:
                print(f"# --keep-logs: {part} not copied: {exc}", file=sys.stderr, flush=True)


def _await_covered(layout: LakeLayout, up: Upstream, puller: Child, timeout_s: float) -> float:
    """Until the watermarks cover every table's CREATE: the puller follows them all."""
    began = time.monotonic()
    while not read_watermarks(layout).reached(up.created_ts, up.table_ids.values()):
        puller.check("puller start")
        if time.monotonic() - began > timeout_s:
            raise TimeoutError(f"the puller did not cover the {len(up.names)} tables within {timeout_s:.0f}s; "
                               f"see {puller.log}")
        time.sleep(0.5)
    return time.monotonic() - began


def _drain(layout: LakeLayout, up: Upstream, load: Load, merger: LoopMerger, puller: Child,
           args: argparse.Namespace) -> float | None:
    """Seconds after the load until every replica's checkpoint reaches its table's last change (and
    a cut the last change of all, with syncpoints); None when --drain-timeout passed first (the
    stages then miss some changes). A replica with no change after another table's last one need
    not move: the follower commits nothing to a table without work."""
    if not load.changes:
        return 0.0
    last_of: dict[str, int] = {}
    for c in load.changes:
        last_of[c.table] = max(last_of.get(c.table, 0), c.commit_ts)
    last = max(last_of.values())
    began = time.monotonic()
    while time.monotonic() - began < args.drain_timeout:
        puller.check("drain")
        merger.check("drain")
        if all(_checkpoint(layout.replica_path(DATABASE, name)) >= ts for name, ts in last_of.items()) and (
                not args.syncpoint_interval or _newest_cut(layout) >= last):
            return time.monotonic() - began
        time.sleep(1.0)
    print(f"# drain: not every replica reached the last change within {args.drain_timeout:.0f}s", flush=True)
    return None


def _checkpoint(path: str) -> int:
    try:
        return DeltaTable(path).transaction_version(MERGE_APP_ID) or -1
    except DeltaError:
        return -1


def _newest_cut(layout: LakeLayout) -> int:
    try:
        ts = DeltaTable(layout.syncpoints).to_pyarrow_table(columns=["ts"]).column("ts")
    except DeltaError:
        return -1
    return pc.max(ts).as_py() or -1


# ---- post hoc, from the Delta logs ---------------------------------------------------------------

def snapshots(path: str) -> Iterator[tuple[int, DeltaTable]]:
    """(commit time ms, the table as of that version) for every loadable version, oldest first."""
    newest = DeltaTable(path)
    times = {h["version"]: h["timestamp"] for h in newest.history()}
    snapshot = None
    for version in range(newest.version() + 1):
        try:
            if snapshot is None:
                snapshot = DeltaTable(path, version=version)
            else:
                snapshot.load_as_version(version)
        except DeltaError:
            continue  # a version whose log was cleaned up
        yield times[version], snapshot


def _local(uri: str) -> str:
    return uri.removeprefix("file://")


def landed_versions(path: str) -> Iterator[tuple[int, list[int]]]:
    """(commit time ms, commit ts of the rows in the files the version added) per changelog version."""
    files: set[str] = set()
    for time_ms, snapshot in snapshots(path):
        now = set(snapshot.file_uris())
        added = sorted(now - files)
        files = now
        yield time_ms, [ts for uri in added
                        for ts in pq.ParquetFile(_local(uri)).read(columns=["commit_ts"]).column(0).to_pylist()]


def covered_reaches(path: str, table_ids: dict[str, int]) -> dict[str, Reach]:
    """Each table's resolved ts (the lowest any puller claims) per watermarks version."""
    points: dict[str, list[tuple[int, int]]] = {name: [] for name in table_ids}
    by_id = {tid: name for name, tid in table_ids.items()}
    for time_ms, snapshot in snapshots(path):
        rows = snapshot.to_pyarrow_table(columns=["kind", "table_id", "resolved_ts"])
        rows = rows.filter(pc.equal(rows.column("kind"), "table"))
        lowest: dict[int, int] = {}
        for tid, ts in zip(rows.column("table_id").to_pylist(), rows.column("resolved_ts").to_pylist()):
            lowest[tid] = min(lowest.get(tid, ts), ts)
        for tid, ts in lowest.items():
            if tid in by_id:
                points[by_id[tid]].append((time_ms, ts))
    return {name: Reach(p) for name, p in points.items()}


def merged_reach(path: str) -> Reach:
    """The replica's checkpoint (the merge's txn action) per replica version."""
    return Reach((time_ms, snapshot.transaction_version(MERGE_APP_ID) or -1) for time_ms, snapshot in snapshots(path))


def syncpoint_reach(path: str) -> Reach:
    """The newest cut ts per syncpoints version."""
    def newest(snapshot: DeltaTable) -> int:
        return pc.max(snapshot.to_pyarrow_table(columns=["ts"]).column("ts")).as_py() or -1
    return Reach((time_ms, newest(snapshot)) for time_ms, snapshot in snapshots(path))


def pass_split(layout: LakeLayout, passes: list[dict]) -> dict[str, float | None]:
    """Where a load pass's wall time went, from the merge log (one row per table per `tidelake merge`
    run): in the run (first table's start to last table's finish), outside it (process start, Spark
    session, reading the lake's control tables), and each table's own merge. Medians over the passes."""
    path = merge_log_path(layout)
    if not passes or not DeltaTable.is_deltatable(path):
        return {"in_run_s_p50": None, "outside_run_s_p50": None, "table_s_p50": None, "table_s_p95": None}
    rows = DeltaTable(path).to_pyarrow_table(columns=["run_id", "duration_s", "started_at", "finished_at"]).to_pylist()
    runs: dict[str, list[dict]] = {}
    for row in rows:
        runs.setdefault(row["run_id"], []).append(row)
    in_run, outside, per_table = [], [], []
    for p in passes:
        mine = [r for r in runs.values() if p["began_at"] <= min(x["started_at"].timestamp() for x in r) <= p["ended_at"]]
        if len(mine) != 1:
            continue  # a pass that logged no run (it failed before) or a syncpoint's run
        (run,) = mine
        span = (max(x["finished_at"] for x in run) - min(x["started_at"] for x in run)).total_seconds()
        in_run.append(span)
        outside.append(p["merge_s"] - span)
        per_table += [x["duration_s"] for x in run]
    return {"in_run_s_p50": median(in_run) if in_run else None,
            "outside_run_s_p50": median(outside) if outside else None,
            "table_s_p50": percentile(per_table, 50) if per_table else None,
            "table_s_p95": percentile(per_table, 95) if per_table else None}


def measure(layout: LakeLayout, up: Upstream, changes: list[Change],
            syncpoints: bool) -> tuple[list[dict[str, float | None]], dict[str, int]]:
    """Seconds from commit to each stage per change, and the versions read per table kind."""
    landed = first_landing(landed_versions(layout.changelog))
    covered = covered_reaches(layout.watermarks, up.table_ids)
    merged = {}
    for name in up.names:
        path = layout.replica_path(DATABASE, name)
        if DeltaTable.is_deltatable(path):
            merged[name] = merged_reach(path)
    cuts = syncpoint_reach(layout.syncpoints) if syncpoints and DeltaTable.is_deltatable(layout.syncpoints) else None
    reads = {"changelog": DeltaTable(layout.changelog).version() + 1,
             "watermarks": DeltaTable(layout.watermarks).version() + 1,
             "replicas": sum(len(r) for r in merged.values()), "syncpoints": len(cuts) if cuts is not None else 0}
    return [stage_seconds(c, landed, covered, merged, cuts) for c in changes], reads


# ---- report ------------------------------------------------------------------------------------

def run_result(tables: int, run_no: int, args: argparse.Namespace, load: Load, per_change: list[dict],
               passes: list[dict], create_pass: dict, idle_pass: dict) -> dict:
    summary = summarize(per_change)
    walls = [p["merge_s"] for p in passes]
    ratios = {}
    merged_p50 = summary["merged"]["p50"]
    for ceiling in ("landed", "covered"):
        if merged_p50 is not None and summary[ceiling]["p50"]:
            ratios[f"merged_p50_vs_{ceiling}_p50"] = merged_p50 / summary[ceiling]["p50"]
    return {
        "tables": tables, "run": run_no, "target_rate": args.rate, "changes": len(load.changes),
        "ops": dict(Counter(c.op for c in load.changes)), "load_errors": load.errors,
        "achieved_rate": len(load.changes) / load.elapsed_s if load.elapsed_s else 0.0,
        "load_behind_s": load.behind_s, "stages": summary, "out_of_order": out_of_order(per_change),
        "ratios": ratios,
        "passes": len(passes), "pass_s_p50": median(walls) if walls else None, "pass_s_max": max(walls, default=None),
        "pass_s_per_table": median(walls) / tables if walls else None,
        "syncpoint_s_p50": median(p["syncpoint_s"] for p in passes if "syncpoint_s" in p)
        if any("syncpoint_s" in p for p in passes) else None,
        "syncpoint_runs": sum("syncpoint_s" in p for p in passes),
        "failed_passes": sum(p["merge_exit"] not in (0, 75) for p in passes),
        "create_pass_s": create_pass["merge_s"], "idle_pass_s": idle_pass["merge_s"],
    }


def spread(values: list[float]) -> dict[str, float] | None:
    return {"median": median(values), "min": min(values), "max": max(values)} if values else None


def by_tables(runs: list[dict]) -> dict[int, dict]:
    """Per table count, each figure as median (min-max) over its runs."""
    out = {}
    for tables in sorted({r["tables"] for r in runs}):
        mine = [r for r in runs if r["tables"] == tables]
        figures = {f"{stage}_{p}": spread([r["stages"][stage][p] for r in mine if r["stages"][stage][p] is not None])
                   for stage in STAGES for p in ("p50", "p95", "p99", "max")}
        for key in ("achieved_rate", "pass_s_p50", "pass_s_per_table", "idle_pass_s", "syncpoint_s_p50",
                    "in_run_s_p50", "outside_run_s_p50", "table_s_p50", "table_s_p95"):
            figures[key] = spread([r[key] for r in mine if r[key] is not None])
        for key in ("merged_p50_vs_landed_p50", "merged_p50_vs_covered_p50"):
            figures[key] = spread([r["ratios"][key] for r in mine if key in r["ratios"]])
        figures["missing"] = {stage: sum(r["stages"][stage]["missing"] for r in mine) for stage in STAGES}
        figures["out_of_order"] = sum(r["out_of_order"] for r in mine)
        out[tables] = {"runs": len(mine), **figures}
    return out


def _fmt(value: dict | None) -> str:
    if value is None:
        return "-"
    if len({round(value["min"], 2), round(value["max"], 2)}) == 1:
        return f"{value['median']:.2f}"
    return f"{value['median']:.2f} ({value['min']:.2f}-{value['max']:.2f})"


def print_report(runs: list[dict], summary: dict[int, dict], syncpoints: bool) -> None:
    stages = STAGES if syncpoints else STAGES[:-1]
    print("\n## Freshness per change: seconds from upstream commit, median (min-max) over runs\n")
    rows = []
    for tables, fig in summary.items():
        for stage in stages:
            rows.append([tables, fig["runs"], _fmt(fig["achieved_rate"]), stage,
                         *(_fmt(fig[f"{stage}_{p}"]) for p in ("p50", "p95", "p99", "max")), fig["missing"][stage]])
    print(markdown_table(["tables", "runs", "changes/s", "stage", "p50 s", "p95 s", "p99 s", "max s", "missing"], rows))
    print()
    print(markdown_table(
        ["tables", "merge passes / run", "pass s p50", "in the run s", "outside it s", "table merge s p50",
         "table merge s p95", "pass s per table", "idle pass s", "syncpoint s p50",
         "merged p50 / landed p50", "merged p50 / covered p50", "changes out of stage order"],
        [[tables, median(r["passes"] for r in runs if r["tables"] == tables), _fmt(fig["pass_s_p50"]),
          _fmt(fig["in_run_s_p50"]), _fmt(fig["outside_run_s_p50"]), _fmt(fig["table_s_p50"]),
          _fmt(fig["table_s_p95"]), _fmt(fig["pass_s_per_table"]), _fmt(fig["idle_pass_s"]),
          _fmt(fig["syncpoint_s_p50"]),
          _fmt(fig["merged_p50_vs_landed_p50"]), _fmt(fig["merged_p50_vs_covered_p50"]), fig["out_of_order"]]
         for tables, fig in summary.items()]))
    airflow = [r for r in runs if "airflow" in r]
    if airflow:
        print("\n## The merge DAG's runs (Airflow API), per bench run; seconds, medians over the DAG's runs\n")
        keys = ("run_s_p50", "event_to_queued_s_p50", "event_to_start_s_p50", "start_to_plan_s_p50", "plan_s_p50",
                "plan_to_merge_s_p50", "merge_task_s_p50", "merge_task_in_run_s_p50", "merge_task_outside_run_s_p50")
        print(markdown_table(
            ["tables", "run", "DAG runs (by type)", "without a merge task", "run s", "event -> queued",
             "event -> start", "start -> plan", "plan", "plan -> merge", "merge task", "its merge run",
             "the task outside it"],
            [[r["tables"], r["run"], f"{r['airflow']['runs']} ("
              + ", ".join(f"{n} {kind}" for kind, n in sorted(r["airflow"]["run_types"].items())) + ")",
              r["airflow"]["runs_without_merge"],
              *("-" if r["airflow"][k] is None else f"{r['airflow'][k]:.2f}" for k in keys)] for r in airflow]))
        for r in (r for r in airflow if "follow" in r["airflow"]):
            follow = r["airflow"]["follow"]
            print(f"\n{r['tables']} tables, run {r['run']}: the follower DAG's {follow['runs']} run(s), its task "
                  f"{', '.join(follow['task_states'])} at the drain; its follower held the lease "
                  f"{follow['started_after_unpause_s']:.1f}s after the DAG was unpaused")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=counts, default="10,100", help="table counts, comma-separated")
    parser.add_argument("--rate", type=float, default=200.0, help="changes/s in total over the tables")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load per run")
    parser.add_argument("--runs", type=int, default=1, help="runs per table count")
    parser.add_argument("--merger", choices=MERGERS, default="loop",
                        help="loop: `tidelake merge` passes back to back; follow: `tidelake merge --follow`; "
                             "airflow: the merge DAG in Airflow standalone; airflow-follow: and the merge follower "
                             "DAG")
    parser.add_argument("--run-on-new-data", default="15s",
                        help="--merger airflow: [merge].run_on_new_data, the floor between asset-triggered runs")
    parser.add_argument("--merge-schedule", default="1m", help="--merger airflow: the merge DAG's schedule")
    parser.add_argument("--spark", choices=("warm", "local"), default="warm",
                        help="warm: one Spark Connect server for every pass; local: each pass starts local Spark")
    parser.add_argument("--syncpoint-interval", type=int, default=0, help="seconds between cuts; 0: no syncpoints")
    parser.add_argument("--flush-interval", default=None, help="the puller's flush interval (default: the config's)")
    parser.add_argument("--updates", type=float, default=0.2, help="fraction of changes that update a live row")
    parser.add_argument("--deletes", type=float, default=0.1, help="fraction of changes that delete a live row")
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--start-timeout", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--merge-threads", type=int, default=None,
                        help="tables merged at once (`tidelake merge --threads`; default: the merge's)")
    parser.add_argument("--json", help="also write the results as JSON here")
    parser.add_argument("--keep-logs", type=Path, default=None,
                        help="copy each run's logs (puller, merges, follower; Airflow's task logs) into this folder")
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.duration <= 0 or args.runs < 1:
        parser.error("--rate and --duration must be positive and --runs at least 1")
    if not 0 <= args.updates + args.deletes <= 1 or min(args.updates, args.deletes) < 0:
        parser.error("--updates and --deletes are fractions that add up to at most 1")
    if args.merger.startswith("airflow") and args.spark != "warm":
        parser.error(f"--merger {args.merger} runs its merge tasks on the warm Spark Connect server: use --spark warm")
    if args.merger.startswith("airflow") and args.merge_threads is not None:
        parser.error(f"--merge-threads is for the merge commands the bench starts; with --merger {args.merger} the "
                     "DAGs' tasks use the merge's default threads")
    env = print_environment()
    results: dict = {"load_start": os.getloadavg(), "merger": args.merger, "spark": args.spark,
                     "flush_interval": args.flush_interval or "config default",
                     "syncpoint_interval_s": args.syncpoint_interval or None, "runs": []}
    with tempfile.TemporaryDirectory(prefix="bench-freshness-") as tmp_name:
        tmp = Path(tmp_name)
        server = None
        if args.spark == "warm":
            server = connect_server.ServerSettings(tmp / "spark-server", port=free_port(15002), master="local[2]")
            connect_server.start(server)
            spark_args = ["--remote", server.url]
        else:
            spark_args = ["--master", "local[2]"]
        try:
            for tables in args.tables:
                for run_no in range(1, args.runs + 1):
                    run = one_run(tables, run_no, args, tmp, spark_args)
                    results["runs"].append(run)
                    merged = run["stages"]["merged"]
                    print(f"# {tables} tables, run {run_no}: {run['achieved_rate']:.0f} changes/s, merged p50 "
                          f"{merged['p50']} s p99 {merged['p99']} s, {run['passes']} passes of "
                          f"{run['pass_s_p50']} s, {run['out_of_order']} out of stage order, "
                          f"load {run['load_end']}", flush=True)
        finally:
            if server is not None:
                connect_server.stop(server)
    results["by_tables"] = by_tables(results["runs"])
    results["load_end"] = os.getloadavg()
    print_report(results["runs"], results["by_tables"], bool(args.syncpoint_interval))
    print(f"\nload average (1, 5, 15 min): start {results['load_start']}, end {results['load_end']}")
    write_json(args.json, "freshness" if args.merger == "loop" else f"freshness_{args.merger.replace('-', '_')}", env,
               results)
    return results


if __name__ == "__main__":
    main()
