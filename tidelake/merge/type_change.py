"""Which replica column type changes Delta can apply as metadata-only type widening.

docs/stack.md#delta-lake-schema-changes-protocol-concurrency (Delta 4.x type widening): byte->short/int/long/decimal/double,
short->int/long/decimal/double, int->long/decimal/double, long->decimal, float->double,
decimal(p,s)->decimal(p+k1,s+k2) with k1 >= k2 >= 0, date->timestamp_ntz. An integer widens to a
decimal only if the decimal keeps all its digits. Everything else is rewritten with a CAST.
Owner: the merge's DDL apply (tidelake.merge.ddl_apply).
"""

from __future__ import annotations

from pyspark.sql.types import (
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    TimestampNTZType,
)

# Integer types in widening order, with the decimal digits each needs.
_INTEGER_DIGITS: dict[type[DataType], int] = {ByteType: 3, ShortType: 5, IntegerType: 10, LongType: 20}
_INTEGER_RANK = {t: i for i, t in enumerate(_INTEGER_DIGITS)}


def can_widen(current: DataType, target: DataType) -> bool:
    """True when `ALTER COLUMN c TYPE target` is a Delta type widening of `current`."""
    src, dst = type(current), type(target)
    if src in _INTEGER_RANK:
        if dst in _INTEGER_RANK:
            return _INTEGER_RANK[dst] > _INTEGER_RANK[src]
        if dst is DoubleType:
            return src is not LongType
        if dst is DecimalType:
            return target.precision - target.scale >= _INTEGER_DIGITS[src]
        return False
    if src is FloatType:
        return dst is DoubleType
    if src is DecimalType and dst is DecimalType:
        k1, k2 = target.precision - current.precision, target.scale - current.scale
        return k1 >= k2 >= 0 and (k1, k2) != (0, 0)
    return src is DateType and dst is TimestampNTZType
