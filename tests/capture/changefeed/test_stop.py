"""A stop ends the puller in every state, within a bounded time, and says what it left: PD
unreachable, every store down, lake writes failing (docs/operations.md#puller: SIGTERM flushes and exits 0)."""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import sys
import time

from tests.capture.changefeed.test_puller_runner import REPO, shop, some_rows
from tests.capture.pull_harness import (  # noqa: F401 (sim is a fixture)
    changelog,
    config_doc,
    make_config,
    sim,
    watermarks,
)
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.capture.landing.changelog_writer import ChangelogWriter
from tidelake.config_writer import changefeed_document, config_from_document, write_config
from tidelake.wait import wait_until

STOP_WITHIN_S = 15.0  # one last attempt per request (PD timeout 10s) plus the final flush


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stopped_in_time(run: PullerThread) -> float:
    asked = time.monotonic()
    run.stop(timeout_s=STOP_WITHIN_S)
    return time.monotonic() - asked


def test_a_stop_while_pd_is_unreachable_returns_at_once(tmp_path):
    config = config_from_document(changefeed_document("cf1", [f"127.0.0.1:{_free_port()}"], tmp_path / "lake"), "t")
    run = PullerThread(config).start()
    time.sleep(1.0)  # retrying GetMembers (60s budget)
    assert _stopped_in_time(run) < 5.0
    assert run.error is None, run.error
    assert "stopped before PD answered" in run.summary.left and not (tmp_path / "lake").exists()


def test_sigterm_while_pd_is_unreachable_exits_zero_and_says_so(tmp_path):
    config = write_config(tmp_path / "cf.toml",
                          changefeed_document("cf1", [f"127.0.0.1:{_free_port()}"], tmp_path / "lake"))
    proc = subprocess.Popen([sys.executable, "-m", "tidelake", "pull", "--config", str(config)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3.0)  # retrying PD, or still importing: either way the stop is honoured
    asked = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert time.monotonic() - asked < STOP_WITHIN_S
    assert "stopped before PD answered" in err and "Traceback" not in err, err


def test_a_stop_while_every_store_is_down_returns_in_bounded_time(sim, tmp_path):
    shop(sim, 110)
    for store_id in list(sim.store_addresses):
        sim.stop_store(store_id)
    run = PullerThread(make_config(sim, tmp_path / "lake")).start()
    time.sleep(1.0)  # the schema read backs off (120s budget)
    assert _stopped_in_time(run) < STOP_WITHIN_S
    assert run.error is None, run.error
    left = run.summary.left
    assert left.startswith("stopped while waiting (") and ("stopped while retrying" in left or "on stop" in left), left


def test_a_stop_while_lake_writes_fail_says_what_was_not_landed(sim, tmp_path, monkeypatch):
    lake = tmp_path / "lake"
    tidb = shop(sim, 110)
    run = PullerThread(make_config(sim, lake, flush="200ms")).start()
    wait_until(lambda: watermarks(lake).ddl_resolved, 30, "the first flush", check=run.check)

    def lake_gone(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(ChangelogWriter, "append", lake_gone)
    some_rows(tidb, random.Random(3), 110, 5)
    wait_until(lambda: run.runner._lander.buffered_bytes() > 0, 30, "rows buffered", check=run.check)
    before = len(changelog(lake))
    assert _stopped_in_time(run) < STOP_WITHIN_S
    assert run.error is None, run.error
    left = run.summary.left
    assert "the final flush failed (No space left on device)" in left and "re-pulled" in left, left
    assert len(changelog(lake)) == before


def test_a_stop_while_the_buffer_is_full_and_lake_writes_fail_is_bounded(sim, tmp_path, monkeypatch):
    lake = tmp_path / "lake"
    tidb = shop(sim, 110)
    doc = config_doc(sim, lake)
    doc["puller"]["memory_quota"] = "1KiB"  # the region workers block on the quota at once
    run = PullerThread(config_from_document(doc, "t")).start()
    wait_until(lambda: watermarks(lake).ddl_resolved, 30, "the first flush", check=run.check)

    def lake_gone(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(ChangelogWriter, "append", lake_gone)
    for seed in range(5):
        some_rows(tidb, random.Random(seed), 110, 20)
    time.sleep(1.0)
    assert _stopped_in_time(run) < STOP_WITHIN_S
    assert run.error is None, run.error
    assert "the final flush failed" in run.summary.left
