"""Which Spark a lake command runs on: `--remote URL` / `[spark] remote` / SPARK_REMOTE (a warm
Spark Connect server, tidelake.spark.connect_server), else `--master` (local Spark).
Owner: the Spark commands (merge, syncpoint, maintenance).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from tidelake.cli.target import Target
from tidelake.config import SparkConfig
from tidelake.errors import InputError


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", metavar="URL", help="Spark master (default local[*] or $TIDELAKE_SPARK_MASTER)")
    parser.add_argument("--remote", metavar="sc://HOST:PORT",
                        help="run as a client of this Spark Connect server (default: [spark] remote of the "
                        "config, then $SPARK_REMOTE, else local Spark)")


def remote_choice(args: argparse.Namespace, target: Target, env: Mapping[str, str] | None = None) -> str | None:
    """The Spark Connect server to run on, first match: --remote, [spark] remote of the
    changefeed config, SPARK_REMOTE (unless --master asks for local Spark); None: local Spark."""
    env = os.environ if env is None else env
    configured = target.config.spark if target.config is not None else SparkConfig()
    remote = args.remote or configured.remote_or_env({} if args.master else env)
    if remote is not None and not remote.startswith("sc://"):
        raise InputError(f"--remote must be a Spark Connect URL like sc://127.0.0.1:15002, got {remote!r}")
    if remote is not None and args.master:
        raise InputError("give either --master (local Spark) or a Spark Connect remote, not both")
    return remote
