"""The package tree reads in data-flow order: no import runs against it, and no module cycle.

Product stages, lowest first (docs/design.md#components): a module may import its own stage or a lower
one. The test kit (the simulator, the nemesis, the demos) is a lane beside the product: the
product never imports it, the kit may use the product, and the simulator uses only the base and
the codec, as a real TiKV shares nothing with our clients. The command line sits on top of both.
Third-party frameworks stay in the stages that need them, so the rest runs without Airflow or Spark.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tidelake"

# (stage, module prefixes), lowest first; the longest matching prefix decides.
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("tidelake.errors", "tidelake.failpoints", "tidelake.tso", "tidelake.table_names", "tidelake.table_filter",
              "tidelake.config", "tidelake.config_writer", "tidelake.wait", "tidelake.stop_signals", "tidelake.side_by_side", "tidelake.kvproto")),
    ("codec", ("tidelake.codec",)),
    ("upstream", ("tidelake.upstream",)),
    ("lake", ("tidelake.lake",)),
    ("capture.eventfeed", ("tidelake.capture.eventfeed", "tidelake.capture.puller_errors")),
    ("capture.landing", ("tidelake.capture.landing",)),
    ("capture.changefeed", ("tidelake.capture",)),
    ("spark", ("tidelake.spark",)),
    ("merge", ("tidelake.merge",)),
    ("syncpoint", ("tidelake.syncpoint",)),
    ("maintenance", ("tidelake.maintenance",)),
    ("bootstrap", ("tidelake.bootstrap",)),
    ("verify", ("tidelake.verify",)),
    ("consumers", ("tidelake.consumers",)),
    ("status", ("tidelake.status",)),
    ("orchestration", ("tidelake.orchestration",)),
    ("orchestration.airflow", ("tidelake.orchestration.airflow",)),
]
# The test kit, lowest first: each may import the product, the kit before it, and itself.
KIT: list[tuple[str, tuple[str, ...]]] = [
    ("sim", ("tidelake.sim",)),
    ("demos", ("tidelake.demos",)),
    ("nemesis", ("tidelake.nemesis",)),
]
SIM_MAY_IMPORT = ("base", "codec")
TOP = ("tidelake.cli", "tidelake.__main__")  # may import anything
OPTION = re.compile(r"--[A-Za-z]")  # a long command-line option

# Third-party packages allowed only under these module prefixes.
CONFINED: dict[str, tuple[str, ...]] = {
    "airflow": ("tidelake.orchestration.airflow",),
    "pyspark": ("tidelake.spark", "tidelake.merge", "tidelake.syncpoint", "tidelake.maintenance", "tidelake.bootstrap",
                "tidelake.verify", "tidelake.consumers", "tidelake.orchestration.job_entry", "tidelake.demos"),
    "delta": ("tidelake.spark", "tidelake.merge", "tidelake.bootstrap"),
    "grpc": ("tidelake.kvproto", "tidelake.upstream", "tidelake.capture", "tidelake.sim", "tidelake.cli.status_command"),
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


def _rank(module: str, stages: list[tuple[str, tuple[str, ...]]]) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, rank): the longest prefix decides
    for rank, (_, prefixes) in enumerate(stages):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), rank)
    return None if best is None else best[1]


def _stage(module: str) -> int | None:
    return _rank(module, STAGES)


def _kit(module: str) -> int | None:
    return _rank(module, KIT)


def _top(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in TOP)


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        targets = {_resolve(n) for n in _imports(path, module) if n.startswith("tidelake")}
        edges[module] = {t for t in targets if t is not None and t != module}
    return edges


EDGES = _edges()


def test_every_module_has_a_stage():
    unstaged = [m for m in MODULES if m != "tidelake" and _stage(m) is None and _kit(m) is None and not _top(m)]
    assert not unstaged, f"give these modules a stage in STAGES or KIT: {unstaged}"


def _against(module: str, target: str) -> bool:
    """Whether `module` importing `target` runs against the flow (see the module doc)."""
    if target == "tidelake" or _top(module):
        return False
    if _top(target):
        return True
    kit, target_kit = _kit(module), _kit(target)
    if kit is None:  # the product: never the kit, never a later stage
        return target_kit is not None or _stage(target) > _stage(module)
    if target_kit is not None:
        return target_kit > kit
    return kit == 0 and STAGES[_stage(target)][0] not in SIM_MAY_IMPORT


def test_no_import_runs_against_the_flow():
    against = [f"{module} -> {target}" for module, targets in EDGES.items() for target in targets
               if _against(module, target)]
    assert not against, "imports against the data flow:\n" + "\n".join(sorted(against))


def test_the_product_imports_nothing_of_the_test_kit():
    """The kit lane, told apart from the flow above so its message names it."""
    product = [m for m in EDGES if _kit(m) is None and not _top(m)]
    found = [f"{m} -> {t}" for m in product for t in EDGES[m] if _kit(t) is not None]
    assert not found, "the product imports the test kit:\n" + "\n".join(sorted(found))


def test_no_two_modules_share_a_name():
    """One name per concept: a module's file name says what it is wherever it is read (a traceback,
    a log line), so no two modules carry the same one (package faces and generated code apart)."""
    names = Counter(p.name for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" and "kvproto" not in p.parts)
    assert not [n for n, count in names.items() if count > 1], sorted(n for n, c in names.items() if c > 1)


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


@pytest.mark.parametrize("folder", ["dags", "plugins", "tidelake/orchestration/spark_jobs"])
def test_entry_points_do_not_reach_into_the_cli(folder):
    """A Spark job runs its job spec (tidelake.orchestration.job_entry); no entry point goes
    through the command line."""
    offenders = []
    for path in sorted((ROOT / folder).glob("*.py")):
        offenders += [f"{path.relative_to(ROOT)} imports {name}" for name in _imports(path, path.stem)
                      if name.startswith("tidelake.cli")]
    assert not offenders, "\n".join(offenders)


def test_orchestration_builds_no_command_lines():
    """Airflow hands Spark jobs a job spec (tidelake.orchestration.job_spec), never arguments to
    parse: no option string (`--name`; PEM armour like `-----BEGIN` is none) is written in
    orchestration or the DAG files."""
    found = []
    for path in [*sorted((PACKAGE / "orchestration").rglob("*.py")), *sorted((ROOT / "dags").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and OPTION.match(node.value):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not found, "command-line options built in orchestration:\n" + "\n".join(found)
