"""A TCP relay process in front of the S3 server: the endpoint `make integration` kills. Killing
it and starting a new one on the same port is, as clients see it, an S3 endpoint that died and
came back, while the store behind it keeps every object.

More: docs/internals.md#tcp_relay.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from tidelake.demos.supervisor import Child, accepting, await_stage

_CHUNK = 64 * 1024


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One direction; an EOF is passed on as an EOF, a broken side breaks the other too."""
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.transport.abort()


async def _serve(listen_port: int, upstream_port: int) -> None:
    async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        except OSError:
            client_writer.transport.abort()
            return
        try:
            await asyncio.gather(_pump(client_reader, upstream_writer), _pump(upstream_reader, client_writer))
        finally:
            client_writer.close()
            upstream_writer.close()

    # reuse_address: the restarted relay binds the port while the killed one's sockets linger in TIME_WAIT.
    server = await asyncio.start_server(relay, "127.0.0.1", listen_port, reuse_address=True)
    async with server:
        await server.serve_forever()


class TcpRelay:
    """The relay as a child process on a fixed port: started, killed and started again there."""

    def __init__(self, listen_port: int, upstream_port: int, log: Path) -> None:
        self.listen_port = listen_port
        self.upstream_port = upstream_port
        self.log = log
        self._child: Child | None = None

    @property
    def pid(self) -> int | None:
        return self._child.process.pid if self._child is not None else None

    def start(self, timeout_s: float = 30.0) -> None:
        command = [sys.executable, "-m", "tidelake.demos.tcp_relay", str(self.listen_port), str(self.upstream_port)]
        self._child = Child("s3 endpoint relay", command, self.log)
        await_stage("s3 endpoint relay", lambda: accepting(self.listen_port), timeout_s, self.log, [self._child.check], interval_s=0.2)

    def check(self, stage: str) -> None:
        """Fail `stage` naming the relay's log if it exited (not while killed on purpose)."""
        if self._child is not None:
            self._child.check(stage)

    def kill(self) -> None:
        """SIGKILL: no shutdown of any kind, the port is dead until start() again."""
        assert self._child is not None
        os.kill(self._child.process.pid, signal.SIGKILL)
        self._child.stop(grace_s=1)  # reaps it and closes the log
        self._child = None

    def stop(self) -> None:
        if self._child is not None:
            self._child.stop(grace_s=10)
            self._child = None


if __name__ == "__main__":
    try:
        asyncio.run(_serve(int(sys.argv[1]), int(sys.argv[2])))
    except KeyboardInterrupt:
        pass
