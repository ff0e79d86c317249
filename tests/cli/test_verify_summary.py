"""verify is a gate that cannot pass on nothing: a run that compared no table fails, and the last
line says how many tables and upstream rows were compared."""

from __future__ import annotations

from rich.console import Console

from tidelake.cli.verify_command import print_report
from tidelake.verify.verifier import TableVerdict, Verdict, VerifyReport


def _last_line(report: VerifyReport, capsys) -> str:
    print_report(report, Console(width=200, force_terminal=False))
    return capsys.readouterr().out.strip().splitlines()[-1]


def _verdict(name: str, status: str, rows: int = 0) -> TableVerdict:
    return TableVerdict(name, f"/lake/{name}", status, upstream_rows=rows, replica_rows=rows)


def test_nothing_compared_fails(capsys):
    for report in (VerifyReport([]), VerifyReport([_verdict("s.a", Verdict.SKIPPED)])):
        assert not report.ok
        assert "verify failed: nothing to compare" in _last_line(report, capsys)


def test_a_pass_counts_the_tables_and_rows_it_compared(capsys):
    report = VerifyReport([_verdict("s.a", Verdict.MATCH, 1200), _verdict("s.b", Verdict.MATCH, 34),
                           _verdict("s.c", Verdict.SKIPPED)])
    assert report.ok
    assert _last_line(report, capsys) == "all replicas match upstream (2 of 3 tables compared, 1,234 upstream rows)"


def test_a_mismatch_fails_with_the_same_counts(capsys):
    report = VerifyReport([_verdict("s.a", Verdict.MATCH, 5), _verdict("s.b", Verdict.MISMATCH, 7)])
    assert not report.ok
    assert _last_line(report, capsys) == "verify failed (2 of 2 tables compared, 12 upstream rows)"
