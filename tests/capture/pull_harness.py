"""Shared pieces of the puller-runner tests: a small cluster, a changefeed config, the lake read
back, and the oracle taken from the simulator's own MVCC write records."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tidelake.codec.keys import table_record_span
from tidelake.config import ChangefeedConfig, parse_config
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import read_watermarks
from tidelake.puller.runner import PullerRunner, RunOptions, Shard
from tidelake.sim.cluster import SimCluster


@pytest.fixture
def sim():
    cluster = SimCluster(n_stores=2, leader_failover_delay_s=0.2, split_check_interval_s=0, gc_interval_s=0,
                         server_workers=8, cdc_options={"min_ts_interval_s": 0.2})
    with cluster:
        yield cluster


def config_doc(sim: SimCluster, lake: Path, rules=("shop.*",), flush="200ms", **changefeed) -> dict:
    return {
        "changefeed": {"id": "cf1", **changefeed},
        "upstream": {"pd": [sim.pd_address], "gc_ttl": "10m"},
        "filter": {"rules": list(rules)},
        "lake": {"root": str(lake)},
        "puller": {"flush_interval": flush},
    }


def make_config(sim: SimCluster, lake: Path, **kw) -> ChangefeedConfig:
    return parse_config(config_doc(sim, lake, **kw), "test.toml")


def write_toml(doc: dict, path: Path) -> Path:
    lines = []
    for section, values in doc.items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            if isinstance(value, str):
                lines.append(f'{key} = "{value}"')
            elif isinstance(value, list):
                lines.append(f"{key} = [{', '.join(repr(v).replace(chr(39), chr(34)) for v in value)}]")
            else:
                lines.append(f"{key} = {value}")
    path.write_text("\n".join(lines) + "\n")
    return path


class RunnerThread:
    """A PullerRunner on a background thread, stopped gracefully by stop()."""

    def __init__(self, config: ChangefeedConfig, shard: Shard = Shard(), **options) -> None:
        self.runner = PullerRunner(config, shard, RunOptions(gc_advance_interval_s=0.2, **options))
        self.summary = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.summary = self.runner.run()
        except BaseException as exc:  # handed to the test thread
            self.error = exc

    def __enter__(self) -> RunnerThread:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self.runner.stop()
        self.thread.join(60)
        assert not self.thread.is_alive(), "runner did not stop"


def wait_for(predicate, timeout_s: float = 30.0, what: str = "condition", check=None):
    deadline = time.monotonic() + timeout_s
    while True:
        if check is not None:
            check()
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def watermarks(lake: Path):
    return read_watermarks(LakeLayout(str(lake)))


def wait_resolved(lake: Path, tables: dict[int, int], ddl_ts: int = 0, runner: RunnerThread | None = None):
    """Until every table's watermark and the DDL watermark reach the given ts."""
    def check():
        if runner is not None and runner.error is not None:
            raise runner.error

    def reached():
        w = watermarks(lake)
        return w.ddl_resolved >= ddl_ts and all(w.table_resolved.get(t, 0) >= ts for t, ts in tables.items())

    return wait_for(reached, 40, f"watermarks {tables} / ddl {ddl_ts}", check)


def changelog(lake: Path) -> list[tuple[int, bytes, int, str, bytes]]:
    """(table id, key, commit ts, op, value) of every landed row, duplicates kept."""
    path = LakeLayout(str(lake)).changelog
    if not DeltaTable.is_deltatable(path):
        return []
    t = DeltaTable(path).to_pyarrow_table(columns=["table_id", "key", "commit_ts", "op", "value"]).to_pylist()
    return [(r["table_id"], r["key"], r["commit_ts"], r["op"], r["value"]) for r in t]


def oracle(sim: SimCluster, table_id: int, after_ts: int) -> set[tuple[int, bytes, int, str, bytes]]:
    """Every committed put/delete of the table with commit ts > after_ts, from the MVCC write records."""
    start, end = table_record_span(table_id)
    return {(table_id, e.key, e.commit_ts, e.op, e.value)
            for e in sim.mvcc.snapshot_delta(start, end, after_ts) if e.commit_ts > 0}


def ddl_rows(lake: Path) -> list[dict]:
    return DeltaTable(LakeLayout(str(lake)).ddl).to_pyarrow_table().to_pylist()


def start_ts(lake: Path, runner: RunnerThread) -> int:
    """The start ts the runner chose, as recorded by its schema snapshot rows (not a watermark,
    which a second flush may already have moved past it)."""
    from tidelake.lake.layout import SOURCE_SNAPSHOT

    wait_resolved(lake, {}, 1, runner)
    return next(r["commit_ts"] for r in ddl_rows(lake) if r["source"] == SOURCE_SNAPSHOT)
