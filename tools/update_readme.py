"""Regenerate the README's type-mapping table from tidelake.codec.spark_types (`make readme`)."""

from __future__ import annotations

import sys
from pathlib import Path

from tidelake.codec.spark_types import type_mapping_markdown

README = Path(__file__).resolve().parent.parent / "README.md"
START, END = "<!-- type-mapping:start -->", "<!-- type-mapping:end -->"


def render(text: str) -> str:
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{type_mapping_markdown().strip()}\n{END}{tail}"


if __name__ == "__main__":
    README.write_text(render(README.read_text()))
    sys.exit(0)
