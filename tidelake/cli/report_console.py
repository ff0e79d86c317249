"""The rich console the commands print their reports with.

Off a terminal (an Airflow task log, a pipe, a file) rich assumes 80 columns and elides the
cells of a wide table ("sim.…"), which leaves a log that names no table; reports there get a
width a log viewer can show.
"""

from __future__ import annotations

from rich.console import Console

LOG_WIDTH = 200


def report_console(stderr: bool = False) -> Console:
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=LOG_WIDTH)
