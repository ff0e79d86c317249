"""The prewrite budget: memory bounded whatever the transaction's size, the rest spilled and
found again, nothing left behind when a region's feed ends."""

from __future__ import annotations

import gc
import logging
import os
import random
import sqlite3

import pytest

from tidelake.capture.eventfeed import prewrites
from tidelake.capture.eventfeed.prewrites import (
    ENTRY_OVERHEAD_BYTES,
    PrewriteBudget,
    UnmatchedPrewrites,
    check_spill_dir,
)
from tidelake.capture.puller_errors import PullerError, SpillFullError


def _key(i: int) -> bytes:
    return b"t\x80\x00\x00\x00\x00\x00\x00\x2a_r" + i.to_bytes(8, "big")


# Both ways a commit takes its spilled prewrite: DELETE ... RETURNING, and read-then-delete for an
# SQLite older than 3.35.
@pytest.mark.parametrize("delete_returning", [True, False])
def test_memory_stays_within_the_budget_and_spilled_prewrites_come_back(monkeypatch, delete_returning):
    monkeypatch.setattr(prewrites, "_DELETE_RETURNING", delete_returning)
    entry = ENTRY_OVERHEAD_BYTES + len(_key(0)) + 100
    budget = PrewriteBudget(10 * entry)
    waiting = UnmatchedPrewrites(budget)
    for i in range(1000):  # one transaction of 1000 rows, 10 fit in memory
        waiting.put_many([(50, _key(i), (b"v" * 100, b"", 0))])
        assert budget.used <= budget.memory_bytes
    assert len(waiting) == 1000 and budget.used == 10 * entry and budget.spilled == 990
    assert waiting.get(50, _key(999)) == (b"v" * 100, b"", 0)
    waiting.put_many([(50, _key(999), (b"w" * 100, b"o", 1))])  # a later generation replaces it where it is
    assert waiting.get(50, _key(999)) == (b"w" * 100, b"o", 1) and budget.spilled == 990
    for i in range(1000):  # the commits take them
        assert waiting.take(50, _key(i)) == ((b"w" * 100, b"o", 1) if i == 999 else (b"v" * 100, b"", 0))
        assert waiting.take(50, _key(i)) is None
    assert len(waiting) == 0 and budget.used == 0 and budget.spilled == 0
    budget.close()


def test_the_spill_file_is_freed_when_it_empties_and_a_new_one_opens_at_the_next_spill(tmp_path):
    budget = PrewriteBudget(0, str(tmp_path))
    waiting = UnmatchedPrewrites(budget)
    for i in range(3):
        waiting.put_many([(50, _key(i), (b"v" * 5000, b"", 0))])
    assert len(_open_files_in(tmp_path)) == 1
    for i in range(3):
        waiting.take(50, _key(i))
    assert budget.spilled == 0 and _open_files_in(tmp_path) == []  # its disk is given back
    assert waiting.get(50, _key(0)) is None
    waiting.put_many([(60, _key(7), (b"n", b"", 1))])  # the next transaction spills into a new file
    assert len(_open_files_in(tmp_path)) == 1 and waiting.get(60, _key(7)) == (b"n", b"", 1)
    other = UnmatchedPrewrites(budget)
    other.put_many([(61, _key(8), (b"m", b"", 1))])
    del waiting  # a dropped region's rows were the last but one: the file stays for `other`
    gc.collect()
    assert budget.spilled == 1 and len(_open_files_in(tmp_path)) == 1
    other.take(61, _key(8))
    assert _open_files_in(tmp_path) == []
    budget.close()


def test_a_dropped_region_frees_its_memory_and_its_spilled_rows():
    budget = PrewriteBudget(2000)
    kept, dropped = UnmatchedPrewrites(budget), UnmatchedPrewrites(budget)
    kept.put_many([(7, _key(0), (b"k", b"", 0))])
    for i in range(20):
        dropped.put_many([(9, _key(i), (b"x" * 200, b"", 0))])
    assert budget.spilled > 0
    del dropped  # the region's feed ended (error, unsubscribe): its state goes away
    gc.collect()
    assert budget.used == ENTRY_OVERHEAD_BYTES + len(_key(0)) + 1 and budget.spilled == 0
    assert kept.get(7, _key(0)) == (b"k", b"", 0)
    budget.close()


def _open_files_in(folder) -> list[str]:
    """Paths this process holds open under `folder` (an unlinked one ends in ' (deleted)')."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder)):
            found.append(target)
    return found


def test_the_spill_file_is_in_spill_dir_and_has_no_name(tmp_path):
    budget = PrewriteBudget(0, str(tmp_path))
    waiting = UnmatchedPrewrites(budget)
    waiting.put_many([(5, _key(1), (b"v" * 1000, b"", 0))])
    assert budget.spilled == 1
    assert list(tmp_path.iterdir()) == []  # no name left in the folder ...
    held = _open_files_in(tmp_path)
    assert len(held) == 1 and held[0].endswith(" (deleted)")  # ... but the open file is there
    assert waiting.get(5, _key(1)) == (b"v" * 1000, b"", 0)
    budget.close()
    assert _open_files_in(tmp_path) == []


def test_check_spill_dir_refuses_what_is_not_a_folder(tmp_path):
    check_spill_dir(str(tmp_path))
    assert list(tmp_path.iterdir()) == []  # the probe file is gone
    with pytest.raises(FileNotFoundError):
        check_spill_dir(str(tmp_path / "missing"))
    (tmp_path / "afile").write_text("x")
    with pytest.raises(NotADirectoryError):
        check_spill_dir(str(tmp_path / "afile"))


def test_one_log_line_when_spilling_starts_and_one_when_it_drains(tmp_path, caplog):
    budget = PrewriteBudget(ENTRY_OVERHEAD_BYTES + len(_key(0)) + 10, str(tmp_path))
    waiting = UnmatchedPrewrites(budget)
    with caplog.at_level(logging.INFO, logger="tidelake.capture.eventfeed.prewrites"):
        for i in range(5):
            waiting.put_many([(1, _key(i), (b"v" * 10, b"", 0))])  # the first fits, 4 spill
        assert [r.getMessage() for r in caplog.records] == [
            f"prewrites waiting for their commit passed the {budget.memory_bytes} B memory budget: the rest spill to "
            f"{tmp_path}"]
        for i in range(5):
            waiting.take(1, _key(i))
    assert len(caplog.records) == 2
    assert caplog.records[1].getMessage() == "prewrite spill drained: 4 rows spilled since it started, its file is closed"
    budget.close()


def test_after_close_the_store_refuses_instead_of_answering_from_an_empty_file(tmp_path):
    budget = PrewriteBudget(0, str(tmp_path))
    waiting = UnmatchedPrewrites(budget)
    waiting.put_many([(3, _key(1), (b"v", b"", 0))])
    budget.close()
    for call in (lambda: waiting.get(3, _key(1)), lambda: waiting.take(3, _key(1)),
                 lambda: waiting.put_many([(3, _key(2), (b"w", b"", 0))])):
        with pytest.raises(PullerError, match="prewrites used after the event feed closed their store"):
            call()
    assert _open_files_in(tmp_path) == []


def test_a_batch_keeps_the_newer_prewrite_of_each_lock_in_memory_and_in_the_spill_file():
    # Against a model applying docs/wire.md#row-handling-per-region one row at a time: a PREWRITE replaces the waiting
    # one of its (start_ts, key) unless its value is empty (a heartbeat) or its generation older.
    rng = random.Random(7)
    for memory_entries in (0, 3, 1000):  # all spilled, some in memory, all in memory
        budget = PrewriteBudget(memory_entries * (ENTRY_OVERHEAD_BYTES + len(_key(0)) + 8))
        waiting = UnmatchedPrewrites(budget)
        model: dict[tuple[int, bytes], tuple[bytes, bytes, int]] = {}
        for _ in range(40):
            batch = [(rng.choice((5, 6)), _key(rng.randrange(12)),
                      (rng.choice((b"", b"a" * 8, b"b" * 8)), rng.choice((b"", b"o")), rng.randrange(3)))
                     for _ in range(rng.randrange(1, 9))]
            waiting.put_many(batch)
            for start_ts, key, prewrite in batch:
                old = model.get((start_ts, key))
                if old is None or (prewrite[0] and prewrite[2] >= old[2]):
                    model[(start_ts, key)] = prewrite
            if rng.random() < 0.3:  # a commit or rollback takes one
                start_ts, key = rng.choice((5, 6)), _key(rng.randrange(12))
                assert waiting.take(start_ts, key) == model.pop((start_ts, key), None)
            assert len(waiting) == len(model)
            assert {k: waiting.get(*k) for k in model} == model
            assert budget.used <= budget.memory_bytes
        if memory_entries == 0:
            assert budget.used == 0 and budget.spilled == len(model)
        budget.close()


def test_a_run_of_new_prewrites_past_the_budget_fills_memory_in_order_and_spills_the_rest():
    # A run whose sum fits is charged at once; one whose sum does not goes one prewrite at a time:
    # the same split as putting them one by one.
    entry = ENTRY_OVERHEAD_BYTES + len(_key(0)) + 100
    budget = PrewriteBudget(3 * entry + entry // 2)
    waiting = UnmatchedPrewrites(budget)
    waiting.put_many([(50, _key(i), (b"v" * 100, b"", 0)) for i in range(2)])
    assert budget.used == 2 * entry and budget.spilled == 0
    waiting.put_many([(50, _key(i), (b"v" * 100, b"", 0)) for i in range(2, 6)])
    assert budget.used == 3 * entry and budget.spilled == 3 and len(waiting) == 6
    for i in range(3):  # the first three wait in memory
        assert waiting.take(50, _key(i)) == (b"v" * 100, b"", 0)
        assert budget.used == (2 - i) * entry and budget.spilled == 3
    for i in range(3, 6):  # the rest in the file
        assert waiting.take(50, _key(i)) == (b"v" * 100, b"", 0)
        assert budget.used == 0 and budget.spilled == 5 - i
    budget.close()


def test_a_failed_spill_write_raises_its_own_error_not_the_rollback_s(tmp_path, monkeypatch):
    budget = PrewriteBudget(0, str(tmp_path))
    waiting = UnmatchedPrewrites(budget)
    waiting.put_many([(50, _key(1), (b"v", b"", 0))])  # the file is open
    real = budget._db

    class Full:
        """The connection of a full disk: SQLite ends the transaction itself and says so."""
        in_transaction = False

        def execute(self, sql, *args):
            if sql == "ROLLBACK":
                raise AssertionError("rolled back with no transaction open")
            return real.execute(sql, *args)

        def executemany(self, sql, rows):
            real.execute("ROLLBACK")
            raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(budget, "_db", Full())
    with pytest.raises(SpillFullError, match=rf"^the prewrite spill folder {tmp_path} is full \(database or disk "
                       r"is full\): the puller stops before landing past"):  # one line, exit 75
        waiting.put_many([(50, _key(2), (b"v", b"", 0))])
    monkeypatch.setattr(budget, "_db", real)
    assert waiting.take(50, _key(1)) == (b"v", b"", 0)
    budget.close()
