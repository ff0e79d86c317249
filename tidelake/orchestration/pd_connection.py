"""A TiDB/PD Airflow connection's fields as the upstream config the puller dials (config.UpstreamConfig).

Host and port name the first PD endpoint; extras add `pd_endpoints`, a `cluster` label and TLS
(`tls_ca`, `tls_cert`, `tls_private_key`: PEM text, as a secrets backend keeps it, or a file path).
PEM text is written to owner-only files in a folder the caller owns, because the channels read
paths when they dial (tidelake.upstream.channels). Any problem is one InputError naming the
connection id and the field; the private key's value is never shown, whatever is wrong with it.
Owner: the TiDB PD hook (tidelake.orchestration.airflow.hooks.tidb_pd).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidelake.config import UpstreamConfig, TlsConfig, check_pd_address
from tidelake.errors import InputError

CONN_TYPE = "tidb_pd"
HOOK_NAME = "TiDB PD"  # the connection type's name in Airflow's form and `airflow providers hooks`
DEFAULT_PD_PORT = 2379  # PD's client port (pd-server --client-urls default)
# How Airflow's connection form may store a custom field: plain, or prefixed by the connection type.
_FORM_PREFIX = f"extra__{CONN_TYPE}__"
TLS_FIELDS = ("tls_ca", "tls_cert", "tls_private_key")
EXTRA_FIELDS = ("pd_endpoints", "cluster", *TLS_FIELDS)
SECRET_FIELDS = ("tls_private_key",)  # Airflow's masker also hides it by name ("private_key")
_PEM_BEGIN = "-----BEGIN "


@dataclass(frozen=True)
class PdConnection:
    """What the puller needs from one connection; the key's PEM text stays in a file, never here."""

    conn_id: str
    cluster: str | None
    upstream: UpstreamConfig

    def summary(self) -> dict[str, Any]:
        """Safe to log and to push to XCom: endpoints, cluster and which TLS parts are set, no secret."""
        tls = self.upstream.tls
        return {"conn_id": self.conn_id, "cluster": self.cluster, "pd": list(self.upstream.pd),
                "tls": "none" if tls is None else ("mutual" if tls.key else "server")}


def pd_connection(conn_id: str, host: str | None, port: int | None, extra: Mapping[str, Any], pem_dir: Path,
                  gc_ttl_s: float = UpstreamConfig.gc_ttl_s) -> PdConnection:
    """Validate the connection's fields; PEM text goes to files under `pem_dir` (created 0700)."""
    fields = _extras(conn_id, extra)
    if not host or not host.strip():
        raise _bad(conn_id, "host", "is empty: the first PD endpoint's host, like pd-0.pd")
    endpoints = [_endpoint(conn_id, host.strip(), port), *_more_endpoints(conn_id, fields)]
    for index, address in enumerate(endpoints):
        try:
            check_pd_address(address)
        except ValueError as exc:
            raise _bad(conn_id, "pd_endpoints" if index else "host", str(exc)) from None
    cluster = fields.get("cluster")
    if cluster is not None and (not isinstance(cluster, str) or not cluster.strip()):
        raise _bad(conn_id, "cluster", f"expected a non-empty name, got {cluster!r}")
    tls = _tls(conn_id, fields, pem_dir)
    return PdConnection(conn_id=conn_id, cluster=cluster,
                        upstream=UpstreamConfig(pd=tuple(endpoints), tls=tls, gc_ttl_s=gc_ttl_s))


def _extras(conn_id: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """Extras by field name, form-prefixed or not; an unknown key is an error (a typo would drop TLS)."""
    fields: dict[str, Any] = {}
    for key, value in extra.items():
        name = key.removeprefix(_FORM_PREFIX)
        if name not in EXTRA_FIELDS:
            raise _bad(conn_id, key, f"unknown extra (valid: {', '.join(EXTRA_FIELDS)})")
        if value not in (None, ""):  # the connection form stores untouched fields as empty
            fields[name] = value
    return fields


def _endpoint(conn_id: str, host: str, port: int | None) -> str:
    if ":" not in host.split("://")[-1]:
        return f"{host}:{port or DEFAULT_PD_PORT}"
    # The host carries its port (or is a bracketed IPv6 address): the port field must not contradict it.
    if port and not host.rstrip("/").endswith(f":{port}"):
        raise _bad(conn_id, "port", f"{port}, but host {host!r} names another port")
    return host


def _more_endpoints(conn_id: str, fields: Mapping[str, Any]) -> list[str]:
    value = fields.get("pd_endpoints")
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) and item.strip() for item in items):
        raise _bad(conn_id, "pd_endpoints", f"expected 'host:port' items separated by commas, got {value!r}")
    return [item.strip() for item in items]


def _tls(conn_id: str, fields: Mapping[str, Any], pem_dir: Path) -> TlsConfig | None:
    paths = {name: _pem_path(conn_id, name, fields[name], pem_dir) for name in TLS_FIELDS if name in fields}
    if not paths:
        return None
    if "tls_ca" not in paths:
        raise _bad(conn_id, "tls_ca", "required when tls_cert or tls_private_key is set")
    if ("tls_cert" in paths) != ("tls_private_key" in paths):
        missing = "tls_private_key" if "tls_cert" in paths else "tls_cert"
        raise _bad(conn_id, missing, "required with the other one (mutual TLS needs both)")
    return TlsConfig(ca=paths["tls_ca"], cert=paths.get("tls_cert"), key=paths.get("tls_private_key"))


def _pem_path(conn_id: str, name: str, value: Any, pem_dir: Path) -> str:
    """A PEM file for `value`: its text written under `pem_dir`, or the existing file it names."""
    shown = "(value not shown)" if name in SECRET_FIELDS else repr(value)
    if not isinstance(value, str):
        raise _bad(conn_id, name, f"expected PEM text or a file path, got {shown}")
    if value.lstrip().startswith(_PEM_BEGIN):
        pem_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = pem_dir / f"{name}.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(value)
        return str(path)
    if not Path(value).is_file():
        raise _bad(conn_id, name, f"neither PEM text nor an existing file: {shown}")
    return value


def _bad(conn_id: str, field: str, problem: str) -> InputError:
    return InputError(f"{CONN_TYPE} connection {conn_id!r}: {field}: {problem}")
