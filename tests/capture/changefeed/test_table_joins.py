"""TableJoins without a cluster: the fence a restarted shard must set before its DDL stream runs."""

import threading

from tidelake import tso
from tidelake.capture.changefeed.ddl_puller import DdlPuller, Fence
from tidelake.capture.changefeed.table_joins import TableJoins
from tidelake.lake.layout import LakeLayout
from tidelake.lake.table_starts import StartState, TableStarts


def joins_for(layout: LakeLayout, index: int) -> TableJoins:
    return TableJoins("cf1", (index, 2), owner_of=lambda _id: 1, layout=layout, lander=None,
                      lock=threading.Lock(), feed_from=lambda tables, ts: [], now_ts=lambda: tso.compose(1000, 0),
                      lead_s=1.0)


def test_a_restarted_shard_fences_a_scheduled_join_ahead_of_its_ddl_start_when_attached(tmp_path):
    """Its DDL stream may cross J before the loop's first poll; the fence must already be set."""
    layout = LakeLayout(str(tmp_path / "lake"))
    starts = TableStarts(layout)
    join_ts, ddl_start = tso.compose(2000, 0), tso.compose(1500, 0)
    for state in (StartState.SCHEDULED, StartState.SCHEMA_LANDED):
        request = starts.request("cf1", "other", f"t_{state}")
        starts.mark(request, state, start_ts=join_ts)
    joins = joins_for(layout, 1)
    assert joins.restart(tracker=None, durable_tables={}, ddl_start=ddl_start) == []
    ddl = DdlPuller(decoder=None, tracker=None, resolved_ts=ddl_start)
    joins.attach(ddl)
    assert ddl.on_resolved(join_ts + 1) == [Fence(join_ts)]
