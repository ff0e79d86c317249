"""What the checker's own value readers (row_int, row_values, json_value) raise."""

from __future__ import annotations


class RowFormatError(ValueError):
    """The value is not a row v2 value (or a part of one) these readers understand."""


class Unchecked(Exception):  # noqa: N818 - a verdict, not a failure of the reader
    """A value the readers do not read (a column type, a JSON type, a default): counted, not compared."""
