"""read_control reads the watermarks before the DDL history (docs/design.md invariant 2)."""

from __future__ import annotations

from tidelake.lake import control
from tidelake.lake.control import read_control


def test_watermarks_are_read_before_the_history(layout, monkeypatch):
    order = []
    real_watermarks, real_load = control.read_watermarks, control.SchemaHistory.load
    monkeypatch.setattr(control, "read_watermarks", lambda lay: order.append("watermarks") or real_watermarks(lay))
    monkeypatch.setattr(control.SchemaHistory, "load",
                        classmethod(lambda cls, lay, version=None: order.append("history") or real_load(lay)))
    read_control(layout)
    assert order == ["watermarks", "history"]

