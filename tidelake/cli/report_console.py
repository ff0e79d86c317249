"""The rich console the commands print their reports with.

Off a terminal (an Airflow task log, a pipe, a file) rich assumes 80 columns and elides the
cells of a wide table ("sim.…"), which leaves a log that names no table; reports there get a
width a log viewer can show, unless the caller says how wide it is (COLUMNS, as `make demo`
does for the commands whose output it shows on its own terminal).
Owner: the CLI's reporting commands (status, verify, merge, demo).
"""

from __future__ import annotations

import os

from rich.console import Console

LOG_WIDTH = 200


def report_console(stderr: bool = False) -> Console:
    console = Console(stderr=stderr)
    if console.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return console
    return Console(stderr=stderr, width=LOG_WIDTH)
