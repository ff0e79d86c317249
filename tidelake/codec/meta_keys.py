"""TiDB meta (`m`) keys: the string/hash/list structure holding the schema (docs/metadata.md#tidb-meta-structure-m-keys).

The schema snapshot reader scans these hashes at a TSO exactly as TiCDC does (`DBs`, then each
`DB:<id>`), so the key bytes must match TiDB's `structure` package. Owner: the codec.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidelake.codec.memcomparable_bytes import decode_bytes, encode_bytes
from tidelake.codec.number import decode_int, decode_uint, encode_int, encode_uint
from tidelake.errors import InputError

META_PREFIX = b"m"

# docs/metadata.md#key-shapes: the type flag is EncodeUint(flag), 8 bytes.
STRING_DATA = ord("s")
HASH_META = ord("H")
HASH_DATA = ord("h")
LIST_META = ord("L")
LIST_DATA = ord("l")
_KIND_NAMES = {
    STRING_DATA: "string",
    HASH_META: "hash_meta",
    HASH_DATA: "hash",
    LIST_META: "list_meta",
    LIST_DATA: "list",
}

# docs/metadata.md#meta-keys-and-values
DBS = b"DBs"
SCHEMA_VERSION_KEY = b"SchemaVersionKey"
NEXT_GLOBAL_ID = b"NextGlobalID"
BOOTSTRAP_KEY = b"BootstrapKey"
DDL_TABLE_VERSION = b"DDLTableVersion"
DDL_JOB_LIST = b"DDLJobList"
DDL_JOB_ADD_IDX_LIST = b"DDLJobAddIdxList"
DDL_JOB_HISTORY = b"DDLJobHistory"
DB_PREFIX = b"DB:"
TABLE_FIELD_PREFIX = b"Table"  # TiCDC keeps fields that start with "Table" (not "TID:")
_TABLE_FIELD = b"Table:"


@dataclass(frozen=True)
class MetaKey:
    """A decoded raw meta key; `field` is set for hash data, `index` for list data."""

    kind: str
    key: bytes
    field: bytes | None = None
    index: int | None = None


def db_key(db_id: int) -> bytes:
    """`DB:<id>`: the field of a database in `DBs`, and the hash holding its tables."""
    return DB_PREFIX + str(db_id).encode()


def table_field(table_id: int) -> bytes:
    return _TABLE_FIELD + str(table_id).encode()


def diff_key(schema_version: int) -> bytes:
    return b"Diff:" + str(schema_version).encode()


def _data_prefix(key: bytes, flag: int) -> bytes:
    return META_PREFIX + encode_bytes(key) + encode_uint(flag)


def string_key(key: bytes) -> bytes:
    return _data_prefix(key, STRING_DATA)


def hash_key(key: bytes, field: bytes) -> bytes:
    return _data_prefix(key, HASH_DATA) + encode_bytes(field)


def hash_prefix(key: bytes) -> bytes:
    """Start of `IterateHash`/`HGetAll(key)`; scan up to prefix_next(hash_prefix(key))."""
    return _data_prefix(key, HASH_DATA)


def hash_span(key: bytes) -> tuple[bytes, bytes]:
    prefix = hash_prefix(key)
    return prefix, prefix_next(prefix)


def list_meta_key(key: bytes) -> bytes:
    return _data_prefix(key, LIST_META)


def list_key(key: bytes, index: int) -> bytes:
    return _data_prefix(key, LIST_DATA) + encode_int(index)


def db_info_key(db_id: int) -> bytes:
    """Hash `DBs`, field `DB:<id>` -> DBInfo JSON."""
    return hash_key(DBS, db_key(db_id))


def table_info_key(db_id: int, table_id: int) -> bytes:
    """Hash `DB:<dbid>`, field `Table:<id>` -> TableInfo JSON."""
    return hash_key(db_key(db_id), table_field(table_id))


def prefix_next(key: bytes) -> bytes:
    """`kv.Key.PrefixNext`: +1 on the last byte with carry; all-0xFF keys get a 00 appended."""
    buf = bytearray(key)
    for i in range(len(buf) - 1, -1, -1):
        if buf[i] != 0xFF:
            buf[i] += 1
            return bytes(buf[: i + 1]) + b"\x00" * (len(buf) - i - 1)
        buf[i] = 0
    return bytes(key) + b"\x00"


def is_meta_key(raw: bytes) -> bool:
    return raw[:1] == META_PREFIX


def decode_meta_key(raw: bytes) -> MetaKey:
    """Inverse of the encoders above (`decodeHashDataKey` and friends)."""
    if not is_meta_key(raw):
        raise InputError(f"not a meta key: byte 0 is {raw[:1].hex() or 'missing'}, expected 6d ('m')")
    key, pos = decode_bytes(raw, 1)
    flag, pos = decode_uint(raw, pos)
    kind = _KIND_NAMES.get(flag)
    if kind is None:
        raise InputError(f"meta key has unknown type flag 0x{flag:x} at byte {pos - 8}")
    if flag == HASH_DATA:
        field, pos = decode_bytes(raw, pos)
        result = MetaKey(kind, key, field=field)
    elif flag == LIST_DATA:
        index, pos = decode_int(raw, pos)
        result = MetaKey(kind, key, index=index)
    else:
        result = MetaKey(kind, key)
    if pos != len(raw):
        raise InputError(f"meta key has {len(raw) - pos} unexpected bytes at byte {pos}")
    return result


def parse_id_field(field: bytes, prefix: bytes) -> int | None:
    """The id in `DB:<id>` / `Table:<id>` style names, or None when the prefix differs."""
    if not field.startswith(prefix):
        return None
    digits = field[len(prefix) :]
    if not digits.isdigit():
        raise InputError(f"meta field {field!r}: expected {prefix.decode()}<decimal id>")
    return int(digits)


def parse_table_field(field: bytes) -> int | None:
    return parse_id_field(field, _TABLE_FIELD)


def parse_db_key(key: bytes) -> int | None:
    return parse_id_field(key, DB_PREFIX)
