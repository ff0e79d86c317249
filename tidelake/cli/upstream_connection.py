"""[upstream].connection for the `tidelake` commands that dial PD (pull, bootstrap, verify, status):
the tidb_pd Airflow connection resolved through TiDBPDHook, as the puller task resolves it, from
an AIRFLOW_CONN_* variable or the configured secrets backend (outside a task the Task SDK reads no
metadata DB). Reading one needs Airflow (the `airflow` extra): without it one InputError line. PEM
text held by the connection is written to owner-only files that live until the command exits.
Owner: the CLI (target.py and the pull and bootstrap commands).
"""

from __future__ import annotations

import atexit
from contextlib import ExitStack
from dataclasses import replace

from tidelake.config import ChangefeedConfig
from tidelake.errors import InputError

_OPEN = ExitStack()  # the connections' PEM folders, removed at exit
atexit.register(_OPEN.close)


def with_connection(config: ChangefeedConfig) -> ChangefeedConfig:
    """`config` with [upstream].connection replaced by that connection's PD endpoints and TLS;
    a config naming PD endpoints is returned unchanged."""
    conn_id = config.upstream.connection
    if conn_id is None:
        return config
    try:
        from tidelake.orchestration.airflow.hooks.tidb_pd import TiDBPDHook
    except ImportError as exc:
        raise InputError(f"{config.source}: [upstream].connection {conn_id!r}: reading an Airflow connection needs "
                         f"Airflow (pip install 'tidelake[airflow]'): {exc}") from None
    upstream = _OPEN.enter_context(TiDBPDHook(conn_id).upstream(config.upstream.gc_ttl_s))
    return replace(config, upstream=upstream)
