"""The requests an S3 API server answered, counted from its own request log: moto's server
(tidelake.demos.s3_server) logs one line per request (werkzeug's access log, written as the
response starts), so a count does not depend on the client under test. A count ends with a marker
request (a HEAD of a key no one writes), sent SETTLE_S after the call for requests its background
tasks still had in flight (delta-rs' runtime outlives a Python call), and waits for the marker's
line: every request answered before it has its line in the log by then.
Owner: the tests and benches that count a lake's requests on moto (bench_log_reads, bench_log_growth).
"""

from __future__ import annotations

import itertools
import re
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

from tidelake.demos.s3_server import S3Server

T = TypeVar("T")
KINDS = ("get", "list", "head", "put", "delete", "other")
# werkzeug's access-log line: `127.0.0.1 - - [date] "GET /bucket/key HTTP/1.1" 200 -`, the request
# line coloured by status even in a log file (one or more ANSI escapes around it).
_LINE = re.compile(r'"(?:\x1b\[[0-9;]*m)*([A-Z]+) (\S+) HTTP/[0-9.]+(?:\x1b\[[0-9;]*m)*" (\d{3})')
_MARK_KEY = "_bench_request_mark"
SETTLE_S = 0.2
_marks = itertools.count()


def kind(method: str, target: str) -> str:
    """The request's kind: a GET of the bucket with a list query is a LIST (ListObjectsV2 `list-type=2`,
    or v1), a GET of a key a GET; a POST `?delete` a (batch) delete."""
    path, _, query = target.partition("?")
    if method == "GET":
        return "list" if path.count("/") <= 1 or "list-type" in query or "prefix=" in query else "get"
    if method == "POST" and "delete" in query:
        return "delete"
    return {"HEAD": "head", "PUT": "put", "DELETE": "delete"}.get(method, "other")


class RequestLog:
    """Counts of the requests `server` answered between two points, by kind; plus how many answered
    404, and `list_from_start`: the listings begun at a folder's first key (a LIST page with neither
    StartAfter nor a continuation token), each of which pages through the whole folder."""

    def __init__(self, server: S3Server) -> None:
        self.server = server

    def count(self, call: Callable[[], T]) -> tuple[T, dict[str, int]]:
        """`call()`'s answer and the requests the server answered while it ran."""
        start = self.sync()
        answer = call()
        return answer, self.since(start)

    def sync(self) -> int:
        """The log's length once every request made before this call has its line in it."""
        time.sleep(SETTLE_S)
        mark = f"{_MARK_KEY}/{next(_marks)}"
        request = urllib.request.Request(f"{self.server.endpoint}/{self.server.bucket}/{mark}", method="HEAD")
        try:
            urllib.request.urlopen(request, timeout=5).close()
        except urllib.error.HTTPError:
            pass  # 404: the key is never written
        deadline = time.monotonic() + 10
        while True:
            text = self.server.log.read_bytes()
            at = text.find(mark.encode())
            if at >= 0:
                return text.index(b"\n", at) + 1
            if time.monotonic() > deadline:
                raise TimeoutError(f"the S3 server's log {self.server.log} has no line for the marker request {mark}")
            time.sleep(0.01)

    def since(self, start: int) -> dict[str, int]:
        """The requests logged between `start` (a `sync()`) and a new sync, marker lines left out."""
        end = self.sync()
        lines = self.server.log.read_bytes()[start:end].decode(errors="replace").splitlines()
        counts: Counter[str] = Counter({k: 0 for k in KINDS})
        counts["not_found"] = counts["list_from_start"] = 0
        for line in lines:
            match = _LINE.search(line)
            if match is None or _MARK_KEY in line:
                continue
            method, target, status = match.groups()
            made = kind(method, target)
            query = target.partition("?")[2]
            counts[made] += 1
            counts["not_found"] += status == "404"
            counts["list_from_start"] += (made == "list" and "start-after=" not in query
                                          and "continuation-token=" not in query)
        return dict(counts)
