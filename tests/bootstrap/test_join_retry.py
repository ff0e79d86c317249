"""Bootstrap's side of a join that a puller shard missed (it saw the scheduled ts too late):
ask again, a bounded number of times. The puller side is played by hand on the real table."""

from __future__ import annotations

import io
import threading
import time

import pytest

from tidelake.bootstrap.bootstrap_run import JOIN_ATTEMPTS, Bootstrap, BootstrapOptions
from tidelake.config import parse_config
from tidelake.errors import InputError
from tidelake.lake.layout import LakeLayout
from tidelake.lake.table_starts import MISSED_JOIN, StartState, TableStarts


def bootstrap(tmp_path) -> tuple[Bootstrap, TableStarts, io.StringIO]:
    config = parse_config({"changefeed": {"id": "cf1"}, "upstream": {"pd": ["127.0.0.1:9"]},
                           "lake": {"root": str(tmp_path / "lake")}}, "test.toml")
    out = io.StringIO()
    return Bootstrap(config, BootstrapOptions(join_timeout_s=30), out=out), TableStarts(LakeLayout.from_config(config.lake)), out


def shard_refusing(starts: TableStarts, misses: int, then_join_at: int | None) -> threading.Thread:
    """Refuses the first `misses` requests as missed, then joins the next one."""
    def run() -> None:
        seen = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for request in [s for s in starts.latest("cf1") if s.state == StartState.REQUESTED]:
                seen += 1
                if seen <= misses:
                    starts.mark(request, StartState.MISSED, reason=f"puller shard 1/2 {MISSED_JOIN} {seen}")
                    if seen == misses and then_join_at is None:
                        return
                else:
                    starts.mark(request, StartState.JOINED, start_ts=then_join_at)
                    return
            time.sleep(0.1)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_missed_join_is_asked_again_and_joins(tmp_path):
    runner, starts, out = bootstrap(tmp_path)
    first = starts.request("cf1", "shop", "big")
    shard = shard_refusing(starts, misses=1, then_join_at=777)
    (joined,) = runner._wait_joined(starts, [first])
    shard.join(5)
    assert joined.start_ts == 777 and joined.request_id != first.request_id
    assert f"{MISSED_JOIN} 1; asking again" in out.getvalue()


def test_joins_missed_every_time_end_with_a_clear_error(tmp_path):
    runner, starts, _ = bootstrap(tmp_path)
    first = starts.request("cf1", "shop", "big")
    shard = shard_refusing(starts, misses=JOIN_ATTEMPTS, then_join_at=None)
    with pytest.raises(InputError, match=rf"shop.big: the puller refused it: .*{MISSED_JOIN} {JOIN_ATTEMPTS}"):
        runner._wait_joined(starts, [first])
    shard.join(5)
    assert sum(s.state == StartState.MISSED for s in starts.latest("cf1")) == JOIN_ATTEMPTS


def test_a_refused_request_is_not_asked_again_whatever_its_reason_says(tmp_path):
    runner, starts, out = bootstrap(tmp_path)
    first = starts.request("cf1", "shop", "big")
    starts.mark(first, StartState.REFUSED, reason=f"not replicated by the filter (not {MISSED_JOIN})")
    with pytest.raises(InputError, match="shop.big: the puller refused it: not replicated by the filter"):
        runner._wait_joined(starts, [first])
    assert "asking again" not in out.getvalue()
    assert [s.request_id for s in starts.latest("cf1")] == [first.request_id]
