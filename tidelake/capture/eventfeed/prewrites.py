"""Where a region's unmatched PREWRITE rows wait for their COMMIT: in memory up to a budget shared
by every region of the feed, beyond it in a local spill file (SQLite, unlinked once open).
Prewrites cannot wait for backpressure (their commit follows on the same stream), so memory per
waiting prewrite is bounded whatever the transaction's size. Owner: the EventFeed client.

More: docs/internals.md#prewrites.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import sqlite3
import sys
import tempfile
import threading
import weakref

from tidelake.capture.puller_errors import PullerError, SpillFullError

# What one in-memory entry costs beyond its key, value and old value: the (start_ts, key) tuple,
# the (value, old value, generation) tuple, two ints, three bytes headers and the dict slot.
ENTRY_OVERHEAD_BYTES = 350

Prewrite = tuple[bytes, bytes, int]  # value, old value, generation

# The in-memory budget is this share of the puller's memory quota, at most the feed's cap (the
# share at the default quota). Waiting prewrites are outside the lander's row count and cannot be
# held back, so at a small quota a fixed budget plus what their arrival costs would leave the
# lander no room above its floor.
QUOTA_SHARE = 1 / 64

_SPILL_PREFIX = "tidelake-prewrites-"
# A commit takes its spilled prewrite with one DELETE ... RETURNING where SQLite has it (3.35,
# 2021); Pythons linked against an older system SQLite (RHEL 8: 3.26) read, then delete.
_DELETE_RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)

log = logging.getLogger(__name__)


def check_spill_dir(folder: str | None) -> None:
    """Raise OSError unless a spill file can be created in `folder` (None: the temp folder), so a
    missing or read-only folder stops the puller at start, not at its first big transaction."""
    fd, name = tempfile.mkstemp(prefix=_SPILL_PREFIX, dir=folder)
    os.close(fd)
    os.unlink(name)


def memory_for_quota(quota_bytes: int, cap_bytes: int) -> int:
    """The in-memory budget of waiting prewrites under a puller memory quota of `quota_bytes`."""
    return min(cap_bytes, int(quota_bytes * QUOTA_SHARE))


class PrewriteBudget:
    """Memory every region's waiting prewrites may take together, and the spill file beyond it."""

    def __init__(self, memory_bytes: int, spill_dir: str | None = None) -> None:
        self.memory_bytes = memory_bytes
        self.spill_dir = spill_dir  # None: tempfile's folder
        self._lock = threading.Lock()
        self._used = 0
        self._spilled = 0
        self._db: sqlite3.Connection | None = None
        self._spills = 0  # rows spilled since the file was opened, for the log
        self._closed = False
        self._forgotten: list[tuple[int, list[int]]] = []  # dropped regions, freed at the next use

    @property
    def used(self) -> int:
        with self._lock:
            self._reap()
            return self._used

    @property
    def spilled(self) -> int:
        """Prewrites in the spill file now."""
        with self._lock:
            self._reap()
            return self._spilled

    def charge(self, nbytes: int) -> bool:
        with self._lock:
            if self._closed or self._forgotten:
                self._check_open()
                self._reap()
            if self._used + nbytes > self.memory_bytes:
                return False
            self._used += nbytes
            return True

    def release(self, nbytes: int) -> None:
        with self._lock:
            self._used -= nbytes

    def spill_put(self, owner: int, entries: list[tuple[int, bytes, Prewrite]]) -> int:
        """Store `entries` in order, each unless the spilled prewrite of its (start_ts, key) wins
        (`supersedes`); returns how many (start_ts, key) are new. One SQLite transaction for all:
        a row per statement and commit kept the region worker slower than a transaction's
        arriving prewrites."""
        with self._lock:
            self._check_open()
            self._reap()
            try:
                db = self._open()
            except (OSError, sqlite3.Error) as exc:
                raise self._full(exc) or exc
            db.execute("BEGIN")
            try:
                # Each new (start_ts, key) as its first entry, then every entry in order replaces
                # what is there if it supersedes it: the same result as one entry at a time.
                rows = [(owner, start_ts, key, *prewrite) for start_ts, key, prewrite in entries]
                new = db.executemany("INSERT OR IGNORE INTO p VALUES (?, ?, ?, ?, ?, ?)", rows).rowcount
                if new < len(entries):
                    db.executemany(
                        "UPDATE p SET value = ?1, old_value = ?2, generation = ?3 WHERE owner = ?4 AND start_ts = ?5 "
                        "AND key = ?6 AND length(?1) > 0 AND ?3 >= generation",
                        [(*prewrite, owner, start_ts, key) for start_ts, key, prewrite in entries])
                db.execute("COMMIT")
            except BaseException:
                # After some errors (a full disk) SQLite has already ended the transaction; a
                # ROLLBACK's own error must not hide the real one.
                if db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")
                full = self._full(sys.exc_info()[1])
                if full is not None:
                    raise full from None
                raise
            self._spilled += new
            self._spills += new
            return new

    def spill_get(self, owner: int, start_ts: int, key: bytes) -> Prewrite | None:
        with self._lock:
            self._check_open()
            if self._db is None:  # nothing spilled
                return None
            row = self._db.execute(
                "SELECT value, old_value, generation FROM p WHERE owner = ? AND start_ts = ? AND key = ?",
                (owner, start_ts, key)).fetchone()
            return None if row is None else (row[0], row[1], row[2])

    def spill_take(self, owner: int, start_ts: int, key: bytes) -> Prewrite | None:
        """Remove and return the spilled prewrite of (start_ts, key), None if there is none."""
        with self._lock:
            self._check_open()
            if self._db is None:
                return None
            where = (owner, start_ts, key)
            if _DELETE_RETURNING:
                rows = self._db.execute("DELETE FROM p WHERE owner = ? AND start_ts = ? AND key = ? "
                                        "RETURNING value, old_value, generation", where).fetchall()
            else:
                rows = self._db.execute("SELECT value, old_value, generation FROM p WHERE owner = ? AND start_ts = ? "
                                        "AND key = ?", where).fetchall()
                self._db.execute("DELETE FROM p WHERE owner = ? AND start_ts = ? AND key = ?", where)
            self._spilled -= len(rows)
            self._drop_if_empty()
            return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    def forget(self, owner: int, state: list[int]) -> None:
        """A region's waiting prewrites are dropped (its feed ended); `state` is [in-memory bytes,
        spilled rows] of that region. Called by a finalizer, which may run inside another call of
        this budget on the same thread (a garbage collection): so it only notes the region, and
        the next call frees its memory and rows."""
        self._forgotten.append((owner, state))

    def _reap(self) -> None:
        while self._forgotten:
            owner, state = self._forgotten.pop()
            self._used -= state[0]
            if state[1] and self._db is not None:
                self._spilled -= self._db.execute("DELETE FROM p WHERE owner = ?", (owner,)).rowcount
                self._drop_if_empty()

    def _drop_if_empty(self) -> None:
        """Close the spill file once nothing is in it: SQLite never gives a file's free pages back,
        so one huge transaction would otherwise hold its disk until the feed closes. The next
        spill opens a new one."""
        if self._spilled == 0 and self._db is not None:
            self._db.close()
            self._db = None
            log.info("prewrite spill drained: %d rows spilled since it started, its file is closed", self._spills)

    def close(self) -> None:
        """Drop every waiting prewrite and the spill file; later puts and lookups raise, where they
        would have found nothing (a spilled row gone) and gone on without it."""
        with self._lock:
            self._closed = True
            if self._db is not None:
                self._db.close()
                self._db = None
            self._spilled = 0

    def _full(self, exc: BaseException | None) -> SpillFullError | None:
        """The one-line error for a spill write its filesystem had no room for; None for another failure."""
        full = (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)) or (
            isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
                                                or "database or disk is full" in str(exc)))
        if not full:
            return None
        folder = self.spill_dir or tempfile.gettempdir()
        return SpillFullError(f"the prewrite spill folder {folder} is full ({exc}): the puller stops before "
                              "landing past the transactions waiting for their commit; its next run pulls them "
                              "again from the durable watermarks once the folder has room ([puller].spill_dir)")

    def _check_open(self) -> None:
        if self._closed:
            raise PullerError("prewrites used after the event feed closed their store")

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            fd, name = tempfile.mkstemp(prefix=_SPILL_PREFIX, suffix=".sqlite", dir=self.spill_dir)
            os.close(fd)
            db = None
            try:
                db = sqlite3.connect(name, isolation_level=None, check_same_thread=False)
                # No journal and temporaries in memory: nothing but this one file, whose name goes
                # once SQLite has it open.
                db.execute("PRAGMA journal_mode = OFF")
                db.execute("PRAGMA temp_store = MEMORY")
                db.execute("PRAGMA synchronous = OFF")
                db.execute("CREATE TABLE p (owner INTEGER, start_ts INTEGER, key BLOB, value BLOB, old_value BLOB, "
                           "generation INTEGER, PRIMARY KEY (owner, start_ts, key)) WITHOUT ROWID")
            except BaseException:
                if db is not None:  # a full disk: the next spill tries a new file
                    db.close()
                raise
            finally:
                os.unlink(name)
            self._db = db
            self._spills = 0
            log.info("prewrites waiting for their commit passed the %s memory budget: the rest spill to %s",
                     _size_text(self.memory_bytes), self.spill_dir or tempfile.gettempdir())
        return self._db


def _size_text(n: int) -> str:
    """`n` bytes in the unit a reader takes in at a glance (B, KiB or MiB)."""
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


_owners = itertools.count(1)


class UnmatchedPrewrites:
    """One region's waiting prewrites, by (start_ts, key). Not thread-safe (one region worker)."""

    def __init__(self, budget: PrewriteBudget | None = None) -> None:
        self._budget = budget or PrewriteBudget(1 << 62)  # none given: memory only, unbounded
        self._memory: dict[tuple[int, bytes], Prewrite] = {}
        self._owner = next(_owners)
        self._state = [0, 0]  # in-memory bytes charged, rows spilled
        weakref.finalize(self, self._budget.forget, self._owner, self._state)

    def __len__(self) -> int:
        return len(self._memory) + self._state[1]

    def get(self, start_ts: int, key: bytes) -> Prewrite | None:
        found = self._memory.get((start_ts, key))
        if found is None and self._state[1]:
            found = self._budget.spill_get(self._owner, start_ts, key)
        return found

    def put_many(self, entries: list[tuple[int, bytes, Prewrite]]) -> None:
        """Store each (start_ts, key, prewrite) in order unless the waiting prewrite of its
        (start_ts, key) wins (`supersedes`). Spilled entries go to the file together."""
        state = self._state
        if not state[1]:
            # The common case, one budget charge for the whole run: nothing of this region spilled
            # and every (start_ts, key) new. If their sum fits, each would have fitted one after
            # another; if not, the entries go one at a time as below.
            memory = self._memory
            fresh: dict[tuple[int, bytes], Prewrite] = {}
            nbytes = 0
            for start_ts, key, prewrite in entries:
                k = (start_ts, key)
                if k in memory or k in fresh:
                    break
                fresh[k] = prewrite
                nbytes += ENTRY_OVERHEAD_BYTES + len(key) + len(prewrite[0]) + len(prewrite[1])  # _size, inline
            else:
                if self._budget.charge(nbytes):
                    memory.update(fresh)
                    state[0] += nbytes
                    return
        self._put_each(entries)

    def _put_each(self, entries: list[tuple[int, bytes, Prewrite]]) -> None:
        """put_many one entry at a time: the reference its one-charge path must equal."""
        to_spill: list[tuple[int, bytes, Prewrite]] = []
        for start_ts, key, prewrite in entries:
            k = (start_ts, key)
            old = self._memory.get(k)
            if old is not None:
                if not supersedes(prewrite, old):
                    continue
                del self._memory[k]
                self._release(_size(key, old))
            # In memory only while nothing of this region is spilled, or in place of its old entry:
            # a key is never both in memory and in the file.
            nbytes = _size(key, prewrite)
            if (old is not None or not (self._state[1] or to_spill)) and self._budget.charge(nbytes):
                self._memory[k] = prewrite
                self._state[0] += nbytes
            else:
                to_spill.append((start_ts, key, prewrite))
        if to_spill:
            self._state[1] += self._budget.spill_put(self._owner, to_spill)

    def take(self, start_ts: int, key: bytes) -> Prewrite | None:
        """Remove and return the prewrite of (start_ts, key), None if none waits."""
        old = self._memory.pop((start_ts, key), None)
        if old is not None:
            nbytes = ENTRY_OVERHEAD_BYTES + len(key) + len(old[0]) + len(old[1])  # _size, inline: once per commit
            self._state[0] -= nbytes
            self._budget.release(nbytes)
            return old
        if not self._state[1]:
            return None
        found = self._budget.spill_take(self._owner, start_ts, key)
        if found is not None:
            self._state[1] -= 1
        return found

    def _release(self, nbytes: int) -> None:
        self._state[0] -= nbytes
        self._budget.release(nbytes)


def supersedes(new: Prewrite, old: Prewrite) -> bool:
    """A PREWRITE replaces the waiting one of its lock unless it has no value (a txn heartbeat
    rewrite) or an older generation (docs/wire.md#row-handling-per-region)."""
    return bool(new[0]) and new[2] >= old[2]


def _size(key: bytes, prewrite: Prewrite) -> int:
    """A waiting prewrite's charge; put_many and take compute it inline (a call per row cost as
    much as the sum), so the three must stay the same sum."""
    return ENTRY_OVERHEAD_BYTES + len(key) + len(prewrite[0]) + len(prewrite[1])
