"""Fatal puller errors: each one stops the feed and reaches the user as one line.
Owner: the puller.
"""

from __future__ import annotations

from tidelake.errors import EXIT_TRY_LATER, TidelakeError


class PullerError(TidelakeError):
    """The feed cannot go on without losing or inventing data; restart from the checkpoint."""


class ProtocolViolationError(PullerError):
    """TiKV sent something the CDC protocol forbids (docs/wire.md#invariants-a-simulated-tikv-cdc-server-must-respect); TiCDC panics here."""


class PrewriteNotMatchError(PullerError):
    """A COMMIT after INITIALIZED without its PREWRITE (TiCDC `ErrPrewriteNotMatch`, docs/wire.md#row-handling-per-region)."""


class IncompatibleClusterError(PullerError):
    """Store version, cluster id or protocol compatibility rejected by us or by TiKV (docs/wire.md#region-error-handling, docs/wire.md#version-checks)."""


class SpillFullError(PullerError):
    """The prewrite spill's folder has no room: the prewrites waiting for their commit cannot be kept,
    so the feed stops before anything past them lands; the next run pulls them again."""

    exit_code = EXIT_TRY_LATER
