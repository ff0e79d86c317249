"""Which keys of a changelog window held a row at lo (ChangelogSnapshot.window_keys) against the
upstream replay: the oracle is FedLake's own key -> value state at lo and hi, not TiKV's old
values, which is what window_keys reads. Rows read ahead for many windows at once
(ChangelogSnapshot.read_ahead) against a direct read of each window."""

from __future__ import annotations

import random

from merge.lake_fixtures import FedLake

from tidelake.lake.row_change import OP_DELETE
from tidelake.merge import changelog_snapshot
from tidelake.merge.changelog_snapshot import ChangelogSnapshot
from tidelake.merge.window_spec import COLLAPSED_COLUMNS


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


def test_rows_read_ahead_are_a_direct_read_of_each_window(tmp_path, monkeypatch):
    """A partitioned table (three physical ids) and a plain one, windows of different bounds read
    ahead in one scan: each window's first read is served from memory with the rows and schema a
    direct read gives; a second read of it (a retried window) reads its own."""
    rng = random.Random(3)
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("s"))
    lake.ddl(lake.up.create_table("s", "t", [("id", "bigint", "pk"), ("v", "int")], partitions=["p0", "p1", "p2"]))
    lake.ddl(lake.up.create_table("s", "u", [("id", "bigint", "pk"), ("v", "int")]))
    stops = [lake.resolve()]
    for _ in range(5):
        with lake.txn() as tx:
            for name in ("t", "u"):
                for i in rng.sample(range(30), 5):
                    if rng.random() < 0.3:
                        tx.delete("s", name, {"id": i})
                    else:
                        tx.put("s", name, {"id": i, "v": rng.randrange(100)})
        stops.append(lake.resolve())
    t_ids, u_ids = lake.up.table("s", "t").physical_ids(), lake.up.table("s", "u").physical_ids()
    assert len(t_ids) == 3
    scans = []
    real_read = changelog_snapshot.read_delta
    monkeypatch.setattr(changelog_snapshot, "read_delta", lambda *a, **k: scans.append(1) or real_read(*a, **k))
    collapsed = [*COLLAPSED_COLUMNS, "flush_seq"]

    def rows(table) -> list:
        return sorted(tuple(sorted(r.items())) for r in table.to_pylist())

    for _ in range(8):
        a, b = sorted(rng.sample(range(len(stops)), 2))
        c, d = sorted(rng.sample(range(len(stops)), 2))
        windows = [(t_ids, stops[a], stops[b], collapsed), (u_ids, stops[c], stops[d], ["key", "commit_ts"])]
        direct, ahead = ChangelogSnapshot(lake.layout), ChangelogSnapshot(lake.layout)
        ahead.read_ahead([(ids, lo, hi) for ids, lo, hi, _ in windows])
        scans.clear()
        served = [ahead.rows(ids, lo, hi, columns) for ids, lo, hi, columns in windows]
        assert scans == []  # both from memory
        for (ids, lo, hi, columns), got in zip(windows, served):
            want = direct.rows(ids, lo, hi, columns)
            assert got.schema == want.schema and rows(got) == rows(want)
            scans.clear()
            again = ahead.rows(ids, lo, hi, columns)
            assert scans == [1] and rows(again) == rows(want)  # served once: a retry reads its own
    lake.close()
