"""A real `tidelake pull` on a lake whose filesystem fills up (a 4 MiB tmpfs, tests/lake/tiny_fs.py):
landing pauses with one line naming the cause, the progress lines say LANDING PAUSED, the
region streams wait at the memory quota, SIGTERM while paused exits within seconds saying what
was not landed, and once the volume is grown every committed row is in the changelog exactly
once, as the simulator's own MVCC records have it (docs/operations.md#when-the-lake-has-no-room)."""

from __future__ import annotations

import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.capture.changefeed.test_puller_runner import REPO, shop
from tests.capture.pull_harness import changelog, config_doc, ddl_rows, oracle, sim, watermarks  # noqa: F401 (sim is a fixture)
from tests.lake.tiny_fs import fill, grow, tiny_tmpfs
from tidelake.config_writer import write_config
from tidelake.errors import EXIT_TRY_LATER
from tidelake.lake.layout import DdlSource
from tidelake.wait import wait_until

STOP_WITHIN_S = 5.0
QUOTA_BYTES = 64 << 10  # the puller's memory quota: the rows written while paused are several times it
PAUSE_LINE = re.compile(r"WARNING tidelake\.capture\.landing\.lander: landing of tidelake-puller/cf1 paused \d+ s: "
                        r"the lake's filesystem is full; [\d.]+ MiB kept in memory, retried every 10 s at most "
                        r"\(NoRoomError: the lake's filesystem is full: [\d.]+ MiB free under .*\)$")


class Pull:
    """`tidelake pull` in its own process, its stderr in a file read as it grows."""

    def __init__(self, config: Path, log: Path) -> None:
        self.log = log
        self._out = open(log, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "tidelake", "pull", "--config", str(config),
                                      "--progress-interval", "0.5"], cwd=REPO, stdout=self._out,
                                     stderr=subprocess.STDOUT)

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines()

    def check(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"tidelake pull exited {self.proc.returncode}:\n" + "\n".join(self.lines()[-20:]))

    def stop(self) -> float:
        """SIGTERM; seconds until it exited (0 asserted)."""
        asked = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(60)
        took = time.monotonic() - asked
        self._out.close()
        assert code == 0, "\n".join(self.lines()[-20:])
        return took

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._out.close()


def _big_rows(tidb, rng: random.Random, n: int) -> int:
    """n transactions of 4 rows of 8 KiB each; the last commit ts."""
    return max(tidb.rows(110, {h: rng.randbytes(8 << 10) for h in rng.sample(range(50), 4)}) for _ in range(n))


def _no_trace(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert "Traceback" not in text and "panicked" not in text, text


def test_pull_on_a_filesystem_that_fills_up_pauses_in_one_line_and_loses_nothing(sim, tmp_path):
    tidb = shop(sim, 110)
    rng = random.Random(32)
    with tiny_tmpfs(tmp_path / "mnt", "4m") as mnt:
        lake = mnt / "lake"
        doc = config_doc(sim, lake)
        doc["puller"]["memory_quota"] = f"{QUOTA_BYTES}B"
        config = write_config(tmp_path / "cf.toml", doc)
        pull = Pull(config, tmp_path / "pull-1.log")
        try:
            wait_until(lambda: watermarks(lake).ddl_resolved, 30, "the start snapshot landed", check=pull.check)
            start = next(r["commit_ts"] for r in ddl_rows(lake) if r["source"] == DdlSource.SNAPSHOT)
            landed = _big_rows(tidb, rng, 2)
            wait_until(lambda: watermarks(lake).table_resolved.get(110, 0) >= landed, 30, "the first rows landed",
                       check=pull.check)

            fill(mnt)
            held = _big_rows(tidb, rng, 8)  # 256 KiB of rows: four times the quota
            wait_until(lambda: any("LANDING PAUSED" in line for line in pull.lines()), 30, "a paused progress line",
                       check=pull.check)
            time.sleep(1.5)  # three more progress lines, and a retry or two of the flush
            paused = [line for line in pull.lines() if "landing of" in line]
            assert len(paused) == 1 and PAUSE_LINE.search(paused[0]), paused
            progress = [line for line in pull.lines() if line.startswith("pull cf1: ")]
            assert progress[-1].endswith(", LANDING PAUSED: the lake's filesystem is full"), progress[-1]
            buffered = float(re.search(r"buffer ([\d.]+) MiB", progress[-1]).group(1))
            assert buffered * 2**20 <= QUOTA_BYTES + 0.05 * 2**20, progress[-1]  # the streams wait at the quota
            assert watermarks(lake).table_resolved[110] < held

            grow(mnt, "64m")
            wait_until(lambda: watermarks(lake).table_resolved.get(110, 0) >= held, 30, "landing resumed",
                       check=pull.check)
            assert any(re.search(r"landing of tidelake-puller/cf1 resumed after \d+ s paused "
                                 r"\(the lake's filesystem is full\)$", line) for line in pull.lines())

            fill(mnt, "ballast-2")  # full again, and stopped while paused
            unlanded = _big_rows(tidb, rng, 2)
            wait_until(lambda: sum("LANDING PAUSED" in line for line in pull.lines()) > len(progress) + 1, 30,
                       "paused again", check=pull.check)
            assert pull.stop() < STOP_WITHIN_S
            last = pull.lines()[-1]
            assert last.startswith("pull cf1: stopped; ") and "left: the final flush failed (the lake's filesystem is " \
                "full: " in last and "re-pulled from the durable watermarks" in last, last
            _no_trace(pull.lines())
            assert watermarks(lake).table_resolved[110] < unlanded
        finally:
            pull.kill()

        grow(mnt, "128m")
        again = Pull(config, tmp_path / "pull-2.log")
        try:
            wait_until(lambda: watermarks(lake).table_resolved.get(110, 0) >= unlanded, 30, "the next run landed",
                       check=again.check)
            assert again.stop() < STOP_WITHIN_S
            _no_trace(again.lines())
        finally:
            again.kill()
        rows = [r for r in changelog(lake) if r[0] == 110]
        assert Counter(rows) == Counter(oracle(sim, 110, start))  # each committed change once, none lost


def test_a_spill_folder_that_fills_up_stops_the_puller_in_one_line_and_the_next_run_loses_nothing(sim, tmp_path):
    """A transaction bigger than the spill folder (a 1 MiB tmpfs) while every prewrite spills: the
    puller stops with one line, exit 75, nothing landed past the transaction; grown, the next run
    lands every row."""
    tidb = shop(sim, 110)
    rng = random.Random(4)
    with tiny_tmpfs(tmp_path / "spill", "1m") as spill:
        lake = tmp_path / "lake"
        doc = config_doc(sim, lake)
        doc["puller"].update(memory_quota=f"{QUOTA_BYTES}B", spill_dir=str(spill))  # a prewrite budget of 1 KiB
        config = write_config(tmp_path / "cf.toml", doc)
        pull = Pull(config, tmp_path / "pull-1.log")
        try:
            wait_until(lambda: watermarks(lake).ddl_resolved, 30, "the start snapshot landed", check=pull.check)
            start = next(r["commit_ts"] for r in ddl_rows(lake) if r["source"] == DdlSource.SNAPSHOT)
            landed = _big_rows(tidb, rng, 2)
            wait_until(lambda: watermarks(lake).table_resolved.get(110, 0) >= landed, 30, "the first rows landed",
                       check=pull.check)
            big = tidb.rows(110, {h: rng.randbytes(32 << 10) for h in range(100, 164)})  # 2 MiB of prewrites
            assert pull.proc.wait(30) == EXIT_TRY_LATER
        finally:
            pull.kill()
        lines = pull.lines()
        _no_trace(lines)
        assert lines[-1].startswith(f"tidelake: error: the prewrite spill folder {spill} is full (database or disk "
                                    "is full): the puller stops before landing past the transactions waiting for "
                                    "their commit; its next run pulls them again"), lines[-3:]
        assert watermarks(lake).table_resolved[110] < big

        grow(spill, "16m")
        again = Pull(config, tmp_path / "pull-2.log")
        try:
            wait_until(lambda: watermarks(lake).table_resolved.get(110, 0) >= big, 30, "the next run landed",
                       check=again.check)
            assert again.stop() < STOP_WITHIN_S
            _no_trace(again.lines())
        finally:
            again.kill()
        assert list(spill.iterdir()) == []  # the spill file is unlinked once open
    rows = [r for r in changelog(lake) if r[0] == 110]
    assert Counter(rows) == Counter(oracle(sim, 110, start))


def test_a_puller_started_on_a_full_filesystem_exits_in_one_line(sim, tmp_path):
    shop(sim, 110)
    with tiny_tmpfs(tmp_path / "mnt", "4m") as mnt:
        config = write_config(tmp_path / "cf.toml", config_doc(sim, mnt / "lake"))
        fill(mnt)
        pull = Pull(config, tmp_path / "pull.log")
        try:
            assert pull.proc.wait(60) == EXIT_TRY_LATER
        finally:
            pull.kill()
        lines = pull.lines()
        _no_trace(lines)
        assert len(lines) == 1 and lines[0].startswith("tidelake: error: the lake's filesystem is full: "), lines
