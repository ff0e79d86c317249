"""COM_STMT_EXECUTE as mysql-mimic 3.0.5 reads it, two of its gaps closed (SqlSession installs it).

- Parameter types sent once: a packet with `new_params_bound_flag` = 0 gets its statement's last
  types put back, so mysql-mimic parses it unchanged (libmysqlclient and MariaDB Connector/C send
  the types with the first execution only; mysql-mimic refuses such a packet).
- Parameter values as SQL literals: the `?` positions are found once in the prepared text and each
  value goes in as an escaped literal, where mysql-mimic pastes strings in unescaped.

More: docs/internals.md#prepared.
"""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from typing import Any

from mysql_mimic import packets
from mysql_mimic.prepared import REGEX_PARAM
from mysql_mimic.types import Capabilities

_HEAD = 9  # stmt_id (4 bytes), flags (1), iteration count (4)


def keep_parameter_types(connection: Any) -> None:
    """Wrap `connection.handle_stmt_execute` (mysql-mimic's Connection) to supply omitted types."""
    original: Callable[[bytes], Awaitable[None]] = connection.handle_stmt_execute
    types: dict[int, bytes] = {}

    async def handle_stmt_execute(data: bytes) -> None:
        if Capabilities.CLIENT_QUERY_ATTRIBUTES not in connection.capabilities and len(data) > _HEAD:
            stmt_id = int.from_bytes(data[:4], "little")
            stmt = connection.prepared_stmts.get(stmt_id)
            count = stmt.num_params if stmt is not None else 0
            flag_at = _HEAD + (count + 7) // 8
            if count and len(data) > flag_at:
                if data[flag_at] == 1:
                    types[stmt_id] = data[flag_at + 1: flag_at + 1 + 2 * count]
                elif stmt_id in types:
                    data = data[:flag_at] + b"\x01" + types[stmt_id] + data[flag_at + 1:]
        await original(data)

    connection.handle_stmt_execute = handle_stmt_execute


def sql_literal(value: Any) -> str:
    """A parameter value as a MySQL literal (backslash escapes, as in the default sql_mode)."""
    if value is None:
        return "NULL"
    if value is True or value is False:
        return "TRUE" if value else "FALSE"
    if isinstance(value, (bytes, bytearray)):
        return "X'" + bytes(value).hex() + "'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\x00", "\\0") + "'"
    return str(value)


def _parse_com_stmt_execute(capabilities: Any, client_charset: Any, data: bytes,
                            get_stmt: Callable[[int], Any]) -> Any:
    """mysql-mimic's `parse_com_stmt_execute` with the values spliced in as literals at the
    statement's `?` positions, found once in the prepared text (module docstring). The packet is
    read with mysql-mimic's own readers."""
    reader = io.BytesIO(data)
    stmt = get_stmt(packets.read_uint_4(reader))
    use_cursor, count_available = packets._read_cursor_flags(reader)  # noqa: SLF001
    packets.read_uint_4(reader)  # iteration count, always 1
    count = stmt.num_params
    if Capabilities.CLIENT_QUERY_ATTRIBUTES in capabilities and (count or count_available):
        count = packets.read_uint_len(reader)
    params = packets._read_params(capabilities, client_charset, reader, count, stmt.param_buffers) \
        if count else []  # noqa: SLF001
    values = [value for _, value in params[: stmt.num_params]]
    pieces, last = [], 0
    for match, value in zip(REGEX_PARAM.finditer(stmt.sql), values):
        pieces += [stmt.sql[last:match.start()], sql_literal(value)]
        last = match.end()
    attrs = {k: v for k, v in params[stmt.num_params:] if k is not None}
    return packets.ComStmtExecute(sql="".join(pieces) + stmt.sql[last:], query_attrs=attrs, stmt=stmt,
                                  use_cursor=use_cursor)


# mysql-mimic's connection looks the parser up on its (compiled) packets module at each call
packets.parse_com_stmt_execute = _parse_com_stmt_execute
