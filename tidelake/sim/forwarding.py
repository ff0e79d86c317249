"""TiKV's request forwarding: a Tikv RPC carrying `tikv-forwarded-host` is proxied to that store.

A client that cannot reach a region's leader (client-go and the Java client mark a store
unreachable when its gRPC health check fails) sends the request to another store with the
leader's address in the `tikv-forwarded-host` metadata. TiKV's `forward_unary!` and
`forward_duplex!` (tikv src/server/service/kv.rs, proxy in src/server/proxy.rs) then call the same
method on that address and relay its answer or its gRPC status, instead of serving it locally.
The sim does the same in process: the named store's KvService answers; an address no running
store listens on fails with UNAVAILABLE, what the proxy's connection attempt reports.
"""

from __future__ import annotations

from typing import Callable

import grpc

FORWARD_METADATA_KEY = "tikv-forwarded-host"  # client-go tikvrpc `forwardMetadataKey`
_TIKV_SERVICE = "/tikvpb.Tikv/"


class ForwardingInterceptor(grpc.ServerInterceptor):
    """Serves a forwarded tikvpb.Tikv call with the KvService of the store at the named address."""

    def __init__(self, own_address: Callable[[], str], servicer_at: Callable[[str], object | None]) -> None:
        self._own_address = own_address
        self._servicer_at = servicer_at

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not method.startswith(_TIKV_SERVICE):
            return handler
        target = dict(handler_call_details.invocation_metadata or ()).get(FORWARD_METADATA_KEY, "")
        if not target or target == self._own_address():
            return handler
        name = method[len(_TIKV_SERVICE):]

        def forward(request, context):
            servicer = self._servicer_at(target)
            if servicer is None:
                context.abort(grpc.StatusCode.UNAVAILABLE, f"failed to connect to all addresses: {target}")
            return getattr(servicer, name)(request, context)

        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(forward, handler.request_deserializer,
                                                       handler.response_serializer)
        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(forward, handler.request_deserializer,
                                                         handler.response_serializer)
        return handler
