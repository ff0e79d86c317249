"""A changefeed's puller on a thread of the caller's process (the one-process demo, tests, benches).

`tidelake pull` runs PullerRunner in its own process; here it shares one with Spark or a
test, so what ended it early is kept and re-raised in the caller's thread by check().
Owner: the test kit (the one-process demo, nemesis, tests).
"""

from __future__ import annotations

import threading
from typing import Any

from tidelake.capture.changefeed.puller_runner import PullerRunner, RunOptions, Shard
from tidelake.config import ChangefeedConfig
from tidelake.errors import TidelakeError


class PullerThread:
    """PullerRunner on a daemon thread; a context manager that stops it gracefully on exit."""

    def __init__(self, config: ChangefeedConfig, shard: Shard | None = None, **options: Any) -> None:
        self.runner = PullerRunner(config, shard or Shard(), RunOptions(**options))
        self.summary: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="tidelake-puller", daemon=True)

    def _run(self) -> None:
        try:
            self.summary = self.runner.run()
        except BaseException as exc:  # handed to the caller's thread by check()
            self.error = exc

    def start(self) -> PullerThread:
        self.thread.start()
        return self

    def check(self) -> None:
        """Re-raise what stopped the puller; an error if it stopped without one."""
        if self.error is not None:
            raise self.error
        if not self.thread.is_alive():
            raise TidelakeError("the puller stopped unexpectedly")

    def stop(self, timeout_s: float = 60.0) -> None:
        self.runner.stop()
        self.thread.join(timeout_s)
        if self.thread.is_alive():
            raise TidelakeError(f"the puller did not stop within {timeout_s:.0f}s")

    def __enter__(self) -> PullerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
