"""`tidelake merge` refuses bad arguments with one line naming the flag, before Spark starts, and
tells a run that merged from one that could not (exit codes: docs/operations.md#merge-exit-codes)."""

from datetime import datetime, timezone

import pytest
from rich.console import Console

from tidelake.cli import main
from tidelake.cli import merge_command
from tidelake.cli.merge_command import exit_code
from tidelake.errors import EXIT_TRY_LATER
from tidelake.lake.watermarks import Watermarks
from tidelake.merge.merge_run import MergeReport
from tidelake.merge.table_merge import TableResult


@pytest.mark.parametrize("flags, message", [
    (["--threads", "0"], "--threads must be positive, got 0"),
    (["--max-chunk-rows", "-5"], "--max-chunk-rows must be positive, got -5"),
    (["--until-ts", "0"], "--until-ts must be a positive TSO below 2^64, got 0"),
])
def test_bad_merge_arguments_are_named(tmp_path, capsys, flags, message):
    assert main(["merge", "--lake", str(tmp_path), *flags]) == 2
    assert message in capsys.readouterr().err


def test_merge_needs_exactly_one_of_lake_and_config(tmp_path, capsys):
    assert main(["merge"]) == 2
    assert "no lake given: pass --config FILE or --lake PATH" in capsys.readouterr().err


def report_of(*statuses: str) -> MergeReport:
    why = "no resolved ts for partition 7"
    tables = [TableResult(i, f"app.t{i}", status=s, reason=why if s == "blocked" else None)
              for i, s in enumerate(statuses)]
    return MergeReport("r", datetime.now(timezone.utc), Watermarks({}, 0, 0), tables)


@pytest.mark.parametrize("statuses, code", [
    (("merged", "blocked"), 0),  # something advanced
    (("idle", "idle"), 0),  # nothing new anywhere: up to date
    ((), 0),
    (("blocked", "blocked"), EXIT_TRY_LATER),
    (("idle", "blocked"), EXIT_TRY_LATER),  # the one with work could not advance
    (("error", "blocked"), 1),
    (("stopped", "merged"), 1),
])
def test_a_run_that_advanced_nothing_because_tables_are_blocked_exits_75(statuses, code):
    console = Console(record=True, width=300)
    assert exit_code(report_of(*statuses), console) == code
    said = console.export_text().strip()
    if code == EXIT_TRY_LATER:
        blocked = statuses.count("blocked")
        first = statuses.index("blocked")
        assert said == (f"nothing merged: {blocked} of {len(statuses)} tables are blocked "
                        f"(app.t{first}: no resolved ts for partition 7)")
    else:
        assert said == ""


def test_a_lake_without_room_is_one_line_not_a_trace(tmp_path, capsys, monkeypatch):
    """An engine's error on a full disk (here delta-rs's text) ends the command in one line naming
    the cause; the full trace goes to a file."""
    def full_disk(args):
        raise Exception("Failed to parse parquet: External: Generic LocalFileSystem error: Unable to copy "
                        "data to file: No space left on device (os error 28)\nmore detail")

    monkeypatch.setattr(merge_command, "_merge", full_disk)
    assert main(["merge", "--lake", str(tmp_path)]) == EXIT_TRY_LATER
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("tidelake: error: the lake's filesystem is full: Exception: Failed to parse parquet: ")
    assert "(full trace: " in line


@pytest.mark.parametrize("no_room, code", [
    ((True, True), EXIT_TRY_LATER),  # every failure was the store's lack of room: the same run later succeeds
    ((True, False), 1),  # another failure beside it is a failure
])
def test_a_run_whose_failures_are_all_the_stores_lack_of_room_exits_75_naming_it(no_room, code):
    full = "the lake's filesystem is full: OSError: [Errno 28] No space left on device"
    tables = [TableResult(0, "app.ok", status="merged")] + [
        TableResult(i + 1, f"app.t{i + 1}", status="error", reason=full if room else "boom", no_room=room)
        for i, room in enumerate(no_room)]
    console = Console(record=True, width=300)
    assert exit_code(MergeReport("r", datetime.now(timezone.utc), Watermarks({}, 0, 0), tables), console) == code
    said = console.export_text().strip()
    if code == EXIT_TRY_LATER:
        assert said == (f"stopped for lack of room: 2 of 3 tables not merged (app.t1: {full}); run again once "
                        "the store has room")
    else:
        assert said == ""


def test_a_merge_log_the_store_refused_exits_75_saying_so():
    report = MergeReport("r", datetime.now(timezone.utc), Watermarks({}, 0, 0),
                         [TableResult(0, "app.ok", status="merged")], log_refused="the lake's filesystem is full: x")
    console = Console(record=True, width=300)
    assert exit_code(report, console) == EXIT_TRY_LATER
    assert console.export_text().strip() == ("merge log not written: the lake's filesystem is full: x; status shows "
                                             "the previous run until the next one")
