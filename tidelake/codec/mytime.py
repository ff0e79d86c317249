"""MySQL DATE/DATETIME/TIMESTAMP packed form and TIME durations (docs/encoding.md#packed-time).

Value convention (shared with the row codec):
- DATE -> `datetime.date`; DATETIME -> naive `datetime.datetime`;
- TIMESTAMP -> `datetime.datetime` aware in UTC (TiDB stores TIMESTAMP as UTC wall time, docs/encoding.md#packed-time);
- TIME -> `datetime.timedelta` (may be negative or exceed 24h, up to ±838:59:59).
- Values Python's calendar cannot hold — the zero date '0000-00-00', or a zero month/day/year that
  MySQL accepts without NO_ZERO_DATE/NO_ZERO_IN_DATE — decode to `MySQLTime`, which keeps every
  component and prints as MySQL does. Nothing is coerced to a nearby valid date. Owner: the codec.
"""

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from tidelake.codec.mysql_types import (
    TYPE_DATE,
    TYPE_DATETIME,
    TYPE_NEWDATE,
    TYPE_TIMESTAMP,
)
from tidelake.errors import InputError

MAX_FSP = 6
_NANOS_PER_MICRO = 1000
_MICROS_PER_SECOND = 1_000_000
_DATE_TYPES = (TYPE_DATE, TYPE_NEWDATE)
_PACKED_TYPES = (TYPE_DATE, TYPE_NEWDATE, TYPE_DATETIME, TYPE_TIMESTAMP)


@dataclass(frozen=True)
class MySQLTime:
    """A DATE/DATETIME/TIMESTAMP that Python's datetime cannot represent (zero date or zero parts)."""

    year: int
    month: int
    day: int
    hour: int = 0
    minute: int = 0
    second: int = 0
    microsecond: int = 0
    tp: int = TYPE_DATETIME

    @property
    def is_zero(self) -> bool:
        return not any((self.year, self.month, self.day, self.hour, self.minute, self.second, self.microsecond))

    def text(self, fsp: int = 0) -> str:
        """MySQL's text form, e.g. '0000-00-00' or '0000-00-00 00:00:00.000'."""
        day_part = f"{self.year:04d}-{self.month:02d}-{self.day:02d}"
        if self.tp in _DATE_TYPES:
            return day_part
        return f"{day_part} {self.hour:02d}:{self.minute:02d}:{self.second:02d}{_fraction(self.microsecond, fsp)}"

    def __str__(self) -> str:
        return self.text()


def _check_type(tp: int) -> None:
    if tp not in _PACKED_TYPES:
        raise InputError(f"type code {tp} is not a packed time type (DATE=10, DATETIME=12, TIMESTAMP=7)")


def _check_fsp(fsp: int) -> None:
    if not 0 <= fsp <= MAX_FSP:
        raise InputError(f"fractional seconds precision {fsp} is outside 0..6")


def unpack_time(packed: int, tp: int, fsp: int) -> date | datetime | MySQLTime:
    """Decode TiDB's packed uint64 time (docs/encoding.md#packed-time `FromPackedUint`) as the column type says."""
    _check_type(tp)
    _check_fsp(fsp)
    if not 0 <= packed < 1 << 64:
        raise InputError(f"packed time {packed} is not a uint64")
    micro = packed & 0xFFFFFF
    ymdhms = packed >> 24
    ymd = ymdhms >> 17
    hms = ymdhms & 0x1FFFF
    day = ymd & 31
    year, month = divmod(ymd >> 5, 13)
    second = hms & 63
    minute = (hms >> 6) & 63
    hour = hms >> 12
    if micro >= _MICROS_PER_SECOND or hour > 23 or minute > 59 or second > 59:
        raise InputError(f"packed time {packed:#x} holds an impossible time of day {hour}:{minute}:{second}.{micro}")
    if tp in _DATE_TYPES and (hour or minute or second or micro):
        raise InputError(f"packed DATE {packed:#x} has a time part {hour}:{minute}:{second}.{micro}")
    try:
        if tp in _DATE_TYPES:
            return date(year, month, day)
        value = datetime(year, month, day, hour, minute, second, micro)
    except ValueError:
        if year > 9999 or month > 12 or day > 31:
            raise InputError(f"packed time {packed:#x} decodes to an impossible date {year}-{month}-{day}") from None
        return MySQLTime(year, month, day, hour, minute, second, micro, tp)
    if tp == TYPE_TIMESTAMP:
        return value.replace(tzinfo=timezone.utc)
    return value


def _round_to_fsp(value: datetime, fsp: int) -> datetime:
    """TiDB rounds fractional seconds half-up to the column's fsp when it stores a value."""
    unit = 10 ** (MAX_FSP - fsp)
    rounded = (value.microsecond + unit // 2) // unit * unit
    return value.replace(microsecond=0) + timedelta(microseconds=rounded)


def pack_time(value: date | datetime | MySQLTime, tp: int, fsp: int) -> int:
    """Encode a value for a DATE/DATETIME/TIMESTAMP column as TiDB's packed uint64 (docs/encoding.md#packed-time `ToPackedUint`).

    TIMESTAMP needs an aware datetime (converted to UTC); DATE/DATETIME need naive values, and a
    DATE accepts a datetime only at midnight. Fractional seconds are rounded half-up to `fsp`.
    """
    _check_type(tp)
    _check_fsp(fsp)
    if isinstance(value, MySQLTime):
        parts = (value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond)
    elif isinstance(value, datetime):
        if tp == TYPE_TIMESTAMP:
            if value.tzinfo is None:
                raise InputError(f"TIMESTAMP value {value} has no timezone; pass an aware datetime")
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        elif value.tzinfo is not None:
            raise InputError(f"DATE/DATETIME value {value} carries a timezone; MySQL stores them without one")
        if tp in _DATE_TYPES:
            if value.time() != datetime.min.time():
                raise InputError(f"DATE value {value} has a time part")
        else:
            value = _round_to_fsp(value, fsp)
        parts = (value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond)
    elif isinstance(value, date):
        if tp == TYPE_TIMESTAMP:
            raise InputError(f"TIMESTAMP needs an aware datetime, got date {value}")
        parts = (value.year, value.month, value.day, 0, 0, 0, 0)
    else:
        raise InputError(f"cannot pack {type(value).__name__} as a MySQL time")
    year, month, day, hour, minute, second, micro = parts
    ymd = ((year * 13 + month) << 5) | day
    hms = (hour << 12) | (minute << 6) | second
    return ((ymd << 17) | hms) << 24 | micro


def duration_from_nanos(n: int) -> timedelta:
    """TIME value from the int64 nanoseconds TiDB stores (docs/encoding.md#value-bytes-per-column-type, docs/encoding.md#packed-time)."""
    micros, rest = divmod(n, _NANOS_PER_MICRO)
    if rest:
        raise InputError(f"TIME value {n} ns has sub-microsecond digits, which MySQL TIME (fsp<=6) cannot hold")
    return timedelta(microseconds=micros)


def duration_to_nanos(d: timedelta) -> int:
    """Exact int64 nanoseconds of a TIME value (integer arithmetic, no float seconds)."""
    return ((d.days * 86400 + d.seconds) * _MICROS_PER_SECOND + d.microseconds) * _NANOS_PER_MICRO


def _fraction(micro: int, fsp: int | None) -> str:
    if fsp is None:
        fsp = MAX_FSP if micro else 0
    if fsp == 0:
        return ""
    return "." + f"{micro:06d}"[:fsp]


def iso(value: date | datetime | timedelta | MySQLTime, fsp: int | None = None) -> str:
    """MySQL-style text for CLI output: 'YYYY-MM-DD', 'YYYY-MM-DD HH:MM:SS[.f]', '[-]HH:MM:SS[.f]'.

    `fsp` fixes the number of fractional digits (the column's Decimal); None prints 6 digits when
    the value has microseconds, else none. Aware datetimes print in UTC with a trailing 'Z'.
    """
    if isinstance(value, MySQLTime):
        return value.text(fsp or 0)
    if isinstance(value, datetime):
        suffix = ""
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
            suffix = "Z"
        return f"{value:%Y-%m-%d %H:%M:%S}{_fraction(value.microsecond, fsp)}{suffix}"
    if isinstance(value, date):
        return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    if isinstance(value, timedelta):
        total = value.days * 86400 * _MICROS_PER_SECOND + value.seconds * _MICROS_PER_SECOND + value.microseconds
        sign = "-" if total < 0 else ""
        seconds, micro = divmod(abs(total), _MICROS_PER_SECOND)
        hours, rest = divmod(seconds, 3600)
        minutes, secs = divmod(rest, 60)
        return f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}{_fraction(micro, fsp)}"
    raise InputError(f"cannot format {type(value).__name__} as a MySQL time")
