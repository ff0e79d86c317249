"""PD TSO over the `Tso` bidi stream, batching concurrent callers into one request.

PD answers `TsoRequest{count=n}` with the largest of n consecutive TSOs (docs/wire.md#pd-server-behaviour), so
one round trip serves every caller waiting at that moment, as the Go PD client's dispatcher does.
Owner: the PD client.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Callable, Iterator

from tidelake import tso
from tidelake.kvproto import pdpb_pb2
from tidelake.upstream.upstream_errors import UpstreamError

_MAX_BATCH = 10_000
_STOP = object()

OpenStream = Callable[[Iterator[pdpb_pb2.TsoRequest]], Iterator[pdpb_pb2.TsoResponse]]


class TsoStreamBroken(Exception):
    """The stream failed; callers retry (after PD leader re-discovery)."""


class TsoDispatcher:
    """One background thread owns the stream; `get_ts` may be called from any thread."""

    def __init__(self, open_stream: OpenStream, header: Callable[[], pdpb_pb2.RequestHeader],
                 on_broken: Callable[[], None]) -> None:
        self._open_stream = open_stream
        self._header = header
        self._on_broken = on_broken
        self._waiting: queue.SimpleQueue[Future | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._closed = False
        self._last_ts = 0
        self._responses: Iterator[pdpb_pb2.TsoResponse] | None = None  # the live stream, if any

    def get_ts(self, timeout_s: float) -> int:
        if self._closed:
            raise UpstreamError("PD client is closed")
        fut: Future[int] = Future()
        self._ensure_thread()
        self._waiting.put(fut)
        try:
            return fut.result(timeout=timeout_s)
        except FutureTimeout:
            # A hung stream: cancel it so the dispatcher fails its batch and reconnects.
            self._cancel_stream()
            raise TsoStreamBroken(f"PD Tso gave no answer within {timeout_s:g}s") from None

    def _cancel_stream(self) -> None:
        cancel = getattr(self._responses, "cancel", None)
        if cancel is not None:
            cancel()

    def close(self) -> None:
        self._closed = True
        self._waiting.put(_STOP)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _ensure_thread(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pd-tso", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        requests: queue.SimpleQueue | None = None
        while True:
            batch = self._next_batch()
            if batch is None:
                break
            try:
                if self._responses is None:
                    requests = queue.SimpleQueue()
                    self._responses = self._open_stream(iter(requests.get, _STOP))
                requests.put(pdpb_pb2.TsoRequest(header=self._header(), count=len(batch)))
                response = next(self._responses)
                self._deliver(batch, response)
            except Exception as exc:  # noqa: BLE001 - every failure ends the stream
                if requests is not None:
                    requests.put(_STOP)
                self._cancel_stream()
                requests, self._responses = None, None
                self._on_broken()
                error = exc
                if not isinstance(exc, UpstreamError):
                    error = TsoStreamBroken(f"PD Tso stream failed: {_describe(exc)}")
                for fut in batch:
                    if not fut.done():
                        fut.set_exception(error)
        if requests is not None:
            requests.put(_STOP)
        self._cancel_stream()

    def _next_batch(self) -> list[Future] | None:
        first = self._waiting.get()
        if first is _STOP:
            return None
        batch = [first]
        while len(batch) < _MAX_BATCH:
            try:
                item = self._waiting.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                self._waiting.put(_STOP)
                break
            batch.append(item)
        return batch

    def _deliver(self, batch: list[Future], response: pdpb_pb2.TsoResponse) -> None:
        if response.header.HasField("error") and response.header.error.type != pdpb_pb2.OK:
            error = response.header.error
            raise TsoStreamBroken(f"PD Tso error {pdpb_pb2.ErrorType.Name(error.type)}: {error.message}")
        if response.count != len(batch):
            raise TsoStreamBroken(f"PD Tso returned count {response.count} for a request of {len(batch)}")
        # docs/wire.md#pd-server-behaviour: the timestamp is the largest; the first is logical - count + 1.
        physical = response.timestamp.physical
        first_logical = response.timestamp.logical - response.count + 1
        first = tso.compose(physical, first_logical)
        if first <= self._last_ts or first_logical < 0:
            raise UpstreamError(f"PD TSO went backwards: got {first} after {self._last_ts}")
        self._last_ts = first + len(batch) - 1
        for i, fut in enumerate(batch):
            fut.set_result(first + i)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, StopIteration):
        return "stream closed by PD"
    details = getattr(exc, "details", None)
    if callable(details):
        return f"{exc.code().name}: {details()}"
    return str(exc) or type(exc).__name__
