"""The orchestrator faults kill and restart an Airflow component one way: SIGKILL, a pause, a start,
the time it was down."""

from __future__ import annotations

from types import SimpleNamespace

from tidelake.demos import orchestrator_faults
from tidelake.demos.orchestrator_faults import RESTART_PAUSE_S, _kill_and_restart


def test_kill_and_restart_kills_pauses_and_starts_the_named_component(monkeypatch):
    calls = []
    clock = iter([100.0, 100.0 + RESTART_PAUSE_S + 1.5])
    monkeypatch.setattr(orchestrator_faults.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(orchestrator_faults.time, "sleep", lambda s: calls.append(("sleep", s)))
    components = SimpleNamespace(kill=lambda name: calls.append(("kill", name)) or (41, 3),
                                 restart=lambda name: calls.append(("restart", name)) or 42)
    result = _kill_and_restart(SimpleNamespace(components=components), "triggerer")
    assert calls == [("kill", "triggerer"), ("sleep", RESTART_PAUSE_S), ("restart", "triggerer")]
    assert result == (41, 3, 42, RESTART_PAUSE_S + 1.5)
