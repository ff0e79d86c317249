"""ProcessPullers: a shard process that exits by itself is the anomaly `puller_failed`, named with
its exit code and its last stderr line, and a schedule cannot start on it (the SIGKILLs
themselves run in test_nemesis_cli.py's process-mode schedules)."""

from __future__ import annotations

from collections import Counter

import pytest

from tidelake.config_writer import changefeed_document, write_config
from tidelake.errors import TidelakeError
from tidelake.nemesis.plan import draw_plan
from tidelake.nemesis.puller_processes import ProcessPullers
from tidelake.wait import wait_until


def test_a_shard_exiting_by_itself_is_puller_failed_with_its_error_line(tmp_path):
    (tmp_path / "file").write_text("")
    lake = tmp_path / "file" / "lake"  # `tidelake pull` refuses it and exits 2
    config = write_config(tmp_path / "cf.toml", changefeed_document("nemesis", ["127.0.0.1:1"], lake))
    faults, anomalies = Counter(), []
    pullers = ProcessPullers(config, "nemesis", 1, draw_plan(1, "bank", 2.0), 0.2, tmp_path / "logs", faults,
                             Counter(), anomalies).start()
    try:
        wait_until(lambda: anomalies, 60, "the shard's exit")
        with pytest.raises(TidelakeError, match="^a puller shard failed at start: shard 0 exited with 2: "
                                                "tidelake: error: lake .* cannot be created"):
            pullers.check()
    finally:
        pullers.stop()
    assert {a.kind for a in anomalies} == {"puller_failed"} and not faults and not pullers.kills
