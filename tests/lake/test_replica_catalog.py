"""Replica catalog: stable paths across renames, no two tables in one folder, states with reasons."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tidelake.errors import InputError
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog, ReplicaState


def test_paths_are_chosen_once_and_never_shared(tmp_path):
    layout = LakeLayout(str(tmp_path))
    catalog = ReplicaCatalog(layout)
    first = catalog.assign(10, "shop", "orders", ts=100)
    assert first.path == layout.replica_path("shop", "orders") and first.state == ReplicaState.ACTIVE
    assert catalog.assign(10, "other", "name", ts=200) == first  # idempotent: the first call decides

    renamed = catalog.rename(10, "archive", "orders_old", ts=300)
    assert (renamed.db, renamed.name, renamed.path) == ("archive", "orders_old", first.path)
    second = catalog.assign(11, "shop", "orders", ts=400)  # a new table under the old name
    assert second.path == f"{first.path}__11"

    catalog.mark_dropped(11, ts=500)
    catalog.mark_stopped(10, "exchange partition is not supported", ts=600)
    reopened = ReplicaCatalog(layout).entries()
    assert (reopened[11].state, reopened[10].state) == (ReplicaState.DROPPED, ReplicaState.STOPPED)
    assert reopened[10].reason == "exchange partition is not supported" and reopened[10].state_ts == 600
    assert catalog.find("SHOP", "Orders").table_key == 11
    assert catalog.mark_active(10, ts=700).reason is None


def test_unknown_table_and_state_are_input_errors(tmp_path):
    catalog = ReplicaCatalog(LakeLayout(str(tmp_path)))
    with pytest.raises(InputError, match="no replica"):
        catalog.rename(1, "a", "b", ts=1)
    with pytest.raises(InputError, match="unknown state"):
        catalog.upsert([type(catalog.assign(2, "a", "b", 1))(3, "a", "c", "/x", "paused")])


def test_two_tables_claiming_one_name_at_once_get_two_paths(tmp_path):
    """Merge threads: a dropped table and its successor of the same name both reach their CREATE."""
    layout = LakeLayout(str(tmp_path))
    ReplicaCatalog(layout).entries()  # the catalog table exists before the race
    barrier = threading.Barrier(4)

    def claim(key: int):
        catalog = ReplicaCatalog(layout)  # one per thread, as run_merge does
        barrier.wait()
        return catalog.assign(key, "shop", "orders", ts=100)

    with ThreadPoolExecutor(4) as pool:
        entries = list(pool.map(claim, (10, 11, 12, 13)))
    assert len({e.path for e in entries}) == 4
    assert {e.path for e in ReplicaCatalog(layout).entries().values()} == {e.path for e in entries}


def test_the_catalog_is_compacted_once_upserts_left_many_files(tmp_path):
    """Each new table's upsert adds a file and every read scans them all: past MAX_FILES an upsert
    rewrites the catalog, and every entry reads back as it was written."""
    from deltalake import DeltaTable

    from tidelake.lake.replica_catalog import MAX_FILES, catalog_path

    layout = LakeLayout(str(tmp_path / "lake"))
    catalog = ReplicaCatalog(layout)
    for key in range(1, MAX_FILES + 3):
        catalog.assign(key, "db", f"t{key}", ts=key)
    files = len(DeltaTable(catalog_path(layout)).file_uris())
    assert files <= MAX_FILES
    entries = ReplicaCatalog(layout).entries()
    assert sorted(entries) == list(range(1, MAX_FILES + 3))
    assert all(entries[k].name == f"t{k}" and entries[k].path == layout.replica_path("db", f"t{k}") for k in entries)
