"""Which replica columns may carry file statistics written by delta-rs. deltalake 1.6 writes a
DECIMAL's min/max through an int64 or a float, clamped or rounded above EXACT_DECIMAL_STATS_DIGITS
digits, and readers that skip files by those stats (Spark's `WHERE d = ...`, deltalake's
filters) would then miss rows. A replica whose wide decimals are not key columns therefore names
its other columns in `delta.dataSkippingStatsColumns`, which Spark and delta-rs both honour: no
writer collects statistics of those decimals, so none can be wrong, and delta-rs may write the
replica (tidelake.merge.writers.delta_rs_writer.writable). A wide key (BIGINT UNSIGNED) keeps
its statistics, which readers' point lookups skip files by, and the replica stays on Spark. Owner: the merge; replicas get the
property at creation, older ones when TableMerge opens them (tidelake.merge.replica_schema).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

STATS_COLUMNS = "delta.dataSkippingStatsColumns"
# A float64 holds every decimal of up to 15 significant digits exactly.
EXACT_DECIMAL_STATS_DIGITS = 15
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Types Delta collects min/max of; it refuses others in the property (delta-io/delta
# StatisticsCollection, DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_TYPE), as BINARY and BOOLEAN.
_SKIPPING_TYPES = frozenset({"byte", "short", "integer", "long", "float", "double", "decimal", "string", "date",
                             "timestamp", "timestamp_ntz"})


def wide_decimals(struct: StructType) -> list[str]:
    """The top-level DECIMAL columns of more than EXACT_DECIMAL_STATS_DIGITS digits."""
    return [f.name for f in struct.fields
            if f.dataType.typeName() == "decimal" and f.dataType.precision > EXACT_DECIMAL_STATS_DIGITS]


def stats_columns(struct: StructType, keys: Sequence[str]) -> str | None:
    """The `delta.dataSkippingStatsColumns` a replica of `struct` with key columns `keys` gets:
    every column of a type Delta keeps stats of but its wide decimals; None when it has none or
    one is a key (the default, Delta's first 32 columns, stays)."""
    wide = set(wide_decimals(struct))
    if not wide or wide & set(keys):
        return None
    return ",".join(_name(f.name) for f in struct.fields
                    if f.name not in wide and f.dataType.typeName() in _SKIPPING_TYPES)


def unsafe_stats(struct: StructType, configuration: dict[str, str]) -> list[str]:
    """The wide decimals of `struct` a writer would collect statistics of under the table's
    `configuration`: all of them without the property (conservatively: Delta's default counts
    columns), those the property names otherwise."""
    wide = wide_decimals(struct)
    names = listed_columns(configuration)
    if names is None:
        return wide
    return [n for n in wide if n.lower() in names]


def listed_columns(configuration: dict[str, str]) -> set[str] | None:
    """The lower-cased column names `delta.dataSkippingStatsColumns` lists; None without it."""
    listed = configuration.get(STATS_COLUMNS)
    if listed is None:
        return None
    return {n.strip().strip("`").replace("``", "`").lower() for n in listed.split(",")}


def _name(name: str) -> str:
    return name if _PLAIN_NAME.fullmatch(name) else "`" + name.replace("`", "``") + "`"
