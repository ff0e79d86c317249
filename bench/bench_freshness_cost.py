"""What the freshness metrics add to a merge run: the time of write_freshness_metrics (the figures
of `tidelake freshness` over the last 5 minutes, tidelake.status.freshness_metrics) against the
merge run it follows, on the same lake, at each --tables size.

The lake is fed through the real Lander and merged through delta-rs on the driver (no Spark; the
test suite's FedLake builds it, tests/merge/lake_fixtures.py): --passes passes, each committing
--commits transactions to every table (so no changelog file's statistics name its commit ts: the
flush's commit names them, tidelake.lake.flush_stamps), one flush, one resolve and one logged
merge run of every table (timed). Then the metrics are written --repeats times (timed). Reported
per size: merge run median, metrics median and min-max, their ratio, and the log versions the
figures read.

--incremental times the merge follower's figures instead (a FreshnessTracker,
tidelake.status.freshness_tracker): one call over the span first, then --repeats times
--new-passes more passes and a timed call, each against collect_freshness over the same span at
the same time (the full recompute, timed too; their figures must be equal).

    .venv/bin/python bench/bench_freshness_cost.py [--tables 10,100] [--passes 20] [--commits 3] [--repeats 3]
        [--incremental [--new-passes 1]] [--json F]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from bench._common import Timer, counts, markdown_table, median, print_environment, write_json  # noqa: E402
from merge.lake_fixtures import FedLake  # noqa: E402
from tidelake import tso  # noqa: E402
from tidelake.merge.merge_run import run_merge  # noqa: E402
from tidelake.status.freshness import RECENT_SPAN_S, collect_freshness  # noqa: E402
from tidelake.status.freshness_metrics import write_freshness_metrics  # noqa: E402
from tidelake.status.freshness_tracker import FreshnessTracker  # noqa: E402

DB = "bench"


def fed_lake(tables: int, root: str) -> tuple[FedLake, list[str]]:
    """A lake of `tables` tables created 10 minutes ago, resolved and merged 5 minutes ago."""
    lake = FedLake(root)
    now_ms = int(time.time() * 1000)
    lake.up.ts = tso.compose(now_ms - 600_000)
    lake.ddl(lake.up.create_schema(DB))
    names = [f"t{i:04d}" for i in range(tables)]
    for name in names:
        lake.ddl(lake.up.create_table(DB, name, [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    lake.resolve(tso.compose(now_ms - 300_000))
    run_merge(None, lake.layout, write_log=False)  # creates the replicas
    return lake, names


def one_pass(lake: FedLake, names: list[str], p: int, commits: int) -> float:
    """`commits` transactions on every table, a flush, a resolve and a logged merge run: its seconds."""
    for c in range(commits):
        with lake.txn(tso.compose(int(time.time() * 1000) - 1)) as t:
            for name in names:
                t.put(DB, name, {"id": p * commits + c, "note": f"p{p}"})
        time.sleep(0.002)  # each transaction its own commit ts
    lake.lander.flush()
    lake.resolve(tso.compose(int(time.time() * 1000)))
    with Timer() as merged:
        run_merge(None, lake.layout)
    return merged.wall_s


def feed(lake: FedLake, names: list[str], passes: int, commits: int) -> list[float]:
    """`passes` passes (one_pass); their merge runs' seconds. Warns when they outlast the span."""
    began = time.monotonic()
    merge_s = [one_pass(lake, names, p, commits) for p in range(passes)]
    build_s = time.monotonic() - began
    if build_s > RECENT_SPAN_S:
        print(f"  warning: building took {build_s:.0f}s, over the {RECENT_SPAN_S}s span: fewer passes count",
              flush=True)
    return merge_s


def one_size(tables: int, passes: int, commits: int, repeats: int, root: str) -> dict:
    lake, names = fed_lake(tables, root)
    merge_s = feed(lake, names, passes, commits)
    metrics_s = []
    for _ in range(repeats):
        with Timer() as written:
            assert write_freshness_metrics(lake.layout, min_interval_s=0) is not None  # every write computes
        metrics_s.append(written.wall_s)
    report = collect_freshness(lake.layout, RECENT_SPAN_S)
    lake.close()
    return {"tables": tables, "passes": passes, "changes": report.changes, "merge_run_s_p50": median(merge_s),
            "metrics_s_p50": median(metrics_s), "metrics_s_min": min(metrics_s), "metrics_s_max": max(metrics_s),
            "metrics_vs_merge_run": median(metrics_s) / median(merge_s), "versions_read": report.versions_read,
            "merged_pending": report.stages["merged"].pending, "load_avg_1m": os.getloadavg()[0]}


def one_size_incremental(tables: int, passes: int, commits: int, repeats: int, new_passes: int, root: str) -> dict:
    lake, names = fed_lake(tables, root)
    feed(lake, names, passes, commits)
    tracker = FreshnessTracker(lake.layout, RECENT_SPAN_S)
    with Timer() as first:
        tracker.report()
    call_s, full_s, reads, merge_s = [], [], [], []
    for r in range(repeats):
        merge_s += [one_pass(lake, names, passes + r * new_passes + p, commits) for p in range(new_passes)]
        now_ms = int(time.time() * 1000)
        with Timer() as call:
            tracked = tracker.report(now_ms)
        with Timer() as full:
            checked = collect_freshness(lake.layout, RECENT_SPAN_S, now_ms=now_ms)
        tracked_json, checked_json = tracked.to_json(), checked.to_json()
        reads.append(tracked_json.pop("versions_read"))
        checked_json.pop("versions_read")
        if tracked_json != checked_json:
            raise SystemExit(f"{tables} tables: the tracker's figures differ from collect_freshness's")
        call_s.append(call.wall_s)
        full_s.append(full.wall_s)
    lake.close()
    return {"tables": tables, "passes": passes, "new_passes": new_passes, "changes": checked.changes,
            "first_call_s": first.wall_s, "call_s_p50": median(call_s), "call_s_min": min(call_s),
            "call_s_max": max(call_s), "full_s_p50": median(full_s), "full_s_min": min(full_s),
            "full_s_max": max(full_s), "call_vs_full": median(call_s) / median(full_s),
            "merge_run_s_p50": median(merge_s), "versions_read": reads[-1], "load_avg_1m": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=counts, default="10,100", help="table counts, comma-separated")
    parser.add_argument("--passes", type=int, default=20, help="flush + merge passes before the metrics")
    parser.add_argument("--commits", type=int, default=3, help="transactions per pass, each touching every table")
    parser.add_argument("--repeats", type=int, default=3, help="timed metrics writes per size")
    parser.add_argument("--incremental", action="store_true", help="time the merge follower's tracker instead")
    parser.add_argument("--new-passes", type=int, default=1, help="with --incremental: passes before each call")
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    env = print_environment()
    sizes = []
    for tables in args.tables:
        with tempfile.TemporaryDirectory(prefix="bench-freshness-cost-") as tmp:
            root = os.path.join(tmp, "lake")
            sizes.append(one_size_incremental(tables, args.passes, args.commits, args.repeats, args.new_passes, root)
                         if args.incremental else one_size(tables, args.passes, args.commits, args.repeats, root))
        print(f"  {tables} tables done", flush=True)
    if args.incremental:
        print(markdown_table(
            ["tables", "changes", "first call s", "call (median s)", "min-max", "full recompute (median s)",
             "min-max", "call / full", "merge run (median s)",
             "versions read by a call (changelog, watermarks, replicas, syncpoints)", "load 1m"],
            [[s["tables"], s["changes"], s["first_call_s"], s["call_s_p50"], f"{s['call_s_min']:.3f}-{s['call_s_max']:.3f}",
              s["full_s_p50"], f"{s['full_s_min']:.3f}-{s['full_s_max']:.3f}", s["call_vs_full"], s["merge_run_s_p50"],
              ", ".join(str(s["versions_read"][k]) for k in ("changelog", "watermarks", "replicas", "syncpoints")),
              s["load_avg_1m"]] for s in sizes]))
        results = {"sizes": sizes, "incremental": True}
        write_json(args.json, "bench_freshness_cost", env, results)
        return results
    print(markdown_table(
        ["tables", "changes", "merge run (median s)", "metrics (median s)", "min-max", "metrics / run",
         "versions read (changelog, watermarks, replicas, syncpoints)", "load 1m"],
        [[s["tables"], s["changes"], s["merge_run_s_p50"], s["metrics_s_p50"],
          f"{s['metrics_s_min']:.3f}-{s['metrics_s_max']:.3f}", s["metrics_vs_merge_run"],
          ", ".join(str(v) for v in s["versions_read"].values()), s["load_avg_1m"]] for s in sizes]))
    results = {"sizes": sizes}
    write_json(args.json, "bench_freshness_cost", env, results)
    return results


if __name__ == "__main__":
    main()
