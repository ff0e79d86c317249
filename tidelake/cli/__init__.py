"""`tidelake` command line: one sub-module per command group, imported lazily.

Each module in COMMANDS exposes `register(subparsers)`, which adds its sub-command(s) and sets
`handler` (a callable taking the parsed namespace and returning an exit code). Heavy imports
(Spark, gRPC servers) belong inside handlers so `tidelake --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from tidelake import __version__
from tidelake.errors import TidelakeError

COMMANDS = ("decode", "sim", "pull", "bootstrap", "merge", "syncpoint", "maintenance", "status", "verify", "snapshot",
            "changes", "catalog",
            "demo", "nemesis", "spark_server", "spark_jars")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tidelake", description="Replicate TiDB tables into Delta Lake."
    )
    parser.add_argument("--version", action="version", version=f"tidelake {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"tidelake.cli.{name}_command").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except TidelakeError as exc:
        print(f"tidelake: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tidelake: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        damage = _lake_damage(args)
        if damage is None:
            raise
        print(f"tidelake: error: {damage.line()} (full trace: {_save_trace(exc)})", file=sys.stderr)
        return 1


def _lake_damage(args: argparse.Namespace):
    """The damaged file of the lake a command failed on, if that is why (tidelake.lake.damage)."""
    from tidelake.lake.damage import find_damage
    from tidelake.lake.layout import LakeLayout

    try:
        if getattr(args, "lake", None):
            return find_damage(LakeLayout(args.lake))
        if getattr(args, "config", None):
            from tidelake.config import load_config

            return find_damage(LakeLayout.from_config(load_config(args.config).lake))
    except Exception:  # noqa: BLE001 - no diagnosis: the original error is raised as it was
        return None
    return None


def _save_trace(exc: BaseException) -> str:
    """Write the full traceback to a file and return its path: the terminal gets one line."""
    import tempfile
    import traceback

    with tempfile.NamedTemporaryFile("w", prefix="tidelake-trace-", suffix=".txt", delete=False) as fh:
        traceback.print_exception(exc, file=fh)
        return fh.name


if __name__ == "__main__":
    sys.exit(main())
