"""Every citation of a page in docs/ names a section that exists there, and nothing cites notes
that are not in this repository (a reader must be able to open what the code points at)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"(?<![\w/.-])docs/([a-z_-]+\.md)(?![a-z])(?:\s*§\s*([0-9]+[A-Z]?(?:\.[0-9]+)*)|\s+invariant\s+([1-9]))?")
FORBIDDEN = re.compile(r"facts/[a-z_]+\.md|\bfacts §|\.\./shared|(?<!docs/)DESIGN\.md|DEVELOPERS\.md")


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / f for f in out.split() if "/kvproto/" not in f and (ROOT / f).is_file()]


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def _sections(page: Path) -> tuple[set[str], set[str]]:
    numbers, invariants = set(), set()
    for line in page.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"#+\s+([0-9]+[A-Z]?(?:\.[0-9]+)*)\s", line)
        if heading:
            numbers.add(heading.group(1))
        invariant = re.match(r"#+\s+Invariant\s+([1-9]):", line)
        if invariant:
            invariants.add(invariant.group(1))
    return numbers, invariants


def test_cited_docs_sections_exist():
    missing = []
    pages: dict[str, tuple[set[str], set[str]]] = {}
    for path in _tracked():
        if path.name == "test_citations.py" or (text := _text(path)) is None:
            continue
        for match in CITATION.finditer(text):
            name, section, invariant = match.groups()
            page = ROOT / "docs" / name
            if not page.is_file():
                missing.append(f"{path.relative_to(ROOT)}: docs/{name} does not exist")
                continue
            numbers, invariants = pages.setdefault(name, _sections(page))
            if section and section not in numbers:
                missing.append(f"{path.relative_to(ROOT)}: docs/{name} has no section {section}")
            if invariant and invariant not in invariants:
                missing.append(f"{path.relative_to(ROOT)}: docs/{name} has no invariant {invariant}")
    assert not missing, "\n".join(sorted(set(missing)))


def test_nothing_cites_notes_outside_the_repository():
    found = []
    for path in _tracked():
        if path.name == "test_citations.py" or (text := _text(path)) is None:
            continue
        found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in FORBIDDEN.finditer(text)]
    assert not found, "\n".join(found)


def test_repository_paths_named_in_the_docs_exist():
    """README and docs/ name files of this tree; a move must take those mentions with it."""
    named = re.compile(r"(?<![\w/.-])((?:tidelake|tests|bench|spark_jobs|dags|plugins)/[\w/]+\.py)")
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for match in named.finditer(page.read_text(encoding="utf-8")):
            if not (ROOT / match.group(1)).is_file():
                missing.append(f"{page.relative_to(ROOT)}: {match.group(1)}")
    assert not missing, "\n".join(missing)
