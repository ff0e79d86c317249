"""The triggerer side of [merge].run_on_new_data: an event trigger watching a changefeed's lake.

Airflow's event-driven scheduling (airflow.sdk AssetWatcher; airflow/triggers/base.py
BaseEventTrigger) runs it in the triggerer; each event becomes an asset event of the changelog
asset and the merge DAG gets a run. The decision is tidelake.orchestration.new_data_watch; this
polls (the lake read with hooks.aws_lake.awith_lake_connection) through errors, and sends nothing
while a merge follower holds the lake's merge-follower lease (its run would merge nothing).
Owner: the merge DAG (tidelake.orchestration.airflow.dags.merge).

More: docs/internals.md#new_data_watch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from tidelake.config import load_config
from tidelake.lake.layout import LakeLayout
from tidelake.lake.lease import live_holder, merge_follower_lease
from tidelake.lake.watermarks import read_watermarks
from tidelake.orchestration.airflow.hooks.aws_lake import awith_lake_connection
from tidelake.orchestration.new_data_watch import NewDataWatch

log = logging.getLogger(__name__)

POLL_S = 5.0  # a poll reads the merge follower's lease record, then the watermarks table: its latest checkpoint and a few commits


class NewDataTrigger(BaseEventTrigger):
    """Yields an event when the changefeed's changelog got changes its watermarks now cover."""

    def __init__(self, *, config_path: str, floor_s: float, poll_s: float = POLL_S) -> None:
        super().__init__()
        self.config_path = config_path
        self.floor_s = floor_s
        self.poll_s = poll_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"config_path": self.config_path, "floor_s": self.floor_s, "poll_s": self.poll_s})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        config = await asyncio.to_thread(load_config, self.config_path)
        watch = NewDataWatch(self.floor_s)
        layout: LakeLayout | None = None
        failing = following = False
        while True:
            try:
                if layout is None:  # again after a failed read: the connection's keys may have been rotated
                    layout = LakeLayout.from_config((await awith_lake_connection(config)).lake)
                follower = await asyncio.to_thread(live_holder, layout, merge_follower_lease())
                marks = None if follower is not None else await asyncio.to_thread(read_watermarks, layout)
            except Exception as err:  # the lake is remote: an outage is a wait, not the end of the watch
                if not failing:
                    log.warning("cannot read the merge follower's lease or the watermarks of %s (will retry every "
                                "%.0f s): %s", config.lake.root, self.poll_s, err)
                failing, layout = True, None
            else:
                failing = False
                if (follower is not None) != following:
                    following = follower is not None
                    log.info("%s", f"merge follower {follower.holder.describe()} holds the lease: no new-data "
                                   "events while it runs" if following else
                                   "no merge follower holds the lease: watching for new data again")
                    if not following:  # what the follower left is new data: the next covered version fires
                        watch = NewDataWatch(self.floor_s, seen_version=-1)
                if marks is not None:
                    event = watch.observe(marks, time.monotonic())
                    if event is not None:
                        yield TriggerEvent(event)
            await asyncio.sleep(self.poll_s)
