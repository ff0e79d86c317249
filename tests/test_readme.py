"""The README's type-mapping table is the code's table, not a copy that can drift."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("update_readme", ROOT / "tools" / "update_readme.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_type_mapping_matches_code():
    text = (ROOT / "README.md").read_text()
    assert _tool().render(text) == text, "README type mapping is stale: run `make readme`"


def test_readme_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1]
    commands = [line.split()[0:2] for line in quick.splitlines() if line.startswith("make ")]
    assert commands[:2] == [["make", "demo"], ["make", "test"]]
