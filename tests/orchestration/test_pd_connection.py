"""A tidb_pd connection's fields become the UpstreamConfig the puller dials, or one line naming
the connection id and the field; PEM text lands in owner-only files, the key's value is never shown."""

from __future__ import annotations

import stat

import pytest

from tidelake.config import TlsConfig, UpstreamConfig
from tidelake.errors import InputError
from tidelake.orchestration.pd_connection import pd_connection

CA = "-----BEGIN CERTIFICATE-----\nQ0EgY2VydA==\n-----END CERTIFICATE-----\n"
CERT = "-----BEGIN CERTIFICATE-----\nY2xpZW50IGNlcnQ=\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n"


def test_endpoints_from_host_port_and_extras(tmp_path):
    conn = pd_connection("pd", "pd-0", 2380, {"pd_endpoints": "pd-1:2379, pd-2:2379", "cluster": "prod"}, tmp_path)
    assert conn.upstream == UpstreamConfig(pd=("pd-0:2380", "pd-1:2379", "pd-2:2379"))
    assert conn.summary() == {"conn_id": "pd", "cluster": "prod", "pd": ["pd-0:2380", "pd-1:2379", "pd-2:2379"],
                              "tls": "none"}


def test_default_port_list_extras_and_form_prefix(tmp_path):
    conn = pd_connection("pd", "10.0.0.1", None, {"extra__tidb_pd__pd_endpoints": ["10.0.0.2:2379"],
                                                  "extra__tidb_pd__cluster": ""}, tmp_path, gc_ttl_s=600.0)
    assert conn.upstream == UpstreamConfig(pd=("10.0.0.1:2379", "10.0.0.2:2379"), gc_ttl_s=600.0)
    assert conn.cluster is None


def test_host_may_carry_its_port(tmp_path):
    assert pd_connection("pd", "https://pd-0:2380", None, {}, tmp_path).upstream.pd == ("https://pd-0:2380",)
    assert pd_connection("pd", "pd-0:2380", 2380, {}, tmp_path).upstream.pd == ("pd-0:2380",)


def test_pem_text_goes_to_owner_only_files(tmp_path):
    pem_dir = tmp_path / "pem"
    conn = pd_connection("pd", "pd-0", 2379, {"tls_ca": CA, "tls_cert": CERT, "tls_private_key": KEY}, pem_dir)
    tls = conn.upstream.tls
    assert tls is not None and conn.summary()["tls"] == "mutual"
    for path, text in ((tls.ca, CA), (tls.cert, CERT), (tls.key, KEY)):
        assert open(path).read() == text
        assert stat.S_IMODE((pem_dir / path).stat().st_mode) == 0o600
    assert stat.S_IMODE(pem_dir.stat().st_mode) == 0o700
    assert KEY not in repr(conn) and KEY not in repr(conn.summary())


def test_file_paths_are_kept(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text(CA)
    conn = pd_connection("pd", "pd-0", 2379, {"tls_ca": str(ca)}, tmp_path / "pem")
    assert conn.upstream.tls == TlsConfig(ca=str(ca))
    assert conn.summary()["tls"] == "server"
    assert not (tmp_path / "pem").exists()


@pytest.mark.parametrize(
    ("host", "port", "extra", "field"),
    [
        ("", 2379, {}, "host"),
        ("pd-0", 70000, {}, "host"),
        ("pd-0:2380", 2379, {}, "port"),
        ("pd-0", 2379, {"pd_endpoints": "pd-1:2379,pd-2"}, "pd_endpoints"),
        ("pd-0", 2379, {"pd_endpoints": 5}, "pd_endpoints"),
        ("pd-0", 2379, {"tls-ca": CA}, "tls-ca"),
        ("pd-0", 2379, {"cluster": 3}, "cluster"),
        ("pd-0", 2379, {"tls_cert": CERT, "tls_private_key": KEY}, "tls_ca"),
        ("pd-0", 2379, {"tls_ca": CA, "tls_cert": CERT}, "tls_private_key"),
        ("pd-0", 2379, {"tls_ca": CA, "tls_private_key": KEY}, "tls_cert"),
        ("pd-0", 2379, {"tls_ca": "/no/such/ca.pem"}, "tls_ca"),
    ],
)
def test_bad_fields_fail_in_one_line_naming_connection_and_field(tmp_path, host, port, extra, field):
    with pytest.raises(InputError) as caught:
        pd_connection("prod_pd", host, port, extra, tmp_path)
    message = str(caught.value)
    assert message.startswith(f"tidb_pd connection 'prod_pd': {field}: ") and "\n" not in message


def test_bad_private_key_value_is_not_shown(tmp_path):
    secret = "not-a-pem-but-still-secret-4711"
    with pytest.raises(InputError) as caught:
        pd_connection("pd", "pd-0", 2379, {"tls_ca": CA, "tls_cert": CERT, "tls_private_key": secret}, tmp_path)
    assert "tls_private_key" in str(caught.value) and secret not in str(caught.value)
