"""A loopback HTTP proxy in front of the S3 server that injects the faults of a real object store:
a commit answered 503 (before or after the server stored it: a lost ack), throttling, the store
going away (every connection reset) for a while, and a store refusing every write (PUT, POST) for
a while with 507 Insufficient Storage (MinIO's answer when its drives are full) or 503 Slow Down,
reads still answered.

It runs as its own process (`python -m tests.lake.s3_fault_proxy UPSTREAM_PORT`, printing its
port): delta-rs holds the GIL while it waits on the store, so a proxy thread in the test process
would never answer. Tests steer it with requests to /__faults__ (FaultClient).
"""

from __future__ import annotations

import http.client
import json
import select
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONTROL = "/__faults__"
SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")
# MinIO's error when its drives are below the free-space threshold (cmd/api-errors.go ErrStorageFull).
STORAGE_FULL = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>XMinioStorageFull</Code>'
                b"<Message>Storage backend has reached its minimum free drive threshold. Please delete a few "
                b"objects to proceed.</Message></Error>")
REFUSALS = {507: STORAGE_FULL, 503: SLOW_DOWN}


class FaultProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.down = False
        self.commit_faults: list[bool] = []  # per next log commit PUT: True = store it, then 503
        self.throttle = 0  # next N requests of any kind answered 503 SlowDown
        self.refuse_writes = 0  # while set (507 or 503): every PUT and POST answered with it
        self.refused = 0  # writes refused so far
        self.injected = 0
        self._mu = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                proxy._handle(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _fault_for(self, method: str, path: str) -> str | None:
        with self._mu:
            if self.down:
                return "down"
            if self.refuse_writes and method in ("PUT", "POST"):
                self.refused += 1
                return "refuse"
            if self.throttle > 0:
                self.throttle -= 1
                self.injected += 1
                return "throttle"
            if method == "PUT" and "/_delta_log/" in path and path.split("?")[0].endswith(".json") and self.commit_faults:
                self.injected += 1
                return "after" if self.commit_faults.pop(0) else "before"
        return None

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        if handler.path.startswith(CONTROL):
            with self._mu:
                for key, value in json.loads(body or b"{}").items():
                    setattr(self, key, value)
                state = {"down": self.down, "throttle": self.throttle, "injected": self.injected,
                         "commit_faults": self.commit_faults, "refuse_writes": self.refuse_writes,
                         "refused": self.refused}
            self._reply(handler, 200, {"Content-Type": "application/json"}, json.dumps(state).encode())
            return
        fault = self._fault_for(handler.command, handler.path)
        if fault == "down":
            handler.close_connection = True
            handler.connection.close()
            return
        if fault == "refuse":
            self._reply(handler, self.refuse_writes, {"Content-Type": "application/xml"}, REFUSALS[self.refuse_writes])
            return
        if fault in ("throttle", "before"):
            self._reply(handler, 503, {"Content-Type": "application/xml"}, SLOW_DOWN)
            return
        status, headers, payload = self._forward(handler, body)
        if fault == "after":
            self._reply(handler, 503, {"Content-Type": "application/xml"}, SLOW_DOWN)
            return
        self._reply(handler, status, headers, payload)

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=60)
        try:
            headers = {k: v for k, v in handler.headers.items() if k.lower() != "connection"}
            conn.request(handler.command, handler.path, body=body or None, headers=headers)
            response = conn.getresponse()
            payload = b"" if handler.command == "HEAD" else response.read()
            out = {k: v for k, v in response.getheaders()
                   if k.lower() not in ("connection", "transfer-encoding", "content-length")}
            if handler.command == "HEAD":
                out["Content-Length"] = response.getheader("Content-Length", "0")
            return response.status, out, payload
        finally:
            conn.close()

    @staticmethod
    def _reply(handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], payload: bytes) -> None:
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        if "Content-Length" not in headers:
            handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(payload)


class FaultClient:
    """The proxy process, seen from a test: start, set faults, read how many it injected, stop."""

    def __init__(self, upstream_port: int, log: Path) -> None:
        self._log = log.open("w")
        self.process = subprocess.Popen([sys.executable, "-m", "tests.lake.s3_fault_proxy", str(upstream_port)],
                                        stdout=subprocess.PIPE, stderr=self._log, text=True,
                                        cwd=Path(__file__).resolve().parents[2])
        ready, _, _ = select.select([self.process.stdout], [], [], 30)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.process.kill()
            self.process.wait(timeout=10)
            raise RuntimeError(f"the fault proxy reported no port within 30 s; see {log}")
        self.port = int(line)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set(self, **faults: object) -> dict:
        request = urllib.request.Request(self.endpoint + CONTROL, data=json.dumps(faults).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self._log.close()


if __name__ == "__main__":
    proxy = FaultProxy(int(sys.argv[1]))
    print(proxy.port, flush=True)
    threading.Event().wait()
