"""`tidelake` command line: one module per command group, `<group>_command.py`.

Each exposes `register(subparsers)`, which adds its command(s) and sets `handler` (a callable
taking the parsed namespace and returning an exit code). A run imports only its command's module,
and so only that command's stage (`tidelake decode` loads no Spark), as Airflow's CLI loads its
commands lazily; the top-level help imports them all. Owner: the `tidelake` CLI.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import traceback
from collections.abc import Sequence

from tidelake import __version__
from tidelake.errors import EXIT_TRY_LATER, TidelakeError
from tidelake.lake.store_room import refusal
from tidelake.spark.driver_lost import DRIVER_LOST, driver_lost

# command -> the group module that registers it, in help order
COMMANDS = {"decode": "decode", "sim": "sim", "sim-replay": "sim", "pull": "pull", "bootstrap": "bootstrap",
            "merge": "merge", "syncpoint": "syncpoint", "maintenance": "maintenance", "status": "status", "freshness": "freshness",
            "verify": "verify", "snapshot-at": "snapshot", "changes": "changes", "duckdb": "duckdb", "iceberg": "iceberg", "catalog": "catalog",
            "demo": "demo", "nemesis": "nemesis", "spark-server": "spark_server", "spark-jars": "spark_jars"}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of `command`'s group alone, or of every group (None or an unknown command)."""
    parser = argparse.ArgumentParser(
        prog="tidelake", description="Replicate TiDB tables into Delta Lake."
    )
    parser.add_argument("--version", action="version", version=f"tidelake {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    groups = [COMMANDS[command]] if command in COMMANDS else dict.fromkeys(COMMANDS.values())
    for group in groups:
        importlib.import_module(f"tidelake.cli.{group}_command").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:  # loading a command's module can refuse the environment (TIDELAKE_FAILPOINTS) in one line
        parser = build_parser(next((a for a in argv if not a.startswith("-")), None))
    except TidelakeError as exc:
        print(f"tidelake: error: {exc}", file=sys.stderr)
        return exc.exit_code
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
        if driver_lost(exc):
            print(f"tidelake: error: {DRIVER_LOST} (full trace: {_save_trace(exc)})", file=sys.stderr)
            return 1
        damage = _lake_damage(args)
        cause = refusal(exc)
        if damage is None and cause is None:
            raise
        line = damage.line() if damage is not None else f"{cause}: {_first_line(exc)}"
        print(f"tidelake: error: {line} (full trace: {_save_trace(exc)})", file=sys.stderr)
        return 1 if damage is not None else EXIT_TRY_LATER  # a store without room: the same command later may succeed


def _lake_damage(args: argparse.Namespace):
    """The damaged file of the lake a command failed on, if that is why (tidelake.lake.damage)."""
    # not at the top: deltalake must load after `tidelake pull` tuned the allocators (process_memory)
    from tidelake.config import load_config
    from tidelake.lake.damage import find_damage
    from tidelake.lake.layout import LakeLayout

    try:
        if getattr(args, "lake", None):
            return find_damage(LakeLayout(args.lake))
        if getattr(args, "config", None):
            return find_damage(LakeLayout.from_config(load_config(args.config).lake))
    except Exception:  # noqa: BLE001 - no diagnosis: the original error is raised as it was
        return None
    return None


def _first_line(exc: BaseException) -> str:
    # not at the top: deltalake must load after `tidelake pull` tuned the allocators (process_memory)
    from tidelake.lake.damage import first_line

    return first_line(exc)


def _save_trace(exc: BaseException) -> str:
    """Write the full traceback to a file and return its path: the terminal gets one line."""
    with tempfile.NamedTemporaryFile("w", prefix="tidelake-trace-", suffix=".txt", delete=False) as fh:
        traceback.print_exception(exc, file=fh)
        return fh.name


if __name__ == "__main__":
    sys.exit(main())
