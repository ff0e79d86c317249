"""COM_STMT_EXECUTE packets as mysql-mimic reads them: parameter types re-sent on every execution.

The MySQL protocol lets a client send a prepared statement's parameter types once: a later
COM_STMT_EXECUTE with `new_params_bound_flag` = 0 reuses them ("COM_STMT_EXECUTE", MySQL
client/server protocol documentation). libmysqlclient and MariaDB Connector/C (sysbench, the
mysql CLI's library) do so from the second execution on; mysql-mimic 3.0.5 refuses such a packet
("Server requires the new-params-bound-flag to be set"). This keeps each statement's last types
and puts them back into a packet that omits them, so mysql-mimic parses it unchanged. Packets
with query attributes (CLIENT_QUERY_ATTRIBUTES, where a parameter count precedes the bitmap) are
passed through as they are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

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
