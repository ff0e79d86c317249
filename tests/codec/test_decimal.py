"""MyDecimal binary format: upstream vectors (docs/encoding.md#literal-bytes-from-upstream-tests #12, docs/encoding.md#vectors-derived-from-the-rules D12) and round trips."""

import random
from decimal import Decimal

import pytest

from tidelake.codec.decimal import (
    decimal_bin_size,
    decode_decimal_bin,
    encode_decimal_bin,
)
from tidelake.errors import InputError

VECTORS = [
    # (value, precision, frac, bytes) — docs/encoding.md#literal-bytes-from-upstream-tests #12 from mydecimal.go, docs/encoding.md#vectors-derived-from-the-rules D12 derived
    ("1234567890.1234", 14, 4, "810dfb38d204d2"),
    ("-1234567890.1234", 14, 4, "7ef204c72dfb2d"),
    ("12.34", 6, 2, "800c22"),
    ("-12.34", 6, 2, "7ff3dd"),
    ("0", 10, 0, "8000000000"),
    ("11.9900", 6, 4, "8b26ac"),
]


@pytest.mark.parametrize(("text", "precision", "frac", "hexbytes"), VECTORS)
def test_upstream_vectors(text: str, precision: int, frac: int, hexbytes: str) -> None:
    data = bytes.fromhex(hexbytes)
    assert encode_decimal_bin(Decimal(text), precision, frac) == data
    value, end = decode_decimal_bin(b"\xaa" + data + b"\xbb", 1, precision, frac)
    assert value == Decimal(text)
    assert value.as_tuple().exponent == -frac
    assert end == 1 + len(data)


@pytest.mark.parametrize(
    ("precision", "frac", "size"),
    [(14, 4, 7), (6, 2, 3), (10, 0, 5), (65, 30, 30), (9, 0, 4), (18, 9, 8), (1, 0, 1), (30, 30, 14), (81, 0, 36)],
)
def test_bin_size(precision: int, frac: int, size: int) -> None:
    assert decimal_bin_size(precision, frac) == size
    assert len(encode_decimal_bin(Decimal(0), precision, frac)) == size


def _random_value(rng: random.Random, precision: int, frac: int) -> Decimal:
    intg = precision - frac
    int_digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, intg)))
    frac_digits = "".join(rng.choice("0123456789") for _ in range(frac))
    sign = rng.choice(["", "-"])
    return Decimal(f"{sign}{int_digits or '0'}{'.' + frac_digits if frac else ''}")


def test_round_trip_many_shapes() -> None:
    rng = random.Random(7)
    shapes = [(p, f) for p in (1, 2, 8, 9, 10, 17, 18, 19, 27, 38, 39, 65) for f in sorted({0, 1, p // 2, min(p, 30)})]
    for precision, frac in shapes:
        for _ in range(20):
            value = _random_value(rng, precision, frac)
            data = encode_decimal_bin(value, precision, frac)
            decoded, end = decode_decimal_bin(data, 0, precision, frac)
            assert decoded == value, (precision, frac, value)
            assert end == len(data) == decimal_bin_size(precision, frac)


def test_max_precision_extremes() -> None:
    biggest = Decimal("9" * 35 + "." + "9" * 30)
    for value in (biggest, biggest.copy_negate(), Decimal("0E-30"), Decimal("-0." + "0" * 29 + "1")):
        decoded, _ = decode_decimal_bin(encode_decimal_bin(value, 65, 30), 0, 65, 30)
        assert decoded == value


def test_bytes_sort_like_values() -> None:
    values = sorted(Decimal(v) for v in ["-999.99", "-1.5", "-0.01", "0", "0.01", "1.5", "999.99"])
    encoded = [encode_decimal_bin(v, 5, 2) for v in values]
    assert encoded == sorted(encoded)


def test_zero_is_never_negative() -> None:
    assert encode_decimal_bin(Decimal("-0.00"), 5, 2) == encode_decimal_bin(Decimal("0"), 5, 2)
    value, _ = decode_decimal_bin(encode_decimal_bin(Decimal("-0"), 5, 2), 0, 5, 2)
    assert not value.is_signed()


def test_extra_fraction_rounds_half_up() -> None:
    assert decode_decimal_bin(encode_decimal_bin(Decimal("1.235"), 5, 2), 0, 5, 2)[0] == Decimal("1.24")
    assert decode_decimal_bin(encode_decimal_bin(Decimal("-1.235"), 5, 2), 0, 5, 2)[0] == Decimal("-1.24")


def test_overflow_and_bad_input_raise() -> None:
    with pytest.raises(InputError, match="does not fit"):
        encode_decimal_bin(Decimal("1000"), 5, 2)
    with pytest.raises(InputError, match="not finite"):
        encode_decimal_bin(Decimal("NaN"), 5, 2)
    with pytest.raises(InputError, match="needs 7 bytes"):
        decode_decimal_bin(bytes.fromhex("810dfb38d2"), 0, 14, 4)
    with pytest.raises(InputError, match="precision"):
        decimal_bin_size(5, 6)
    with pytest.raises(InputError, match="corrupt decimal"):
        decode_decimal_bin(bytes.fromhex("ffffffff"), 0, 9, 0)
