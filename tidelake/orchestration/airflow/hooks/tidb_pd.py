"""TiDBPDHook: the `tidb_pd` connection (PD endpoints, cluster, TLS) as the upstream the puller and
the bootstrap dial.

Airflow resolves the connection (metadata DB, AIRFLOW_CONN_* or a secrets backend); the checks
and the PEM files are tidelake.orchestration.pd_connection's. A missing connection or a bad field
is one InputError line naming the connection id and the field. The private key's text is masked
in task logs and never leaves the hook except as a file path inside `upstream()`.
Owner: the tidelake provider (provider_info lists its connection type), for tasks that dial PD.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException
from airflow.sdk.log import mask_secret

from tidelake.config import UpstreamConfig
from tidelake.errors import InputError
from tidelake.orchestration.pd_connection import CONN_TYPE, HOOK_NAME, SECRET_FIELDS, PdConnection, pd_connection

log = logging.getLogger(__name__)


class TiDBPDHook(BaseHook):
    """Reads connection `tidb_pd_conn_id` when asked, never at construction (DAG parsing stays offline)."""

    conn_name_attr = "tidb_pd_conn_id"
    default_conn_name = "tidb_pd_default"
    conn_type = CONN_TYPE
    hook_name = HOOK_NAME

    def __init__(self, tidb_pd_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tidb_pd_conn_id = tidb_pd_conn_id

    def __repr__(self) -> str:
        return f"TiDBPDHook(tidb_pd_conn_id={self.tidb_pd_conn_id!r})"

    def pd_connection(self, pem_dir: Path, gc_ttl_s: float = UpstreamConfig.gc_ttl_s) -> PdConnection:
        """The validated connection; PEM text in its TLS extras is written under `pem_dir`."""
        try:
            conn = self.get_connection(self.tidb_pd_conn_id)
        except AirflowNotFoundException:
            raise InputError(f"{CONN_TYPE} connection {self.tidb_pd_conn_id!r}: not defined (add it in Admin > "
                             "Connections, an AIRFLOW_CONN_* variable or the secrets backend)") from None
        if conn.conn_type != CONN_TYPE:
            raise InputError(f"{CONN_TYPE} connection {self.tidb_pd_conn_id!r}: conn_type: is "
                             f"{conn.conn_type!r}, expected {CONN_TYPE!r}")
        extra = conn.extra_dejson
        for name, value in extra.items():
            if name.endswith(SECRET_FIELDS) and isinstance(value, str):
                _mask_pem(value)
        return pd_connection(self.tidb_pd_conn_id, conn.host, conn.port, extra, pem_dir, gc_ttl_s)

    @contextmanager
    def upstream(self, gc_ttl_s: float = UpstreamConfig.gc_ttl_s) -> Iterator[UpstreamConfig]:
        """The upstream config while the block runs; PEM files written for it are removed after."""
        with tempfile.TemporaryDirectory(prefix="tidelake-pd-tls-") as folder:
            connection = self.pd_connection(Path(folder), gc_ttl_s)
            log.info("PD connection: %s", connection.summary())
            yield connection.upstream


def _mask_pem(text: str) -> None:
    """Mask the key's text and each of its base64 lines: a log quoting one line must not leak it."""
    mask_secret(text)
    for line in text.splitlines():
        if line.strip() and not line.startswith("-----"):
            mask_secret(line.strip())
