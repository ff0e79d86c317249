"""The RSS reading and growth the lander's backpressure watches, against known allocations."""

from __future__ import annotations

import ctypes
import platform
import sys

import pytest

from tidelake.capture.landing.resident_memory import ResidentGrowth, resident_bytes

MIB = 1 << 20


def _vm_rss() -> int:
    """RSS as /proc/self/status reports it (a second source, parsed independently)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RSS is read from /proc on Linux")
def test_resident_bytes_agrees_with_proc_status_and_sees_a_touched_allocation():
    before = resident_bytes()
    assert before is not None
    assert abs(before - _vm_rss()) < 8 * MIB
    block = b"x" * (64 * MIB)  # written, so every page is resident
    grown = resident_bytes() - before
    assert 60 * MIB <= grown <= 72 * MIB, grown
    del block


def test_growth_is_zero_until_the_base_is_marked_and_the_first_mark_wins():
    readings = iter([100, 150, 170, 120])
    growth = ResidentGrowth(lambda: next(readings))
    assert growth.growth() == 0  # no base yet: nothing read
    growth.mark_base()  # reads 100
    assert growth.growth() == 50  # 150
    growth.mark_base()  # no read: the base stays 100
    assert growth.growth() == 70  # 170
    assert growth.growth() == 20  # 120: memory given back counts as given back


def test_growth_without_an_rss_reading_is_zero():
    growth = ResidentGrowth(lambda: None)
    growth.mark_base()
    assert growth.growth() == 0


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_release_freed_gives_back_memory_freed_in_the_middle_of_the_heap():
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    chunk = 64 << 10  # below glibc's mmap threshold: from the heap
    blocks = [libc.malloc(chunk) for _ in range(64 * MIB // chunk)]
    for block in blocks:
        ctypes.memset(block, 1, chunk)  # touched: resident
    pin = libc.malloc(chunk)  # above them: free() alone gives back only the heap's top
    before = resident_bytes()
    for block in blocks:
        libc.free(block)
    by_free = before - resident_bytes()
    ResidentGrowth(lambda: None).release_freed()
    given_back = before - resident_bytes()
    libc.free(pin)
    assert by_free < 16 * MIB, by_free  # the check can fail: glibc keeps what is below its top
    assert given_back >= 48 * MIB, given_back
