"""Which lake (and upstream) a command looks at: `--config FILE`, or `--lake PATH` [`--pd ADDR`].

Every command that reads a lake takes these the same way: the changefeed config names the lake
root, its storage options, PD and TLS as a whole, and mixing it with --lake/--pd is an error, not
a silent override. Owner: the CLI: every lake command parses its target here.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from tidelake.cli.upstream_connection import with_connection
from tidelake.config import ChangefeedConfig, TlsConfig, check_pd_address, load_config
from tidelake.errors import InputError
from tidelake.lake.lake_check import require_lake
from tidelake.lake.layout import LakeLayout


@dataclass(frozen=True)
class Target:
    layout: LakeLayout
    pd: list[str]
    tls: TlsConfig | None = None
    config: ChangefeedConfig | None = None  # when given by --config


def add_target_arguments(parser: argparse.ArgumentParser, pd: bool = False, pd_required: bool = False) -> None:
    """--config and --lake, plus --pd when the command talks to the upstream."""
    parser.add_argument("--config", metavar="FILE", help="changefeed TOML: the lake" + (", PD and TLS" if pd else "")
                        + " are taken from it")
    parser.add_argument("--lake", metavar="PATH", help="lake root (folder or object-store URI)")
    if pd:
        parser.add_argument(
            "--pd", action="append", default=[], metavar="ADDR",
            help="PD address host:port (repeatable)" + ("" if pd_required else "; without it lag uses the wall clock"),
        )


def resolve_target(args: argparse.Namespace, pd_required: bool = False) -> Target:
    """The target the arguments name; a missing or doubled choice, or a lake that is not a
    tidelake lake, is one clear InputError (before any command starts Spark or dials PD)."""
    target = _named_target(args, pd_required)

    require_lake(target.layout)
    return target


def _named_target(args: argparse.Namespace, pd_required: bool) -> Target:
    pd = [a.strip() for arg in getattr(args, "pd", []) for a in arg.split(",") if a.strip()]
    has_pd = hasattr(args, "pd")
    alternative = "--lake/--pd" if has_pd else "--lake"
    if args.config:
        if args.lake or pd:
            raise InputError(f"give either --config or {alternative}, not both")

        config = load_config(args.config)
        if has_pd:  # a command that dials PD reads [upstream].connection; the others need no Airflow
            config = with_connection(config)
        endpoints = config.upstream.endpoints("the command line") if pd_required else list(config.upstream.pd)
        return Target(LakeLayout.from_config(config.lake), endpoints, config.upstream.tls, config)
    if not args.lake:
        raise InputError("no lake given: pass --config FILE or --lake PATH" + (" --pd ADDR" if pd_required else ""))
    if pd_required and not pd:
        raise InputError("no PD address given: pass --pd ADDR (or --config FILE)")

    for address in pd:
        try:
            check_pd_address(address)
        except ValueError as exc:
            raise InputError(f"--pd: {exc}") from None
    return Target(LakeLayout(args.lake), pd)
