"""tikv-client-java 3.3.5 at its defaults against the simulator (docs/wire.md#grpc-health, docs/wire.md#request-forwarding).

The Java client health-checks every store and, when a check fails, forwards requests through
another store; against a store without gRPC health it looped on StoreNotMatch. Here it must
commit a two-phase transaction across regions and scan it back without forwarding once. The
program (javaclient/ beside this file) is compiled at test time with Maven and javac into a
temporary folder; nothing fetched is kept. The oracle is the simulator's own scan at the same ts.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.capture.pull_harness import sim  # noqa: F401 (fixture)
from tidelake.codec.keys import record_key, table_record_span
from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.sim.cluster import SimCluster

HERE = Path(__file__).resolve().parent / "javaclient"
TABLE = 130


@pytest.fixture(scope="module")
def javaclient(tmp_path_factory) -> list[str]:
    mvn, javac, java = shutil.which("mvn"), shutil.which("javac"), shutil.which("java")
    if not (mvn and javac and java):
        pytest.skip("Maven and a JDK are not installed")
    build = tmp_path_factory.mktemp("javaclient")
    shutil.copytree(HERE, build, dirs_exist_ok=True)
    lib, out = build / "lib", build / "out"
    steps = ([mvn, "-q", "-B", "dependency:copy-dependencies", f"-DoutputDirectory={lib}"],
             [javac, "-cp", f"{lib}/*", "-d", str(out), "src/main/java/tidelake/Main.java"])
    for args in steps:
        done = subprocess.run(args, cwd=build, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{args[0]} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    return [java, "-cp", f"{out}:{lib}/*", "tidelake.Main"]


def test_java_client_commits_and_scans_without_forwarding(javaclient, sim, monkeypatch):
    forwarded = []
    monkeypatch.setattr(SimCluster, "kv_service_at", lambda self, address: forwarded.append(address))
    sim.split_table(TABLE)
    sim.split_table(TABLE + 1)
    split = encode_bytes(record_key(TABLE, 50))
    sim.split_region(sim.regions.locate(split).id, split)
    lo, hi = table_record_span(TABLE)
    keys = [record_key(TABLE, h).hex() for h in (10, 60, 70)]  # primary and a secondary in another region
    done = subprocess.run([*javaclient, sim.pd_address, lo.hex(), hi.hex(), *keys],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    ts_line, *rows = [line for line in done.stdout.splitlines() if line.strip()]
    got = [tuple(bytes.fromhex(part) for part in line.split(" ")[1:]) for line in rows]
    assert got == sim.mvcc.scan(lo, hi, int(ts_line), None) and len(got) == 3
    assert forwarded == []
