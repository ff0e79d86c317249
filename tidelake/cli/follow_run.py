"""`tidelake merge --follow`: the merge follower (tidelake.merge.follow) on one Spark session, with
the changefeed's syncpoints ([merge].syncpoint_interval) and their Iceberg publication, until
SIGTERM/SIGINT (tidelake.stop_signals): the first lets the pass in progress finish, a second
abandons it; either way the leases are released. Exit 0 when stopped, 75 when another follower holds the lake's lease.
Owner: `tidelake merge --follow`.
"""

from __future__ import annotations

import argparse

from tidelake.cli.spark_choice import remote_choice
from tidelake.cli.target import Target
from tidelake.errors import InputError
from tidelake.lake.lease import live_holder, merge_follower_lease
from tidelake.merge.follow import FOLLOW_THREADS, FollowerRunning
from tidelake.merge.table_plan import DEFAULT_CHUNK_ROWS
from tidelake.orchestration.job_entry import changefeed_follower
from tidelake.spark.spark_session import get_session, release_session
from tidelake.stop_signals import stop_on_signals


def check_follow_args(args: argparse.Namespace) -> None:
    """--follow merges every table to the latest: the one-run choices do not go with it."""
    given = [flag for flag, value in (("--table", args.table), ("--until-ts", args.until_ts),
                                      ("--rebuild", args.rebuild)) if value]
    if given:
        raise InputError(f"--follow merges every table as the watermarks advance; {', '.join(given)} "
                         "is for a single run")


def follow(args: argparse.Namespace, target: Target) -> int:
    check_follow_args(args)
    layout, config = target.layout, target.config
    holder = live_holder(layout, merge_follower_lease())
    if holder is not None:  # refused before a Spark session starts; the lease itself decides races
        raise FollowerRunning.held_by(layout, holder)
    spark = get_session("tidelake-merge-follow", master=args.master, remote=remote_choice(args, target),
                        lake=layout)
    try:
        # After the session: a local SparkContext installs its own SIGINT handler (cancel every job).
        with stop_on_signals() as stop:
            changefeed_follower(spark, layout, config, lambda line: print(line, flush=True), stop,
                                threads=args.threads or FOLLOW_THREADS,
                                max_chunk_rows=args.max_chunk_rows or DEFAULT_CHUNK_ROWS).run()
    finally:
        release_session(spark)
    return 0
