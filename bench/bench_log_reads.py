"""What reading a replica's log from its newest commit files saves against loading snapshots, per
replica of --versions Delta versions, each the ceiling measured in the same run on the same replica:

  (a) checkpoint_version (tidelake/lake/checkpoint.py: the checkpoint and the first version
      recording it, walked back over the newest commit files) against the snapshot search it falls
      back to (a DeltaTable open for the checkpoint, then _search_snapshots: a binary search whose
      every step replays the log);
  (b) read_checkpoint (the same walk) against DeltaTable(path).transaction_version(MERGE_APP_ID);
  (c) ReplicaHandle.refresh() on an unchanged log (tidelake/merge/replica_handles.py: whether the
      next commit file exists) against update_incremental() on the same handle (a log listing);
  (d) one commit file read by DeltaLog.read_bytes (tidelake/lake/delta_commits.py: a plain file
      read on a local folder) against delta-rs' storage handler (DeltaStorageHandler.open_input_file
      and read, what DeltaLog used on every store before; on S3 DeltaLog still uses it).

Each replica is built with delta-rs as the merge writes one: appends recording the merge's txn
(tidelake.capture.landing.app_txn.commit_properties(MERGE_APP_ID, ts)) that run no delta-rs
post-commit hook (REPLICA_POST_COMMIT), a Delta checkpoint every 10 versions
(keep_checkpoint_cadence, from the phase the replica's path sets). How far the newest version is
past the last checkpoint (the walk probes from there for the newest) is reported as
past_delta_checkpoint: at most 9, the longest the cadence allows. Every way's answer must equal
its ceiling's and the replica's as built (exit 1 if not).
Reported per replica: CPU (time.process_time) and wall ms per call, median and min-max over
--repeats repeats of --calls calls each, the way and its ceiling taking turns, and each way / its
ceiling per repeat (median and min-max).

--store s3 puts the replicas on moto's S3 server (tidelake.demos.s3_server, as the tests and `make
integration` start it) and also reports the requests one call of each way makes, by kind (GET,
LIST, HEAD, PUT, DELETE; and how many answered 404), counted from the server's own request log
(tidelake/demos/s3_requests.py), not by the code under test.

    .venv/bin/python bench/bench_log_reads.py [--versions 20,110] [--calls 20] [--repeats 3] [--store local|s3]
                                              [--json F]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.fs import DeltaStorageHandler

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from bench._common import Timer, counts, markdown_table, median, print_environment, write_json  # noqa: E402
from tidelake import tso  # noqa: E402
from tidelake.capture.landing.app_txn import commit_properties  # noqa: E402
from tidelake.demos.s3_requests import RequestLog  # noqa: E402
from tidelake.demos.s3_server import S3Server  # noqa: E402
from tidelake.lake.checkpoint import (MERGE_APP_ID, _search_snapshots, checkpoint_version,  # noqa: E402
                                      read_checkpoint)
from tidelake.lake.delta_commits import DeltaLog, commit_name  # noqa: E402
from tidelake.lake.object_store import lake_storage_options  # noqa: E402
from tidelake.merge.replica_handles import ReplicaHandle  # noqa: E402
from tidelake.merge.replica_schema import REPLICA_PROPERTIES  # noqa: E402
from tidelake.merge.writers.delta_rs_writer import REPLICA_POST_COMMIT, keep_checkpoint_cadence  # noqa: E402

WAYS = (("checkpoint_version", "walk", "snapshots"), ("read_checkpoint", "walk", "table_open"),
        ("refresh", "probe", "update_incremental"), ("commit_read", "delta_log", "storage_handler"))


Options = dict[str, str] | None


def build_replica(path: str, versions: int, options: Options = None) -> tuple[int, int]:
    """A replica of versions 0..versions-1, each a one-row append recording the next checkpoint;
    (its newest version, its checkpoint)."""
    start_ms = int(time.time() * 1000) - 3_600_000
    table = None
    ts = 0
    for v in range(versions):
        ts = tso.compose(start_ms + v * 1000)
        rows = pa.table({"id": pa.array([v], pa.int64()), "note": pa.array([f"v{v}"], pa.string())})
        if table is None:
            write_deltalake(path, rows, mode="append", configuration=REPLICA_PROPERTIES,
                            commit_properties=commit_properties(MERGE_APP_ID, ts), storage_options=options,
                            post_commithook_properties=REPLICA_POST_COMMIT)
            table = DeltaTable(path, storage_options=options)
        else:
            write_deltalake(table, rows, mode="append", commit_properties=commit_properties(MERGE_APP_ID, ts),
                            post_commithook_properties=REPLICA_POST_COMMIT)
        keep_checkpoint_cadence(table)
    assert table is not None
    return table.version(), ts


def snapshot_checkpoint_version(path: str, options: Options = None) -> tuple[int, int] | None:
    """checkpoint_version by loading snapshots: what it falls back to when the commit files cannot tell."""
    checkpoint = DeltaTable(path, storage_options=options).transaction_version(MERGE_APP_ID)
    if checkpoint is None:
        return None
    version = _search_snapshots(path, checkpoint, options, MERGE_APP_ID)
    return None if version is None else (checkpoint, version)


def _stats(values: list[float], unit: str) -> dict[str, float]:
    return {f"{unit}_p50": median(values), f"{unit}_min": min(values), f"{unit}_max": max(values)}


def compare(name: str, fast: tuple[str, Callable[[], object]], ceiling: tuple[str, Callable[[], object]],
            calls: int, repeats: int, versions: int, requests: RequestLog | None = None) -> dict:
    """CPU and wall ms per call of each way over `repeats` repeats of `calls` calls, the way and
    its ceiling taking turns so that a busy neighbour weighs on both; each repeat's way / ceiling;
    with `requests`, the store requests of one call of each (after the warm-up call).
    Exits naming both when their answers differ."""
    (fast_name, fast_call), (ceiling_name, ceiling_call) = fast, ceiling
    answers = {fast_name: fast_call(), ceiling_name: ceiling_call()}  # warm: the store handle, the page cache
    if answers[fast_name] != answers[ceiling_name]:
        raise SystemExit(f"{versions} versions: {name}: {fast_name} answered {answers[fast_name]!r}, "
                         f"{ceiling_name} {answers[ceiling_name]!r}")
    made = {way: requests.count(call)[1] for way, call in (fast, ceiling)} if requests is not None else {}
    cpu: dict[str, list[float]] = {fast_name: [], ceiling_name: []}
    wall: dict[str, list[float]] = {fast_name: [], ceiling_name: []}
    for _ in range(repeats):
        for way, call in (fast, ceiling):
            with Timer() as t:
                for _ in range(calls):
                    call()
            cpu[way].append(t.cpu_s * 1000 / calls)
            wall[way].append(t.wall_s * 1000 / calls)
    cpu_ratios = [f / c for f, c in zip(cpu[fast_name], cpu[ceiling_name])]
    wall_ratios = [f / c for f, c in zip(wall[fast_name], wall[ceiling_name])]
    return {**{way: {**_stats(cpu[way], "cpu_ms"), **_stats(wall[way], "wall_ms"),
                     **({"requests": made[way]} if made else {})} for way in cpu},
            "answer": answers[fast_name], **_stats(cpu_ratios, "cpu_ratio"), **_stats(wall_ratios, "wall_ratio")}


def one_replica(versions: int, calls: int, repeats: int, path: str, options: Options = None,
                requests: RequestLog | None = None) -> dict:
    newest, checkpoint = build_replica(path, versions, options)
    expected = (checkpoint, newest)
    result: dict[str, object] = {"versions": versions, "newest_version": newest,
                                 "past_delta_checkpoint": newest - DeltaLog(path, options).last_checkpoint()}
    result["checkpoint_version"] = compare(
        "checkpoint_version", ("walk", lambda: checkpoint_version(path, options)),
        ("snapshots", lambda: snapshot_checkpoint_version(path, options)), calls, repeats, versions, requests)
    result["read_checkpoint"] = compare(
        "read_checkpoint", ("walk", lambda: read_checkpoint(path, options)),
        ("table_open", lambda: DeltaTable(path, storage_options=options).transaction_version(MERGE_APP_ID)),
        calls, repeats, versions, requests)
    handle = ReplicaHandle.open(path, options)
    assert handle is not None

    def probe() -> int:
        handle.refresh()
        return handle.table.version()

    def listing() -> int:
        handle.table.update_incremental()
        return handle.table.version()

    result["refresh"] = compare("refresh of an unchanged log", ("probe", probe), ("update_incremental", listing),
                                calls, repeats, versions, requests)
    newest_commit = commit_name(newest)
    files, handler = DeltaLog(path, options), DeltaStorageHandler(path, options)

    def handler_read() -> bytes:
        with handler.open_input_file(newest_commit) as source:
            return source.read()

    result["commit_read"] = compare("a commit file read", ("delta_log", lambda: files.read_bytes(newest_commit)),
                                    ("storage_handler", handler_read), calls, repeats, versions, requests)
    for name, want in (("checkpoint_version", expected), ("read_checkpoint", checkpoint), ("refresh", newest)):
        got = result[name]["answer"]  # type: ignore[index]
        if got != want:
            raise SystemExit(f"{versions} versions: {name} answered {got!r}, the replica as built holds {want!r}")
    result["load_avg_1m"] = os.getloadavg()[0]
    return result


@contextmanager
def replica_store(store: str) -> Iterator[tuple[Callable[[str], str], Options, RequestLog | None]]:
    """(a replica's path by name, the storage options, the request log on s3): a temporary folder,
    or a moto S3 server started for the run (its log in the temporary folder) and stopped after."""
    with tempfile.TemporaryDirectory(prefix="bench-log-reads-") as tmp:
        if store == "local":
            yield (lambda name: os.path.join(tmp, name)), None, None
            return
        server = S3Server(Path(tmp) / "s3")
        server.start()
        try:
            root = server.lake_root("bench")
            yield ((lambda name: f"{root}/{name}"), lake_storage_options(root, server.storage_options(), environ={}),
                   RequestLog(server))
        finally:
            server.stop()


def requests_text(made: dict[str, int]) -> str:
    """`3 GET (1 not found), 1 LIST`: the kinds made, in RequestLog's order."""
    kinds = [f"{n} {k.upper()}" for k, n in made.items() if n and k not in ("not_found", "list_from_start")]
    missing = f" ({made['not_found']} not found)" if made.get("not_found") else ""
    return (", ".join(kinds) or "none") + missing


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=counts, default="20,110", help="Delta versions per replica, comma-separated")
    parser.add_argument("--calls", type=int, default=20, help="calls per repeat of each way")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats of each way")
    parser.add_argument("--store", choices=("local", "s3"), default="local",
                        help="replicas in a local folder, or on moto's S3 server with request counts")
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.repeats < 1:
        parser.error("--calls and --repeats must be at least 1")
    env = print_environment()
    replicas = []
    with replica_store(args.store) as (path_of, options, requests):
        for i, versions in enumerate(args.versions):
            replicas.append(one_replica(versions, args.calls, args.repeats, path_of(f"replica_{i}"), options, requests))
            print(f"  {versions} versions done", flush=True)
    rows = []
    for r in replicas:
        for name, fast, ceiling in WAYS:
            c = r[name]
            f, b = c[fast], c[ceiling]
            rows.append([r["versions"], r["past_delta_checkpoint"], f"{name}: {fast} / {ceiling}",
                         f"{f['cpu_ms_p50']:.3f} ({f['cpu_ms_min']:.3f}-{f['cpu_ms_max']:.3f})",
                         f"{b['cpu_ms_p50']:.3f} ({b['cpu_ms_min']:.3f}-{b['cpu_ms_max']:.3f})",
                         f"{c['cpu_ratio_p50']:.3f} ({c['cpu_ratio_min']:.3f}-{c['cpu_ratio_max']:.3f})",
                         f"{f['wall_ms_p50']:.3f} ({f['wall_ms_min']:.3f}-{f['wall_ms_max']:.3f})",
                         f"{b['wall_ms_p50']:.3f} ({b['wall_ms_min']:.3f}-{b['wall_ms_max']:.3f})",
                         f"{c['wall_ratio_p50']:.3f} ({c['wall_ratio_min']:.3f}-{c['wall_ratio_max']:.3f})",
                         r["load_avg_1m"]])
    print(markdown_table(["versions", "past the last Delta checkpoint", "way / ceiling", "CPU ms (median, min-max)",
                          "ceiling CPU ms", "CPU ratio", "wall ms", "ceiling wall ms", "wall ratio", "load 1m"], rows))
    if requests is not None:
        print("\nrequests of one call (moto's request log):")
        print(markdown_table(["versions", "way", "requests", "ceiling", "ceiling requests"], [
            [r["versions"], f"{name}: {fast}", requests_text(r[name][fast]["requests"]), ceiling,
             requests_text(r[name][ceiling]["requests"])] for r in replicas for name, fast, ceiling in WAYS]))
    results = {"store": args.store, "replicas": replicas, "calls": args.calls, "repeats": args.repeats,
               "load_avg_1m_end": os.getloadavg()[0]}
    write_json(args.json, "log_reads", env, results)
    return results


if __name__ == "__main__":
    main()
