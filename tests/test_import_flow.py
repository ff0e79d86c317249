"""The package tree reads in data-flow order: no import runs against it, and no module cycle.

Stages, lowest first (docs/design.md §4). A module may import its own stage or a lower one; the
simulator is a lane of its own beside the product (it may use only the base and the codec, as a
real TiKV shares nothing with our clients). Third-party frameworks stay in the stages that need
them, so the rest is testable without Airflow or Spark.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tidelake"

# (stage, module prefixes), lowest first.
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("tidelake.errors", "tidelake.failpoints", "tidelake.tso", "tidelake.table_names", "tidelake.table_filter",
              "tidelake.config", "tidelake.config_writer", "tidelake.wait", "tidelake.kvproto")),
    ("codec", ("tidelake.codec",)),
    ("upstream", ("tidelake.upstream",)),
    ("lake", ("tidelake.lake",)),
    ("capture.eventfeed", ("tidelake.capture.eventfeed", "tidelake.capture.errors")),
    ("capture.changefeed", ("tidelake.capture",)),
    ("apply", ("tidelake.apply",)),
    ("bootstrap", ("tidelake.bootstrap",)),
    ("orchestration", ("tidelake.orchestration.assets", "tidelake.orchestration.backfill",
                       "tidelake.orchestration.changefeeds", "tidelake.orchestration.merge_history",
                       "tidelake.orchestration.merge_run", "tidelake.orchestration.page_report",
                       "tidelake.orchestration.params",
                       "tidelake.orchestration.plugin_views", "tidelake.orchestration.spark_submit",
                       "tidelake.orchestration")),
    ("orchestration.airflow", ("tidelake.orchestration.airflow",)),
    ("demos", ("tidelake.demos",)),
    ("nemesis", ("tidelake.nemesis",)),
    ("cli", ("tidelake.cli", "tidelake.__main__")),
]
SIM = "tidelake.sim"
SIM_MAY_IMPORT = ("base", "codec")

# Third-party packages allowed only under these module prefixes.
CONFINED: dict[str, tuple[str, ...]] = {
    "airflow": ("tidelake.orchestration.airflow",),
    "pyspark": ("tidelake.apply", "tidelake.bootstrap", "tidelake.demos", "tidelake.orchestration.spark_submit"),
    "delta": ("tidelake.apply", "tidelake.bootstrap"),
    "grpc": ("tidelake.kvproto", "tidelake.upstream", "tidelake.capture", "tidelake.sim", "tidelake.cli.status"),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str) -> set[str]:
    """Every module `path` imports, TYPE_CHECKING blocks and function-level imports included."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py") if "kvproto" not in p.parts}


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The tidelake module `name` refers to (a module, or the module defining an imported name)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _stage(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, rank): the longest prefix decides
    for rank, (_, prefixes) in enumerate(STAGES):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), rank)
    return None if best is None else best[1]


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        targets = {_resolve(n) for n in _imports(path, module) if n.startswith("tidelake")}
        edges[module] = {t for t in targets if t is not None and t != module}
    return edges


EDGES = _edges()


def test_every_module_has_a_stage():
    unstaged = [m for m in MODULES if not m.startswith(SIM) and _stage(m) is None and m != "tidelake"]
    assert not unstaged, f"give these modules a stage in STAGES: {unstaged}"


def test_no_import_runs_against_the_flow():
    sim_allowed = {i for i, (name, _) in enumerate(STAGES) if name in SIM_MAY_IMPORT}
    against = []
    for module, targets in EDGES.items():
        for target in targets:
            if target == "tidelake":
                continue
            if module.startswith(SIM):
                if not target.startswith(SIM) and _stage(target) not in sim_allowed:
                    against.append(f"{module} -> {target}")
            elif target.startswith(SIM):
                if _stage(module) < _stage("tidelake.demos"):
                    against.append(f"{module} -> {target}")
            elif _stage(target) > _stage(module):
                against.append(f"{module} -> {target}")
    assert not against, "imports against the data flow:\n" + "\n".join(sorted(against))


def test_no_module_cycle():
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(EDGES.get(module, ())):
            if state.get(target) == 1:
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in sorted(EDGES):
        if module not in state:
            visit(module)
    assert not cycles, "module cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("package", sorted(CONFINED))
def test_frameworks_stay_in_their_stages(package):
    outside = []
    for module, path in MODULES.items():
        names = _imports(path, module)
        if any(n == package or n.startswith(package + ".") for n in names):
            if not any(module == p or module.startswith(p + ".") for p in CONFINED[package]):
                outside.append(module)
    assert not outside, f"{package} imported outside {CONFINED[package]}: {outside}"


@pytest.mark.parametrize("folder", ["dags", "plugins", "spark_jobs"])
def test_entry_points_do_not_reach_into_the_cli(folder):
    """A spark job is a `tidelake` command under spark-submit (tidelake.cli.submitted), nothing more."""
    offenders = []
    for path in sorted((ROOT / folder).glob("*.py")):
        for name in _imports(path, path.stem):
            if name.startswith("tidelake.cli") and not name.startswith("tidelake.cli.submitted"):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, "\n".join(offenders)
