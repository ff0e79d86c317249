"""Failpoints armed from TIDELAKE_FAILPOINTS: fail-rs's chain syntax (a subset), malformed values
refused whole in one line, and a real lander process that SIGKILLs itself at the armed point."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tidelake.failpoints import ENV, parse_env
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import read_watermarks

REPO = str(Path(__file__).resolve().parents[1])


def _passes(chain, n: int, monkeypatch) -> list[str]:
    """What each of n passes did: 'pass', 'kill' or 'sleep'."""
    done: list[str] = []
    monkeypatch.setattr("tidelake.failpoints.kill_self", lambda name: done.append("kill"))
    monkeypatch.setattr("tidelake.failpoints.time.sleep", lambda s: done.append(f"sleep {s:g}"))
    for _ in range(n):
        before = len(done)
        chain("p.q", None)
        if len(done) == before:
            done.append("pass")
    return done


def test_a_chain_takes_each_action_for_its_count_then_the_next(monkeypatch):
    chains = parse_env(" lander.after_changelog = 2*off->kill ; merge.next_table=1*sleep(250)->off;")
    assert set(chains) == {"lander.after_changelog", "merge.next_table"}
    assert _passes(chains["lander.after_changelog"], 4, monkeypatch) == ["pass", "pass", "kill", "kill"]
    assert _passes(chains["merge.next_table"], 3, monkeypatch) == ["sleep 0.25", "pass", "pass"]
    # every action counted and spent: the point is passed untouched from then on
    assert _passes(parse_env("a.b=1*kill")["a.b"], 3, monkeypatch) == ["kill", "pass", "pass"]
    assert parse_env("") == {} and parse_env(" ; ") == {}


@pytest.mark.parametrize("value, message", [
    ("lander.after_changelog", "'lander.after_changelog' is not name=actions"),
    ("=kill", "'=kill' is not name=actions"),
    ("a b=kill", "'a b=kill' is not name=actions"),
    ("lander.open=kill;lander.open=off", "failpoint lander.open is armed twice"),
    ("p.q=2*of->kill", "p.q: action '2*of' is not [cnt*]task"),
    ("p.q=kill->", "p.q: action '' is not [cnt*]task"),
    ("p.q=50%kill", "(fail-rs's p% frequency is not supported)"),
    ("p.q=x*kill", "p.q: action 'x*kill'"),
    ("p.q=sleep", "sleep takes milliseconds"),
    ("p.q=kill(3)", "kill takes no argument"),
    ("p.q=panic", "action 'panic'"),
])
def test_a_malformed_value_is_refused_naming_the_variable_and_the_bad_part(value, message):
    with pytest.raises(Exception, match="^" + ENV) as err:
        parse_env(value)
    assert message in str(err.value) and "\n" not in str(err.value)


def _run(env: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=REPO, env={**os.environ, ENV: env}, capture_output=True,
                          text=True, timeout=120)


def test_a_process_with_a_malformed_value_does_not_start(tmp_path):
    done = _run("lander.after_changelog=2*off->kil", "-m", "tidelake", "pull", "--config", str(tmp_path / "cf.toml"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"tidelake: error: {ENV}: lander.after_changelog: action 'kil' is not "
                                        "[cnt*]task with task one of off, kill, sleep(ms)"]
    misspelt = _run("lander.after_changelg=kill", "-m", "tidelake", "pull", "--config", str(tmp_path / "cf.toml"))
    assert misspelt.returncode == 2 and len(misspelt.stderr.splitlines()) == 1
    assert "lander.after_changelg is not a failpoint of tidelake pull" in misspelt.stderr


# Two flushes of a real lander: rows of table 41 up to ts 2000, then more up to ts 3000.
FLUSHES = """
import sys
from tidelake.capture.landing.lander import Lander
from tidelake.lake.layout import LakeLayout
from tidelake.lake.row_change import RowChange

lander = Lander(LakeLayout(sys.argv[1]), "cf-1", flush_interval_s=3600)
for first, last in ((1000, 2000), (2001, 3000)):
    lander.add_rows([RowChange(41, ts, ts - 1, "put", b"t41_r%d" % ts, b"v", b"", 1) for ts in range(first, last, 100)])
    lander.resolve(41, last)
    lander.flush()
    print("flushed", last, flush=True)
"""


def test_a_process_armed_after_the_changelog_commit_dies_by_sigkill_leaving_a_crashed_flush(tmp_path):
    """The second flush's changelog commit lands, then SIGKILL: its watermark never does, so the
    lake says what a crash there leaves (rows above the durable watermark, re-pulled on restart)."""
    lake = tmp_path / "lake"
    done = _run("lander.after_changelog=1*off->kill", "-c", FLUSHES, str(lake))
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert done.stdout.splitlines() == ["flushed 2000"]  # the second flush never returned
    assert "failpoint lander.after_changelog: kill (SIGKILL of pid" in done.stderr
    layout = LakeLayout(str(lake))
    assert read_watermarks(layout).table_resolved == {41: 2000}
    landed = sorted(DeltaTable(layout.changelog).to_pyarrow_table().column("commit_ts").to_pylist())
    assert landed == [*range(1000, 2000, 100), *range(2001, 3000, 100)]


def test_a_process_armed_before_the_watermarks_commit_lands_no_watermark(tmp_path):
    lake = tmp_path / "lake"
    done = _run("lander.before_watermarks=kill", "-c", FLUSHES, str(lake))
    assert done.returncode == -signal.SIGKILL and done.stdout == ""
    layout = LakeLayout(str(lake))
    assert read_watermarks(layout).table_resolved == {}
    assert len(DeltaTable(layout.changelog).to_pyarrow_table()) == 10


def test_a_process_says_which_failpoints_its_environment_armed(tmp_path):
    armed = _run("lander.before_watermarks=kill", "-m", "tidelake", "pull", "--config", str(tmp_path / "cf.toml"))
    assert armed.returncode == 2  # no such config: the warning came first
    assert f"failpoints armed from {ENV}: lander.before_watermarks=kill" in armed.stderr
