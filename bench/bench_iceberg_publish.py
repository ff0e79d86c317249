"""What publishing a syncpoint as Iceberg adds (tidelake.consumers.iceberg.sync): the wall time of
`sync_iceberg` for one cut of --tables replicas, against pyiceberg's own commit cost in the same
catalog, in one run. Per run, in a fresh local lake (replicas written with delta-rs, --rows rows
each, the cuts recorded as the syncpoint job records them) and its SQLite catalog:
  first     the first cut published: every table created, its files appended, tagged;
  next      a second cut after every replica took an append and a DELETE that rewrites a file:
            the steady state, one overwrite snapshot per table (schema unchanged);
  ceiling   per table one pyiceberg transaction appending one data file to a bare table of the
            same catalog (load, fast append, commit): the catalog's own cost per table commit.
Reported per size: median and min-max over --runs of first, next, ceiling, and next / ceiling.
The Delta cut itself (Spark) is not timed here.

    .venv/bin/python bench/bench_iceberg_publish.py [--tables 5,200] [--rows 100] [--runs 3] [--json F]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Timer, counts, markdown_table, median, print_environment, write_json  # noqa: E402

import pyarrow as pa  # noqa: E402
from deltalake import DeltaTable, write_deltalake  # noqa: E402
from pyiceberg.schema import Schema  # noqa: E402
from pyiceberg.types import LongType, NestedField  # noqa: E402

from tidelake import tso  # noqa: E402
from tidelake.config import IcebergConfig  # noqa: E402
from tidelake.consumers.iceberg.data_files import delta_data_files  # noqa: E402
from tidelake.consumers.iceberg.iceberg_catalog import open_catalog  # noqa: E402
from tidelake.consumers.iceberg.sync import sync_iceberg  # noqa: E402
from tidelake.lake.layout import WATERMARKS_SCHEMA, LakeLayout, open_or_create  # noqa: E402
from tidelake.lake.replica_catalog import ReplicaCatalog  # noqa: E402
from tidelake.syncpoint.records import ReplicaAt, Syncpoint, record_syncpoint  # noqa: E402

FIRST = tso.compose(int(time.time() * 1000) - 120_000)
SECOND = tso.compose(int(time.time() * 1000) - 60_000)


def _rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": pa.array(ids, pa.int64()), "note": [f"row {i}" for i in ids],
                     "amount": pa.array([i * 0.5 for i in ids], pa.float64())})


def _cut(layout: LakeLayout, ts: int, paths: dict[int, str]) -> None:
    replicas = [ReplicaAt(key, "bench", f"t{key}", path, DeltaTable(path).version()) for key, path in paths.items()]
    if not record_syncpoint(layout, Syncpoint(ts, replicas)):
        raise SystemExit(f"syncpoint {ts} was not recorded")


def _ceiling(catalog, tables: int, sample_file: str) -> float:
    """Seconds for one bare-table commit per table: load it, fast-append one file, commit."""
    delta = DeltaTable(sample_file)
    data_file = next(iter(delta_data_files(delta, sample_file, catalog.load_table(("bench", "t0")).io).values()))
    catalog.create_namespace_if_not_exists("ceiling")
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    for key in range(tables):
        catalog.create_table(("ceiling", f"c{key}"), schema, location=f"{catalog.properties['warehouse']}/ceiling/c{key}")
    with Timer() as timer:
        for key in range(tables):
            table = catalog.load_table(("ceiling", f"c{key}"))
            tx = table.transaction()
            with tx.update_snapshot().fast_append() as append:
                append.append_data_file(data_file)
            tx.commit_transaction()
    return timer.wall_s


def one_run(tables: int, rows: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-iceberg-") as tmp:
        layout = LakeLayout(str(Path(tmp) / "lake"))
        open_or_create(layout, layout.watermarks, WATERMARKS_SCHEMA)
        replica_catalog = ReplicaCatalog(layout)
        paths = {}
        for key in range(tables):
            paths[key] = replica_catalog.assign(key, "bench", f"t{key}", FIRST - 10).path
            write_deltalake(paths[key], _rows(0, rows))
            write_deltalake(paths[key], _rows(rows, rows), mode="append")
        _cut(layout, FIRST, paths)
        catalog = open_catalog(layout, IcebergConfig())
        with Timer() as first:
            published_first = len(sync_iceberg(catalog, layout).published)
        for path in paths.values():
            write_deltalake(path, _rows(2 * rows, rows), mode="append")
            DeltaTable(path).delete(f"id < {rows // 2}")
        _cut(layout, SECOND, paths)
        with Timer() as steady:
            report = sync_iceberg(catalog, layout)
        removed = sum(p.removed for p in report.published)
        if published_first != tables or len(report.published) != tables or removed < tables:
            raise SystemExit(f"published {published_first} then {len(report.published)} of {tables} tables "
                             f"({removed} files removed)")
        ceiling_s = _ceiling(catalog, tables, paths[0])
    return {"first_s": first.wall_s, "next_s": steady.wall_s, "ceiling_s": ceiling_s,
            "next_vs_ceiling": steady.wall_s / ceiling_s, "first_cpu_s": first.cpu_s, "next_cpu_s": steady.cpu_s}


def _summary(values: list[float]) -> dict:
    return {"median": median(values), "min": min(values), "max": max(values)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=counts, default="5,200", help="comma-separated replica counts, one size each")
    parser.add_argument("--rows", type=int, default=100, help="rows per replica write")
    parser.add_argument("--runs", type=int, default=3, help="fresh lakes per size")
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    env = print_environment()
    results = {}
    for tables in args.tables:
        runs = [one_run(tables, args.rows) for _ in range(args.runs)]
        print(f"  {tables} tables: " + ", ".join(f"next {r['next_s']:.2f} s" for r in runs), flush=True)
        results[str(tables)] = {"runs": runs, **{key: _summary([r[key] for r in runs])
                                                 for key in ("first_s", "next_s", "ceiling_s", "next_vs_ceiling")}}
    env["load_avg_1m_end"] = round(os.getloadavg()[0], 1)

    def cell(size: dict, key: str, fmt: str) -> str:
        s = size[key]
        return f"{s['median']:{fmt}} ({s['min']:{fmt}}-{s['max']:{fmt}})"

    print(markdown_table(
        ["tables", "first publish (s)", "publish per syncpoint (s)", "ceiling: one commit per table (s)",
         "publish / ceiling", "per table (ms)"],
        [[n, cell(r, "first_s", ".2f"), cell(r, "next_s", ".2f"), cell(r, "ceiling_s", ".2f"),
          cell(r, "next_vs_ceiling", ".2f"), f"{1000 * r['next_s']['median'] / int(n):.0f}"]
         for n, r in results.items()]))
    write_json(args.json, "bench_iceberg_publish", env, results)
    return results


if __name__ == "__main__":
    main()
