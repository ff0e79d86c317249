"""The prewrite budget: memory bounded whatever the transaction's size, the rest spilled and
found again, nothing left behind when a region's feed ends."""

from __future__ import annotations

import gc
import logging
import os

import pytest

from tidelake.capture.errors import PullerError
from tidelake.capture.eventfeed.prewrites import ENTRY_OVERHEAD_BYTES, PrewriteBudget, UnmatchedPrewrites, check_spill_dir


def _key(i: int) -> bytes:
    return b"t\x80\x00\x00\x00\x00\x00\x00\x2a_r" + i.to_bytes(8, "big")


def test_memory_stays_within_the_budget_and_spilled_prewrites_come_back():
    entry = ENTRY_OVERHEAD_BYTES + len(_key(0)) + 100
    budget = PrewriteBudget(10 * entry)
    waiting = UnmatchedPrewrites(budget)
    for i in range(1000):  # one transaction of 1000 rows, 10 fit in memory
        waiting.put(50, _key(i), (b"v" * 100, b"", 0))
        assert budget.used <= budget.memory_bytes
    assert len(waiting) == 1000 and budget.used == 10 * entry and budget.spilled == 990
    assert waiting.get(50, _key(999)) == (b"v" * 100, b"", 0)
    waiting.put(50, _key(999), (b"w" * 100, b"o", 1))  # a later generation replaces it where it is
    assert waiting.get(50, _key(999)) == (b"w" * 100, b"o", 1) and budget.spilled == 990
    for i in range(1000):  # the commits take them
        assert waiting.get(50, _key(i)) is not None
        waiting.delete(50, _key(i))
    assert len(waiting) == 0 and budget.used == 0 and budget.spilled == 0
    budget.close()


def test_the_spill_file_is_freed_when_it_empties_and_a_new_one_opens_at_the_next_spill(tmp_path):
    budget = PrewriteBudget(0, str(tmp_path))
    waiting = UnmatchedPrewrites(budget)
    for i in range(3):
        waiting.put(50, _key(i), (b"v" * 5000, b"", 0))
    assert len(_open_files_in(tmp_path)) == 1
    for i in range(3):
        waiting.delete(50, _key(i))
    assert budget.spilled == 0 and _open_files_in(tmp_path) == []  # its disk is given back
    assert waiting.get(50, _key(0)) is None
    waiting.put(60, _key(7), (b"n", b"", 1))  # the next transaction spills into a new file
    assert len(_open_files_in(tmp_path)) == 1 and waiting.get(60, _key(7)) == (b"n", b"", 1)
    other = UnmatchedPrewrites(budget)
    other.put(61, _key(8), (b"m", b"", 1))
    del waiting  # a dropped region's rows were the last but one: the file stays for `other`
    gc.collect()
    assert budget.spilled == 1 and len(_open_files_in(tmp_path)) == 1
    other.delete(61, _key(8))
    assert _open_files_in(tmp_path) == []
    budget.close()


def test_a_dropped_region_frees_its_memory_and_its_spilled_rows():
    budget = PrewriteBudget(2000)
    kept, dropped = UnmatchedPrewrites(budget), UnmatchedPrewrites(budget)
    kept.put(7, _key(0), (b"k", b"", 0))
    for i in range(20):
        dropped.put(9, _key(i), (b"x" * 200, b"", 0))
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
    waiting.put(5, _key(1), (b"v" * 1000, b"", 0))
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
            waiting.put(1, _key(i), (b"v" * 10, b"", 0))  # the first fits, 4 spill
        assert [r.getMessage() for r in caplog.records] == [
            f"prewrites waiting for their commit passed the 0.0 MiB memory budget: the rest spill to {tmp_path}"]
        for i in range(5):
            waiting.delete(1, _key(i))
    assert len(caplog.records) == 2
    assert caplog.records[1].getMessage() == "prewrite spill drained: 4 rows spilled since it started, its file is closed"
    budget.close()


def test_after_close_the_store_refuses_instead_of_answering_from_an_empty_file(tmp_path):
    budget = PrewriteBudget(0, str(tmp_path))
    waiting = UnmatchedPrewrites(budget)
    waiting.put(3, _key(1), (b"v", b"", 0))
    budget.close()
    for call in (lambda: waiting.get(3, _key(1)), lambda: waiting.delete(3, _key(1)),
                 lambda: waiting.put(3, _key(2), (b"w", b"", 0))):
        with pytest.raises(PullerError, match="prewrites used after the event feed closed their store"):
            call()
    assert _open_files_in(tmp_path) == []
