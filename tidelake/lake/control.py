"""The watermarks and the DDL history, read in the one order that makes them consistent.

A puller commits the DDL rows a flush covers before the watermark row that covers them
(tidelake.capture.landing.lander). So a DDL history read AFTER the watermarks holds every DDL at or below
the DDL watermark it reports, and a barrier computed from the two is never above a DDL that
was still to land (docs/design.md invariant 2). Everything that decides from both (merge,
syncpoints, status, the merge DAG's plan) reads them here, never one by one.
Owner: the lander writes both tables (tidelake.capture.landing); every reader reads them here.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidelake.lake.layout import LakeLayout
from tidelake.lake.schema_history import SchemaHistory
from tidelake.lake.watermarks import Watermarks, read_watermarks


@dataclass(frozen=True)
class ControlTables:
    watermarks: Watermarks
    history: SchemaHistory


def read_control(layout: LakeLayout) -> ControlTables:
    """The watermarks first, then the DDL history (see module doc)."""
    watermarks = read_watermarks(layout)
    return ControlTables(watermarks, SchemaHistory.load(layout))
