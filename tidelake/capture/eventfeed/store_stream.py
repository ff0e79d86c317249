"""One store's EventFeed connection: multiplexing probe, request sending, event routing.

Follows TiCDC's shared stream (docs/wire.md#stream-setup): probe `EventFeedV2` with the
`features: stream-multiplexing` header; if the store answers UNIMPLEMENTED, fall back to one
plain `EventFeed` stream per subscription. Incoming events are routed to the region subscription
they belong to by (request_id, region_id); events for unknown subscriptions are dropped, and
after an Error a subscription is forgotten (docs/wire.md#silence-after-an-error). Handlers run on the receiving thread and
may block: that is the backpressure that reaches TiKV through gRPC flow control.
Owner: the EventFeed client, one connection per store.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from typing import Any, Protocol

import grpc

from tidelake.kvproto import cdcpb_pb2, cdcpb_pb2_grpc

log = logging.getLogger(__name__)

# docs/wire.md#connection-setup / docs/wire.md#stream-setup
MULTIPLEXING_METADATA = (("features", "stream-multiplexing"),)
PROBE_TIMEOUT_S = 10.0


class StreamHandler(Protocol):
    """Receives routed events; `token` is whatever (hashable) was registered for that region subscription."""

    def on_entries(self, token: Any, events: list[list[cdcpb_pb2.Event.Row]]) -> None:
        """The rows of one or more consecutive Entries events of the region, one list per event."""

    def on_resolved(self, tokens: list[Any], ts: int) -> None: ...

    def on_error(self, token: Any, error: cdcpb_pb2.Error) -> None: ...

    def on_broken(self, tokens: list[Any], reason: str) -> None: ...


class StreamUnavailable(Exception):
    """The store could not be reached or the stream is closed; the caller retries elsewhere."""


class _Call:
    """One gRPC bidi stream: a request queue feeding the call and a thread reading responses."""

    def __init__(self, owner: StoreStream, subscription_id: int | None) -> None:
        self.owner = owner
        self.subscription_id = subscription_id  # None on a multiplexed stream
        self.requests: queue.SimpleQueue[cdcpb_pb2.ChangeDataRequest | None] = queue.SimpleQueue()
        self.closing = False
        stub = cdcpb_pb2_grpc.ChangeDataStub(owner.channel)
        if subscription_id is None:
            self.call = stub.EventFeedV2(self._request_iter(), metadata=MULTIPLEXING_METADATA)
        else:
            self.call = stub.EventFeed(self._request_iter())
        name = f"cdc-recv-s{owner.store_id}" + ("" if subscription_id is None else f"-r{subscription_id}")
        self.thread = threading.Thread(target=owner._receive, args=(self,), name=name, daemon=True)
        self.thread.start()

    def _request_iter(self) -> Iterator[cdcpb_pb2.ChangeDataRequest]:
        while True:
            request = self.requests.get()
            if request is None:
                return  # CloseSend: TiKV deregisters everything of this connection (docs/wire.md#connection-setup)
            yield request

    def send(self, request: cdcpb_pb2.ChangeDataRequest) -> None:
        self.requests.put(request)

    def close(self) -> None:
        self.closing = True
        self.requests.put(None)
        self.call.cancel()


class StoreStream:
    """EventFeed traffic to one store, shared by every subscription that has regions there."""

    def __init__(
        self, store_id: int, channel: grpc.Channel, handler: StreamHandler, probe_timeout_s: float = PROBE_TIMEOUT_S
    ) -> None:
        self.store_id = store_id
        self.channel = channel
        self.multiplexed = self._probe_multiplexing(probe_timeout_s)
        self._handler = handler
        self._mutex = threading.Lock()
        self._active: dict[tuple[int, int], Any] = {}
        self._calls: dict[int | None, _Call] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def regions(self) -> int:
        """Region subscriptions routed on this stream now (0: the stream is idle)."""
        with self._mutex:
            return len(self._active)

    def _probe_multiplexing(self, timeout_s: float) -> bool:
        """EventFeedV2 with the feature header and no requests: OK => supported (docs/wire.md#stream-setup)."""
        stub = cdcpb_pb2_grpc.ChangeDataStub(self.channel)
        call = stub.EventFeedV2(iter(()), metadata=MULTIPLEXING_METADATA, timeout=timeout_s)
        try:
            for _ in call:
                pass
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                log.info("store %d does not support stream multiplexing: one stream per table", self.store_id)
                return False
            raise StreamUnavailable(f"store {self.store_id}: {exc.code().name} {exc.details()}") from exc
        return True

    def register(self, token: Any, request: cdcpb_pb2.ChangeDataRequest) -> None:
        """Route events of (request_id, region_id) to `token`, then send the request."""
        key = (request.request_id, request.region_id)
        with self._mutex:
            if self._closed:
                raise StreamUnavailable(f"store {self.store_id}: stream closed")
            call_key = None if self.multiplexed else request.request_id
            call = self._calls.get(call_key)
            if call is None:
                call = _Call(self, call_key)
                self._calls[call_key] = call
            self._active[key] = token
        call.send(request)

    def deregister(self, subscription_id: int, header: cdcpb_pb2.Header) -> None:
        """Drop a whole subscription: Deregister on a multiplexed stream, else close its stream (docs/wire.md#request-it-sends)."""
        with self._mutex:
            for key in [k for k in self._active if k[0] == subscription_id]:
                del self._active[key]
            call = self._calls.get(None) if self.multiplexed else self._calls.pop(subscription_id, None)
        if call is None:
            return
        if self.multiplexed:
            request = cdcpb_pb2.ChangeDataRequest(header=header, request_id=subscription_id)
            request.deregister.SetInParent()
            call.send(request)
        else:
            call.close()

    def close(self) -> None:
        with self._mutex:
            self._closed = True
            calls = list(self._calls.values())
            self._calls.clear()
            self._active.clear()
        for call in calls:
            call.close()
        for call in calls:
            if call.thread is not threading.current_thread():
                call.thread.join(timeout=5)

    def _receive(self, call: _Call) -> None:
        reason = "stream closed by the store"
        try:
            for response in call.call:
                self._route(call, response)
        except grpc.RpcError as exc:
            reason = f"{exc.code().name}: {exc.details()}"
        except Exception as exc:  # a handler failed: the client records it; drop this stream's regions
            reason = f"handler error: {exc!r}"
            log.exception("store %d: routing failed", self.store_id)
        if call.closing:
            return
        # We stop reading it: cancel it too, so TiKV drops its subscriptions instead of buffering
        # for nobody (and congesting those regions for the subscriptions that replace them).
        call.call.cancel()
        self._break(call, reason)

    def _break(self, call: _Call, reason: str) -> None:
        with self._mutex:
            if self.multiplexed:
                self._closed = True
                keys = list(self._active)
            else:
                keys = [k for k in self._active if k[0] == call.subscription_id]
            if self._calls.get(call.subscription_id) is call:
                del self._calls[call.subscription_id]
            tokens = [self._active.pop(k) for k in keys]
        log.warning("store %d: EventFeed stream broken (%s), %d regions to retry", self.store_id, reason, len(tokens))
        self._handler.on_broken(tokens, f"store {self.store_id}: {reason}")

    def _route(self, call: _Call, response: cdcpb_pb2.ChangeDataEvent) -> None:
        # docs/wire.md#routing-of-incoming-messages: on plain streams the stream itself names the subscription.
        fixed_subscription = call.subscription_id
        if response.HasField("resolved_ts"):
            resolved = response.resolved_ts
            subscription = resolved.request_id if fixed_subscription is None else fixed_subscription
            with self._mutex:
                tokens = [t for t in (self._active.get((subscription, r)) for r in resolved.regions) if t is not None]
            if tokens:
                self._handler.on_resolved(tokens, resolved.ts)
        # One region's Entries events of this response go to the handler in one call, in order:
        # a handler call (and a region worker's hand-off) per event cost more than its rows when
        # events are small. A region's other events flush its entries first, so its order holds.
        # Each event stays its own list; the client hands their rows to the sink in bounded batches.
        # The routing table is read under one hold of the mutex per response, not one per event
        # (a lock round trip per event cost as much as routing it). A registration made while the
        # response is handled gets none of its events: TiKV sent them before it saw that request;
        # a token deregistered meanwhile still gets them (handlers ignore a stopped feed's events).
        # An error's token leaves the table only when its error is handed over, so a handler that
        # raises first leaves it to the stream's on_broken; the key's later events are dropped.
        routed: list[tuple[Any, str, cdcpb_pb2.Event, tuple[int, int]]] = []
        with self._mutex:
            active = self._active
            failed: set[tuple[int, int]] = set()
            for event in response.events:
                subscription = event.request_id if fixed_subscription is None else fixed_subscription
                key = (subscription, event.region_id)
                if key in failed:
                    continue
                kind = event.WhichOneof("event")
                token = active.get(key)
                if token is not None:
                    routed.append((token, kind, event, key))
                    if kind == "error":
                        failed.add(key)
        pending: dict[Any, list[list[cdcpb_pb2.Event.Row]]] = {}
        for token, kind, event, key in routed:
            if kind == "entries":
                pending.setdefault(token, []).append(list(event.entries.entries))
                continue
            events = pending.pop(token, None)
            if events is not None:
                self._handler.on_entries(token, events)
            if kind == "error":
                with self._mutex:
                    if self._active.get(key) is not token:
                        continue  # deregistered meanwhile: its error is no longer ours to report
                    del self._active[key]
                self._handler.on_error(token, event.error)
            elif kind == "resolved_ts":  # deprecated per-region form (clients < 4.0.8, docs/wire.md#event)
                self._handler.on_resolved([token], event.resolved_ts)
        for token, events in pending.items():
            self._handler.on_entries(token, events)
