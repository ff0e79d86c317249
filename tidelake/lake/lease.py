"""Writer leases: one process at a time writes a replica or runs a puller shard, whoever started
it (a DAG task, an operator's `tidelake merge` or `tidelake pull`), and a replica writer's commits
carry the lease's fencing token. A lease is a folder of records, one per token; the highest is the
lease. Taking it creates the next token's record, so of two takers one wins (create-if-absent,
tidelake.lake.lease_store). Its holder pushes the record's expiry forward every `renew_s`; once it
passes (a killed holder; at once when its process on this host is gone), the next taker creates the
next token. Right before each commit a writer checks its record is still the highest and unexpired
(fence_token) and records its token. Owner: the replica writers' runs (merge, maintenance,
bootstrap) and the puller's run. More: docs/internals.md#lease.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Hashable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone

from tidelake.config import LeaseSettings
from tidelake.errors import EXIT_TRY_LATER, TidelakeError
from tidelake.lake.layout import LakeLayout
from tidelake.lake.lease_store import LeaseStore, lease_store
from tidelake.side_by_side import side_by_side

log = logging.getLogger(__name__)

LEASE_METADATA_KEY = "tidelake.lease"  # the fencing token in a commit's userMetadata
_POLL_S = 1.0  # between looks at a held lease while waiting for it
_STORE_CALLS = 8  # leases taken or released at once by one run (a merge run leases each of its replicas)
_COMMAND_CHARS = 160


@dataclass(frozen=True)
class Holder:
    host: str
    pid: int
    command: str
    started: str  # ISO UTC, when the lease was taken

    def gone(self) -> bool:
        """Whether this holder ran on this host and its process no longer exists (SIGKILLed, OOM-killed):
        its lease is taken over without waiting for the expiry. A live pid (even a reused one) or
        another host's holder waits for the expiry; a host name shared across pid namespaces can only
        make a takeover early, and the old holder's fencing check then refuses its next commit."""
        if self.host != socket.gethostname() or self.pid == os.getpid():
            return False
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as stat:
                return stat.read().rsplit(b")", 1)[-1].split()[0] in (b"Z", b"X")  # ended, not yet reaped
        except FileNotFoundError:
            return True
        except OSError:  # no /proc (macOS): ask the kernel
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return True
            except PermissionError:  # alive, another user's
                return False
            return False

    def describe(self) -> str:
        """How a message names the holder: its command, host, pid and since when."""
        return f"`{self.command}` (host {self.host}, pid {self.pid}) since {self.started}"

    @classmethod
    def this_process(cls) -> Holder:
        program = sys.argv[0] if sys.argv else "python"
        if os.path.basename(program) == "__main__.py":  # `python -m tidelake`: name the package, as users type it
            program = os.path.dirname(program)
        argv = [os.path.basename(program), *sys.argv[1:]]
        return cls(socket.gethostname(), os.getpid(), " ".join(argv)[:_COMMAND_CHARS],
                   datetime.now(timezone.utc).isoformat(timespec="seconds"))


@dataclass(frozen=True)
class LeaseRecord:
    token: int
    nonce: str  # tells two holders of one token apart (a record removed by hand and taken again)
    holder: Holder
    expires_at: float  # Unix seconds on the holder's clock
    released: bool = False

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, body: bytes) -> LeaseRecord | None:
        """None for a record that is not one (edited by hand): it holds nothing."""
        try:
            data = json.loads(body)
            return cls(int(data["token"]), str(data["nonce"]), Holder(**data["holder"]),
                       float(data["expires_at"]), bool(data.get("released", False)))
        except (ValueError, KeyError, TypeError):
            return None

    def live(self, now: float) -> bool:
        return not self.released and self.expires_at > now

    def holds(self, now: float) -> bool:
        """Live, and its holder not a process known to have ended (Holder.gone): a taker must wait."""
        return self.live(now) and not self.holder.gone()


class LeaseHeld(TidelakeError):
    """Another process holds the lease: the one line names it (host, pid, command, since)."""

    exit_code = EXIT_TRY_LATER

    def __init__(self, name: str, label: str, record: LeaseRecord, waited_s: float) -> None:
        left = max(record.expires_at - time.time(), 0.0)
        waited = f"; waited {waited_s:.0f}s" if waited_s >= 1 else ""
        super().__init__(f"{label} is being written by {record.holder.describe()}: lease {name} token "
                         f"{record.token} expires in {left:.0f}s unless renewed{waited}")
        self.record = record


class LeaseLost(TidelakeError):
    """This process no longer holds its lease (expired unrenewed, or taken over): it must not commit."""


@dataclass
class Lease:
    """One lease this process holds; its methods are safe from any thread (one lock per lease)."""

    store: LeaseStore
    name: str
    label: str
    record: LeaseRecord
    version: str
    settings: LeaseSettings
    lost: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def token(self) -> int:
        return self.record.token

    def renew(self) -> None:
        """Push the expiry forward; a store error is logged and retried at the next renewal
        (the lease then expires on its own if the store stays away)."""
        with self._lock:
            if self.lost is not None:
                return
            record = replace(self.record, expires_at=time.time() + self.settings.ttl_s)
            try:
                # Never push a superseded record's expiry: it would look live again were the newer removed.
                tokens = self.store.tokens(self.name)
                version = (self.store.overwrite(self.name, self.token, record.to_bytes(), self.version)
                           if tokens and tokens[-1] == self.token else None)
            except Exception as exc:  # the store's own errors vary by store; the next renewal retries
                log.warning("could not renew the lease of %s: %s", self.label, exc)
                return
            if version is None:
                self.lost = f"its record {self.token} was superseded, replaced or removed"
                log.error("lost the lease of %s: %s", self.label, self.lost)
                return
            self.record, self.version = record, version

    def check(self) -> int:
        """The token, after checking the lease is still this process's (LeaseLost if not)."""
        with self._lock:
            if self.lost is None and time.time() >= self.record.expires_at:
                self.lost = f"it expired at {_iso(self.record.expires_at)} without a renewal"
            if self.lost is None:
                tokens = self.store.tokens(self.name)
                if not tokens or tokens[-1] != self.token:
                    self.lost = f"token {tokens[-1]} took it over" if tokens else "its records were removed"
                else:
                    stored = self.store.read(self.name, self.token)
                    found = LeaseRecord.from_bytes(stored.body) if stored is not None else None
                    if found is None or found.nonce != self.record.nonce:
                        self.lost = f"its record {self.token} was replaced or removed"
            if self.lost is not None:
                raise LeaseLost(f"{self.label}: lease {self.name} token {self.token} is no longer held by this "
                                f"process ({self.lost}); nothing more is committed")
            return self.token

    def release(self) -> None:
        """Mark the record released (kept: the next taker numbers its token after it)."""
        with self._lock:
            if self.lost is not None:
                return
            record = replace(self.record, released=True, expires_at=time.time())
            try:
                if self.store.overwrite(self.name, self.token, record.to_bytes(), self.version) is not None:
                    self.record = record
            except Exception as exc:  # it then expires after the TTL
                log.warning("could not release the lease of %s (it expires in %.0fs): %s", self.label,
                            self.record.expires_at - time.time(), exc)
            self.lost = "released"


def take(store: LeaseStore, name: str, label: str, settings: LeaseSettings, holder: Holder,
         deadline: float, cancel: threading.Event | None = None) -> Lease:
    """Take lease `name`, waiting for a live holder until `deadline` (time.monotonic()); LeaseHeld
    when it is still held then, or at once when `cancel` is set. A lease whose record expired
    unreleased, or whose holder's process on this host has ended (Holder.gone), is taken over."""
    started, tried, waiting = time.monotonic(), None, False
    while True:
        tokens = store.tokens(name)
        top = tokens[-1] if tokens else 0
        if top:
            stored = store.read(name, top)
            if stored is None:  # removed between the listing and the read: look again
                continue
            current = LeaseRecord.from_bytes(stored.body)
            if current is not None and current == tried:  # our create landed, its answer was lost (a retried PUT)
                return Lease(store, name, label, current, stored.version, settings)
            if current is not None and current.holds(time.time()):
                if time.monotonic() >= deadline or (cancel is not None and cancel.is_set()):
                    raise LeaseHeld(name, label, current, time.monotonic() - started)
                if not waiting:
                    waiting = True
                    log.warning("waiting up to %.0fs for %s", deadline - time.monotonic(),
                                LeaseHeld(name, label, current, 0.0))
                pause = min(_POLL_S, max(deadline - time.monotonic(), 0.0))
                if cancel is None:
                    time.sleep(pause)
                else:
                    cancel.wait(pause)
                continue
            if current is not None and not current.released:
                log.warning("taking over the lease of %s: lease %d of `%s` (host %s, pid %d) %s", label, top,
                            current.holder.command, current.holder.host, current.holder.pid,
                            f"expired at {_iso(current.expires_at)}" if current.expires_at <= time.time()
                            else "ended on this host without releasing it")
        record = tried = LeaseRecord(top + 1, uuid.uuid4().hex, holder, time.time() + settings.ttl_s)
        version = store.create(name, record.token, record.to_bytes())
        if version is None:  # another taker created this token first: look again
            continue
        for old in tokens[:-1]:  # the predecessor stays: a listing racing this one still sees a token
            store.delete(name, old)
        return Lease(store, name, label, record, version, settings)


class Leases:
    """The leases a run holds, by key, renewed by one background thread until closed; `refused`
    are the keys another process holds."""

    def __init__(self, settings: LeaseSettings, held: dict[Hashable, Lease],
                 refused: dict[Hashable, LeaseHeld], fenced: bool) -> None:
        self.settings, self.held, self.refused, self.fenced = settings, held, refused, fenced
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="tidelake-leases", daemon=True)
        if held:
            self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.settings.renew_s):
            for lease in list(self.held.values()):
                lease.renew()

    @contextmanager
    def fencing(self, key: Hashable) -> Iterator[None]:
        """Commits in this block (this thread or task) are checked against `key`'s lease and carry
        its token (fence_token)."""
        reset = _current.set(self.held.get(key))
        try:
            yield
        finally:
            _current.reset(reset)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        _release(list(self.held.values()))


@contextmanager
def hold(layout: LakeLayout, names: Mapping[Hashable, tuple[str, str]],
         wait_s: float | None = None, cancel: threading.Event | None = None) -> Iterator[Leases]:
    """Hold the leases `names` (key -> (lease name, label in messages)) of `layout`'s lake for the
    block, waiting up to `wait_s` (default: the lake's lease_wait; no longer once `cancel` is set)
    for those held elsewhere; the ones still held then are `refused`. On a store without a
    conditional write nothing is held and nothing fenced."""
    settings = layout.leases
    store = lease_store(layout.leases_root, layout.storage_options)
    held: dict[Hashable, Lease] = {}
    refused: dict[Hashable, LeaseHeld] = {}
    if store is None:
        log.warning("%s has no conditional write wired for leases: its writers are not fenced", layout.root)
    else:
        holder = Holder.this_process()
        wait = settings.wait_s if wait_s is None else wait_s
        deadline = time.monotonic() + wait

        def take_one(item: tuple[Hashable, tuple[str, str]]) -> None:
            key, (name, label) = item
            try:
                held[key] = take(store, name, label, settings, holder, deadline, cancel)
            except LeaseHeld as exc:
                refused[key] = exc

        try:
            # At once only when no take waits: takes that wait go one by one in the given order, or
            # two runs could each hold part of the other's leases while waiting for the rest.
            side_by_side(take_one, list(names.items()), _STORE_CALLS if wait <= 0 else 1, "tidelake-leases")
        except BaseException:  # every take started has ended: release what was taken
            _release(list(held.values()))
            raise
    leases = Leases(settings, held, refused, store is not None)
    try:
        yield leases
    finally:
        leases.close()


def _release(leases: list[Lease]) -> None:
    side_by_side(lambda lease: lease.release(), leases, _STORE_CALLS, "tidelake-leases")


def replica_lease(table_key: int) -> str:
    """The lease of the replica (and its history table) of the catalog's table `table_key`."""
    return f"replica-{int(table_key)}"


def puller_lease(feed_id: str) -> str:
    """The lease of one puller shard of a changefeed (`feed_id`: the id and its shard suffix)."""
    return f"puller-{feed_id}"


def merge_follower_lease() -> str:
    """The lease of the lake's merge follower (`tidelake merge --follow`), held for its lifetime:
    one follower per lake, and scheduled merge runs leave the merge to a live one."""
    return "merge-follower"


def live_holder(layout: LakeLayout, name: str) -> LeaseRecord | None:
    """The record of the process holding lease `name` of `layout`'s lake now, None when nobody
    does (no record, released, expired, or its process on this host has ended)."""
    store = lease_store(layout.leases_root, layout.storage_options)
    tokens = store.tokens(name) if store is not None else []
    stored = store.read(name, tokens[-1]) if tokens else None
    record = LeaseRecord.from_bytes(stored.body) if stored is not None else None
    return record if record is not None and record.holds(time.time()) else None


def fence_token() -> int | None:
    """The token of the lease the current commit is made under, checked against the store right
    now (LeaseLost when this process lost it); None outside any lease (tests, unfenced stores)."""
    lease = _current.get()
    return lease.check() if lease is not None else None


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")


_current: ContextVar[Lease | None] = ContextVar("tidelake_lease", default=None)
