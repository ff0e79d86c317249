"""CrashSwitch: a crash at a lander failpoint stops that lander's commits for good, while a new
lander on the same lake lands; injected write errors fail only for their window."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from deltalake import DeltaTable

from tidelake.capture.landing.lander import Lander
from tidelake.lake.watermarks import read_watermarks
from tidelake.nemesis.puller_crash import CrashSwitch, LakeWriteError, PullerCrashed


def _landed(layout) -> int:
    return len(DeltaTable(layout.changelog).to_pyarrow_table()) if DeltaTable.is_deltatable(layout.changelog) else 0


@pytest.fixture
def switch():
    switch = CrashSwitch()
    with switch.armed():
        yield switch


def _lander(layout) -> Lander:
    return Lander(layout, "cf-1", flush_interval_s=3600)


def test_a_crash_after_the_changelog_commit_leaves_the_old_watermark_and_a_new_lander_resumes(
        switch, layout, make_rows):
    first = _lander(layout)
    rows = make_rows(41, 3)
    first.add_rows(rows)
    first.resolve(41, rows[-1].commit_ts)
    switch.crash_at("lander.after_changelog")
    with pytest.raises(PullerCrashed):
        first.flush()
    assert switch.crashed.is_set()
    assert _landed(layout) == 3 and read_watermarks(layout).table_resolved == {}  # rows landed, watermark not
    first.resolve(41, rows[-1].commit_ts + 1)
    with pytest.raises(PullerCrashed):  # dead: it commits nothing more
        first.flush()
    second = _lander(layout)  # the restarted puller: a new lander on the same lake
    more = make_rows(41, 2)
    second.add_rows(more)
    second.resolve(41, more[-1].commit_ts)
    second.flush()
    assert read_watermarks(layout).table_resolved == {41: more[-1].commit_ts} and _landed(layout) == 5


def test_crash_now_kills_only_the_current_lander(switch, layout, make_rows):
    old = _lander(layout)
    switch.crash_now()
    old.add_rows(make_rows(41, 1))
    with pytest.raises(PullerCrashed):
        old.flush()
    new = _lander(layout)
    new.add_rows(make_rows(41, 1))
    new.flush()
    assert _landed(layout) == 1


def test_write_errors_fail_for_their_window_then_the_retry_lands(switch, layout, make_rows, monkeypatch):
    now = [time.monotonic()]  # the switch's clock, moved by hand: a slow flush cannot outlast the window
    monkeypatch.setattr("tidelake.nemesis.puller_crash.time", SimpleNamespace(monotonic=lambda: now[0]))
    lander = _lander(layout)
    rows = make_rows(41, 2)
    lander.add_rows(rows)
    lander.resolve(41, rows[-1].commit_ts)
    switch.fail_writes("lander.after_watermarks", 0.3)  # the watermark commit lands, its ack is lost
    with pytest.raises(LakeWriteError):
        lander.flush()
    assert read_watermarks(layout).table_resolved == {41: rows[-1].commit_ts}
    now[0] += 0.35
    lander.flush()  # the retry finds its own commit and skips it
    assert _landed(layout) == 2
    assert not switch.crashed.is_set()
