"""The SQL server of `tidelake sim --sql-port`: mysql-mimic's asyncio server on its own thread.

mysql-mimic runs on asyncio; the simulator is threaded, so the server gets an event loop on a
thread of its own and every connection a worker thread for its statements (client_session.py). `stop`
closes the listening socket and the connections; open transactions are rolled back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

from mysql_mimic import MysqlServer
from mysql_mimic.constants import KillKind
from mysql_mimic.control import LocalControl
from mysql_mimic.types import ServerStatus

from tidelake.errors import InputError
from tidelake.sim.sql import variables as sv
from tidelake.sim.sql.client_session import SqlSession

# mysql-mimic logs every error it sends to a client at ERROR; a refused statement is no server error
logging.getLogger("mysql_mimic").setLevel(logging.CRITICAL)
# sqlglot warns when it keeps a statement as an opaque command; parse.py refuses those by name
logging.getLogger("sqlglot").setLevel(logging.ERROR)


class _Connections(LocalControl):
    """mysql-mimic's registry of live connections, which the server ends as KILL CONNECTION does.
    A new connection's status flags say autocommit from the handshake's OK packet on, as TiDB's do
    (clients such as pymysql decide from them whether to send SET autocommit)."""

    async def add(self, connection: Any) -> int:
        connection.status_flags |= ServerStatus.SERVER_STATUS_AUTOCOMMIT
        return await super().add(connection)

    async def kill_all(self, timeout_s: float = 10.0) -> None:
        for connection_id in list(self._connections):
            await self.kill(connection_id, KillKind.CONNECTION)
        deadline = asyncio.get_running_loop().time() + timeout_s
        while self._connections and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)


class SqlServer:
    """`SqlServer(tidb, port=4000).start()` listens on host:port (0: any free port) until `stop()`."""

    def __init__(self, tidb: Any, host: str = "127.0.0.1", port: int = 4000) -> None:
        self.tidb = tidb
        self.host = host
        self._port = port
        self._globals = sv.global_variables()
        self._loop = asyncio.new_event_loop()
        self._connections = _Connections()
        self._server = MysqlServer(session_factory=lambda: SqlSession(tidb, self._globals), control=self._connections)
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self._port}"

    @property
    def port(self) -> int:
        return self._port

    def start(self) -> SqlServer:
        try:
            self._loop.run_until_complete(self._server.start_server(host=self.host, port=self._port))
        except OSError as err:
            self._loop.close()
            reason = os.strerror(err.errno) if err.errno else str(err)
            raise InputError(f"SQL: cannot listen on {self.host}:{self._port} ({reason}; --sql-port picks another "
                             "port, 0 turns the SQL front off)") from None
        self._port = self._server.sockets()[0].getsockname()[1]
        self._thread = threading.Thread(target=self._loop.run_forever, name="sim-sql-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._close(), self._loop)
        future.result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._thread = None
        self._loop.close()

    async def _close(self) -> None:
        self._server.close()
        await self._connections.kill_all()  # each session's close rolls its transaction back
        await self._server.wait_closed()

    def __enter__(self) -> SqlServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
