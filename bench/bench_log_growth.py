"""How the merge follower's per-pass reads of a replica's log grow with the log's commit files
(a replica keeps delta.logRetentionDuration of them, 30 days by default: a commit every few seconds
leaves tens of thousands), on a local folder or on moto's S3 server (--store s3, request counts
from the server's own log: tidelake/demos/s3_requests.py).

Each log of --files N: versions 0 and 1 written by delta-rs as a replica is (REPLICA_PROPERTIES,
one-row appends recording the merge's txn), then versions 2..N+2 written as files, each a commit of
commitInfo and the merge's txn alone (the commit tidelake.merge.writers.delta_rs_writer.commit_txn_only
makes), and a Delta checkpoint of version N by delta-rs (N a multiple of 10, as
Delta's own interval sets them): the newest version is 2 past the checkpoint, and the follower's own
commits below land on N+3 to N+6 (one may write keep_checkpoint_cadence's checkpoint, by the phase
the replica's path sets). On s3 the files are put
with boto3 after being made in a temporary folder. Per call, median (min-max) wall ms over --calls:

  probe: a kept handle's take of an unchanged log (ReplicaHandle.commit_digest + refresh:
         tidelake/merge/replica_handles.py);
  moved: refresh of a handle one version behind (the probe, then update_incremental: a listing);
  own commit: a one-row append recording the merge's txn on the handle and keep_checkpoint_cadence,
         as the delta-rs writer makes it (delta_rs_writer.REPLICA_POST_COMMIT: no post-commit hook,
         so no expired-log cleanup at the commit), 2 calls whatever --calls (each adds a version),
         at versions where the table's phase puts neither a checkpoint nor a cleanup (untimed
         commits first move the log past those);
  own commit, default hooks: the same with delta-rs' default post-commit hooks (its expired-log
         cleanup after every commit), as the writer committed before;
  walk: read_checkpoint and checkpoint_version (tidelake/lake/checkpoint.py);
  open: DeltaTable(path), what a handle not kept costs;
  cleanup: DeltaTable.cleanup_metadata(), which delta-rs' default post-commit hook ran after every
         commit and tidelake now runs once in CLEANUP_INTERVAL versions, at the table's phase
         (tidelake.lake.log_cleanup.cleanup_due);
         nothing is old enough to delete here.

    .venv/bin/python bench/bench_log_growth.py [--files 100,2000,20000] [--calls 5] [--store local|s3] [--json F]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, PostCommitHookProperties, write_deltalake

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from bench._common import counts, markdown_table, median, print_environment, write_json  # noqa: E402
from bench.bench_log_reads import Options, replica_store  # noqa: E402
from tidelake import tso  # noqa: E402
from tidelake.capture.landing.app_txn import commit_properties  # noqa: E402
from tidelake.demos.s3_requests import KINDS, RequestLog  # noqa: E402
from tidelake.lake.checkpoint import MERGE_APP_ID, checkpoint_version, read_checkpoint  # noqa: E402
from tidelake.lake.create_if_absent import s3_client  # noqa: E402
from tidelake.lake.delta_commits import commit_name  # noqa: E402
from tidelake.lake.log_cleanup import cleanup_due  # noqa: E402
from tidelake.merge.replica_handles import ReplicaHandle  # noqa: E402
from tidelake.merge.replica_schema import REPLICA_PROPERTIES  # noqa: E402
from tidelake.merge.writers.delta_rs_writer import (  # noqa: E402
    REPLICA_POST_COMMIT,
    checkpoint_due,
    keep_checkpoint_cadence,
)

OWN_COMMITS = 2
PAST_CHECKPOINT = 2
UPLOAD_THREADS = 8


def ts_of(version: int, start_ms: int) -> int:
    """The merge's checkpoint recorded by `version`: one second of upstream time a version."""
    return tso.compose(start_ms + version * 1000)


def build_log(folder: str, files: int, start_ms: int) -> int:
    """A replica log at the local `folder` as the module docstring says; its newest version."""
    for v in range(2):
        rows = pa.table({"id": pa.array([v], pa.int64())})
        write_deltalake(folder, rows, mode="append", configuration=REPLICA_PROPERTIES if v == 0 else None,
                        commit_properties=commit_properties(MERGE_APP_ID, ts_of(v, start_ms)))
    newest = files + PAST_CHECKPOINT
    for v in range(2, newest + 1):
        ms = start_ms + v * 1000
        actions = [{"commitInfo": {"timestamp": ms, "operation": "WRITE", "operationParameters": {"mode": "Append"},
                                   "clientVersion": "bench_log_growth"}},
                   {"txn": {"appId": MERGE_APP_ID, "version": ts_of(v, start_ms), "lastUpdated": ms}}]
        Path(folder, commit_name(v)).write_text("".join(json.dumps(a) + "\n" for a in actions))
    DeltaTable(folder, version=files).create_checkpoint()
    return newest


def upload(folder: str, root: str, options: Options) -> float:
    """Put every file under the local `folder` at `root` on the store; the seconds it took."""
    client = s3_client(options)
    bucket, _, prefix = root.removeprefix("s3://").partition("/")
    names = [os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs]
    started = time.monotonic()

    def put(name: str) -> None:
        client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=Path(folder, name).read_bytes())

    with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
        list(pool.map(put, names))
    return time.monotonic() - started


def measure(call: Callable[[], object], calls: int, requests: RequestLog | None,
            before: Callable[[], object] | None = None) -> dict:
    """Wall ms of `calls` calls (each after `before`, untimed), and the requests of one more."""
    walls = []
    for _ in range(calls):
        if before is not None:
            before()
        started = time.perf_counter()
        call()
        walls.append((time.perf_counter() - started) * 1000)
    result: dict[str, object] = {"wall_ms_p50": median(walls), "wall_ms_min": min(walls), "wall_ms_max": max(walls)}
    if requests is not None:
        if before is not None:
            before()
        result["requests"] = requests.count(call)[1]
    return result


def one_log(files: int, calls: int, path: str, options: Options, requests: RequestLog | None, tmp: str) -> dict:
    start_ms = int(time.time() * 1000) - 86_400_000
    started = time.monotonic()
    if options is None:
        newest = build_log(path, files, start_ms)
        upload_s = 0.0
    else:
        local = os.path.join(tmp, f"log_{files}")
        newest = build_log(local, files, start_ms)
        upload_s = upload(local, path, options)
    result: dict[str, object] = {"files": files, "newest_version": newest, "build_s": time.monotonic() - started,
                                 "upload_s": upload_s}
    handle = ReplicaHandle.open(path, options)
    assert handle is not None and handle.table.version() == newest
    want = ts_of(newest, start_ms)
    if read_checkpoint(path, options) != want or checkpoint_version(path, options) != (want, newest):
        raise SystemExit(f"{files} files: the walk answered {checkpoint_version(path, options)!r}, "
                         f"the log as built holds {(want, newest)!r}")

    def take() -> None:
        handle.commit_digest()
        handle.refresh()

    behind: list[ReplicaHandle] = []

    def one_behind() -> None:
        behind[:] = [ReplicaHandle(path, DeltaTable(path, version=newest - 1, storage_options=options), options)]

    result["probe"] = measure(take, calls, requests)
    result["moved"] = measure(lambda: behind[0].refresh(), calls, requests, before=one_behind)
    result["read_checkpoint"] = measure(lambda: read_checkpoint(path, options), calls, requests)
    result["checkpoint_version"] = measure(lambda: checkpoint_version(path, options), calls, requests)
    result["open"] = measure(lambda: DeltaTable(path, storage_options=options), calls, requests)
    result["cleanup"] = measure(lambda: DeltaTable(path, storage_options=options).cleanup_metadata(), calls,
                                requests)
    versions = itertools.count(newest + 1)
    uri = handle.table.table_uri
    first = newest + 1  # of the timed own commits: none at a version of the cadence's checkpoint or cleanup
    while any(checkpoint_due(uri, v) or cleanup_due(uri, v) for v in range(first, first + 2 * OWN_COMMITS)):
        first += 1

    def own_commit(hooks: PostCommitHookProperties | None) -> None:
        v = next(versions)
        write_deltalake(handle.table, pa.table({"id": pa.array([v], pa.int64())}), mode="append",
                        commit_properties=commit_properties(MERGE_APP_ID, ts_of(v, start_ms)),
                        post_commithook_properties=hooks)
        keep_checkpoint_cadence(handle.table, at_commit=True)

    for _ in range(newest + 1, first):
        own_commit(REPLICA_POST_COMMIT)
    for way, hooks in (("own_commit", REPLICA_POST_COMMIT), ("own_commit_default_hooks", None)):
        result[way] = measure(lambda: own_commit(hooks), OWN_COMMITS - (requests is not None), requests)
    if handle.table.version() != first - 1 + 2 * OWN_COMMITS:
        raise SystemExit(f"{files} files: the own commits left the handle at {handle.table.version()}")
    result["load_avg_1m"] = os.getloadavg()[0]
    return result


WAYS = ("probe", "moved", "own_commit", "own_commit_default_hooks", "read_checkpoint", "checkpoint_version", "open",
        "cleanup")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=counts, default="100,2000,20000", help="commit files per log, comma-separated")
    parser.add_argument("--calls", type=int, default=5, help="timed calls of each read")
    parser.add_argument("--store", choices=("local", "s3"), default="local",
                        help="logs in a local folder, or on moto's S3 server with request counts")
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if args.calls < 1 or any(f < 10 or f % 10 for f in args.files):
        parser.error("--calls must be at least 1 and --files multiples of 10")
    env = print_environment()
    logs = []
    with replica_store(args.store) as (path_of, options, requests), \
            tempfile.TemporaryDirectory(prefix="bench-log-growth-") as tmp:
        for i, files in enumerate(args.files):
            logs.append(one_log(files, args.calls, path_of(f"replica_{i}"), options, requests, tmp))
            print(f"  {files} files done (built in {logs[-1]['build_s']:.1f} s)", flush=True)
    rows = []
    for way in WAYS:
        row = [way]
        for log in logs:
            m = log[way]
            row.append(f"{m['wall_ms_p50']:.2f} ({m['wall_ms_min']:.2f}-{m['wall_ms_max']:.2f})")
            if "requests" in m:
                made = m["requests"]
                row.append(" ".join(f"{n}{k[0].upper()}" for k, n in made.items() if n and k in KINDS)
                           + (f" ({made['list_from_start']} from the start)" if made["list_from_start"] else ""))
        rows.append(row)
    headers = ["per call"]
    for log in logs:
        headers.append(f"{log['files']} files: wall ms")
        if requests is not None:
            headers.append("requests")
    print(markdown_table(headers, rows))
    print("load 1m per log: " + ", ".join(f"{log['load_avg_1m']:.1f}" for log in logs))
    results = {"store": args.store, "logs": logs, "calls": args.calls, "load_avg_1m_end": os.getloadavg()[0]}
    write_json(args.json, "log_growth", env, results)
    return results


if __name__ == "__main__":
    main()
