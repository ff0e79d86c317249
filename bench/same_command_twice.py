"""Each writer command twice at once against one lake, as two operators (or an operator beside a
DAG) start them: nothing may be lost or duplicated, and each answer is either the work done or
one line naming the other writer (issue #32 item 2, docs/operations.md#writer-leases).

    .venv/bin/python bench/same_command_twice.py [--store local|s3|both] [--json out.json]

One simulator with its SQL front and one puller (bench/_pipeline.py). Before each pair a batch
of inserts, updates and deletes goes in through the SQL front, so each command has work. The
pairs: `pull` beside the running puller (same changefeed, same shard), `merge` twice,
`maintenance` twice, `syncpoint` twice, `bootstrap` of one table outside the filter twice, and
`merge` beside `maintenance`. Both commands of a pair start together; each answer is classed:

- `done`: exit 0;
- `refused`: exit 75 or a refusal of the second writer, with the one line that says who holds it;
- anything else (a traceback, another exit code, a refusal without its line) is a failure.

After the pairs the pipeline merges to now and `tidelake verify` compares every replica with the
upstream at its checkpoint; the syncpoints recorded must be distinct. `--store s3` puts the lake
on a moto S3 server (tidelake.demos.s3_server). Run it alone on the machine (four JVMs at once).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pymysql  # noqa: E402

from bench._common import markdown_table, print_environment, write_json  # noqa: E402
from bench._pipeline import MASTER, Pipeline, tidelake  # noqa: E402
from tidelake.config import load_config  # noqa: E402
from tidelake.demos.integration import lake_environment  # noqa: E402
from tidelake.demos.s3_server import S3Server  # noqa: E402
from tidelake.errors import EXIT_TRY_LATER  # noqa: E402
from tidelake.lake.layout import LakeLayout  # noqa: E402
from tidelake.syncpoint.records import read_syncpoints  # noqa: E402

DATABASE = "shop"
OUTSIDE = "side"  # a database the changefeed's filter leaves out: bootstrap adds its table
ROWS = 200
PULL_RUN_S = 20
# What a refused second writer says (tidelake.lake.lease.LeaseHeld, the lander's changefeed check).
REFUSALS = ("is being written by", "another puller", "second puller")


@dataclass
class Answer:
    command: str
    exit: int
    seconds: float
    verdict: str  # done | refused | failed
    line: str  # the refusal line, or the last line of the output


@dataclass
class Pair:
    name: str
    answers: list[Answer]

    @property
    def ok(self) -> bool:
        return all(a.verdict != "failed" for a in self.answers)


def _pairs(config: str) -> list[tuple[str, list[list[str]]]]:
    cf = ["--config", config]
    spark = ["--master", MASTER]
    merge = ["merge", *cf, *spark]
    maintenance = ["maintenance", *cf, *spark]
    return [
        ("merge twice", [merge, merge]),
        ("maintenance twice", [maintenance, maintenance]),
        ("syncpoint twice", [["syncpoint", *cf, "--interval", "1", *spark]] * 2),
        ("bootstrap twice", [["bootstrap", *cf, "--table", f"{OUTSIDE}.sessions", "--spark-master", MASTER]] * 2),
        ("merge beside maintenance", [merge, maintenance]),
        ("pull beside the puller", [["pull", *cf, "--max-run-seconds", str(PULL_RUN_S)]]),
    ]


def _classify(command: list[str], done: subprocess.CompletedProcess, seconds: float) -> Answer:
    output = (done.stdout + done.stderr).splitlines()
    refusals = [line for line in output if any(r in line for r in REFUSALS)]
    traceback = any(line.startswith("Traceback") for line in output)
    if done.returncode == 0 and not traceback:  # the command's own last word, not the JVM's
        said = [x for x in done.stdout.splitlines() if any(c.isalpha() for c in x)]
        verdict, line = "done", said[-1] if said else ""
    elif refusals and not traceback and done.returncode in (0, 1, EXIT_TRY_LATER):
        verdict, line = "refused", refusals[0]
    else:
        verdict, line = "failed", next((x for x in reversed(output) if x.strip()), "")
    return Answer(" ".join(command[:1]), done.returncode, round(seconds, 1), verdict, line.strip()[:400])


def run_pair(pipe: Pipeline, name: str, commands: list[list[str]]) -> Pair:
    """Start every command of the pair at once; wait for all."""
    started = time.monotonic()
    running = [(c, subprocess.Popen(tidelake(*c), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
               for c in commands]
    answers = []
    for i, (command, process) in enumerate(running):
        out, err = process.communicate(timeout=1800)
        done = subprocess.CompletedProcess(command, process.returncode, out, err)
        (pipe.logs / f"{name.replace(' ', '-')}-{i}.log").write_text(out + err)
        answers.append(_classify(command, done, time.monotonic() - started))
    return Pair(name, answers)


def _load(sql: pymysql.Connection, rng: random.Random, batch: int) -> None:
    """Inserts, updates and deletes on both tables of the filter and on the one outside it."""
    with sql.cursor() as cur:
        for _ in range(batch):
            key = rng.randrange(ROWS * 4)
            cur.execute(f"REPLACE INTO {DATABASE}.orders VALUES (%s, %s, %s)", (key, rng.randrange(1000), f"o{key}"))
            cur.execute(f"UPDATE {DATABASE}.items SET qty = qty + 1 WHERE id = %s", (rng.randrange(ROWS),))
            cur.execute(f"INSERT INTO {OUTSIDE}.sessions (user_id) VALUES (%s)", (rng.randrange(100),))
        low = rng.randrange(ROWS * 4)
        cur.execute(f"DELETE FROM {DATABASE}.orders WHERE id BETWEEN %s AND %s", (low, low + 10))


def _schema(sql: pymysql.Connection) -> None:
    with sql.cursor() as cur:
        for db in (DATABASE, OUTSIDE):
            cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"CREATE TABLE {DATABASE}.orders (id BIGINT PRIMARY KEY, amount INT, note VARCHAR(40))")
        cur.execute(f"CREATE TABLE {DATABASE}.items (id INT PRIMARY KEY, qty INT NOT NULL)")
        cur.execute(f"CREATE TABLE {OUTSIDE}.sessions (id BIGINT AUTO_INCREMENT PRIMARY KEY, user_id INT)")
        cur.executemany(f"INSERT INTO {DATABASE}.items VALUES (%s, 0)", [(i,) for i in range(ROWS)])


def run_store(store: str, workdir: Path, seed: int) -> dict:
    s3 = None
    lake_root, lake = None, None
    saved = dict(os.environ)
    if store == "s3":
        s3 = S3Server(workdir / "s3")
        s3.start()
        os.environ.update(lake_environment(s3.endpoint))
        lake_root, lake = s3.lake_root("twice"), {"storage_options": s3.storage_options()}
    rng = random.Random(seed)
    try:
        with Pipeline(workdir, rules=(f"{DATABASE}.*",), lake_root=lake_root, lake=lake) as pipe:
            sql = pymysql.connect(host="127.0.0.1", port=pipe.sql_port, user="root", autocommit=True)
            _schema(sql)
            pairs = []
            for name, commands in _pairs(str(pipe.config)):
                _load(sql, rng, 50)
                pairs.append(run_pair(pipe, name, commands))
                pipe.check(name)
                print(f"{store}: {name}: " + "; ".join(f"{a.verdict} (exit {a.exit}, {a.seconds}s)"
                                                       for a in pairs[-1].answers), flush=True)
            _load(sql, rng, 50)
            outcome = pipe.replicate()
            layout = LakeLayout.from_config(load_config(pipe.config).lake)
            syncpoints = [s.ts for s in read_syncpoints(layout)]
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if s3 is not None:
            s3.stop()
    print(f"{store}: replicas verified: {outcome.verified} (verify exit {outcome.verify_exit}); "
          f"{len(syncpoints)} syncpoints, distinct: {len(set(syncpoints)) == len(syncpoints)}", flush=True)
    return {"store": store, "pairs": [{"name": p.name, "ok": p.ok, "answers": [asdict(a) for a in p.answers]}
                                      for p in pairs],
            "verified": outcome.verified, "verify_exit": outcome.verify_exit, "outcome": outcome.to_json(),
            "syncpoints": len(syncpoints), "syncpoints_distinct": len(set(syncpoints)) == len(syncpoints)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("local", "s3", "both"), default="both")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", type=Path, help="logs, lake and config (default: a temporary folder)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    env = print_environment()
    root = args.workdir or Path(tempfile.mkdtemp(prefix="tidelake-twice-"))
    results = [run_store(store, root / store, args.seed)
               for store in (("local", "s3") if args.store == "both" else (args.store,))]
    rows = [[r["store"], p["name"], *(f"{a['verdict']} (exit {a['exit']}): {a['line'][:120]}" for a in p["answers"]),
             *([""] if len(p["answers"]) == 1 else [])]
            for r in results for p in r["pairs"]]
    print(markdown_table(["store", "pair", "first", "second"], rows))
    if args.json:
        write_json(args.json, "same_command_twice", env, results)
    ok = all(r["verified"] and r["syncpoints_distinct"] and all(p["ok"] for p in r["pairs"]) for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
