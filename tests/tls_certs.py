"""A test CA and a server and a client certificate it signed (EC P-256, valid one day, for
127.0.0.1 and localhost), made by the openssl command: ca.pem, server.pem/.key, client.pem/.key."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

HAVE_OPENSSL = shutil.which("openssl") is not None


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _issue(name: str, cwd: Path) -> None:
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=cwd)
    (cwd / f"{name}.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", f"{name}.pem", "-days", "1", "-extfile", f"{name}.ext", cwd=cwd)


def make_certs(folder: Path) -> Path:
    """The CA and both certificates in `folder` (made if missing), which is returned."""
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=tidelake-test-ca", cwd=folder)
    _issue("server", folder)
    _issue("client", folder)
    return folder
