"""Which keys of a changelog window held a row at lo (ChangelogSnapshot.window_keys) against the
upstream replay: the oracle is FedLake's own key -> value state at lo and hi, not TiKV's old
values, which is what window_keys reads."""

from __future__ import annotations

import random

from merge.lake_fixtures import FedLake

from tidelake.lake.row_change import OP_DELETE
from tidelake.merge.changelog_snapshot import ChangelogSnapshot


def replay(lake: FedLake, ts: int) -> dict[bytes, bytes]:
    state: dict[bytes, bytes] = {}
    for change in sorted(lake.committed, key=lambda c: c.commit_ts):
        if change.commit_ts <= ts:
            if change.op == OP_DELETE:
                state.pop(change.key, None)
            else:
                state[change.key] = change.value
    return state


def test_window_keys_match_the_upstream_state_at_both_ends_of_random_windows(tmp_path):
    rng = random.Random(7)
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("s"))
    lake.ddl(lake.up.create_table("s", "t", [("id", "bigint", "pk"), ("v", "int")], partitions=["p0", "p1"]))
    stops = [lake.resolve()]
    for _ in range(6):
        for _ in range(rng.randrange(1, 6)):
            with lake.txn() as t:
                for i in rng.sample(range(12), rng.randrange(1, 4)):
                    if rng.random() < 0.3:
                        t.delete("s", "t", {"id": i})  # sometimes of a key that has no row
                    else:
                        t.put("s", "t", {"id": i, "v": rng.randrange(100)})
        if rng.random() < 0.5:
            lake.reland(rng.sample(lake.committed, min(4, len(lake.committed))))  # duplicates
        stops.append(lake.resolve())
    pids = lake.up.table("s", "t").physical_ids()
    snapshot = ChangelogSnapshot(lake.layout)
    for lo, hi in [(a, b) for i, a in enumerate(stops) for b in stops[i + 1:]]:
        before = replay(lake, lo)
        changed = {c.key for c in lake.committed if lo < c.commit_ts <= hi}
        got = snapshot.window_keys(pids, lo, hi)
        assert got.keys == len(changed)
        assert got.held == len(changed & before.keys())
    assert snapshot.window_keys(pids, stops[-1], stops[-1] + 10).keys == 0
    lake.close()
