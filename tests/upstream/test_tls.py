"""PD over mutual TLS with certificates made by openssl for the test; plaintext dial is refused."""

from __future__ import annotations

from concurrent import futures

import grpc
import pytest
from pd_members import PdMembers
from tls_certs import HAVE_OPENSSL, make_certs

from tidelake.config import TlsConfig
from tidelake.errors import InputError
from tidelake.kvproto import pdpb_pb2_grpc
from tidelake.upstream.channels import credentials
from tidelake.upstream.pd_client import PDClient
from tidelake.upstream.upstream_errors import UpstreamError

pytestmark = pytest.mark.skipif(not HAVE_OPENSSL, reason="needs the openssl command")


@pytest.fixture
def certs(tmp_path):
    return make_certs(tmp_path)


def test_mutual_tls_to_pd(sim, certs):
    switch = PdMembers(sim)
    server = grpc.server(futures.ThreadPoolExecutor(4))
    pdpb_pb2_grpc.add_PDServicer_to_server(switch.servicer(0), server)
    credentials = grpc.ssl_server_credentials(
        [((certs / "server.key").read_bytes(), (certs / "server.pem").read_bytes())],
        root_certificates=(certs / "ca.pem").read_bytes(),
        require_client_auth=True,
    )
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    switch.urls.append(f"127.0.0.1:{port}")
    try:
        tls = TlsConfig(ca=str(certs / "ca.pem"), cert=str(certs / "client.pem"), key=str(certs / "client.key"))
        with PDClient([f"https://127.0.0.1:{port}"], tls=tls, retry_timeout_s=5) as client:
            assert client.cluster_id == sim.cluster_id
            assert client.get_ts() > 0
        with pytest.raises(UpstreamError, match="GetMembers"):
            PDClient([f"127.0.0.1:{port}"], timeout_s=0.5, retry_timeout_s=1)
    finally:
        server.stop(None)


def test_missing_tls_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="TLS ca file"):
        credentials(TlsConfig(ca=str(tmp_path / "absent.pem")))


def test_the_puller_lands_a_table_over_mutual_tls_to_pd_and_tikv(certs, tmp_path):
    """The settings README documents: [upstream.tls] ca, cert and key, with every PD and store
    port of the cluster on TLS that requires a client certificate (schema and snapshot reads,
    the TSO, the CDC streams)."""
    from tests.capture.pull_harness import changelog, config_doc, oracle, wait_resolved
    from tests.capture.tidb_writes import TiDBWrites
    from tidelake.capture.changefeed.puller_thread import PullerThread
    from tidelake.config import parse_config
    from tidelake.sim.cluster import SimCluster

    server = grpc.ssl_server_credentials([((certs / "server.key").read_bytes(), (certs / "server.pem").read_bytes())],
                                         root_certificates=(certs / "ca.pem").read_bytes(), require_client_auth=True)
    sim = SimCluster(n_stores=2, split_check_interval_s=0, gc_interval_s=0, server_workers=8,
                     cdc_options={"min_ts_interval_s": 0.2}, server_credentials=server)
    with sim:
        tidb = TiDBWrites(sim)
        tidb.create_db(2, "shop")
        tidb.create_table(2, 110, "t110")
        lake = tmp_path / "lake"
        doc = config_doc(sim, lake)
        doc["upstream"]["pd"] = [f"https://{sim.pd_address}"]
        doc["upstream"]["tls"] = {"ca": str(certs / "ca.pem"), "cert": str(certs / "client.pem"),
                                  "key": str(certs / "client.key")}
        with PullerThread(parse_config(doc, "test.toml")) as run:
            wait_resolved(lake, {110: 1}, 1, run)
            last = tidb.rows(110, {h: bytes([h]) * 4 for h in range(5)})
            wait_resolved(lake, {110: last}, 1, run)
        assert run.error is None
        landed = {row for row in changelog(lake) if row[0] == 110}
        assert landed == oracle(sim, 110, run.summary.start_ts) and len(landed) == 5
