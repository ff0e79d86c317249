"""The lake on a real S3 API server (moto's server process on loopback, behind a fault proxy):
two puller shards committing to one changelog at once, commits answered 503 before and after the
store kept them, throttling, and the store unreachable for 10 s. Nothing may be lost or landed
twice, and what cannot be reached is one clear error."""

from __future__ import annotations

import itertools
import threading
import time

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError

from tidelake.capture.landing.bucket_compaction import compact_buckets
from tidelake.capture.landing.changelog_retention import open_changelog, vacuum_changelog
from tidelake.capture.landing.lander import Lander
from tidelake.errors import InputError, StoreUnreachable
from tidelake.lake.commit_buckets import bucket_label, bucket_seconds_of
from tidelake.lake.lake_check import check_lake_root, require_lake
from tidelake.lake.layout import LakeLayout
from tidelake.lake.object_store import lake_storage_options
from tidelake.lake.watermarks import read_watermarks

_prefixes = itertools.count()


@pytest.fixture
def s3_layout(s3_server, proxy) -> LakeLayout:
    root = s3_server.lake_root(f"lake{next(_prefixes)}")
    options = {**s3_server.storage_options(), "AWS_ENDPOINT_URL": proxy.endpoint}
    return LakeLayout(root, lake_storage_options(root, options, environ={}))


def _landed(layout: LakeLayout) -> list[tuple[int, int, bytes]]:
    table = DeltaTable(layout.changelog, storage_options=layout.storage_options).to_pyarrow_table()
    return sorted(zip(table["table_id"].to_pylist(), table["commit_ts"].to_pylist(), table["key"].to_pylist()))


def _expected(rows) -> list[tuple[int, int, bytes]]:
    return sorted((r.table_id, r.commit_ts, r.key) for r in rows)


def test_two_shards_commit_concurrently_through_lost_acks_and_throttling(s3_layout, proxy, make_rows):
    check_lake_root(s3_layout)
    shards = [Lander(s3_layout, f"cf-shard{i}of2", flush_interval_s=3600) for i in range(2)]
    added: list = []
    mu = threading.Lock()

    def run(index: int, lander: Lander) -> None:
        table_id = 100 + index
        for _ in range(6):
            rows = make_rows(table_id, 5)
            with mu:
                added.extend(rows)
            lander.add_rows(rows)
            lander.resolve(table_id, rows[-1].commit_ts)
            lander.flush()

    # per commit PUT: stored then 503 (a lost ack), refused with 503, stored then 503
    proxy.set(commit_faults=[True, False, True, False], throttle=3)
    threads = [threading.Thread(target=run, args=(i, lander)) for i, lander in enumerate(shards)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for lander in shards:
        lander.close()
    assert proxy.set()["injected"] == 7
    assert _landed(s3_layout) == _expected(added)  # every row exactly once
    watermarks = read_watermarks(s3_layout)
    for index in range(2):
        mine = [r for r in added if r.table_id == 100 + index]
        assert watermarks.table_resolved[100 + index] == max(r.commit_ts for r in mine)


def test_store_unreachable_for_ten_seconds_loses_nothing(s3_layout, proxy, make_rows):
    lander = Lander(s3_layout, "cf-1", flush_interval_s=0.5)
    before = make_rows(7, 20)
    lander.add_rows(before)
    lander.resolve(7, before[-1].commit_ts)
    lander.flush()
    proxy.set(down=True)
    during = make_rows(7, 20)
    lander.add_rows(during)  # buffered while every flush attempt is reset by the store
    lander.resolve(7, during[-1].commit_ts)
    impatient = LakeLayout(s3_layout.root, {**s3_layout.storage_options, "max_retries": "1", "retry_timeout": "2s"})
    with pytest.raises(InputError, match=rf"^lake {s3_layout.root} cannot be read: .*") as refused:
        require_lake(impatient)  # a short retry budget: the refusal comes well within the outage
    assert "\n" not in str(refused.value)
    assert isinstance(refused.value, StoreUnreachable)  # an Airflow task retries it
    time.sleep(10)
    proxy.set(down=False)
    lander.close()
    assert _landed(s3_layout) == _expected(before + during)
    assert read_watermarks(s3_layout).table_resolved[7] == during[-1].commit_ts


def test_a_missing_bucket_is_one_line_naming_what_the_store_answered(s3_server):
    root = "s3://no-such-bucket/lake"
    layout = LakeLayout(root, lake_storage_options(root, s3_server.storage_options(), environ={}))
    with pytest.raises(InputError, match=r"^lake s3://no-such-bucket/lake cannot be read: .*404") as refused:
        check_lake_root(layout)
    assert "\n" not in str(refused.value)
    assert not isinstance(refused.value, StoreUnreachable)  # the store answered: retrying will not help


def test_changelog_upkeep_beside_appending_shards_loses_nothing(s3_layout, make_rows):
    """The changelog's bucket compaction (the lander's) and maintenance's vacuum, with delta-rs
    (conditional PUT commits), while a puller appends to the same bucket: every appended row stays
    readable, and the files were compacted."""
    lander = Lander(s3_layout, "cf-1", flush_interval_s=3600)
    added = []
    for _ in range(4):
        rows = make_rows(9, 5)
        added.extend(rows)
        lander.add_rows(rows)
        lander.flush()
    changelog = open_changelog(s3_layout)
    files_before = len(changelog.file_uris())
    bucket = bucket_label(added[0].commit_ts, bucket_seconds_of(changelog))
    stop = threading.Event()

    def append() -> None:
        while not stop.is_set():
            rows = make_rows(9, 5)
            added.extend(rows)
            lander.add_rows(rows)
            lander.flush()

    appender = threading.Thread(target=append)
    appender.start()
    compacted = 0
    deadline = time.monotonic() + 120
    while not compacted and time.monotonic() < deadline:
        try:
            compacted = compact_buckets(open_changelog(s3_layout), 9, [bucket])
        except CommitFailedError:
            pass  # lost to an append of the same files' partition: the next attempt compacts
    vacuum_changelog(open_changelog(s3_layout), 0)
    stop.set()
    appender.join()
    lander.close()
    assert compacted >= files_before
    assert _landed(s3_layout) == _expected(added)
