"""Which transaction waits for which lock holder, and TiKV's deadlock check over it.

TiKV queues a pessimistic lock request behind the lock it meets and its deadlock detector refuses
the request that would close a wait-for cycle (tikv src/server/lock_manager/deadlock.rs,
`DetectTable::detect`); TiDB then rolls that transaction back (MySQL error 1213). The simulated
stores answer a held lock at once instead (docs/wire.md#transactional-writes), so the front waits on its side
and asks this graph first.
"""

from __future__ import annotations

import threading

from tidelake.errors import TidelakeError


class DeadlockError(TidelakeError):
    """Waiting for `holder` would close a cycle of transactions waiting for each other."""

    def __init__(self, waiter: int, holder: int) -> None:
        super().__init__(f"deadlock: txn {waiter} would wait for txn {holder}, which waits for it")
        self.waiter = waiter
        self.holder = holder


class LockWaits:
    """One edge per waiting transaction (a lock request waits for one lock at a time)."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._waits: dict[int, int] = {}  # waiter start ts -> holder start ts

    def wait(self, waiter: int, holder: int) -> None:
        """Record that `waiter` waits for `holder`, or raise DeadlockError if `holder` already
        waits, directly or through others, for `waiter`."""
        with self._mu:
            ts, seen = holder, set()
            while ts != waiter and ts in self._waits and ts not in seen:
                seen.add(ts)
                ts = self._waits[ts]
            if ts == waiter:
                raise DeadlockError(waiter, holder)
            self._waits[waiter] = holder

    def waiting(self, waiter: int) -> bool:
        """Whether `waiter` is waiting for a lock now."""
        with self._mu:
            return waiter in self._waits

    def done(self, waiter: int) -> None:
        """`waiter` got its lock, gave up, or finished."""
        with self._mu:
            self._waits.pop(waiter, None)
