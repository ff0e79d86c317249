"""Run a folder of SQL scripts through the simulator's SQL front as a user's client sends them,
then pull, merge and verify every replica they leave.

    .venv/bin/python bench/sql_corpus.py PATH/TO/FOLDER [--json out.json]

Every `*.sql` under the folder goes through the MariaDB command-line client, `mariadb -v --force
< script` (each statement echoed, errors reported and skipped), after the prelude TiCDC's
integration tests send before each script (`tests/integration_tests/_utils/run_sql_file` in
pingcap/tiflow: `set global tidb_enable_clustered_index = 'int_only'`). Scripts run test by test
(a test is the folder holding `data/`); within a test in the order its `run.sh` names them when
there is one (else by name), and a script its `run.sh` only sends to the downstream
(`DOWN_TIDB_HOST`) is skipped. TiCDC starts a new cluster per test; here tests run in batches
(no two in a batch name the same database) and between batches the cluster is made to look new:
every table moves to a database of its batch (`b<N>_<db>`, RENAME TABLE across databases) and
the databases are dropped, `test` created again. Pointed at the SQL of TiCDC's integration tests (`tests/integration_tests/*/data/*.sql` of pingcap/tiflow or pingcap/ticdc),
it measures how much of their SQL the front runs; none of that SQL is kept in this repository.

The report: scripts run, scripts fully accepted, statements run and refused, refused statements
by category (error code and message with names and numbers blanked), and whether `tidelake
verify` finds every replica equal to the upstream after `tidelake pull` and `tidelake merge`
(bench/_pipeline.py), once after the last batch (`--replicate-every N` also after every N
batches). `--no-replicate` only runs the scripts.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import markdown_table, print_environment, write_json  # noqa: E402
from bench._pipeline import Pipeline  # noqa: E402

PRELUDE = "set global tidb_enable_clustered_index = 'int_only';"
_ERROR = re.compile(r"^ERROR (\d+) \((\w+)\)(?: at line (\d+))?: (.*)$")
_ECHO = "--------------"
_USE = re.compile(r"^\s*use\s+\S+", re.IGNORECASE)
_DATABASE = re.compile(r"(?:\buse\s+|\bdatabase\s+(?:if\s+(?:not\s+)?exists\s+)?)`?(\w+)`?", re.IGNORECASE)
_KEPT = re.compile(r"^b\d+_")  # a database an earlier batch's tables were moved to
_SYSTEM_DATABASES = {"mysql", "information_schema", "performance_schema", "metrics_schema", "sys"}


def category(code: int, message: str) -> str:
    """An error's class: the code and its message with quoted names and numbers blanked; what the
    front does not support keeps the name of the form it refused."""
    if code == 1235:
        what = re.sub(r"^This version of TiDB doesn't yet support '", "", message)
        name = re.split(r"[(']", what)[0].strip()[:70]
        return f"1235 not supported: {name}"
    blanked = re.sub(r"'[^']*'|`[^`]*`|\"[^\"]*\"", "?", message)
    blanked = re.sub(r"\b\d+\b", "N", blanked)
    return f"{code} {blanked[:90]}"


@dataclass
class Test:
    """A test's scripts in the order to run them, the downstream-only ones, the databases named."""

    name: str
    scripts: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    databases: set[str] = field(default_factory=set)


def collect(folder: Path) -> list[Test]:
    """The tests under `folder` (module docstring), in name order."""
    found: dict[Path, list[Path]] = {}
    for script in folder.rglob("*.sql"):
        test = script.parent.parent if script.parent.name == "data" else script.parent
        found.setdefault(test, []).append(script)
    tests = []
    for path in sorted(found):
        run_sh = path / "run.sh"
        lines = run_sh.read_text(errors="replace").splitlines() if run_sh.exists() else []

        def mentions(script: Path) -> list[int]:
            return [i for i, line in enumerate(lines) if re.search(rf"\b{re.escape(script.name)}\b", line)]

        test = Test(str(path.relative_to(folder)) if path != folder else folder.name)
        for script in sorted(found[path], key=lambda s: (min(mentions(s), default=len(lines)), s.name)):
            uses = [lines[i] for i in mentions(script)]
            if uses and all("DOWN_TIDB" in u and "UP_TIDB" not in u for u in uses):
                test.skipped.append(script)
                continue
            test.scripts.append(script)
            test.databases |= {m.lower() for m in _DATABASE.findall(script.read_text(errors="replace"))}
        tests.append(test)
    return tests


def batches(tests: list[Test], size: int) -> list[list[Test]]:
    """Tests grouped (first fit, at most `size` a group) so that no two in a group name the same
    database: each group runs on what looks like a fresh cluster to every test in it (TiCDC starts
    one per test), and is then replicated and verified."""
    out: list[tuple[list[Test], set[str]]] = []
    for test in tests:
        group = next((g for g in out if len(g[0]) < size and not g[1] & test.databases), None)
        if group is None:
            group = ([], set())
            out.append(group)
        group[0].append(test)
        group[1].update(test.databases)
    return [g[0] for g in out]


def reset(client: str, port: int, keep_prefix: str | None) -> list[str]:
    """Make the cluster look new to the next batch: every user database goes and `test` is
    created, as a new TiDB cluster has it. With `keep_prefix`, each database's tables first move
    to `<keep_prefix>_<db>` (RENAME TABLE across databases, which replicas follow), so one pull,
    merge and verify at the end checks every batch's tables. Returns the errors met."""
    base = [client, "-uroot", "-h127.0.0.1", f"-P{port}", "-N", "-B"]

    def sql(statement: str) -> subprocess.CompletedProcess:
        return subprocess.run([*base, "-e", statement], capture_output=True, text=True, timeout=600)

    errors = []
    shown = sql("SHOW DATABASES")
    for db in (n for n in shown.stdout.split() if n.lower() not in _SYSTEM_DATABASES and not _KEPT.match(n)):
        tables = sql(f"SHOW TABLES FROM `{db}`").stdout.split()
        if keep_prefix and tables:
            kept = f"{keep_prefix}_{db}"[:64]
            pairs = ", ".join(f"`{db}`.`{t}` TO `{kept}`.`{t}`" for t in tables)
            moved = sql(f"CREATE DATABASE `{kept}`; RENAME TABLE {pairs}")
            if moved.returncode:
                errors.append(moved.stderr.strip()[:300])
        dropped = sql(f"DROP DATABASE `{db}`")
        if dropped.returncode:
            errors.append(dropped.stderr.strip()[:300])
    sql("CREATE DATABASE test")
    return errors


def run_script(client: str, port: int, script: Path, timeout_s: float) -> dict:
    """One script through the client; the statements it ran and the errors it answered."""
    base = [client, "-uroot", "-h127.0.0.1", f"-P{port}", "--default-character-set", "utf8mb4"]
    subprocess.run([*base, "-e", PRELUDE], capture_output=True, timeout=60)
    started = time.monotonic()
    try:
        with script.open("rb") as stdin:
            done = subprocess.run([*base, "-v", "--force"], stdin=stdin, capture_output=True, timeout=timeout_s)
        out, err, timed_out = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"), False
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace")
        err, timed_out = (exc.stderr or b"").decode(errors="replace"), True
    echoed = sum(1 for line in out.splitlines() if line == _ECHO) // 2
    uses = sum(1 for line in script.read_text(errors="replace").splitlines() if _USE.match(line))
    errors = []
    for line in err.splitlines():
        match = _ERROR.match(line.strip())
        if match:
            errors.append((int(match.group(1)), match.group(4)))
    return {"script": str(script), "statements": echoed + uses, "errors": errors, "timed_out": timed_out,
            "seconds": round(time.monotonic() - started, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="folder searched for *.sql scripts")
    parser.add_argument("--client", default="mariadb", help="MySQL command-line client (default mariadb)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per script (default 300)")
    parser.add_argument("--no-replicate", action="store_true", help="only run the scripts")
    parser.add_argument("--workdir", type=Path, help="logs, lake and config (default: a temporary folder)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--batch", type=int, default=15, help="tests per fresh-looking cluster, at most (default 15)")
    parser.add_argument("--replicate-every", type=int, default=0, metavar="N",
                        help="pull + merge + verify after every N batches too (default: once, after the last)")
    parser.add_argument("--spark-lock", type=Path, help="run merge and verify under `flock` of this file")
    parser.add_argument("--show", type=int, default=3, help="example errors kept per category (default 3)")
    args = parser.parse_args(argv)
    if shutil.which(args.client) is None:
        print(f"error: {args.client} not found (Debian: apt-get install mariadb-client)", file=sys.stderr)
        return 2
    tests = collect(args.folder)
    scripts = [s for t in tests for s in t.scripts]
    if not scripts:
        print(f"error: no *.sql under {args.folder}", file=sys.stderr)
        return 2
    env = print_environment()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sql-corpus-"))
    groups = batches(tests, args.batch)
    skipped = [str(s.relative_to(args.folder)) for t in tests for s in t.skipped]
    print(f"# {len(tests)} tests, {len(scripts)} scripts under {args.folder} ({len(skipped)} downstream-only "
          f"skipped), {len(groups)} batches; logs in {workdir}/logs", flush=True)
    results, outcomes, reset_errors = [], [], []
    with Pipeline(workdir, spark_lock=args.spark_lock) as pipe:
        for number, group in enumerate(groups, 1):
            keep = None if args.no_replicate else f"b{number - 1}"
            reset_errors += reset(args.client, pipe.sql_port, keep)
            for test in group:
                for script in test.scripts:
                    pipe.check(f"script {script}")
                    result = run_script(args.client, pipe.sql_port, script, args.timeout)
                    result["script"] = str(script.relative_to(args.folder))
                    results.append(result)
            print(f"  batch {number}/{len(groups)}: {len(group)} tests", flush=True)
            last = number == len(groups)
            if not args.no_replicate and (last or (args.replicate_every and number % args.replicate_every == 0)):
                if last:
                    reset_errors += reset(args.client, pipe.sql_port, f"b{number}")
                outcome = pipe.replicate()
                outcomes.append({"after_batch": number, **outcome.to_json()})
                verdict = "verified" if outcome.verified else f"NOT verified (verify exit {outcome.verify_exit})"
                print(f"  pull + merge + verify: {outcome.replicas} replicas {verdict}", flush=True)
                if not outcome.verified:
                    print(outcome.verify_tail, flush=True)
    report = summarize(results, args.show)
    report["skipped_downstream_only"] = skipped
    report["tests"] = len(tests)
    report["reset_errors"] = reset_errors
    print_report(report, outcomes)
    write_json(args.json, "sql_corpus", env, {**report, "replication": outcomes})
    return 0 if all(o["verified"] for o in outcomes) else 1


def summarize(results: list[dict], show: int) -> dict:
    by_category: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for result in results:
        for code, message in result["errors"]:
            key = category(code, message)
            by_category[key] += 1
            if len(examples.setdefault(key, [])) < show:
                examples[key].append(f"{result['script']}: {message[:160]}")
    statements = sum(r["statements"] for r in results)
    refused = sum(len(r["errors"]) for r in results)
    return {
        "scripts": len(results),
        "fully_accepted": sum(1 for r in results if not r["errors"] and not r["timed_out"]),
        "timed_out": [r["script"] for r in results if r["timed_out"]],
        "statements": statements,
        "refused": refused,
        "categories": [{"category": k, "count": n, "examples": examples[k]} for k, n in by_category.most_common()],
        "scripts_detail": results,
    }


def print_report(report: dict, outcomes: list[dict]) -> None:
    print(f"\ntests: {report['tests']}, scripts run: {report['scripts']}, fully accepted: {report['fully_accepted']}, "
          f"statements: {report['statements']}, refused: {report['refused']}, timed out: {len(report['timed_out'])}")
    print(markdown_table(["refused statements by category", "count"],
                         [(c["category"], c["count"]) for c in report["categories"]]))
    for error in report["reset_errors"]:
        print(f"between batches: {error}")
    for o in outcomes:
        verdict = "every replica verified" if o["verified"] else f"NOT verified (verify exit {o['verify_exit']})"
        print(f"\nafter batch {o['after_batch']}: pull + merge + verify, {o['replicas']} replicas, {verdict}; "
              f"seconds {o['seconds']}")
        for kind in ("behind", "stalled", "failed", "stopped"):
            if o[kind]:
                print(f"  {kind}: {o[kind]}")

if __name__ == "__main__":
    sys.exit(main())
