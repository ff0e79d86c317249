"""An S3 API server on loopback for the object-store lake of tests and `make integration`.

It is moto's server mode (`moto_server`, PyPI moto[server]): a real HTTP server speaking the S3
REST API, started as a child process and stopped by its pid. It answers conditional writes
(`If-None-Match: *`, `If-Match`) with 412 like AWS S3, which delta-rs needs for concurrent commits
from several puller shards (docs/stack.md#object-store-the-lake-on-s3). It keeps objects in memory, so a restarted process
starts empty: `make integration` kills a relay in front of it instead (tidelake.demos.tcp_relay).
"""

from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path

from tidelake.demos.supervisor import Child, await_stage, free_port

ACCESS_KEY = "tidelake"
SECRET_KEY = "tidelake-secret"
REGION = "us-east-1"


class S3Server:
    """One moto S3 server process on 127.0.0.1 with one bucket."""

    def __init__(self, workdir: Path, bucket: str = "lake", port: int = 0) -> None:
        self.workdir = workdir
        self.bucket = bucket
        self.port = port or free_port(0)
        self.log = workdir / "s3-server.log"
        self._child: Child | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._child.process.pid if self._child is not None else None

    def storage_options(self) -> dict[str, str]:
        """[lake.storage_options] of a lake in this server's bucket."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": REGION,
                "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}

    def lake_root(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix}"

    def start(self, timeout_s: float = 60.0) -> None:
        moto = Path(sys.executable).with_name("moto_server")
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
        self._child = Child("s3 server", [str(moto), "-H", "127.0.0.1", "-p", str(self.port)], self.log, env=env)
        await_stage("s3 server", self._answers, timeout_s, self.log, checks=[self._child.check], interval_s=0.3)
        self._request("PUT", f"/{self.bucket}")

    def check(self, stage: str) -> None:
        """Fail `stage` naming this server's log if the process has exited."""
        if self._child is not None:
            self._child.check(stage)

    def stop(self) -> None:
        if self._child is not None:
            self._child.stop(grace_s=10)
            self._child = None

    def _answers(self) -> bool:
        try:
            self._request("GET", "/")
        except OSError:
            return False
        return True

    def _request(self, method: str, path: str) -> None:
        request = urllib.request.Request(self.endpoint + path, method=method)
        with urllib.request.urlopen(request, timeout=5) as response:
            response.read()
