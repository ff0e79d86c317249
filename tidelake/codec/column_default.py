"""A column's `origin_default` as a Python value: what a row written before ADD COLUMN holds.

TiDB stores it as text in ColumnInfo JSON (BIT in `origin_default_bit`, base64); TiCDC and TiDB
read it with `GetColOriginDefaultValue` (docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns, docs/encoding.md#schema-json).
Owner: the codec.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.mytime import MySQLTime
from tidelake.codec.row_value import enum_index, enum_name, set_bits, set_names
from tidelake.codec.schema import ColumnInfo
from tidelake.errors import InputError

_DATETIME = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6}))?)?$")
_TIME = re.compile(r"(-)?(\d+):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6}))?$")


def origin_default(column: ColumnInfo) -> Any:
    """The parsed origin default, or None when the column has none."""
    ft = column.field_type
    text = column.origin_default
    if ft.tp == mt.TYPE_BIT:
        # TiDB keeps BIT defaults as raw bytes in origin_default_bit (GetOriginDefaultValue);
        # the text copy is the same bytes as a string, mangled by JSON.
        if column.origin_default_bit is not None:
            return int.from_bytes(column.origin_default_bit, "big")
        if isinstance(text, str):
            return int.from_bytes(text.encode("utf-8"), "big")
    if text is None:
        return None
    try:
        return _parse(text, column)
    except (ValueError, InvalidOperation) as exc:
        raise InputError(f"column {column.name!r}: cannot read origin_default {text!r} ({exc})") from None


def _parse(text: Any, column: ColumnInfo) -> Any:
    ft = column.field_type
    tp = ft.tp
    if tp in mt.INTEGER_TYPES or tp in (mt.TYPE_YEAR, mt.TYPE_BIT):
        return int(text)  # a BIT default given as a JSON number
    if tp in (mt.TYPE_FLOAT, mt.TYPE_DOUBLE):
        return float(text)
    if tp == mt.TYPE_NEWDECIMAL:
        return Decimal(str(text))
    text = str(text)
    if tp in mt.STRING_TYPES:
        return text.encode("utf-8") if mt.is_binary_string(ft) else text
    if tp in (mt.TYPE_DATE, mt.TYPE_NEWDATE, mt.TYPE_DATETIME, mt.TYPE_TIMESTAMP):
        return _parse_time(text, tp)
    if tp == mt.TYPE_DURATION:
        return _parse_duration(text)
    if tp == mt.TYPE_ENUM:
        return enum_name(enum_index(text, ft), ft)
    if tp == mt.TYPE_SET:
        return set_names(set_bits(text, ft), ft)
    if tp == mt.TYPE_JSON:
        return json.loads(text)
    raise ValueError(f"unsupported column type code {tp}")


def _parse_time(text: str, tp: int) -> date | datetime | MySQLTime:
    match = _DATETIME.match(text.strip())
    if match is None:
        raise ValueError("expected YYYY-MM-DD[ HH:MM:SS[.ffffff]]")
    year, month, day, hour, minute, second = (int(g or 0) for g in match.groups()[:6])
    micro = int((match.group(7) or "").ljust(6, "0"))
    try:
        if tp in (mt.TYPE_DATE, mt.TYPE_NEWDATE):
            return date(year, month, day)
        value = datetime(year, month, day, hour, minute, second, micro)
    except ValueError:
        return MySQLTime(year, month, day, hour, minute, second, micro, tp)
    # Column version >= 1 stores TIMESTAMP defaults in UTC (docs/encoding.md#schema-json); older ones are assumed UTC too.
    return value.replace(tzinfo=timezone.utc) if tp == mt.TYPE_TIMESTAMP else value


def _parse_duration(text: str) -> timedelta:
    match = _TIME.match(text.strip())
    if match is None:
        raise ValueError("expected [-]HH:MM:SS[.ffffff]")
    sign, hours, minutes, seconds, frac = match.groups()
    value = timedelta(
        hours=int(hours), minutes=int(minutes), seconds=int(seconds), microseconds=int((frac or "").ljust(6, "0"))
    )
    return -value if sign else value
