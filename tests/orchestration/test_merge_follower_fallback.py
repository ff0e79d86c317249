"""The scheduled merge is the merge follower's fallback: while a live lease merge-follower exists,
tidelake_merge's plan task and its syncpoint job log one line naming the follower and merge
nothing; once the lease is released, or expires with its holder, the plan merges again. A rebuild
asked for by hand still runs. No Spark: the plan reads the lake with delta-rs, and the syncpoint
job yields before it would use its session."""

from __future__ import annotations

import logging
import socket
import time

import pytest
from merge.lake_fixtures import FedLake

from tidelake.config import LeaseSettings, load_config
from tidelake.config_writer import changefeed_document, write_config
from tidelake.lake.lease import Holder, hold, merge_follower_lease, take
from tidelake.lake.lease_store import lease_store
from tidelake.orchestration.job_entry import run_job
from tidelake.orchestration.job_spec import SyncpointJob
from tidelake.orchestration.merge_dag import plan_run
from tidelake.syncpoint.records import read_syncpoints

YIELDS = "is running; this run leaves the merge to it"


@pytest.fixture
def lake(tmp_path):
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 1, "note": "a"})
    lake.resolve()
    yield lake
    lake.close()


@pytest.fixture
def config(lake, tmp_path):
    return str(write_config(tmp_path / "cf.toml", changefeed_document(
        "cf", ["127.0.0.1:1"], lake.layout.root, merge={"syncpoint_interval": "1s"})))


def yielded(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if YIELDS in r.getMessage()]


def test_the_plan_and_the_syncpoint_job_leave_the_merge_to_a_live_follower(lake, config, caplog):
    caplog.set_level(logging.INFO)
    with hold(lake.layout, {"f": (merge_follower_lease(), "the merge follower")}):
        # no replica yet: the publish task announces what the follower creates
        assert plan_run(config, {}, {}) == {"merge_jobs": [], "before": {"shop.orders": None}, "syncpoint": False}
        (line,) = yielded(caplog)
        assert line.startswith("merge follower `") and f"host {socket.gethostname()}" in line
        run_job(SyncpointJob(config), load_config(config), None)
        assert len(yielded(caplog)) == 2
        assert read_syncpoints(lake.layout) == []
        rebuild = plan_run(config, {"rebuild": "shop.orders"}, {})  # by hand: not left to the follower
        assert [job["name"] for job in rebuild["merge_jobs"]] == ["tidelake merge cf: shop.orders"]
    caplog.clear()
    planned = plan_run(config, {}, {})  # released: the scheduled run merges again
    assert [job["name"] for job in planned["merge_jobs"]] == ["tidelake merge cf: shop.orders"]
    assert yielded(caplog) == []


def test_a_follower_that_died_elsewhere_is_waited_for_until_its_lease_expires(lake, config, caplog):
    caplog.set_level(logging.INFO)
    store = lease_store(lake.layout.leases_root, lake.layout.storage_options)
    elsewhere = Holder("another-host", 4242, "tidelake merge --follow", "2026-01-01T00:00:00+00:00")
    take(store, merge_follower_lease(), "the merge follower", LeaseSettings(ttl_s=1.0, renew_s=0.5), elsewhere,
         time.monotonic())  # never renewed: its holder is gone
    assert plan_run(config, {}, {})["merge_jobs"] == []
    assert "(host another-host, pid 4242) since " in yielded(caplog)[0]
    time.sleep(1.1)
    assert [job["name"] for job in plan_run(config, {}, {})["merge_jobs"]] == ["tidelake merge cf: shop.orders"]


def test_an_unreadable_announced_record_is_a_warning_and_the_plan_merges(lake, config, caplog):
    from pathlib import Path

    caplog.set_level(logging.WARNING)
    log_dir = Path(lake.layout.announced) / "_delta_log"
    log_dir.mkdir(parents=True)
    (log_dir / "00000000000000000000.json").write_text("not json\n")
    planned = plan_run(config, {}, {})
    assert [job["name"] for job in planned["merge_jobs"]] == ["tidelake merge cf: shop.orders"]
    assert planned["before"] == {"shop.orders": None}
    (line,) = [r.getMessage() for r in caplog.records if "announced replica states" in r.getMessage()]
    assert line.startswith(f"could not read the announced replica states in {lake.layout.announced} (")
