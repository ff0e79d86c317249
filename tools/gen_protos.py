"""Generate tidelake/kvproto/ from protos/*.proto with the venv's grpc_tools.protoc.

The generated code is committed so that installs need no protoc; this script must therefore be
byte-for-byte reproducible (sorted inputs, no timestamps, fixed package name), and
tests/protos checks that the committed copy equals a fresh run.

protoc writes sibling imports (`import metapb_pb2 as metapb__pb2`) that only work with the output
folder on sys.path; they are rewritten to package imports (docs/stack.md#grpc-and-protobuf-code-generation-and-versions).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROTO_DIR = REPO / "protos"
DEFAULT_OUT = REPO / "tidelake" / "kvproto"
PACKAGE = "tidelake.kvproto"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2_grpc.py", "_pb2.pyi")
INIT_TEXT = '''"""kvproto-compatible protobuf and gRPC modules (packages cdcpb, pdpb, metapb, errorpb, kvrpcpb, tikvpb, etcdserverpb, mvccpb).

Generated from protos/*.proto by `make protos` (tools/gen_protos.py). Do not edit: edit the
.proto files and regenerate; tests/protos fails when this folder is stale.
"""
'''

_SIBLING_IMPORT = re.compile(r"^import (\w+_pb2) as (\w+)$", re.MULTILINE)
_CLASS_DEF = re.compile(r"^class ", re.MULTILINE)


def proto_files(proto_dir: Path = PROTO_DIR) -> list[Path]:
    """The .proto inputs in a fixed order, so that output never depends on directory listing order."""
    return sorted(proto_dir.glob("*.proto"))


def run_protoc(proto_dir: Path, raw_out: Path) -> None:
    """Run the venv's protoc (grpc_tools) once over every input; raises SystemExit on failure."""
    files = [str(p) for p in proto_files(proto_dir)]
    if not files:
        raise SystemExit(f"gen_protos: no .proto files in {proto_dir}")
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"--proto_path={proto_dir}",
        f"--python_out={raw_out}",
        f"--grpc_python_out={raw_out}",
        f"--pyi_out={raw_out}",
        *files,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"gen_protos: protoc failed ({done.returncode}):\n{done.stderr.strip()}")


def package_imports(source: str) -> str:
    """Rewrite protoc's sibling imports to imports from the tidelake.kvproto package."""
    return _SIBLING_IMPORT.sub(rf"from {PACKAGE} import \1 as \2", source)


def generate(out_dir: Path, proto_dir: Path = PROTO_DIR) -> list[Path]:
    """Write the generated modules and __init__.py into out_dir; drop generated files no proto produces."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="gen_protos_") as tmp:
        raw_out = Path(tmp)
        run_protoc(proto_dir, raw_out)
        for raw in sorted(raw_out.iterdir()):
            text = raw.read_text(encoding="utf-8")
            if raw.name.endswith("_pb2_grpc.py") and not _CLASS_DEF.search(text):
                continue  # a .proto without a service: protoc's grpc module would only import grpc
            target = out_dir / raw.name
            target.write_bytes(package_imports(text).encode("utf-8"))
            written.append(target)
    init = out_dir / "__init__.py"
    init.write_bytes(INIT_TEXT.encode("utf-8"))
    written.append(init)
    for old in sorted(out_dir.iterdir()):
        if old.name.endswith(GENERATED_SUFFIXES) and old not in written:
            old.unlink()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: tidelake/kvproto)")
    args = parser.parse_args(argv)
    written = generate(args.out)
    print(f"gen_protos: wrote {len(written)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
