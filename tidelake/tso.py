"""TSO arithmetic: ts = physical_ms << 18 | logical (docs/wire.md#tso-format).
Owner: PD (the format); every stage computes with it here.
"""

from __future__ import annotations

from datetime import datetime, timezone

PHYSICAL_SHIFT_BITS = 18
LOGICAL_MASK = (1 << PHYSICAL_SHIFT_BITS) - 1
LIMIT = 1 << 64  # TSOs are uint64 on the wire (pdpb.Timestamp composes into one u64)


def compose(physical_ms: int, logical: int = 0) -> int:
    return (physical_ms << PHYSICAL_SHIFT_BITS) | (logical & LOGICAL_MASK)


def physical_ms(ts: int) -> int:
    return ts >> PHYSICAL_SHIFT_BITS


def logical(ts: int) -> int:
    return ts & LOGICAL_MASK


def to_datetime(ts: int) -> datetime:
    """UTC wall-clock time of a TSO (millisecond precision)."""
    return datetime.fromtimestamp(physical_ms(ts) / 1000, tz=timezone.utc)


def from_datetime(when: datetime) -> int:
    """Smallest TSO at `when` (naive datetimes are taken as UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return compose(int(when.timestamp() * 1000))


def lag_seconds(ts: int, now_ts: int) -> float:
    """Seconds between two TSOs, e.g. a watermark and the current PD time."""
    return max(0, physical_ms(now_ts) - physical_ms(ts)) / 1000
