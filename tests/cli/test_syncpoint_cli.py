"""`tidelake syncpoint` picks its exit code from the attempt's outcome, never from its reason text."""

from __future__ import annotations

import pytest

from tidelake.cli import main, syncpoint_command
from tidelake.lake.layout import WATERMARKS_SCHEMA, LakeLayout, open_or_create
from tidelake.syncpoint.cut import SyncpointOutcome, SyncpointResult


@pytest.mark.parametrize("outcome, code", [
    (SyncpointOutcome.NOT_REACHABLE, 0), (SyncpointOutcome.WAITING, 0), (SyncpointOutcome.ALREADY_RECORDED, 0),
    (SyncpointOutcome.INCOMPLETE, 1), (SyncpointOutcome.HELD, 75),
])
def test_only_an_incomplete_cut_fails(tmp_path, monkeypatch, capsys, outcome, code):
    layout = LakeLayout(str(tmp_path / "lake"))
    open_or_create(layout, layout.watermarks, WATERMARKS_SCHEMA)
    seen = []
    monkeypatch.setattr(syncpoint_command, "get_session", lambda *a, **kw: "spark")
    monkeypatch.setattr(syncpoint_command, "run_syncpoint",
                        lambda spark, lay, interval: seen.append((spark, lay.root, interval))
                        or SyncpointResult(42, outcome, "has no Delta version (in any reason text)"))
    assert main(["syncpoint", "--lake", layout.root, "--interval", "60"]) == code
    assert seen == [("spark", layout.root, 60)]
    out = capsys.readouterr()
    assert str(outcome) in out.out or "not taken" in out.err
