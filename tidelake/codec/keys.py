"""TiDB table keys: record and index keys, table spans, and the raw <-> region-space mapping.

Raw keys are what TiDB writes and what CDC events carry; PD regions and CDC request spans use
`EncodeBytes(raw)` ("region space", docs/encoding.md#raw-keys-and-encoded-keys-pd-regions-cdc). Keeping both here, with names
that say which space they are in, is what stops the puller comparing keys across spaces.
Owner: the codec.
"""

from __future__ import annotations

import struct

from tidelake.codec.datum import INT_FLAG, Datum, decode_datum, decode_datums
from tidelake.codec.memcomparable_bytes import decode_bytes, encode_bytes
from tidelake.codec.number import decode_int, encode_int
from tidelake.errors import InputError

# docs/encoding.md#record-row-key
TABLE_PREFIX = b"t"
RECORD_SEP = b"_r"
INDEX_SEP = b"_i"
TABLE_PREFIX_LEN = 9  # 't' + EncodeInt(tid); also TableSplitKeyLen
RECORD_PREFIX_LEN = 11  # 't' + EncodeInt(tid) + '_r'
INT_HANDLE_KEY_LEN = 19  # RecordRowKeyLen
INDEX_PREFIX_LEN = 19  # 't' + EncodeInt(tid) + '_i' + EncodeInt(index id)

MAX_INT48 = (1 << 48) - 1
# docs/wire.md#table-id, docs/encoding.md#meta-keys-schema-storage: mysql.tidb_ddl_job / tidb_ddl_history
DDL_JOB_TABLE_ID = MAX_INT48 - 1
DDL_HISTORY_TABLE_ID = MAX_INT48 - 3

_T = TABLE_PREFIX[0]
_INT_RECORD_KEY = struct.Struct(">xQ2xQ")  # 't' tid '_r' handle, both EncodeInt (docs/encoding.md#record-row-key)
_INT64_BIAS = 1 << 63

# docs/encoding.md#record-row-key: kv.NewCommonHandle pads shorter handles so they never look like ints.
COMMON_HANDLE_MIN_LEN = 9


def table_prefix(table_id: int) -> bytes:
    """Raw `'t' + EncodeInt(table_id)`: the common prefix of all keys of one physical table."""
    return TABLE_PREFIX + encode_int(table_id)


def table_split_key(table_id: int) -> bytes:
    """Region-space key where TiDB splits regions at a table boundary (docs/encoding.md#raw-keys-and-encoded-keys-pd-regions-cdc, vector D6)."""
    return encode_bytes(table_prefix(table_id))


def record_prefix(table_id: int) -> bytes:
    return table_prefix(table_id) + RECORD_SEP


def record_key(table_id: int, handle: int | bytes) -> bytes:
    """Raw row key (docs/encoding.md#record-row-key): an int handle, or the already-encoded bytes of a common handle."""
    if isinstance(handle, int):
        return record_prefix(table_id) + encode_int(handle)
    return record_prefix(table_id) + pad_common_handle(handle)


def pad_common_handle(encoded: bytes) -> bytes:
    """`kv.NewCommonHandle` zero-pads short handles to 9 bytes (docs/encoding.md#record-row-key)."""
    if len(encoded) < COMMON_HANDLE_MIN_LEN:
        return encoded + b"\x00" * (COMMON_HANDLE_MIN_LEN - len(encoded))
    return encoded


def index_prefix(table_id: int, index_id: int) -> bytes:
    return table_prefix(table_id) + INDEX_SEP + encode_int(index_id)


def index_key(table_id: int, index_id: int, encoded_values: bytes) -> bytes:
    """Raw index key (docs/encoding.md#index-key); `encoded_values` are the flagged key datums, plus any handle suffix."""
    return index_prefix(table_id, index_id) + encoded_values


def is_table_key(key: bytes) -> bool:
    return len(key) >= TABLE_PREFIX_LEN and key[:1] == TABLE_PREFIX


def is_record_key(key: bytes) -> bool:
    """`IsRecordKey` (docs/encoding.md#record-row-key)."""
    return len(key) > RECORD_PREFIX_LEN and key[:1] == TABLE_PREFIX and key[9:11] == RECORD_SEP


def is_index_key(key: bytes) -> bool:
    return len(key) > RECORD_PREFIX_LEN and key[:1] == TABLE_PREFIX and key[9:11] == INDEX_SEP


def table_id_of(key: bytes) -> int:
    """Physical table (or partition) id of a raw table key (`DecodeTableID`)."""
    if not is_table_key(key):
        raise InputError(f"not a table key: expected 't' + 8 bytes at byte 0, got {key[:9].hex()!r}")
    return decode_int(key, 1)[0]


def decode_record_key(key: bytes) -> tuple[int, int | bytes]:
    """(table id, handle): an int for 19-byte keys, else the common handle bytes (docs/encoding.md#how-ticdc-decodes-a-row step 3)."""
    if len(key) == INT_HANDLE_KEY_LEN and key[0] == _T and key[9:11] == RECORD_SEP:
        # the common int-handle key in one unpack: EncodeInt is uint64(v) ^ 1<<63, i.e. v + 2^63 (docs/encoding.md#comparable-int64-and-uint64)
        table_id, handle = _INT_RECORD_KEY.unpack(key)
        return table_id - _INT64_BIAS, handle - _INT64_BIAS
    if not is_record_key(key):
        raise InputError(f"not a record key: expected 't'<8 bytes>'_r' at byte 0, got {key[:11].hex()!r}")
    table_id = decode_int(key, 1)[0]
    if len(key) < RECORD_PREFIX_LEN + COMMON_HANDLE_MIN_LEN:
        raise InputError(
            f"record key handle at byte {RECORD_PREFIX_LEN} is {len(key) - RECORD_PREFIX_LEN} bytes: "
            "neither an 8-byte int handle nor a common handle (>= 9 bytes)"
        )
    return table_id, key[RECORD_PREFIX_LEN:]


def decode_index_key(key: bytes) -> tuple[int, int, bytes]:
    """(table id, index id, encoded index values and handle suffix) of a raw index key (docs/encoding.md#index-key)."""
    if not is_index_key(key) or len(key) < INDEX_PREFIX_LEN:
        raise InputError(f"not an index key: expected 't'<8 bytes>'_i'<8 bytes> at byte 0, got {key[:19].hex()!r}")
    return decode_int(key, 1)[0], decode_int(key, 11)[0], key[INDEX_PREFIX_LEN:]


# docs/encoding.md#index-key: index value layouts and option flags
MAX_OLD_INDEX_VALUE_LEN = 9
PARTITION_ID_FLAG = 0x7E
COMMON_HANDLE_FLAG = 0x7F
INDEX_VERSION_FLAG = 0x7D
_RESTORED_DATA_START = 0x80


def split_index_key_values(encoded: bytes, column_count: int) -> tuple[list[Datum], int | bytes | None]:
    """The indexed values and the handle suffix (None for a distinct unique index, docs/encoding.md#index-key)."""
    values = []
    pos = 0
    for _ in range(column_count):
        datum, pos = decode_datum(encoded, pos)
        values.append(datum)
    rest = encoded[pos:]
    if not rest:
        return values, None
    if rest[0] == PARTITION_ID_FLAG:  # global index v1: partition id before the handle
        _, hpos = decode_int(rest, 1)
        rest = rest[hpos:]
    handle_datums = decode_datums(rest)
    if len(handle_datums) == 1 and handle_datums[0].flag == INT_FLAG:
        return values, handle_datums[0].value
    return values, rest


def index_value_handle(value: bytes) -> int | bytes | None:
    """The handle stored in a unique index's value (`DecodeHandleInIndexValue`, docs/encoding.md#index-value), or None
    when the value holds none (non-unique entries keep the handle in the key)."""
    if len(value) <= MAX_OLD_INDEX_VALUE_LEN:
        if len(value) < 8:
            return None
        return int.from_bytes(value[:8], "big", signed=True)  # plain two's complement, no sign flip
    tail_len = value[0]
    if len(value) > 2 and value[1] == INDEX_VERSION_FLAG:
        return _version1_common_handle(value, tail_len)
    if tail_len >= 8:
        start = len(value) - tail_len
        return int.from_bytes(value[start : start + 8], "big", signed=True)
    if value[1] == COMMON_HANDLE_FLAG:
        return _common_handle_option(value, 1)
    return None


def _common_handle_option(value: bytes, pos: int) -> bytes:
    if len(value) < pos + 3:
        raise InputError(f"index value truncated at byte {pos}: common handle length needs 2 bytes")
    length = int.from_bytes(value[pos + 1 : pos + 3], "big")
    if len(value) < pos + 3 + length:
        raise InputError(f"index value truncated at byte {pos + 3}: common handle needs {length} bytes")
    return value[pos + 3 : pos + 3 + length]


def _version1_common_handle(value: bytes, tail_len: int) -> bytes | None:
    """Clustered-index version 1 (docs/encoding.md#index-value): TailLen, 0x7d, version, then flagged options."""
    pos = 3
    end = len(value) - tail_len
    while pos < end:
        flag = value[pos]
        if flag == COMMON_HANDLE_FLAG:
            return _common_handle_option(value, pos)
        if flag == PARTITION_ID_FLAG:
            pos += 9
        elif flag >= _RESTORED_DATA_START:
            return None
        else:
            raise InputError(f"index value: unknown option flag 0x{flag:02x} at byte {pos}")
    return None


def table_record_span(table_id: int) -> tuple[bytes, bytes]:
    """Raw `[t{id}_r, t{id}_s)`: all rows, no indexes (TiCDC `GetTableRange`, docs/encoding.md#from-table-to-region-key-range-in-ticdc)."""
    prefix = table_prefix(table_id)
    return prefix + RECORD_SEP, prefix + b"_s"


def table_record_span_encoded(table_id: int) -> tuple[bytes, bytes]:
    """Region-space record span (TiCDC `TableIDToComparableSpan`, docs/encoding.md#from-table-to-region-key-range-in-ticdc, vector D5)."""
    start, end = table_record_span(table_id)
    return encode_bytes(start), encode_bytes(end)


def to_region_key(raw: bytes) -> bytes:
    """Raw key -> region space (`spanz.ToComparableKey`, docs/encoding.md#from-table-to-region-key-range-in-ticdc)."""
    return encode_bytes(raw)


def from_region_key(encoded: bytes) -> bytes:
    """Region-space key -> raw key; empty stays empty (it means -inf/+inf at a span's ends)."""
    if not encoded:
        return b""
    raw, end = decode_bytes(encoded)
    if end != len(encoded):
        raise InputError(f"region key has {len(encoded) - end} trailing bytes after byte {end}")
    return raw
