"""`tidelake spark-server start|stop|status [--dir DIR] [--port P]`: the warm Spark.

A long-running Spark Connect server with Delta (tidelake.spark.connect_server) that `tidelake
merge/syncpoint/maintenance --remote sc://127.0.0.1:P` (or `[spark] remote`, or SPARK_REMOTE)
and the merge DAG reach as thin clients. `start` returns once the server listens and prints its
URL, pid and log; `stop` ends the pid recorded in DIR. `make demo` / `make up` do both.
Owner: `tidelake spark-server`.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tidelake.errors import InputError
from tidelake.spark import connect_server as server

DEFAULT_DIR = Path(".tidelake") / "spark-server"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("spark-server", help="start or stop a warm Spark Connect server with Delta")
    parser.add_argument("action", choices=("start", "stop", "status", "run"),
                        help="run: in the foreground (containers, service managers); the others as above")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"pid and log folder (default {DEFAULT_DIR})")
    parser.add_argument("--port", type=int, default=None, help="gRPC port (default 15002)")
    parser.add_argument("--host", default=None, help="bind address (default 127.0.0.1: this machine only)")
    parser.add_argument("--master", default=None, help="Spark master of the server (default local[*])")
    parser.add_argument("--driver-memory", default=None, help="server JVM heap (default 2g)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark conf of the server (repeatable): object store endpoints, memory")
    parser.add_argument("--packages", action="append", default=[], metavar="G:A:V",
                        help="extra Maven packages of the server (repeatable), e.g. hadoop-aws for s3a lakes")
    parser.set_defaults(handler=_spark_server)


def _spark_server(args: argparse.Namespace) -> int:
    if args.port is not None and not 0 < args.port < 65536:
        raise InputError(f"--port must be 1..65535, got {args.port}")
    given = {"port": args.port, "host": args.host, "master": args.master, "driver_memory": args.driver_memory}
    settings = server.ServerSettings(args.dir.resolve(), **{k: v for k, v in given.items() if v is not None})
    confs = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--conf: expected KEY=VALUE, got {item!r}")
        confs[key.strip()] = value
    packages = tuple(args.packages)
    if args.action == "run":
        os.execv(server.spark_submit(), server.server_command(settings, confs, packages))
    if args.action == "start":
        pid = server.start(settings, confs, packages)
        print(f"Spark Connect server {settings.url} pid {pid}; log {settings.log_file}")
        return 0
    if args.action == "stop":
        pid = server.stop(settings)
        print(f"stopped Spark Connect server pid {pid}" if pid is not None else f"no server running from {settings.folder}")
        return 0
    pid = server.running_pid(settings)
    if pid is None:
        print(f"no server running from {settings.folder}")
        return 1
    print(f"Spark Connect server {server.recorded_url(settings)} pid {pid}; log {settings.log_file}")
    return 0
