"""Every citation of a page in docs/ names a heading that exists there (by its anchor, never a
section number), and nothing cites notes that are not in this repository (a reader must be able
to open what the code points at)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"(?<![\w/.-])docs/([a-z_-]+\.md)(?![a-z])(?:#([\w-]+)|\s+invariant\s+([1-9]))?")
LOCAL_LINK = re.compile(r"\]\(#([\w-]+)\)")  # [text](#anchor) inside a page
SECTION_NUMBER = re.compile(r"§\s?[0-9]")
FORBIDDEN = re.compile(r"facts/[a-z_]+\.md|\bfacts §|\.\./shared|(?<!docs/)DESIGN\.md|DEVELOPERS\.md")


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / f for f in out.split() if "/kvproto/" not in f and (ROOT / f).is_file()]


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def _slug(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def _sections(page: Path) -> tuple[set[str], set[str]]:
    """(heading anchors, invariant numbers) of a page; a repeated heading gets -1, -2, ..."""
    anchors, invariants, seen, fence = set(), set(), {}, False
    for line in page.read_text(encoding="utf-8").splitlines():
        fence = fence != line.startswith("```")
        heading = None if fence else re.match(r"#+\s+(.*)$", line)
        if heading is None:
            continue
        base = _slug(heading.group(1))
        anchors.add(base if base not in seen else f"{base}-{seen[base]}")
        seen[base] = seen.get(base, 0) + 1
        invariant = re.match(r"Invariant\s+([1-9]):", heading.group(1))
        if invariant:
            invariants.add(invariant.group(1))
    return anchors, invariants


def test_cited_docs_headings_exist():
    missing = []
    pages: dict[str, tuple[set[str], set[str]]] = {}
    for path in _tracked():
        if path.name == "test_citations.py" or (text := _text(path)) is None:
            continue
        for match in CITATION.finditer(text):
            name, anchor, invariant = match.groups()
            page = ROOT / "docs" / name
            if not page.is_file():
                missing.append(f"{path.relative_to(ROOT)}: docs/{name} does not exist")
                continue
            anchors, invariants = pages.setdefault(name, _sections(page))
            if anchor and anchor not in anchors:
                missing.append(f"{path.relative_to(ROOT)}: docs/{name} has no heading #{anchor}")
            if invariant and invariant not in invariants:
                missing.append(f"{path.relative_to(ROOT)}: docs/{name} has no invariant {invariant}")
        if path.suffix == ".md" and path.parent.name in ("docs", ROOT.name):
            anchors = _sections(path)[0]
            missing += [f"{path.relative_to(ROOT)}: no heading #{a} on this page"
                        for a in LOCAL_LINK.findall(text) if a not in anchors]
    assert not missing, "\n".join(sorted(set(missing)))


def test_nothing_cites_a_section_number():
    """Headings are cited by anchor: a number goes stale as soon as a page is reordered."""
    found = [f"{path.relative_to(ROOT)}: {m.group(0)!r}" for path in _tracked()
             if path.name != "test_citations.py" and (text := _text(path)) is not None
             for m in SECTION_NUMBER.finditer(text)]
    assert not found, "\n".join(found)


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
