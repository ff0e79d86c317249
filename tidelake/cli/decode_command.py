"""`tidelake decode key|row`: print TiDB keys and row values as JSON (a debugging aid).

Keys may be raw (as in CDC events and the changelog) or region-space (`EncodeBytes`, as in PD
and region boundaries); the output says which (`"encoded"`).
Owner: `tidelake decode`, over the codec.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tidelake.codec import datum as d
from tidelake.codec import keys, meta_keys
from tidelake.codec.common_handle import (
    decode_common_handle,
    pk_columns,
    split_common_handle,
)
from tidelake.codec.datum import decode_datums
from tidelake.codec.json_binary import decode_json_binary
from tidelake.codec.keys import split_index_key_values
from tidelake.codec.mytime import duration_from_nanos, iso
from tidelake.codec.row import decode_row, jsonable
from tidelake.codec.row_value import value_from_datum
from tidelake.codec.schema import TableInfo
from tidelake.errors import InputError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("decode", help="decode TiDB keys and row values to JSON")
    kinds = parser.add_subparsers(dest="decode_kind", metavar="KIND", required=True)

    key = kinds.add_parser("key", help="decode a record, index or meta key (raw or region-space)")
    key.add_argument("hex", metavar="HEX", help="key bytes in hex")
    key.add_argument("--table-info", metavar="FILE", help="TableInfo JSON: types index values and common handles")
    key.set_defaults(handler=_decode_key)

    row = kinds.add_parser("row", help="decode a row value (format v1 or v2)")
    row.add_argument("hex", metavar="HEX", help="row value bytes in hex")
    row.add_argument("--table-info", metavar="FILE", required=True, help="TableInfo JSON of the table")
    handle = row.add_mutually_exclusive_group()
    handle.add_argument("--handle", metavar="H", help="int handle, or common handle bytes in hex")
    handle.add_argument("--key", metavar="HEX", help="the row's record key (raw or region-space), for its handle")
    row.set_defaults(handler=_decode_row)


def _hex(text: str, what: str) -> bytes:
    cleaned = "".join(text.split())
    if cleaned[:2].lower() == "0x":
        cleaned = cleaned[2:]
    for i, ch in enumerate(cleaned):
        if ch not in "0123456789abcdefABCDEF":
            raise InputError(f"{what}: bad hex character {ch!r} at character {i}")
    if len(cleaned) % 2:
        raise InputError(f"{what}: odd number of hex digits ({len(cleaned)}); byte {len(cleaned) // 2} is incomplete")
    return bytes.fromhex(cleaned)


def _load_table(path: str) -> Any:
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read table info {path}: {exc.strerror}") from None
    return TableInfo.from_json(text)


def _print(obj: dict) -> int:
    print(json.dumps(obj, ensure_ascii=False))
    return 0


def _raw_key(key: bytes) -> tuple[bytes, bool]:
    """(raw key, was it region-space encoded). Raw is tried first: the two never collide for
    table keys (byte 9 is '_' raw, a group marker encoded)."""
    if keys.is_record_key(key) or keys.is_index_key(key):
        return key, False
    if meta_keys.is_meta_key(key):
        try:
            meta_keys.decode_meta_key(key)
            return key, False
        except InputError:
            pass
    try:
        raw = keys.from_region_key(key)
    except InputError as exc:
        raise InputError(f"key is neither a raw table/meta key nor a region-space key ({exc})") from None
    return raw, True


def _untyped(datum: Any) -> Any:
    """JSON form of a datum without its column type: bytes as UTF-8 text, else 0x-hex."""
    if datum.flag == d.MAX_FLAG:
        return "MAX"
    if datum.flag in (d.BYTES_FLAG, d.COMPACT_BYTES_FLAG):
        try:
            return datum.value.decode("utf-8")
        except UnicodeDecodeError:
            return "0x" + datum.value.hex()
    if datum.flag == d.DURATION_FLAG:
        return iso(duration_from_nanos(datum.value))
    if datum.flag == d.JSON_FLAG:
        return jsonable(decode_json_binary(datum.value), None)
    return jsonable(datum.value, None)


def _decode_key(args: argparse.Namespace) -> int:
    key, encoded = _raw_key(_hex(args.hex, "key"))
    table = _load_table(args.table_info) if args.table_info else None
    out: dict[str, Any] = {"encoded": encoded}
    if meta_keys.is_meta_key(key):
        meta = meta_keys.decode_meta_key(key)
        out.update(kind="meta", type=meta.kind, key=meta.key.decode("utf-8", "replace"))
        if meta.field is not None:
            out["field"] = meta.field.decode("utf-8", "replace")
            table_id = meta_keys.parse_table_field(meta.field)
            if table_id is not None:
                out.update(db_id=meta_keys.parse_db_key(meta.key), table_id=table_id)
        if meta.index is not None:
            out["index"] = meta.index
        return _print(out)
    if keys.is_record_key(key):
        table_id, handle = keys.decode_record_key(key)
        out.update(kind="record", table_id=table_id, handle=_handle_json(handle, table))
        return _print(out)
    if keys.is_index_key(key):
        table_id, index_id, rest = keys.decode_index_key(key)
        out.update(kind="index", table_id=table_id, index_id=index_id)
        out.update(_index_values_json(rest, index_id, table))
        return _print(out)
    raise InputError(f"not a record, index or meta key: byte 0 is {key[:1].hex() or 'missing'}")


def _handle_json(handle: int | bytes, table: Any) -> Any:
    if isinstance(handle, int):
        return handle
    if table is None:
        return [_untyped(d) for d in split_common_handle(handle)]
    values = decode_common_handle(table, handle)
    return [jsonable(values[col.name], col.field_type) for col, _ in pk_columns(table)]


def _index_values_json(rest: bytes, index_id: int, table: Any) -> dict[str, Any]:
    index = None if table is None else next((i for i in table.indices if i.id == index_id), None)
    if index is None:
        return {"values": [_untyped(d) for d in decode_datums(rest)]}
    datums, handle = split_index_key_values(rest, len(index.columns))
    values = []
    for index_column, datum in zip(index.columns, datums):
        ft = table.columns[index_column.offset].field_type
        values.append(jsonable(value_from_datum(datum, ft), ft))
    out: dict[str, Any] = {"index_name": index.name, "values": values}
    if handle is not None:
        out["handle"] = _handle_json(handle, table)
    return out


def _decode_row(args: argparse.Namespace) -> int:
    table = _load_table(args.table_info)
    value = _hex(args.hex, "row value")
    handle: int | bytes | None = None
    if args.key is not None:
        raw, _ = _raw_key(_hex(args.key, "--key"))
        handle = keys.decode_record_key(raw)[1]
    elif args.handle is not None:
        if table.is_common_handle:
            handle = _hex(args.handle, "--handle")
        else:
            try:
                handle = int(args.handle)
            except ValueError:
                raise InputError(f"--handle {args.handle!r} is not an integer (table has int handles)") from None
    row = decode_row(value, table, handle)
    types = {c.name: c.field_type for c in table.columns}
    return _print({name: jsonable(v, types.get(name)) for name, v in row.items()})
