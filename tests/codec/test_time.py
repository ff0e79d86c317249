"""Packed time and TIME durations: upstream vectors (docs/encoding.md#literal-bytes-from-upstream-tests #13/#14, docs/encoding.md#vectors-derived-from-the-rules D13/D15) and round trips."""

from datetime import date, datetime, timedelta, timezone

import pytest

from tidelake.codec.mysql_types import TYPE_DATE, TYPE_DATETIME, TYPE_TIMESTAMP
from tidelake.codec.mytime import (
    MySQLTime,
    duration_from_nanos,
    duration_to_nanos,
    iso,
    pack_time,
    unpack_time,
)
from tidelake.errors import InputError

UTC = timezone.utc


def test_upstream_timestamp_vector() -> None:
    # docs/encoding.md#literal-bytes-from-upstream-tests #13: TIMESTAMP(6) '2011-11-10 11:11:11.999999' (rowcodec_test.go)
    packed = 1840446893366133311
    value = unpack_time(packed, TYPE_TIMESTAMP, 6)
    assert value == datetime(2011, 11, 10, 11, 11, 11, 999999, tzinfo=UTC)
    assert pack_time(value, TYPE_TIMESTAMP, 6) == packed
    assert iso(value, 6) == "2011-11-10 11:11:11.999999Z"


def test_upstream_duration_vector() -> None:
    # docs/encoding.md#literal-bytes-from-upstream-tests #14: TIME '4:00:00' is 14400000000000 ns
    assert duration_from_nanos(14400000000000) == timedelta(hours=4)
    assert duration_to_nanos(timedelta(hours=4)) == 14400000000000
    assert iso(timedelta(hours=4)) == "04:00:00"


def test_derived_vectors() -> None:
    # docs/encoding.md#vectors-derived-from-the-rules D13 and D15
    assert pack_time(datetime(2024, 1, 2, 3, 4, 5), TYPE_DATETIME, 0) == 0x19B2443105000000
    assert pack_time(date(2024, 1, 2), TYPE_DATE, 0).to_bytes(8, "little") == bytes.fromhex("000000000044b219")
    assert duration_to_nanos(timedelta(seconds=-1)) == -1_000_000_000


def test_zero_date_convention() -> None:
    zero = unpack_time(0, TYPE_DATETIME, 0)
    assert isinstance(zero, MySQLTime) and zero.is_zero
    assert str(zero) == "0000-00-00 00:00:00"
    assert iso(zero, 3) == "0000-00-00 00:00:00.000"
    assert unpack_time(0, TYPE_DATE, 0).text() == "0000-00-00"
    assert pack_time(zero, TYPE_DATETIME, 0) == 0


def test_zero_in_date_parts_kept_exactly() -> None:
    partial = MySQLTime(2020, 0, 15, tp=TYPE_DATE)
    packed = pack_time(partial, TYPE_DATE, 0)
    assert unpack_time(packed, TYPE_DATE, 0) == partial
    assert str(partial) == "2020-00-15"


@pytest.mark.parametrize("fsp", range(7))
def test_datetime_round_trip_each_fsp(fsp: int) -> None:
    micro = int("123456"[:fsp].ljust(6, "0")) if fsp else 0
    for value in (
        datetime(2024, 2, 29, 23, 59, 59, micro),
        datetime(1000, 1, 1, 0, 0, 0, micro),
        datetime(9999, 12, 31, 23, 59, 59, micro),
        datetime(1970, 1, 1, 0, 0, 0, micro),
    ):
        packed = pack_time(value, TYPE_DATETIME, fsp)
        assert unpack_time(packed, TYPE_DATETIME, fsp) == value
        assert iso(value, fsp) == value.strftime("%Y-%m-%d %H:%M:%S") + ("." + f"{micro:06d}"[:fsp] if fsp else "")


def test_leap_days_and_sort_order() -> None:
    days = [date(2000, 2, 29), date(2024, 2, 29), date(1904, 2, 29), date(2023, 12, 31), date(2024, 1, 1)]
    packed = [pack_time(d, TYPE_DATE, 0) for d in days]
    assert [unpack_time(p, TYPE_DATE, 0) for p in packed] == days
    assert sorted(packed) == [pack_time(d, TYPE_DATE, 0) for d in sorted(days)]


def test_timestamp_is_stored_in_utc() -> None:
    plus2 = timezone(timedelta(hours=2))
    local = datetime(2024, 3, 1, 1, 30, tzinfo=plus2)
    packed = pack_time(local, TYPE_TIMESTAMP, 0)
    assert packed == pack_time(datetime(2024, 2, 29, 23, 30), TYPE_DATETIME, 0)
    assert unpack_time(packed, TYPE_TIMESTAMP, 0) == local
    assert unpack_time(packed, TYPE_TIMESTAMP, 0).tzinfo == UTC


def test_fraction_rounds_half_up_with_carry() -> None:
    packed = pack_time(datetime(2023, 12, 31, 23, 59, 59, 999_500), TYPE_DATETIME, 3)
    assert unpack_time(packed, TYPE_DATETIME, 3) == datetime(2024, 1, 1, 0, 0, 0)
    packed = pack_time(datetime(2023, 1, 1, 0, 0, 0, 123_449), TYPE_DATETIME, 4)
    assert unpack_time(packed, TYPE_DATETIME, 4) == datetime(2023, 1, 1, 0, 0, 0, 123_400)


@pytest.mark.parametrize(
    "delta",
    [
        timedelta(0),
        timedelta(microseconds=-1),
        timedelta(seconds=-1),
        timedelta(hours=-838, minutes=-59, seconds=-59),
        timedelta(hours=838, minutes=59, seconds=59, microseconds=999999),
        timedelta(days=2, microseconds=5),
    ],
)
def test_duration_round_trip(delta: timedelta) -> None:
    assert duration_from_nanos(duration_to_nanos(delta)) == delta


def test_duration_text() -> None:
    assert iso(timedelta(seconds=-1)) == "-00:00:01"
    assert iso(timedelta(hours=-838, minutes=-59, seconds=-59)) == "-838:59:59"
    assert iso(timedelta(hours=25, microseconds=500), 3) == "25:00:00.000"
    assert iso(timedelta(minutes=-1, microseconds=-250000), 2) == "-00:01:00.25"


def test_bad_inputs_raise() -> None:
    with pytest.raises(InputError, match="no timezone"):
        pack_time(datetime(2024, 1, 1), TYPE_TIMESTAMP, 0)
    with pytest.raises(InputError, match="carries a timezone"):
        pack_time(datetime(2024, 1, 1, tzinfo=UTC), TYPE_DATETIME, 0)
    with pytest.raises(InputError, match="time part"):
        pack_time(datetime(2024, 1, 1, 1), TYPE_DATE, 0)
    with pytest.raises(InputError, match="not a packed time type"):
        unpack_time(1, 3, 0)
    with pytest.raises(InputError, match="impossible time of day"):
        unpack_time((25 << 12) << 24, TYPE_DATETIME, 0)
    with pytest.raises(InputError, match="sub-microsecond"):
        duration_from_nanos(1)
    with pytest.raises(InputError, match="0..6"):
        pack_time(date(2024, 1, 1), TYPE_DATE, 7)
