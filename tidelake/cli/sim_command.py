"""`tidelake sim`: run the simulated TiDB cluster (PD + TiKV stores) with a workload and faults.

`tidelake sim-replay` serves a CDC recording made with `tidelake sim --record DIR` at full speed,
so puller benchmarks measure the puller, not the simulator.
Owner: `tidelake sim` and `tidelake sim-replay`, over the test kit (tidelake.sim).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tidelake.config import parse_duration
from tidelake.errors import InputError
from tidelake.sim import cluster as sim_cluster
from tidelake.sim.faults import PROFILES, FaultInjector, get_profile
from tidelake.sim.replay import record_options, serve_replay
from tidelake.sim.tidb.kvtxn import check_txn_mode
from tidelake.sim.tidb.session import SimTiDB
from tidelake.sim.workload import PRESETS, WorkloadRunner, get_preset


def _presets_help() -> str:
    lines = ["workload presets:"]
    lines += [f"  {p.name:<10} {p.description} ({p.rate:g} txn/s)" for p in PRESETS.values()]
    lines += ["  none       no workload: an idle cluster (schema bootstrap only)", "", "transaction modes (--txn-mode):",
              "  pessimistic  TiDB's default: pessimistic locks per statement, async commit and 1PC where "
              "client-go uses them",
              "  optimistic   classic Percolator 2PC: buffered writes, no async commit, no 1PC", "", "fault profiles:"]
    lines += [f"  {p.name:<10} {p.description}" for p in PROFILES.values()]
    return "\n".join(lines)


DEFAULT_SQL_PORT = 4000  # TiDB's


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sim", help="run a simulated TiDB cluster (PD + TiKV with CDC) with a workload and faults",
        description="Start PD and N TiKV stores on loopback (TiKV's and PD's own gRPC protocols), a TiDB-like "
                    "front writing meta keys, DDL jobs and row-v2 rows, a seeded workload and fault injection. "
                    "Stops on Ctrl-C, SIGTERM or after --duration.",
        epilog=_presets_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", type=int, default=3, metavar="N", help="number of TiKV stores (default 3)")
    parser.add_argument("--pd-port", type=int, default=0, metavar="P", help="PD port (default: any free port)")
    parser.add_argument("--sql-port", type=int, default=None, metavar="P",
                        help="serve the MySQL protocol on 127.0.0.1:P like a TiDB server (default 4000, TiDB's, "
                             "or any free port when 4000 is taken; 0 turns it off): "
                             "`mysql -h 127.0.0.1 -P 4000 -u root`")
    parser.add_argument("--workload", default="mixed", metavar="PRESET", help="workload preset or 'none' (default mixed)")
    parser.add_argument("--rate", type=float, default=None, metavar="R", help="target txn/s (default: the preset's)")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="seed for workload, faults and leaders")
    parser.add_argument("--faults", default="none", metavar="PROFILE", help="fault profile (default none)")
    parser.add_argument("--txn-mode", default=None, metavar="MODE",
                        help="tidb_txn_mode of the workload's transactions: pessimistic or optimistic (default: the "
                             "preset's, else pessimistic, TiDB's default)")
    parser.add_argument("--preload", type=int, default=0, metavar="ROWS",
                        help="bulk-load ROWS rows into DB.orders before the workload's traffic starts (tables "
                             "that already hold data, for bootstrap); the workload updates and deletes them and "
                             "never truncates that table")
    parser.add_argument("--database", default="sim", metavar="DB", help="database the workload writes (default sim)")
    parser.add_argument("--info-file", metavar="PATH", help="write PD/store addresses as JSON here")
    parser.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    parser.add_argument("--progress-interval", type=float, default=5.0, metavar="S", help="seconds between progress lines")
    parser.add_argument("--gc-life-time", default="10m", metavar="DURATION",
                        help="MVCC history kept below now, like TiDB's tidb_gc_life_time (default 10m); "
                             "service safepoints still hold GC back")
    parser.add_argument("--record", metavar="DIR", help="record every CDC stream the stores serve into DIR/streams.tlcdc (for sim-replay)")
    parser.set_defaults(handler=_run)

    replay = subparsers.add_parser(
        "sim-replay", help="serve a recorded CDC stream (tidelake sim --record) at full speed",
        description="Serve ChangeData/EventFeed from a recording: each subscription gets the recorded events of "
                    "its region (request ids rewritten), as fast as the client reads them.")
    replay.add_argument("recording", nargs="+", metavar="FILE", help="recording file(s) written by tidelake sim --record")
    replay.add_argument("--port", type=int, default=0, metavar="P", help="port to serve on (default: any free port)")
    replay.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    replay.set_defaults(handler=_replay)


def _check_args(args: argparse.Namespace) -> None:
    if args.stores < 1:
        raise InputError(f"--stores must be at least 1, got {args.stores}")
    if not 0 <= args.pd_port <= 65535:
        raise InputError(f"--pd-port must be 0..65535, got {args.pd_port}")
    if args.sql_port is not None and not 0 <= args.sql_port <= 65535:
        raise InputError(f"--sql-port must be 0..65535 (0: no SQL front), got {args.sql_port}")
    if args.workload != "none":
        get_preset(args.workload)
    if args.rate is not None and not (math.isfinite(args.rate) and args.rate > 0):
        raise InputError(f"--rate must be a finite number > 0, got {args.rate}")
    if args.preload < 0:
        raise InputError(f"--preload must be >= 0 rows, got {args.preload}")
    if args.preload and args.workload == "none":
        raise InputError("--preload needs a workload preset (it loads the workload's orders table); "
                         "got --workload none")
    get_profile(args.faults)
    if args.txn_mode is not None:
        check_txn_mode(args.txn_mode, "--txn-mode")
    if args.duration is not None and not (math.isfinite(args.duration) and args.duration > 0):
        raise InputError(f"--duration must be a finite number > 0, got {args.duration}")
    try:
        args.gc_life_time_s = parse_duration(args.gc_life_time)
    except ValueError:
        raise InputError(f"--gc-life-time: expected a duration like '10m' or '2h', got {args.gc_life_time!r}") from None
    if not (math.isfinite(args.progress_interval) and args.progress_interval > 0):
        raise InputError(f"--progress-interval must be a finite number > 0, got {args.progress_interval}")
    if args.record:
        _check_writable("--record", Path(args.record), folder=True)
    if args.info_file:
        _check_writable("--info-file", Path(args.info_file), folder=False)


def _check_writable(flag: str, path: Path, folder: bool) -> None:
    """Refuse, before any server starts, an output path that cannot be written: a traceback from
    deep in the recorder or the info writer names neither the flag nor the path."""
    if folder and path.exists() and not path.is_dir():
        raise InputError(f"{flag} {path}: is a file, not a folder")
    if not folder and path.is_dir():
        raise InputError(f"{flag} {path}: is a folder, not a file")
    parent = path.parent
    while folder and not parent.exists():  # a folder is created with its parents
        parent = parent.parent
    if not parent.exists():
        raise InputError(f"{flag} {path}: folder {parent} does not exist")
    if not parent.is_dir():
        raise InputError(f"{flag} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK):
        raise InputError(f"{flag} {path}: {parent} is not writable")


@contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGTERM/SIGINT, so the run loop shuts everything down in order; the previous
    handlers come back afterwards."""
    stop = threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(args: argparse.Namespace) -> int:
    _check_args(args)
    cdc_options = record_options(args.record) if args.record else {}
    cluster = sim_cluster.SimCluster(n_stores=args.stores, seed=args.seed, pd_port=args.pd_port,
                                     cdc_options=cdc_options, gc_life_time_s=args.gc_life_time_s)
    with _stop_on_signals() as stop:
        _serve(cluster, stop, args)
    print("stopped", flush=True)
    return 0


def _serve(cluster: Any, stop: threading.Event, args: argparse.Namespace) -> None:
    cluster.start()
    workload = faults = sql = None
    try:
        print(f"pd: {cluster.pd_address}", flush=True)
        for store_id, address in sorted(cluster.store_addresses.items()):
            print(f"store {store_id}: {address}", flush=True)
        tidb = SimTiDB(cluster, **({"txn_mode": args.txn_mode} if args.txn_mode else {}))
        if args.sql_port != 0:
            sql = _start_sql(tidb, cluster.host, args.sql_port)
            print(f"sql: {sql.address} (mysql -h {cluster.host} -P {sql.port} -u root)", flush=True)
        if args.info_file:
            cluster.write_info(args.info_file, sql=sql.address if sql is not None else None)
            print(f"info file: {args.info_file}", flush=True)
        if args.workload != "none":
            workload = WorkloadRunner(tidb, args.workload, seed=args.seed, rate=args.rate, database=args.database,
                                      preload_rows=args.preload, txn_mode=args.txn_mode)
            print(f"txn mode: {workload.txn_mode}", flush=True)
            workload.start()
        faults = FaultInjector(cluster, args.faults, seed=args.seed)
        faults.start()
        _progress_loop(stop, args, workload, faults, tidb)
    finally:
        if sql is not None:
            sql.stop()
        if faults is not None:
            faults.stop()
        if workload is not None:
            workload.stop()
        cluster.stop()


def _progress_loop(stop: threading.Event, args: argparse.Namespace, workload: Any, faults: Any, tidb: Any) -> None:
    started = time.monotonic()
    deadline = started + args.duration if args.duration else None
    next_line = started + args.progress_interval
    while not stop.is_set():
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            break
        if now >= next_line:
            print(_progress(now - started, workload, faults, tidb), flush=True)
            next_line += args.progress_interval
        wakeups = [next_line] + ([deadline] if deadline is not None else [])
        stop.wait(max(0.0, min(wakeups) - time.monotonic()))
    print(_progress(time.monotonic() - started, workload, faults, tidb), flush=True)


def _progress(elapsed: float, workload: Any, faults: Any, tidb: Any) -> str:
    c = workload.counters.snapshot() if workload is not None else {}
    fault_total = sum(faults.applied.values()) if faults is not None else 0
    line = (f"t={elapsed:.0f}s txns={c.get('txns', 0)} rows={c.get('rows', 0)} ddls={c.get('ddls', 0)} "
            f"1pc={c.get('one_pc', 0)} async={c.get('async_commit', 0)} 2pc={c.get('two_pc', 0)} "
            f"conflicts={c.get('conflicts', 0)} long_txns={c.get('long_txns', 0)} errors={c.get('errors', 0)} "
            f"faults={fault_total} schema_version={tidb.schema_version}")
    if workload is not None and workload.planner.preload_rows:
        line += f" preloaded={c['preloaded']}/{workload.planner.preload_rows}"
    if c.get("last_error"):
        line += f" last_error={c['last_error']!r}"
    return line


def _replay(args: argparse.Namespace) -> int:
    for path in args.recording:
        if not Path(path).is_file():
            raise InputError(f"recording {path!r} does not exist")
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port must be 0..65535, got {args.port}")
    if args.duration is not None and not (math.isfinite(args.duration) and args.duration > 0):
        raise InputError(f"--duration must be a finite number > 0, got {args.duration}")
    server, port, service = serve_replay(args.recording, port=args.port)
    try:
        print(f"replay: 127.0.0.1:{port} serving {service.region_count} recorded regions", flush=True)
        with _stop_on_signals() as stop:
            stop.wait(args.duration)
    finally:
        server.stop(None).wait()
    print("stopped", flush=True)
    return 0


def _start_sql(tidb: Any, host: str, port: int | None) -> Any:
    """The SQL front on `port`; without --sql-port on TiDB's 4000, else (taken) on any free port."""
    from tidelake.sim.sql.server import SqlServer  # imports mysql-mimic and sqlglot only when serving SQL

    if port is not None:
        return SqlServer(tidb, host, port).start()
    try:
        return SqlServer(tidb, host, DEFAULT_SQL_PORT).start()
    except InputError:
        server = SqlServer(tidb, host, 0).start()
        print(f"sql: {host}:{DEFAULT_SQL_PORT} is taken; serving on port {server.port} instead", flush=True)
        return server

