"""TiDB's MyDecimal binary format (the bytes after `precision frac` in a row value or key).

Implements docs/encoding.md#mydecimal-binary-format (pingcap/tidb `pkg/types/mydecimal.go` WriteBin/FromBin)
with exact `decimal.Decimal` arithmetic: values are rebuilt from their digit strings, never
through floats. Owner: the codec.
"""

from collections.abc import Callable
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from functools import lru_cache

from tidelake.errors import InputError

# docs/encoding.md#mydecimal-binary-format: bytes needed for 0..9 leftover digits
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_DIGITS_PER_WORD = 9
_WORD_SIZE = 4
# MyDecimal holds at most 9 words of 9 digits; MySQL limits DECIMAL to 65 digits and 30 decimals.
MAX_BIN_PRECISION = 81
_INVERT = bytes(255 - b for b in range(256))  # one's complement of each byte, for bytes.translate
# A context wide enough that quantize/round never raise for any legal DECIMAL.
_EXACT = Context(prec=200, rounding=ROUND_HALF_UP)


def _check_shape(precision: int, frac: int) -> None:
    if not 1 <= precision <= MAX_BIN_PRECISION or not 0 <= frac <= precision:
        raise InputError(f"invalid decimal precision/frac ({precision},{frac}): need 1<=precision<=81 and 0<=frac<=precision")


def decimal_bin_size(precision: int, frac: int) -> int:
    """Bytes taken by a value of DECIMAL(precision, frac) (docs/encoding.md#mydecimal-binary-format `DecimalBinSize`)."""
    _check_shape(precision, frac)
    intg = precision - frac
    return (
        (intg // _DIGITS_PER_WORD) * _WORD_SIZE
        + _DIG2BYTES[intg % _DIGITS_PER_WORD]
        + (frac // _DIGITS_PER_WORD) * _WORD_SIZE
        + _DIG2BYTES[frac % _DIGITS_PER_WORD]
    )


def _group_sizes(precision: int, frac: int) -> list[tuple[int, int]]:
    """(digits, bytes) of each group in storage order: leading partial int word, int words, frac words, trailing partial."""
    intg = precision - frac
    groups: list[tuple[int, int]] = []
    if intg % _DIGITS_PER_WORD:
        groups.append((intg % _DIGITS_PER_WORD, _DIG2BYTES[intg % _DIGITS_PER_WORD]))
    groups += [(_DIGITS_PER_WORD, _WORD_SIZE)] * (intg // _DIGITS_PER_WORD)
    groups += [(_DIGITS_PER_WORD, _WORD_SIZE)] * (frac // _DIGITS_PER_WORD)
    if frac % _DIGITS_PER_WORD:
        groups.append((frac % _DIGITS_PER_WORD, _DIG2BYTES[frac % _DIGITS_PER_WORD]))
    return groups


def decode_decimal_bin(buf: bytes, offset: int, precision: int, frac: int) -> tuple[Decimal, int]:
    """Read one MyDecimal at `offset`; returns the value (scale = frac) and the offset after it."""
    return decimal_bin_decoder(precision, frac)(buf, offset)


@lru_cache(maxsize=256)
def decimal_bin_decoder(precision: int, frac: int) -> Callable[[bytes, int], tuple[Decimal, int]]:
    """`decode_decimal_bin` for one (precision, frac), with the word layout worked out once:
    row decoders read many values of one column."""
    size = decimal_bin_size(precision, frac)
    groups = []
    pos = 0
    for ndigits, nbytes in _group_sizes(precision, frac):
        groups.append((pos, pos + nbytes, ndigits, 10**ndigits))
        pos += nbytes

    def decode(buf: bytes, offset: int) -> tuple[Decimal, int]:
        if offset < 0 or len(buf) - offset < size:
            raise InputError(
                f"decimal ({precision},{frac}) needs {size} bytes at offset {offset}, only {max(len(buf) - offset, 0)} left"
            )
        raw = bytearray(buf[offset : offset + size])
        # docs/encoding.md#mydecimal-binary-format FromBin: sign bit clear = negative; flip it, then undo the one's complement.
        negative = (raw[0] & 0x80) == 0
        raw[0] ^= 0x80
        if negative:
            raw = raw.translate(_INVERT)
        digits = 0
        for start, stop, ndigits, limit in groups:
            word = int.from_bytes(raw[start:stop], "big")
            if word >= limit:
                raise InputError(
                    f"corrupt decimal ({precision},{frac}) at offset {offset}: group {word} exceeds {ndigits} digits"
                )
            digits = digits * limit + word
        # the digits with exponent -frac: the value's scale is the column's frac, -0 reads as 0
        sign = "-" if negative and digits else ""
        return Decimal(f"{sign}{digits}E-{frac}" if frac else f"{sign}{digits}"), offset + size

    return decode


def encode_decimal_bin(value: Decimal, precision: int, frac: int) -> bytes:
    """MyDecimal bytes of `value` as DECIMAL(precision, frac).

    Extra fraction digits are rounded half-up, as TiDB does when it converts a value for a
    DECIMAL column; a value whose integer part does not fit raises InputError.
    """
    _check_shape(precision, frac)
    if not isinstance(value, Decimal):
        raise InputError(f"decimal value must be decimal.Decimal, got {type(value).__name__}")
    if not value.is_finite():
        raise InputError(f"decimal value {value} is not finite")
    try:
        scaled = value.quantize(Decimal(1).scaleb(-frac), context=_EXACT)
    except InvalidOperation as exc:
        raise InputError(f"decimal value {value} cannot be scaled to {frac} fraction digits") from exc
    sign, digit_tuple, _ = scaled.as_tuple()
    text = "".join(map(str, digit_tuple)).zfill(frac + 1)
    int_text, frac_text = text[: len(text) - frac], text[len(text) - frac :]
    int_text = int_text.lstrip("0")
    intg = precision - frac
    if len(int_text) > intg:
        raise InputError(f"decimal value {value} does not fit DECIMAL({precision},{frac})")
    all_digits = int_text.zfill(intg) + frac_text
    out = bytearray()
    pos = 0
    for ndigits, nbytes in _group_sizes(precision, frac):
        out += int(all_digits[pos : pos + ndigits]).to_bytes(nbytes, "big")
        pos += ndigits
    negative = bool(sign) and any(digit_tuple)
    if negative:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)
