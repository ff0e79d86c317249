"""The published schema of `tidelake status --json` (tidelake/status/status_report.schema.json),
held against real reports by the tests that make them."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from tidelake.status import status_report

SCHEMA = json.loads(Path(status_report.__file__).with_name("status_report.schema.json").read_text())
_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def valid(doc: dict) -> dict:
    """`doc` after a JSON round trip (plain JSON types only) and a check against the schema,
    formats (date-times) included."""
    doc = json.loads(json.dumps(doc))
    _VALIDATOR.validate(doc)
    return doc
