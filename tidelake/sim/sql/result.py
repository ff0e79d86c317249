"""What one statement answers: a result set, or the counts of an OK packet."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Result:
    """`columns` empty means an OK packet carrying `affected` rows and `last_insert_id`."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    columns: list[Any] = field(default_factory=list)
    affected: int = 0
    last_insert_id: int = 0
    warnings: int = 0
