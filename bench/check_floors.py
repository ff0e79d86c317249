"""Fail `make bench` when a figure falls past its floor: each check in bench/floors.toml names a
bench's JSON (its `bench` field), a value in it, optionally the value it is divided by (a ceiling
measured in the same run), and the bound the value must keep.

    .venv/bin/python bench/check_floors.py FOLDER [--floors bench/floors.toml]

FOLDER holds the `--json` outputs of one `make bench`. A path is a list of keys; on a list a key
`name=value` (or `a=1,b=2`, every one) picks the first element whose `name` is `value`, and a
number picks by position. Ratios
against a ceiling of the same run are used wherever a bench measures one, so a busy neighbour
moves both sides; the floors sit at about half of the figures in bench/README.md, so they catch a
regression, not the noise of a shared machine. Exit 1 names every figure past its floor, or a
bench whose output is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Check:
    """One figure's floor (at_least) or ceiling (at_most)."""

    bench: str
    what: str
    path: tuple[str, ...]
    over: tuple[str, ...] | None = None
    at_least: float | None = None
    at_most: float | None = None

    def bound(self) -> str:
        return f">= {self.at_least:g}" if self.at_least is not None else f"<= {self.at_most:g}"

    def holds(self, value: float) -> bool:
        if self.at_least is not None and value < self.at_least:
            return False
        return self.at_most is None or value <= self.at_most


def load_checks(path: Path) -> list[Check]:
    """The checks of a floors file; a malformed one is named with its position."""
    doc = tomllib.loads(path.read_text())
    checks = []
    for i, raw in enumerate(doc.get("check", []), 1):
        try:
            check = Check(raw["bench"], raw["what"], tuple(str(p) for p in raw["path"]),
                          tuple(str(p) for p in raw["over"]) if "over" in raw else None,
                          raw.get("at_least"), raw.get("at_most"))
        except KeyError as exc:
            raise SystemExit(f"{path}: check {i} has no {exc.args[0]!r}") from None
        if (check.at_least is None) == (check.at_most is None):
            raise SystemExit(f"{path}: check {i} ({check.what}) needs exactly one of at_least, at_most")
        checks.append(check)
    return checks


def pick(doc: object, path: tuple[str, ...]) -> float:
    """The number at `path` in `doc` (see the module doc); KeyError naming the missing step."""
    here = doc
    for step in path:
        if isinstance(here, list):
            if "=" in step:
                wanted = [condition.split("=", 1) for condition in step.split(",")]
                found = [e for e in here if isinstance(e, dict) and all(str(e.get(n)) == v for n, v in wanted)]
                if not found:
                    raise KeyError(step)
                here = found[0]
            else:
                try:
                    here = here[int(step)]
                except (ValueError, IndexError):
                    raise KeyError(step) from None
        elif isinstance(here, dict) and step in here:
            here = here[step]
        else:
            raise KeyError(step)
    if isinstance(here, bool) or not isinstance(here, (int, float)):
        raise KeyError(f"{path[-1]} (not a number)")
    return float(here)


def read_outputs(folder: Path) -> dict[str, dict]:
    """Each JSON output's results by its bench name."""
    outputs = {}
    for file in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(file.read_text())
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{file}: not JSON ({exc})") from None
        if isinstance(doc, dict) and "bench" in doc:
            outputs[doc["bench"]] = doc.get("results", {})
    return outputs


def evaluate(checks: list[Check], outputs: dict[str, dict]) -> list[tuple[Check, float | None, str]]:
    """(check, value, verdict) for each check: "ok", "PAST ITS FLOOR" or why it has no value."""
    rows = []
    for check in checks:
        if check.bench not in outputs:
            rows.append((check, None, f"no output of bench {check.bench!r}"))
            continue
        try:
            value = pick(outputs[check.bench], check.path)
            if check.over is not None:
                value /= pick(outputs[check.bench], check.over)
        except KeyError as exc:
            rows.append((check, None, f"no value: step {exc.args[0]!r} not found"))
            continue
        except ZeroDivisionError:
            rows.append((check, None, "its ceiling is 0"))
            continue
        rows.append((check, value, "ok" if check.holds(value) else "PAST ITS FLOOR"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="folder of the benches' --json outputs")
    parser.add_argument("--floors", type=Path, default=HERE / "floors.toml")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"check_floors: {args.folder} is not a folder", file=sys.stderr)
        return 2
    rows = evaluate(load_checks(args.floors), read_outputs(args.folder))
    print("| bench | figure | value | bound | verdict |\n|---|---|---|---|---|")
    for check, value, verdict in rows:
        shown = "-" if value is None else f"{value:.3g}"
        print(f"| {check.bench} | {check.what} | {shown} | {check.bound()} | {verdict} |")
    failed = [(c, v, verdict) for c, v, verdict in rows if verdict != "ok"]
    for check, value, verdict in failed:
        shown = "-" if value is None else f"{value:.3g}"
        print(f"check_floors: {check.bench}: {check.what}: {verdict} ({shown}, needs {check.bound()})",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
