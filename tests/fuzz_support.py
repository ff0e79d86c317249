"""What every fuzzed decoder must do with bad input: return, or raise one clear InputError line."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tidelake.errors import InputError


def decodes_or_rejects(decode: Callable[..., Any], *args: Any, where: str | None = r"\d") -> Any:
    """Call `decode`; an InputError is fine if its message is one non-empty line that names where
    (by default a byte offset, length or code: any digit). Any other exception fails the test."""
    try:
        return decode(*args)
    except InputError as exc:
        message = str(exc)
        assert message and "\n" not in message, f"not one line: {message!r}"
        if where is not None:
            assert re.search(where, message), f"does not say where ({where}): {message!r}"
        return None
