"""A changefeed's [upstream].connection, resolved by the Airflow task, handed to the Spark job it
starts: the variable HANDOFF_ENV of the task's process, which the spark-submit (client deploy
mode: the driver is its child on the worker) and a job run in the task inherit, holding the
connection id, the PD endpoints and the paths of the TLS files the task wrote, never PEM text.
So no endpoint, path or key reaches a command line, a Spark conf of the DAG, a rendered template
or XCom, and the files live exactly while the task runs. The job reads it back here; a variable
naming another connection, or not one this module wrote, is one InputError line.
Owner: the Spark task (tidelake.orchestration.airflow.spark_operator) writes it, job_entry reads it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import replace

from tidelake.config import ChangefeedConfig, TlsConfig, UpstreamConfig
from tidelake.errors import InputError

HANDOFF_ENV = "TIDELAKE_RESOLVED_UPSTREAM"  # set by the Spark task for its job, never by a deployment
_TLS_PARTS = ("ca", "cert", "key")


def handoff_environment(conn_id: str, upstream: UpstreamConfig) -> dict[str, str]:
    """The variables that hand `upstream`, resolved from connection `conn_id`, to the job."""
    tls = upstream.tls
    document = {"connection": conn_id, "pd": list(upstream.pd),
                "tls": None if tls is None else {part: getattr(tls, part) for part in _TLS_PARTS}}
    return {HANDOFF_ENV: json.dumps(document, sort_keys=True)}


def received_upstream(config: ChangefeedConfig, environ: Mapping[str, str] | None = None) -> ChangefeedConfig:
    """`config` with [upstream].connection replaced by the endpoints and TLS files the task handed
    over; unchanged when it names PD itself or nothing was handed over (a job that dials PD then
    fails on UpstreamConfig.endpoints, in one line)."""
    conn_id = config.upstream.connection
    text = (os.environ if environ is None else environ).get(HANDOFF_ENV)
    if conn_id is None or text is None:
        return config
    where = f"{config.source}: [upstream].connection {conn_id!r}: {HANDOFF_ENV}"
    try:
        document = json.loads(text)
        handed = document["connection"]
        pd = document["pd"]
        tls = document["tls"]
    except (ValueError, TypeError, KeyError) as exc:
        raise InputError(f"{where}: not what the Spark task hands over ({type(exc).__name__}: {exc})") from None
    if handed != conn_id:
        raise InputError(f"{where}: names connection {handed!r}: the task resolved another changefeed's upstream")
    if not isinstance(pd, list) or not pd or not all(isinstance(address, str) for address in pd):
        raise InputError(f"{where}: pd: expected the PD endpoints, got {pd!r}")
    if tls is not None and (not isinstance(tls, dict) or not isinstance(tls.get("ca"), str)):
        raise InputError(f"{where}: tls: expected the TLS file paths, got {tls!r}")
    upstream = UpstreamConfig(pd=tuple(pd), gc_ttl_s=config.upstream.gc_ttl_s,
                              tls=None if tls is None else TlsConfig(**{part: tls.get(part) for part in _TLS_PARTS}))
    return replace(config, upstream=upstream)
