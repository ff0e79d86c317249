"""Jittered exponential backoff for rescheduled region work (not a blocking retry loop).

Region retries are re-queued tasks rather than sleeping calls, so tenacity's decorator model
does not fit; this is the one formula the client uses for every retry class.
Owner: the EventFeed client.
"""

from __future__ import annotations

import random


def backoff_s(attempt: int, base_s: float, cap_s: float, rng: random.Random | None = None) -> float:
    """0 for the first attempt, then base * 2^(attempt-1) capped, with 50–100% jitter."""
    if attempt <= 0:
        return 0.0
    delay = min(cap_s, base_s * (2 ** (attempt - 1)))
    return delay * (rng or random).uniform(0.5, 1.0)
