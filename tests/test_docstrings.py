"""Docstrings say the invariant and its owner in at most 10 lines; the long form of a module's is
in docs/internals.md, under the module's name (module names are unique in the package). Every
product module's docstring names its owner in the house sentence "Owner: <stage or command>."."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tidelake"
MAX_LINES = 10
FILES = sorted(p for p in PACKAGE.rglob("*.py") if "kvproto" not in p.parts)
TEST_KIT = {"sim", "nemesis", "demos"}
TRIVIAL_INIT_BYTES = 200  # an __init__.py this small only marks a package
PRODUCT = [p for p in FILES if not TEST_KIT & set(p.relative_to(PACKAGE).parts)
           and not (p.name == "__init__.py" and p.stat().st_size < TRIVIAL_INIT_BYTES)]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_docstrings_are_at_most_ten_lines(path):
    tree = ast.parse(path.read_text(), str(path))
    long = [f"{getattr(node, 'name', '<module>')}: {len(doc.strip().splitlines())} lines"
            for node in [tree, *ast.walk(tree)]
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and (doc := ast.get_docstring(node, clean=False)) and len(doc.strip().splitlines()) > MAX_LINES]
    assert not long, f"{path.relative_to(PACKAGE)}: " + "; ".join(long)


@pytest.mark.parametrize("path", PRODUCT, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_product_modules_name_their_owner(path):
    doc = ast.get_docstring(ast.parse(path.read_text(), str(path)), clean=False)
    assert doc, f"{path.relative_to(PACKAGE)}: no module docstring"
    assert len(doc.strip().splitlines()) <= MAX_LINES, f"{path.relative_to(PACKAGE)}: module docstring over {MAX_LINES} lines"
    assert re.search(r"\bOwner:\s+\S", doc), f"{path.relative_to(PACKAGE)}: module docstring names no 'Owner: ...'"
