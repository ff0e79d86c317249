"""Docstrings say the invariant and its owner in at most 10 lines; the long form of a module's is
in docs/internals.md, under the module's name (module names are unique in the package)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tidelake"
MAX_LINES = 10
FILES = sorted(p for p in PACKAGE.rglob("*.py") if "kvproto" not in p.parts)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_docstrings_are_at_most_ten_lines(path):
    tree = ast.parse(path.read_text(), str(path))
    long = [f"{getattr(node, 'name', '<module>')}: {len(doc.strip().splitlines())} lines"
            for node in [tree, *ast.walk(tree)]
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and (doc := ast.get_docstring(node, clean=False)) and len(doc.strip().splitlines()) > MAX_LINES]
    assert not long, f"{path.relative_to(PACKAGE)}: " + "; ".join(long)
