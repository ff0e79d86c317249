"""The committed tidelake/kvproto/ must equal a fresh, reproducible run of tools/gen_protos.py."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "tidelake" / "kvproto"
GENERATOR = REPO / "tools" / "gen_protos.py"


def _generate(out: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(GENERATOR), "--out", str(out)], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, done.stderr


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.suffix in (".py", ".pyi")}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("kvproto")
    _generate(out)
    return _listing(out)


def test_committed_code_is_not_stale(fresh: dict[str, bytes]) -> None:
    committed = _listing(COMMITTED)
    missing = sorted(set(fresh) - set(committed))
    extra = sorted(set(committed) - set(fresh))
    assert not missing, f"tidelake/kvproto lacks {missing}: run make protos"
    assert not extra, f"tidelake/kvproto has files no .proto produces {extra}: run make protos"
    for name, content in fresh.items():
        assert committed[name] == content, f"tidelake/kvproto/{name} is stale: run make protos"


def test_generation_is_reproducible(fresh: dict[str, bytes], tmp_path: Path) -> None:
    _generate(tmp_path)
    assert _listing(tmp_path) == fresh


def test_every_module_that_protos_declare_is_generated(fresh: dict[str, bytes]) -> None:
    stems = sorted(p.stem for p in (REPO / "protos").glob("*.proto"))
    assert {"cdcpb", "pdpb", "metapb", "errorpb", "kvrpcpb", "tikvpb", "etcdserverpb", "mvccpb"} <= set(stems)
    for stem in stems:
        assert f"{stem}_pb2.py" in fresh and f"{stem}_pb2.pyi" in fresh
    services = {name.removesuffix("_pb2_grpc.py") for name in fresh if name.endswith("_pb2_grpc.py")}
    assert services == {"cdcpb", "pdpb", "tikvpb", "etcdserverpb"}


def test_imports_are_package_imports(fresh: dict[str, bytes]) -> None:
    for name, content in fresh.items():
        text = content.decode("utf-8")
        assert not re.search(r"^import \w+_pb2\b", text, re.MULTILINE), f"{name} has a sibling import"
    assert b"from tidelake.kvproto import metapb_pb2 as metapb__pb2" in fresh["cdcpb_pb2.py"]
    assert b"from tidelake.kvproto import cdcpb_pb2 as cdcpb__pb2" in fresh["cdcpb_pb2_grpc.py"]


def test_stubs_and_modules_are_valid_python(fresh: dict[str, bytes]) -> None:
    for name, content in fresh.items():
        ast.parse(content, filename=name)


def test_generated_files_no_proto_produces_are_removed(tmp_path: Path) -> None:
    leftover = tmp_path / "gone_pb2.py"
    leftover.write_text("stale\n")
    unrelated = tmp_path / "notes.txt"
    unrelated.write_text("keep\n")
    _generate(tmp_path)
    assert not leftover.exists()
    assert unrelated.read_text() == "keep\n"
