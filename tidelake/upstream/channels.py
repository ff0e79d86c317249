"""gRPC channels to PD and TiKV, plain or TLS, with the options TiCDC dials with.

Every upstream client dials through here so TLS and message limits are set in one place.
Owner: the upstream clients (PD, TiKV KV, CDC streams).
"""

from __future__ import annotations

from pathlib import Path

import grpc

from tidelake.config import PD_SCHEMES, TlsConfig
from tidelake.errors import InputError

# TiCDC's grpcMaxCallRecvMsgSize (a region's incremental scan can be large).
MAX_RECEIVE_MESSAGE_BYTES = 256 * 1024 * 1024
# client-go/TiCDC keepalive: ping after 10 s idle, fail after 3 s without an answer.
_KEEPALIVE_OPTIONS = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 3_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]
# No BDP probing: it grows a stream's flow-control window to the bandwidth-delay product, and on a
# fast link gRPC core then buffers megabytes per EventFeed stream, outside the memory quota, while
# the puller holds back (a full quota). Without it a stream's window is gRPC's default plus the
# message being read; a link with a long round trip may then need `grpc.http2.lookahead_bytes`.
_FLOW_CONTROL_OPTIONS = [("grpc.http2.bdp_probe", 0)]


def credentials(tls: TlsConfig) -> grpc.ChannelCredentials:
    """The channel credentials for `tls`; a PEM file that cannot be read is an InputError naming it."""
    return grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca, "ca"),
        private_key=_read(tls.key, "key") if tls.key else None,
        certificate_chain=_read(tls.cert, "cert") if tls.cert else None,
    )


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"TLS {what} file {path!r}: {exc.strerror}") from None


def strip_scheme(address: str) -> str:
    """PD advertises client URLs as 'http://host:port'; gRPC targets are 'host:port'."""
    for scheme in PD_SCHEMES:
        if address.startswith(scheme):
            return address[len(scheme) :].rstrip("/")
    return address.rstrip("/")


def make_channel(address: str, tls: TlsConfig | None) -> grpc.Channel:
    """A channel to `address` ('host:port' or a PD URL); insecure when `tls` is None."""
    target = strip_scheme(address)
    options = [
        ("grpc.max_receive_message_length", MAX_RECEIVE_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_RECEIVE_MESSAGE_BYTES),
        *_KEEPALIVE_OPTIONS,
        *_FLOW_CONTROL_OPTIONS,
    ]
    if tls is None:
        return grpc.insecure_channel(target, options=options)
    return grpc.secure_channel(target, credentials(tls), options=options)
