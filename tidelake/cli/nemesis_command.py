"""`tidelake nemesis --seed S --schedules N [--workload bank|mixed] [--level landing|apply]
[--pullers thread|process [--shards N]] [--json FILE]`.

Runs N fault schedules (seeds S..S+N-1) against the simulator and the puller, each checked by the
independent landing checker (tidelake.nemesis); `--level apply` also merges with local Spark,
crashing the merge at its failpoints, takes a syncpoint and checks the replicas; `--pullers process`
runs the changefeed as `tidelake pull` shard processes and SIGKILLs them. One line per schedule,
then a summary; exit 1 on any anomaly, 0 otherwise. Owner: `tidelake nemesis`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections import Counter
from pathlib import Path

from tidelake.nemesis.batch import BatchOptions, run_batch
from tidelake.nemesis.schedule import ScheduleResult


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "nemesis",
        help="run seeded fault schedules against the simulator and the puller, then check what landed",
        description="Each schedule (seed S+i, reproducible from it) runs the simulator with a workload and the "
        "puller under a random schedule of faults (region churn, stream resets, busy and restarted stores, PD "
        "outages, duplicated and reordered delivery, puller crashes inside flushes, lake write errors), then "
        "checks the changelog at every durable watermark against the simulator's MVCC. With --pullers process "
        "the changefeed runs as `tidelake pull` shard processes and a puller crash is a real SIGKILL, at once or "
        "at a lander failpoint (docs/nemesis.md#the-process-mode---pullers-process---shards-n).",
    )
    parser.add_argument("--seed", type=int, required=True, help="seed of the first schedule")
    parser.add_argument("--schedules", type=int, default=1, metavar="N", help="how many schedules (default 1)")
    parser.add_argument("--workload", default="bank", help="bank (default) or mixed")
    parser.add_argument("--level", default="landing",
                        help="landing (default), or apply: also merge (local Spark) with 1-3 crashes of the merge "
                        "run at its failpoints, take a syncpoint and check every replica checkpoint and the syncpoint "
                        "against the upstream (every column of every row for mixed; run it under "
                        "`flock /tmp/tidelake-spark.lock` on a shared machine)")
    parser.add_argument("--pullers", default="thread",
                        help="thread (default): one puller on a thread of the nemesis, its crashes simulated at the "
                        "lander's failpoints; process: the changefeed as `tidelake pull` child processes, one per "
                        "shard, its crashes real SIGKILLs (at once, or at a lander failpoint armed through "
                        "TIDELAKE_FAILPOINTS), lake write errors not applied (landing level only)")
    parser.add_argument("--shards", type=int, default=1, metavar="N",
                        help="with --pullers process: how many shard processes ([puller].shards, default 1)")
    parser.add_argument("--duration", type=float, default=3.0, metavar="S",
                        help="seconds of traffic and faults per schedule (default 3)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every schedule's result and the summary here")
    parser.add_argument("--log", type=Path, metavar="FILE",
                        help="warnings of the simulator and the puller go here (default: discarded)")
    parser.set_defaults(handler=_nemesis)


def _nemesis(args: argparse.Namespace) -> int:
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # gRPC core's own notices would interleave with the lines

    options = BatchOptions(args.seed, args.schedules, args.workload, args.level, args.duration, args.pullers,
                           args.shards)
    if args.log is not None:
        logging.basicConfig(filename=str(args.log), level=logging.WARNING,
                            format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
    else:
        logging.disable(logging.CRITICAL)  # injected failures log loudly by design; the verdict is the check
    pullers = "" if options.pullers == "thread" else f", {options.shards} puller shard process(es)"
    print(f"nemesis: {options.schedules} {options.level}-level schedules of the {options.workload} workload{pullers}, "
          f"seeds {options.seed}..{options.seed + options.schedules - 1}; rerun one with: "
          f"{options.rerun_command(options.seed)}", flush=True)

    def line(result: ScheduleResult) -> None:
        faults = " ".join(f"{k}={n}" for k, n in sorted(result.faults.items())) or "none"
        if result.missed:
            faults += " (armed, not struck: " + " ".join(f"{k}={n}" for k, n in sorted(result.missed.items())) + ")"
        if result.skipped:
            faults += " (not applied: " + " ".join(f"{k}={n}" for k, n in sorted(result.skipped.items())) + ")"
        if options.pullers == "process":
            faults += "; SIGKILLs: " + (" ".join(f"{k}={n}" for k, n in sorted(result.puller_kills.items())) or "none")
        anomalies = " ".join(f"{k}={n}" for k, n in result.anomalies_by_kind().items()) or "none"
        print(f"seed {result.plan.seed}: {result.seconds:.1f}s, {result.txns} txns, "
              f"{sum(result.ddls.values())} DDL, faults: {faults}; "
              f"checked {result.watermarks_checked} watermarks, {result.totals_checked} totals"
              + (f", {result.copies_checked} rewritten rows" if result.copies_checked else "")
              + (f", {result.removed_checked} removed ids" if result.removed_checked else "")
              + (f", {result.checkpoints_checked} checkpoints, {result.syncpoints_checked} syncpoints"
                 + (f", {result.values_checked} values" if result.values_checked else "")
                 + (" (maintenance between merges)" if result.maintained else "")
                 if options.level == "apply" else "") + "; "
              + ("unchecked: " + " ".join(f"{k}={n}" for k, n in sorted(result.unchecked.items())) + "; "
                 if result.unchecked else "") +
              f"anomalies: {anomalies}", flush=True)
        for anomaly in result.anomalies[:3]:
            print(f"  {anomaly.kind} (table {anomaly.table_id}, ts {anomaly.ts}): {anomaly.detail}", flush=True)
        if not result.ok:
            print(f"  rerun: {options.rerun_command(result.plan.seed)}", flush=True)

    try:
        summary = run_batch(options, line)
    finally:
        logging.disable(logging.NOTSET)
    if args.json is not None:
        args.json.write_text(json.dumps(summary.to_json(), indent=2) + "\n")
    faults = ", ".join(f"{k} {n}" for k, n in sorted(summary.faults.items()))
    anomalies = ", ".join(f"{k} {n}" for k, n in sorted(summary.anomalies.items())) or "none"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    unchecked = sum((r.unchecked for r in summary.results), Counter())
    kills = ""
    if options.pullers == "process":
        kills = "; SIGKILLs: " + (", ".join(f"{k} {n}" for k, n in sorted(summary.puller_kills.items())) or "none")
    print(f"summary: {len(summary.results)} schedules in {summary.seconds:.0f}s (load {load}); "
          f"faults: {sum(summary.faults.values())} ({faults}){kills}; "
          + (f"unchecked: {', '.join(f'{k} {n}' for k, n in sorted(unchecked.items()))}; " if unchecked else "")
          + f"anomalies: {anomalies}", file=sys.stdout)
    if summary.ddls:
        print(f"DDL issued: {sum(summary.ddls.values())} ("
              + ", ".join(f"{k} {n}" for k, n in sorted(summary.ddls.items())) + ")")
    if summary.failed_seeds:
        print(f"failed seeds: {' '.join(map(str, summary.failed_seeds))}")
    return 1 if summary.failed_seeds else 0
