"""The relay `make integration` kills as its S3 outage: it forwards, dies like a crashed server
(open connections broken, new ones refused), and comes back on the same port."""

from __future__ import annotations

import socket
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tidelake.demos.supervisor import free_port
from tidelake.demos.tcp_relay import TcpRelay


class Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[::-1])


@pytest.fixture
def upstream():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def put(port: int, body: bytes) -> bytes:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/k", data=body, method="PUT")
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


def read_answer(conn: socket.socket) -> bytes:
    """The whole one-byte answer: its head and body may arrive in separate segments."""
    answer = b""
    while not answer.endswith(b"\r\n\r\nz"):
        chunk = conn.recv(4096)
        assert chunk, f"the relay closed the connection mid-answer: {answer!r}"
        answer += chunk
    return answer


def test_relay_forwards_dies_with_its_connections_and_returns_on_the_same_port(upstream, tmp_path):
    relay = TcpRelay(free_port(0), upstream, tmp_path / "relay.log")
    relay.start()
    try:
        body = bytes(range(256)) * 1024  # larger than one relay chunk
        assert put(relay.listen_port, body) == body[::-1]
        held = socket.create_connection(("127.0.0.1", relay.listen_port), timeout=10)
        held.sendall(b"PUT /k HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nz")
        assert read_answer(held).startswith(b"HTTP/1.1 200")
        first = relay.pid
        relay.kill()
        try:  # the open connection is gone: a reset or an EOF, never an answer
            assert held.recv(4096) == b""
        except ConnectionResetError:
            pass
        held.close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", relay.listen_port), timeout=5)
        relay.start()
        assert relay.pid != first
        assert put(relay.listen_port, b"again") == b"niaga"
    finally:
        relay.stop()
