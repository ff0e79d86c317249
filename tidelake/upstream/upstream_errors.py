"""Errors from talking to the upstream cluster, as one actionable line each.
Owner: the upstream clients.
"""

from __future__ import annotations

from tidelake.errors import TidelakeError


class UpstreamError(TidelakeError):
    """PD or TiKV could not answer as needed (unreachable, wrong cluster, retries exhausted)."""


class EtcdApiUnavailable(UpstreamError):
    """PD does not serve etcd's client API on its client URL (a gRPC proxy in front of it)."""


class BelowGCSafepointError(UpstreamError):
    """A ts the caller needs to read at is (or may be) already garbage-collected (docs/metadata.md#what-a-client-sees-when-its-ts-is-older-than-gc)."""

    exit_code = 2
