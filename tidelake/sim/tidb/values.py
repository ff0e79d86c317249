"""Seeded random column values in the codec's Python value model, one generator per TiDB type.

Workloads need values that exercise every encoding branch (compact ints of each width, unsigned
above 2^63, fsp rounding, JSON nesting, multi-byte UTF-8), yet stay reproducible from a seed.
"""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.schema import FieldType

_INT_BITS = {mt.TYPE_TINY: 8, mt.TYPE_SHORT: 16, mt.TYPE_INT24: 24, mt.TYPE_LONG: 32, mt.TYPE_LONGLONG: 64}
_TEXT_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-éß東京🙂"
_EPOCH = datetime(1970, 1, 2)


def random_value(ft: FieldType, rng: random.Random) -> Any:
    """A value valid for a column of type `ft` (never NULL; callers decide about NULLs)."""
    tp = ft.tp
    if tp in _INT_BITS:
        bits = _INT_BITS[tp]
        if ft.flag & mt.UNSIGNED_FLAG:
            return rng.choice((0, 1, 255, rng.getrandbits(bits), (1 << bits) - 1))
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        return rng.choice((0, -1, 127, -128, rng.randint(low, high), low, high))
    if tp == mt.TYPE_FLOAT:
        return rng.randint(-(1 << 20), 1 << 20) / 4  # exact in float32, so reads compare equal
    if tp == mt.TYPE_DOUBLE:
        return rng.uniform(-1e12, 1e12)
    if tp == mt.TYPE_NEWDECIMAL:
        int_digits = max(ft.flen - ft.decimal, 0)
        unscaled = rng.randint(-(10 ** (int_digits + ft.decimal)) + 1, 10 ** (int_digits + ft.decimal) - 1)
        return Decimal(unscaled).scaleb(-ft.decimal)
    if tp == mt.TYPE_DATE:
        return date(2000, 1, 1) + timedelta(days=rng.randint(0, 12000))
    if tp in (mt.TYPE_DATETIME, mt.TYPE_TIMESTAMP):
        value = _EPOCH + timedelta(seconds=rng.randint(0, 2_000_000_000), microseconds=_micros(ft, rng))
        return value.replace(tzinfo=timezone.utc) if tp == mt.TYPE_TIMESTAMP else value
    if tp == mt.TYPE_DURATION:
        return timedelta(seconds=rng.randint(-3_000_000, 3_000_000), microseconds=_micros(ft, rng))
    if tp == mt.TYPE_YEAR:
        return rng.randint(1901, 2155)
    if tp == mt.TYPE_BIT:
        return rng.getrandbits(max(ft.flen, 1))
    if tp == mt.TYPE_JSON:
        n = rng.randint(0, 1000)
        return {"n": n, "tag": _text(rng, 8), "ok": n % 2 == 0, "list": [n, n / 4, None], "nested": {"x": -n}}
    if tp == mt.TYPE_ENUM:
        return rng.choice(ft.elems)
    if tp == mt.TYPE_SET:
        return ",".join(e for e in ft.elems if rng.random() < 0.5)
    if tp in mt.STRING_TYPES:
        limit = ft.flen if 0 < ft.flen < 256 else 200
        if mt.is_binary_string(ft):
            size = limit if tp == mt.TYPE_STRING else rng.randint(0, limit)
            return rng.randbytes(size)
        return _text(rng, rng.randint(0, limit))
    raise ValueError(f"no value generator for MySQL type {tp}")


def _micros(ft: FieldType, rng: random.Random) -> int:
    fsp = max(ft.decimal, 0)
    if fsp == 0:
        return 0
    step = 10 ** (6 - fsp)
    return rng.randrange(0, 1_000_000, step)


def _text(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(_TEXT_ALPHABET) for _ in range(length))
