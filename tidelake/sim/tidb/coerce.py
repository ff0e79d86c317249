"""A value as a column stores it: MySQL's conversion rules under TiDB's default (strict) sql_mode.

The input is any value an SQL expression yields (int, float, Decimal, str, bytes, date, datetime,
timedelta, JSON objects, None); the output is the codec's value model for the column's FieldType
(tidelake/codec/row_value.py). Strict mode (TiDB's default `STRICT_TRANS_TABLES`) refuses what
does not fit with TiDB's error (1264 out of range, 1366 incorrect value, 1406 too long, 1292 bad
date, 1265 truncated); without it the value is clamped or truncated, as MySQL does with a warning.
Rules follow pingcap/tidb `pkg/types/datum.go` (`ConvertTo`) and `pkg/types/time.go`.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone, tzinfo
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation, localcontext
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.mytime import MySQLTime
from tidelake.codec.schema import ColumnInfo, FieldType
from tidelake.sim.tidb import sql_errors as er

_INT_BITS = {mt.TYPE_TINY: 8, mt.TYPE_SHORT: 16, mt.TYPE_INT24: 24, mt.TYPE_LONG: 32, mt.TYPE_LONGLONG: 64}
_NUMBER = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$")
_DATETIME = re.compile(
    r"^\s*(\d{2,4})[-/.](\d{1,2})[-/.](\d{1,2})(?:[ T]+(\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d*))?)?)?\s*$")
_DATETIME_DIGITS = re.compile(r"^\s*(\d{8}|\d{14}|\d{12}|\d{6})(?:\.(\d*))?\s*$")
_TIME = re.compile(r"^\s*(-)?(?:(\d+)\s+)?(\d+):(\d{1,2})(?::(\d{1,2})(?:\.(\d*))?)?\s*$")
_TIME_DIGITS = re.compile(r"^\s*(-)?(\d+)(?:\.(\d*))?\s*$")
_MAX_TIME = timedelta(hours=838, minutes=59, seconds=59)
_TIMESTAMP_MIN = datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc)
_TIMESTAMP_MAX = datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=timezone.utc)
_F32 = struct.Struct("<f")
_NUMERIC_TYPES = frozenset({mt.TYPE_TINY, mt.TYPE_SHORT, mt.TYPE_INT24, mt.TYPE_LONG, mt.TYPE_LONGLONG, mt.TYPE_YEAR,
                            mt.TYPE_FLOAT, mt.TYPE_DOUBLE, mt.TYPE_NEWDECIMAL})
# MySQL's DECIMAL holds 65 digits; Python's default context rounds at 28
DECIMAL_CONTEXT = Context(prec=96)


@dataclass(frozen=True)
class Mode:
    """What of the session's sql_mode and time zone the conversion needs."""

    strict: bool = True
    no_zero_date: bool = True
    time_zone: tzinfo = timezone.utc

    @classmethod
    def from_sql_mode(cls, sql_mode: str, time_zone: tzinfo = timezone.utc) -> Mode:
        flags = {f.strip().upper() for f in sql_mode.split(",")}
        strict = bool(flags & {"STRICT_TRANS_TABLES", "STRICT_ALL_TABLES", "TRADITIONAL"})
        return cls(strict=strict, no_zero_date=strict and bool(flags & {"NO_ZERO_DATE", "TRADITIONAL"}),
                   time_zone=time_zone)


STRICT = Mode()


class BinaryLiteral(bytes):
    """A hex (x'0a', 0x0a) or bit-value (b'1010') literal: a binary string that numeric columns take
    as its big-endian number (TiDB's types.BinaryLiteral, converted by `ToInt`)."""


def to_column(value: Any, column: ColumnInfo, mode: Mode = STRICT, row: int = 1) -> Any:
    """`value` converted for `column` (None stays None; NOT NULL is the caller's check)."""
    if value is None:
        return None
    return _Converter(column, mode, row).convert(value)


def to_type(value: Any, ft: FieldType, mode: Mode = STRICT) -> Any:
    """The same for a bare FieldType (partition bounds, CAST), errors naming no column."""
    if value is None:
        return None
    return _Converter(ColumnInfo(id=0, name="", offset=0, field_type=ft), mode, 1).convert(value)


class _Converter:
    def __init__(self, column: ColumnInfo, mode: Mode, row: int) -> None:
        self.column, self.ft, self.mode, self.row = column, column.field_type, mode, row

    # ---- errors ----------------------------------------------------------------------------

    def _fail(self, kind: tuple[int, str], message: str) -> er.SqlError:
        return er.sql_error(kind, message)

    def out_of_range(self) -> er.SqlError:
        return self._fail(er.OUT_OF_RANGE, f"Out of range value for column '{self.column.name}' at row {self.row}")

    def incorrect(self, kind: str, value: Any) -> er.SqlError:
        return self._fail(er.WRONG_VALUE_FOR_FIELD, f"Incorrect {kind} value: '{_text(value)}' for column "
                                                    f"'{self.column.name}' at row {self.row}")

    def too_long(self) -> er.SqlError:
        return self._fail(er.DATA_TOO_LONG, f"Data too long for column '{self.column.name}' at row {self.row}")

    def truncated(self) -> er.SqlError:
        return self._fail(er.DATA_TRUNCATED, f"Data truncated for column '{self.column.name}' at row {self.row}")

    def bad_time(self, kind: str, value: Any) -> er.SqlError:
        return self._fail(er.TRUNCATED_WRONG_VALUE, f"Incorrect {kind} value: '{_text(value)}' for column "
                                                    f"'{self.column.name}' at row {self.row}")

    # ---- dispatch --------------------------------------------------------------------------

    def convert(self, value: Any) -> Any:
        tp = self.ft.tp
        if isinstance(value, BinaryLiteral) and tp in _NUMERIC_TYPES:
            value = int.from_bytes(value, "big")
        if tp in _INT_BITS:
            return self.integer(value)
        if tp == mt.TYPE_YEAR:
            return self.year(value)
        if tp in (mt.TYPE_FLOAT, mt.TYPE_DOUBLE):
            return self.floating(value)
        if tp == mt.TYPE_NEWDECIMAL:
            return self.decimal(value)
        if tp == mt.TYPE_BIT:
            return self.bit(value)
        if tp in mt.STRING_TYPES:
            return self.binary(value) if mt.is_binary_string(self.ft) else self.text(value)
        if tp in (mt.TYPE_DATE, mt.TYPE_NEWDATE, mt.TYPE_DATETIME, mt.TYPE_TIMESTAMP):
            return self.moment(value)
        if tp == mt.TYPE_DURATION:
            return self.duration(value)
        if tp == mt.TYPE_ENUM:
            return self.enum(value)
        if tp == mt.TYPE_SET:
            return self.set(value)
        if tp == mt.TYPE_JSON:
            return self.json(value)
        if tp == mt.TYPE_TIDB_VECTOR_FLOAT32:
            return self.vector(value)
        raise er.not_supported(f"values of column type {mt.TYPE_NAMES.get(tp, tp)}")

    # ---- numbers ---------------------------------------------------------------------------

    def _number(self, value: Any, kind: str) -> Decimal | float:
        """A numeric view of `value`: MySQL reads strings by their numeric text."""
        if isinstance(value, bool):
            return Decimal(int(value))
        if isinstance(value, int):
            return Decimal(value)
        if isinstance(value, (float, Decimal)):
            return value
        if isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode("utf-8", "replace")
        if isinstance(value, str):
            if _NUMBER.match(value):
                text = value.strip()
                return float(text) if "e" in text.lower() else Decimal(text)
            if self.mode.strict or not value.strip():
                raise self.incorrect(kind, value)
            return Decimal(0)
        if isinstance(value, datetime):
            return Decimal(value.strftime("%Y%m%d%H%M%S"))
        if isinstance(value, date):
            return Decimal(value.strftime("%Y%m%d"))
        if isinstance(value, timedelta):
            return Decimal(_duration_text(value, 0).replace(":", "").replace("-", "")) * (-1 if value < timedelta() else 1)
        raise self.incorrect(kind, value)

    def _bounded(self, number: int, low: int, high: int) -> int:
        if low <= number <= high:
            return number
        if self.mode.strict:
            raise self.out_of_range()
        return max(low, min(high, number))

    def integer(self, value: Any) -> int:
        number = self._number(value, "integer")
        if isinstance(number, float):
            if not math.isfinite(number):
                raise self.out_of_range()
            number = Decimal(repr(number))
        rounded = int(number.quantize(Decimal(1), rounding=ROUND_HALF_UP))
        bits = _INT_BITS[self.ft.tp]
        if mt.is_unsigned(self.ft.flag):
            return self._bounded(rounded, 0, (1 << bits) - 1)
        return self._bounded(rounded, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)

    def year(self, value: Any) -> int:
        text_zero = isinstance(value, str) and value.strip() in ("0", "00")
        number = int(Decimal(self._number(value, "integer")).quantize(Decimal(1), rounding=ROUND_HALF_UP))
        if number == 0:
            return 2000 if text_zero else 0
        if 1 <= number <= 69:
            return 2000 + number
        if 70 <= number <= 99:
            return 1900 + number
        if 1901 <= number <= 2155:
            return number
        if self.mode.strict:
            raise self.out_of_range()
        return 0

    def floating(self, value: Any) -> float:
        number = float(self._number(value, "double" if self.ft.tp == mt.TYPE_DOUBLE else "float"))
        if self.ft.decimal > 0 and self.ft.flen > 0:  # FLOAT(M,D)/DOUBLE(M,D) round to D digits
            number = float(Decimal(repr(number)).quantize(Decimal(1).scaleb(-self.ft.decimal), rounding=ROUND_HALF_UP))
            if abs(number) >= 10 ** (self.ft.flen - self.ft.decimal):
                if self.mode.strict:
                    raise self.out_of_range()
        if mt.is_unsigned(self.ft.flag) and number < 0:
            if self.mode.strict:
                raise self.out_of_range()
            number = 0.0
        if self.ft.tp == mt.TYPE_FLOAT:
            try:
                return _F32.unpack(_F32.pack(number))[0]
            except OverflowError:
                raise self.out_of_range() from None
        if not math.isfinite(number):
            raise self.out_of_range()
        return number

    def decimal(self, value: Any) -> Decimal:
        number = self._number(value, "decimal")
        try:
            number = Decimal(repr(number)) if isinstance(number, float) else Decimal(number)
        except InvalidOperation:
            raise self.incorrect("decimal", value) from None
        if not number.is_finite():
            raise self.out_of_range()
        precision = self.ft.flen if self.ft.flen > 0 else 10
        scale = max(self.ft.decimal, 0)
        with localcontext(DECIMAL_CONTEXT):
            result = number.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
        limit = Decimal(10) ** (precision - scale)
        if abs(result) >= limit or (mt.is_unsigned(self.ft.flag) and result < 0):
            if self.mode.strict:
                raise self.out_of_range()
            largest = limit - Decimal(1).scaleb(-scale)
            lowest = Decimal(0) if mt.is_unsigned(self.ft.flag) else -largest
            result = max(lowest, min(largest, result))
        return result

    def bit(self, value: Any) -> int:
        if isinstance(value, (bytes, bytearray)):
            number = int.from_bytes(bytes(value), "big")
        elif isinstance(value, str) and not _NUMBER.match(value):
            number = int.from_bytes(value.encode("utf-8"), "big")
        else:
            number = int(Decimal(self._number(value, "bit")).quantize(Decimal(1), rounding=ROUND_HALF_UP))
        width = max(self.ft.flen, 1)
        if number < 0 or number >> width:
            if self.mode.strict:
                raise self.too_long()
            return (1 << width) - 1
        return number

    # ---- strings ---------------------------------------------------------------------------

    def _limit(self) -> int:
        return self.ft.flen if self.ft.flen > 0 else 1 << 32

    def text(self, value: Any) -> str:
        if isinstance(value, (bytes, bytearray)):
            try:
                value = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                raise self._fail(er.WRONG_VALUE_FOR_FIELD, f"Incorrect string value '{_text(value)}' for column "
                                 f"'{self.column.name}'") from None
        text = _as_text(value)
        if self.ft.tp in mt.BLOB_TYPES:
            fits = len(text.encode("utf-8")) <= self._limit()
        else:
            fits = len(text) <= self._limit()
        if not fits:
            if self.mode.strict:
                raise self.too_long()
            text = text[: self._limit()]
        return text.rstrip(" ") if self.ft.tp == mt.TYPE_STRING else text

    def binary(self, value: Any) -> bytes:
        data = bytes(value) if isinstance(value, (bytes, bytearray)) else _as_text(value).encode("utf-8")
        if len(data) > self._limit():
            if self.mode.strict:
                raise self.too_long()
            data = data[: self._limit()]
        if self.ft.tp == mt.TYPE_STRING and self.ft.flen > 0:  # BINARY(n) is right-padded with 0x00
            data = data.ljust(self.ft.flen, b"\0")
        return data

    def enum(self, value: Any) -> str:
        elems = list(self.ft.elems or [])
        if isinstance(value, (int, Decimal, float)) and not isinstance(value, bool):
            index = int(value)
            if 1 <= index <= len(elems):
                return elems[index - 1]
        else:
            text = _as_text(value)
            for elem in elems:
                if elem == text:
                    return elem
            for elem in elems:
                if elem.lower() == text.lower():
                    return elem
        if self.mode.strict:
            raise self.truncated()
        return ""

    def set(self, value: Any) -> str:
        elems = list(self.ft.elems or [])
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 0 or value >> len(elems):
                raise self.truncated()
            return ",".join(e for i, e in enumerate(elems) if value >> i & 1)
        chosen = set()
        for part in filter(None, _as_text(value).split(",")):
            match = next((e for e in elems if e.lower() == part.lower()), None)
            if match is None:
                if self.mode.strict:
                    raise self.truncated()
                continue
            chosen.add(match)
        return ",".join(e for e in elems if e in chosen)

    def json(self, value: Any) -> Any:
        if isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode("utf-8", "replace")
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError as exc:
                raise self._fail(er.INVALID_JSON_TEXT, f"Invalid JSON text: {exc}") from None
        if isinstance(value, (dict, list, bool)):
            return value
        if isinstance(value, (int, float, Decimal)):
            raise self._fail(er.INVALID_JSON_TEXT, "Invalid JSON text: not a JSON text, may need CAST")
        raise self.incorrect("json", value)

    def vector(self, value: Any) -> list[float]:
        if isinstance(value, str):
            try:
                items = json.loads(value)
            except ValueError:
                items = None
            if not isinstance(items, list):
                raise self._fail(er.UNKNOWN, f"Invalid vector text: '{value}'")
            value = items
        floats = [float(v) for v in value]
        if self.ft.flen > 0 and len(floats) != self.ft.flen:
            raise self._fail(er.UNKNOWN, f"vector has {len(floats)} dimensions, does not fit VECTOR({self.ft.flen})")
        return floats

    # ---- time ------------------------------------------------------------------------------

    def moment(self, value: Any) -> date | datetime | MySQLTime:
        tp = self.ft.tp
        kind = {mt.TYPE_DATE: "date", mt.TYPE_TIMESTAMP: "timestamp"}.get(tp, "datetime")
        parsed = self._parse_moment(value, kind)
        if isinstance(parsed, MySQLTime):
            if parsed.is_zero and not self.mode.no_zero_date:
                return MySQLTime(0, 0, 0, tp=tp)
            if self.mode.strict:
                raise self.bad_time(kind, value)
            return MySQLTime(0, 0, 0, tp=tp)
        if tp in (mt.TYPE_DATE, mt.TYPE_NEWDATE):
            return parsed.date() if isinstance(parsed, datetime) else parsed
        if not isinstance(parsed, datetime):
            parsed = datetime(parsed.year, parsed.month, parsed.day)
        parsed = _round_micros(parsed, max(self.ft.decimal, 0))
        if tp == mt.TYPE_TIMESTAMP:
            aware = parsed.replace(tzinfo=self.mode.time_zone) if parsed.tzinfo is None else parsed
            aware = aware.astimezone(timezone.utc)
            if not _TIMESTAMP_MIN <= aware <= _TIMESTAMP_MAX:
                if self.mode.strict:
                    raise self.bad_time(kind, value)
                return MySQLTime(0, 0, 0, tp=tp)
            return aware
        return parsed.replace(tzinfo=None) if parsed.tzinfo is not None else parsed

    def _parse_moment(self, value: Any, kind: str) -> date | datetime | MySQLTime:
        if isinstance(value, MySQLTime):
            return value
        if isinstance(value, datetime):
            return value.astimezone(self.mode.time_zone).replace(tzinfo=None) if value.tzinfo else value
        if isinstance(value, date):
            return value
        if isinstance(value, (int, Decimal)) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode("utf-8", "replace")
        if not isinstance(value, str):
            raise self.bad_time(kind, value)
        parts = split_moment(value)
        if parts is None:
            raise self.bad_time(kind, value)
        year, month, day, hour, minute, second, micro = parts
        try:
            return datetime(year, month, day, hour, minute, second, micro)
        except ValueError:
            if not (0 <= month <= 12 and 0 <= day <= 31 and hour < 24 and minute < 60 and second < 60):
                raise self.bad_time(kind, value) from None
            return MySQLTime(year, month, day, hour, minute, second, micro)

    def duration(self, value: Any) -> timedelta:
        if isinstance(value, timedelta):
            result = value
        elif isinstance(value, datetime):
            result = timedelta(hours=value.hour, minutes=value.minute, seconds=value.second,
                               microseconds=value.microsecond)
        else:
            if isinstance(value, (int, Decimal, float)) and not isinstance(value, bool):
                value = str(value)
            if isinstance(value, (bytes, bytearray)):
                value = bytes(value).decode("utf-8", "replace")
            parsed = parse_duration(value) if isinstance(value, str) else None
            if parsed is None:
                raise self.bad_time("time", value)
            result = parsed
        fsp = max(self.ft.decimal, 0)
        step = 10 ** (6 - fsp)
        total = result // timedelta(microseconds=1)
        micros = int((Decimal(total) / step).quantize(Decimal(1), rounding=ROUND_HALF_UP)) * step
        result = timedelta(microseconds=micros)
        if abs(result) > _MAX_TIME:
            if self.mode.strict:
                raise self.bad_time("time", value)
            result = _MAX_TIME if result > timedelta() else -_MAX_TIME
        return result


def _as_text(value: Any) -> str:
    """MySQL's string form of a value (what CONCAT or a string column receives)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return format(value, ".15g") if value != int(value) or abs(value) >= 1e15 else str(int(value))
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return text + (f".{value.microsecond:06d}" if value.microsecond else "")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return _duration_text(value, 6 if value.microseconds else 0)
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(", ", ": "))
    return str(value)


def _text(value: Any) -> str:
    return _as_text(value)[:128]


def split_moment(text: str) -> tuple[int, int, int, int, int, int, int] | None:
    match = _DATETIME.match(text)
    if match is not None:
        year_text = match.group(1)
        year = int(year_text)
        if len(year_text) == 2:
            year += 2000 if year < 70 else 1900
        month, day = int(match.group(2)), int(match.group(3))
        hour, minute, second = (int(match.group(i) or 0) for i in (4, 5, 6))
        micro = int((match.group(7) or "")[:6].ljust(6, "0"))
        return year, month, day, hour, minute, second, micro
    match = _DATETIME_DIGITS.match(text)
    if match is None:
        return None
    digits = match.group(1)
    if len(digits) in (6, 12):  # YYMMDD[HHMMSS]
        year = int(digits[:2])
        digits = str(year + (2000 if year < 70 else 1900)) + digits[2:]
    micro = int((match.group(2) or "")[:6].ljust(6, "0"))
    hour, minute, second = (int(digits[8:10] or 0), int(digits[10:12] or 0), int(digits[12:14] or 0))
    return int(digits[:4]), int(digits[4:6]), int(digits[6:8]), hour, minute, second, micro


def parse_duration(text: str) -> timedelta | None:
    match = _TIME.match(text)
    if match is not None:
        sign, days, hours, minutes, seconds, frac = match.groups()
        if seconds is None:  # 'HH:MM'
            seconds = "0"
        micros = int((frac or "")[:6].ljust(6, "0"))
        value = timedelta(days=int(days or 0), hours=int(hours), minutes=int(minutes), seconds=int(seconds),
                          microseconds=micros)
        return -value if sign else value
    match = _TIME_DIGITS.match(text)
    if match is None:
        return None
    sign, digits, frac = match.groups()
    digits = digits.rjust(6, "0")
    value = timedelta(hours=int(digits[:-4]), minutes=int(digits[-4:-2]), seconds=int(digits[-2:]),
                      microseconds=int((frac or "")[:6].ljust(6, "0")))
    if int(digits[-4:-2]) > 59 or int(digits[-2:]) > 59:
        return None
    return -value if sign else value


def _duration_text(value: timedelta, fsp: int) -> str:
    total = value // timedelta(microseconds=1)
    sign = "-" if total < 0 else ""
    total = abs(total)
    seconds, micros = divmod(total, 1_000_000)
    text = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return text + (f".{micros:06d}"[: fsp + 1] if fsp else "")


def _round_micros(value: datetime, fsp: int) -> datetime:
    if fsp >= 6:
        return value
    step = 10 ** (6 - fsp)
    micros = int((Decimal(value.microsecond) / step).quantize(Decimal(1), rounding=ROUND_HALF_UP)) * step
    return value.replace(microsecond=0) + timedelta(microseconds=micros)


def value_text(value: Any) -> str:
    """The text MySQL shows for a stored value (error messages, SHOW CREATE TABLE defaults)."""
    return _as_text(value)


def duration_text(value: timedelta, fsp: int) -> str:
    return _duration_text(value, fsp)
