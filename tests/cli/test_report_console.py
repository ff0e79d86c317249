"""Reports printed into a log (not a terminal) keep every cell readable."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tidelake.cli.report_console import LOG_WIDTH, report_console


def wide_report() -> Table:
    table = Table("table", "status", "checkpoint", "lag", "windows", "DDLs", "changes", "rows written", "seconds")
    table.add_row("warehouse.order_line_items", "merged", "470629573981634561", "475.2s", "10", "9", "17691", "16167",
                  "130.8")
    return table


def test_off_a_terminal_reports_are_wide_enough_for_their_tables(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    console = report_console()
    assert not console.is_terminal and console.width == LOG_WIDTH
    console.print(wide_report())
    out = capsys.readouterr().out
    assert "warehouse.order_line_items" in out and "470629573981634561" in out and "…" not in out
    Console(width=80).print(wide_report())  # what rich alone does with the same report
    assert "warehouse.order_line_items" not in capsys.readouterr().out


def test_a_width_the_caller_gives_wins(monkeypatch):
    """`make demo` shows verify and status on its own terminal and passes that terminal's width."""
    monkeypatch.setenv("COLUMNS", "123")
    assert report_console().width == 123
