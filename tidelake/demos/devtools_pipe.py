"""Headless Chromium driven over its DevTools protocol on a pipe (`--remote-debugging-pipe`:
commands in on fd 3, replies and events out on fd 4, each a JSON message ended by a NUL byte), so
the demos drive a page (a cookie, a click, a screenshot) with no browser-driver library.
Owner: the demos' browser checks (tidelake.demos.connection_form).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tidelake.errors import InputError
from tidelake.wait import WaitTimeout

COMMAND_FD, REPLY_FD = 3, 4  # Chromium's pipe fds (content/browser/devtools/devtools_pipe_handler.cc)


def find_chromium() -> str:
    """Debian's chromium (`make browser` installs it)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise InputError("headless Chromium is needed for the connection form check: apt-get install chromium "
                         "(or `make browser`)")
    return chromium


class DevToolsPipe:
    """One headless Chromium and its DevTools session; `close` ends the browser by its pid."""

    def __init__(self, log: Path, width: int = 1400, height: int = 1000) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="tidelake-chromium-")
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()

        def pipes() -> None:  # in the child, before exec: the pipe ends on the fds Chromium reads and writes
            os.dup2(commands_read, COMMAND_FD)
            os.dup2(replies_write, REPLY_FD)

        self._out = log.open("ab")
        self.process = subprocess.Popen(
            [find_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--force-color-profile=srgb", "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=self._out, stderr=subprocess.STDOUT, preexec_fn=pipes, pass_fds=(COMMAND_FD, REPLY_FD),
            start_new_session=True)
        os.close(commands_read)
        os.close(replies_write)
        self._buffer = b""
        self._next_id = 0

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout_s: float = 30.0) -> dict[str, Any]:
        """Send one command and return its result; events in between are dropped."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._read(deadline, method)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"DevTools {method}: {reply['error'].get('message')}")
                return reply.get("result", {})

    def _read(self, deadline: float, method: str) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                raise WaitTimeout(f"Chromium did not answer {method} in time")
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium exited (code {self.process.poll()}) before answering {method}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self) -> None:
        """Browser.close first, so the browser reaps its own renderer and GPU processes; then its
        session (process group) is ended by signal if it is still there."""
        try:
            self.call("Browser.close", timeout_s=10)
        except (OSError, RuntimeError, WaitTimeout):
            pass  # already gone or not answering: the signals below end it
        for fd in (self._commands, self._replies):
            os.close(fd)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self._out.close()
        self._profile.cleanup()
