"""The landing check: what the lake says is durable against the simulator's MVCC, read with
deltalake and pyarrow only, sharing no code with what it checks: at every watermark, every change
the MVCC committed at or below it landed and nothing else did (invariants 1 and 2), watermarks
never go back, duplicates are exact repeats (invariant 5). A put at a DDL job's commit ts that
restates the upstream row there is a row the DDL rewrote (REORGANIZE PARTITION, PARTITION BY...:
TiDB's backfill), which the puller lands at the job's finished ts instead of the backfill's writes.

More: docs/internals.md#landing_check.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from tidelake.errors import TidelakeError
from tidelake.nemesis.row_int import RowFormatError, int_column

CHANGELOG_DIR = "_tidelake/changelog"  # docs/design.md#lake-layout
DDL_DIR = "_tidelake/ddl"
WATERMARKS_DIR = "_tidelake/watermarks"
CHANGELOG_FILE_COLUMNS = ("key", "commit_ts", "op", "value")  # the order of a Change
WATERMARK_COLUMNS = ("kind", "table_id", "resolved_ts", "changelog_version")
TABLE_ID = "table_id"
PUT, DELETE = "put", "delete"

Change = tuple[bytes, int, str, bytes]  # key, commit ts, op, value


class CheckerError(TidelakeError):
    """The lake is not laid out as the landing contract says: the check cannot run."""


@dataclass(frozen=True)
class Anomaly:
    kind: str
    table_id: int
    ts: int
    detail: str


@dataclass(frozen=True)
class BankSpec:
    """The bank tables as the upstream defines them, and the total their balances keep."""

    balance_column: dict[int, int]  # physical id -> column id of `balance`
    total: int
    funded_ts: int  # commit ts of the funding txn: before it every table is empty

    @property
    def physical_ids(self) -> list[int]:
        return sorted(self.balance_column)


@dataclass
class LandingReport:
    anomalies: list[Anomaly] = field(default_factory=list)
    watermarks: int = 0  # (physical table, resolved ts) pairs checked
    totals: int = 0  # bank totals checked
    copies: int = 0  # puts at a DDL's commit ts restating the upstream there (rows the DDL rewrote)
    removed: int = 0  # ids a DDL removed whose completeness up to it was due and checked

    def by_kind(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for a in self.anomalies:
            counts[a.kind] += 1
        return dict(sorted(counts.items()))


def record_span(physical_id: int) -> tuple[bytes, bytes]:
    """[t{id}_r, t{id}_s): a table's row keys (pingcap/tidb pkg/tablecodec EncodeRowKey; the id
    is a comparable int64, big-endian with the sign bit flipped)."""
    prefix = b"t" + (physical_id ^ (1 << 63)).to_bytes(8, "big")
    return prefix + b"_r", prefix + b"_s"


def _require_columns(table: DeltaTable, needed: tuple[str, ...], what: str) -> None:
    names = {f.name for f in table.schema().fields}
    missing = [c for c in needed if c not in names]
    if missing:
        raise CheckerError(f"{what} has no column {', '.join(missing)} (it has {', '.join(sorted(names))})")


class ChangelogAt:
    """The changelog at any Delta version, by physical table; each data file is read once."""

    def __init__(self, root: str) -> None:
        self._root = os.path.join(root, CHANGELOG_DIR)
        self._files: dict[str, list[Change]] = {}
        self._versions: dict[int, dict[int, list[Change]]] = {-1: {}}  # -1: before the first landed row
        if not DeltaTable.is_deltatable(self._root):
            self._table = None
            return
        self._table = DeltaTable(self._root)
        _require_columns(self._table, (TABLE_ID, *CHANGELOG_FILE_COLUMNS), self._root)
        if TABLE_ID not in self._table.metadata().partition_columns:
            raise CheckerError(f"{self._root}: {TABLE_ID} is not a partition column")

    @property
    def latest(self) -> int:
        if self._table is None:
            return -1
        self._table.update_incremental()
        return self._table.version()

    def at(self, version: int) -> dict[int, list[Change]]:
        if version not in self._versions:
            if self._table is None:
                raise CheckerError(f"a watermark names changelog version {version}, but {self._root} is no Delta table")
            self._table.load_as_version(version)
            adds = pa.table(self._table.get_add_actions(flatten=True))
            by_table: dict[int, list[Change]] = defaultdict(list)
            for path, table_id in zip(adds.column("path").to_pylist(),
                                      adds.column(f"partition.{TABLE_ID}").to_pylist()):
                by_table[int(table_id)].extend(self._file(path))
            self._versions[version] = dict(by_table)
        return self._versions[version]

    def _file(self, path: str) -> list[Change]:
        if path not in self._files:
            rows = pq.read_table(os.path.join(self._root, unquote(path)), columns=list(CHANGELOG_FILE_COLUMNS))
            self._files[path] = list(zip(*(rows.column(c).to_pylist() for c in CHANGELOG_FILE_COLUMNS)))
        return self._files[path]


def watermark_versions(root: str) -> list[dict[int, tuple[int, int]]]:
    """Per watermarks version: physical id -> (resolved ts, changelog version). With several
    pullers a table's watermark is the lowest any claims, as merge reads it."""
    path = os.path.join(root, WATERMARKS_DIR)
    table = DeltaTable(path)
    _require_columns(table, WATERMARK_COLUMNS, path)
    out = []
    for version in range(table.version() + 1):
        table.load_as_version(version)
        rows = table.to_pyarrow_table(columns=list(WATERMARK_COLUMNS)).to_pylist()
        marks: dict[int, tuple[int, int]] = {}
        for row in rows:
            if row["kind"] not in ("table", "ddl"):
                raise CheckerError(f"{path} version {version}: watermark kind {row['kind']!r}")
            if row["kind"] == "table":
                tid, ts = row["table_id"], row["resolved_ts"]
                if tid not in marks or ts < marks[tid][0]:
                    marks[tid] = (ts, row["changelog_version"])
        out.append(marks)
    return out


class _Upstream:
    """One physical table's committed history in the simulator's MVCC, and snapshots of it."""

    def __init__(self, mvcc: Any, physical_id: int) -> None:
        self._mvcc = mvcc
        self.span = record_span(physical_id)
        self.writes: dict[tuple[bytes, int], tuple[str, bytes]] = {}
        self.last_commit: dict[bytes, list[int]] = defaultdict(list)
        for entry in mvcc.snapshot_delta(*self.span, 0):
            if entry.commit_ts > 0 and entry.op in (PUT, DELETE):  # commit ts 0: a lock still held
                self.writes[(entry.key, entry.commit_ts)] = (entry.op, entry.value)
                self.last_commit[entry.key].append(entry.commit_ts)
        for tss in self.last_commit.values():
            tss.sort()

    def snapshot(self, ts: int) -> dict[bytes, bytes]:
        rows = self._mvcc.scan(*self.span, ts, None)
        locked = [key for key, value in rows if not isinstance(value, bytes)]
        if locked:
            raise CheckerError(f"the MVCC still holds locks at ts {ts} (first key {locked[0].hex()})")
        return dict(rows)

    def commit_ts_at(self, key: bytes, ts: int) -> int:
        return max((t for t in self.last_commit.get(key, ()) if t <= ts), default=0)


def check_landing(root: str, mvcc: Any, bank: BankSpec | None = None,
                  removed_ids: Sequence[tuple[int, int]] = ()) -> LandingReport:
    """`removed_ids`: (physical id, ts) of the ids the upstream's DDL removed, and when."""
    report = LandingReport()
    if not os.path.isdir(os.path.join(root, WATERMARKS_DIR)):
        raise CheckerError(f"{root}: no watermarks table: nothing landed")
    versions = watermark_versions(root)
    changelog = ChangelogAt(root)
    starts: dict[int, int] = {}
    for marks in versions:
        for tid, (ts, _) in marks.items():
            starts[tid] = min(ts, starts.get(tid, ts))
    upstream = {tid: _Upstream(mvcc, tid) for tid in starts}
    jobs = _job_commit_ts(root)
    _filter_rows(root, report)
    _removed_complete(versions[-1] if versions else {}, _ddl_resolved(root),
                      [(pid, ts) for pid, ts in removed_ids if pid in starts], report)
    _duplicates(changelog.at(changelog.latest), report)
    seen: set[tuple[int, int, int]] = set()
    bank_seen: set[int] = set()
    highest: dict[int, int] = {}
    for number, marks in enumerate(versions):
        for tid, (ts, version) in sorted(marks.items()):
            if ts < highest.get(tid, 0):
                report.anomalies.append(Anomaly("watermark_regressed", tid, ts, f"watermarks version {number}: "
                                                f"resolved ts {ts} below the {highest[tid]} recorded before"))
            highest[tid] = max(ts, highest.get(tid, 0))
            if (tid, ts, version) in seen:
                continue
            seen.add((tid, ts, version))
            rows = changelog.at(max(version, -1)).get(tid, [])
            _check_table(tid, ts, starts[tid], rows, upstream[tid], jobs, report)
            report.watermarks += 1
        if bank is not None and all(pid in marks for pid in bank.physical_ids):
            low = min(marks[pid][0] for pid in bank.physical_ids)
            if low not in bank_seen:
                bank_seen.add(low)
                version = max(marks[pid][1] for pid in bank.physical_ids)
                _check_bank(bank, low, changelog.at(version), report)
                report.totals += 1
    return report


def _duplicates(by_table: dict[int, list[Change]], report: LandingReport) -> None:
    for tid, rows in by_table.items():
        seen: dict[tuple[bytes, int], tuple[str, bytes]] = {}
        for key, ts, op, value in rows:
            prior = seen.setdefault((key, ts), (op, value))
            if prior != (op, value):
                report.anomalies.append(Anomaly("conflicting_duplicate", tid, ts,
                                                f"key {key.hex()} landed as {prior[0]} and as {op}, different values"))


def _filter_rows(root: str, report: LandingReport) -> None:
    """The nemesis never changes `[filter].rules`: a `filter` row (a table leaving) is wrong."""
    path = os.path.join(root, DDL_DIR)
    if not os.path.isdir(path):
        return
    rows = DeltaTable(path).to_pyarrow_table(columns=["commit_ts", "source", "schema_name", "table_name", "table_id"])
    for row in rows.to_pylist():
        if row["source"] == "filter":
            report.anomalies.append(Anomaly("table_left", row["table_id"], row["commit_ts"],
                                            f"{row['schema_name']}.{row['table_name']} left the changefeed, the "
                                            "rules never changed"))


def _removed_complete(marks: dict[int, tuple[int, int]], ddl_resolved: int,
                      removed_ids: Sequence[tuple[int, int]], report: LandingReport) -> None:
    """An id a DDL at T removed is fed until its rows up to T - 1 are durable, before the DDL
    watermark passes T (the merge applies the DDL only past T - 1 of every id the table had):
    once the DDL watermark is at or past T, its watermark is at or past T - 1. Ids the lake never
    had a watermark for are not asked (a table the changefeed never fed)."""
    for pid, ts in removed_ids:
        if ts > ddl_resolved:
            continue
        report.removed += 1
        mark = marks.get(pid, (0, 0))[0]
        if mark < ts - 1:
            report.anomalies.append(Anomaly("removed_behind", pid, ts, f"a DDL removed physical id {pid} at {ts} "
                                            f"and the DDL watermark is at {ddl_resolved}, but its watermark is "
                                            f"{mark}: its rows before the DDL are not all landed"))


def _ddl_resolved(root: str) -> int:
    """The DDL watermark now: the lowest any puller claims."""
    path = os.path.join(root, WATERMARKS_DIR)
    rows = DeltaTable(path).to_pyarrow_table(columns=["kind", "resolved_ts"]).to_pylist()
    return min((r["resolved_ts"] for r in rows if r["kind"] == "ddl"), default=0)


def _job_commit_ts(root: str) -> set[int]:
    """The commit ts of every DDL job row in the lake."""
    path = os.path.join(root, DDL_DIR)
    if not os.path.isdir(path):
        return set()
    table = DeltaTable(path).to_pyarrow_table(columns=["commit_ts", "source"])
    return {ts for ts, source in zip(table["commit_ts"].to_pylist(), table["source"].to_pylist()) if source == "job"}


def _check_table(tid: int, ts: int, start: int, rows: list[Change], up: _Upstream, jobs: set[int],
                 report: LandingReport) -> None:
    landed: dict[tuple[bytes, int], tuple[str, bytes]] = {}
    copies: set[tuple[bytes, int]] = set()
    states: dict[int, dict[bytes, bytes]] = {}
    for key, cts, op, value in rows:
        if cts > ts:
            continue
        if op not in (PUT, DELETE):
            report.anomalies.append(Anomaly("bad_op", tid, cts, f"key {key.hex()}: op {op!r}"))
            continue
        landed[(key, cts)] = (op, value)
        expected = up.writes.get((key, cts))
        if expected is None and op == PUT and cts in jobs:
            if cts not in states:
                states[cts] = up.snapshot(cts)
            if states[cts].get(key) == value:
                copies.add((key, cts))
                report.copies += 1
                continue
        if expected is None:
            report.anomalies.append(Anomaly("phantom", tid, ts, f"change of key {key.hex()} at {cts} never committed"))
        elif expected != (op, value):
            report.anomalies.append(Anomaly("wrong_value", tid, ts, f"change of key {key.hex()} at {cts}: "
                                            f"landed {op}, upstream {expected[0]}, values differ"))
    for (key, cts), (op, _) in up.writes.items():
        if start < cts <= ts and (key, cts) not in landed:
            report.anomalies.append(Anomaly("lost", tid, ts, f"{op} of key {key.hex()} at {cts} not landed "
                                            f"by watermark {ts}"))
    state = up.snapshot(start) if start else {}
    # a key with no landed change after start was last changed where the snapshot at start says
    last: dict[bytes, int] = {key: up.commit_ts_at(key, start) for key in state}
    for (key, cts), (op, value) in sorted(landed.items(), key=lambda item: item[0][1]):
        if cts <= start:
            continue
        last[key] = up.commit_ts_at(key, cts) if (key, cts) in copies else cts
        if op == PUT:
            state[key] = value
        else:
            state.pop(key, None)
    want = up.snapshot(ts)
    for key in sorted(set(want) | set(state)):
        if key not in state:
            report.anomalies.append(Anomaly("lost", tid, ts, f"key {key.hex()} missing from the landed state at {ts}"))
        elif key not in want:
            report.anomalies.append(Anomaly("phantom", tid, ts, f"key {key.hex()} in the landed state at {ts}, "
                                            "absent upstream"))
        elif key in last and last[key] != up.commit_ts_at(key, ts):
            report.anomalies.append(Anomaly("misordered", tid, ts, f"key {key.hex()}: last landed change at "
                                            f"{last[key]}, upstream's last at {up.commit_ts_at(key, ts)}"))
        elif state[key] != want[key]:
            report.anomalies.append(Anomaly("wrong_value", tid, ts, f"key {key.hex()}: landed state differs at {ts}"))


def _check_bank(bank: BankSpec, ts: int, by_table: dict[int, list[Change]], report: LandingReport) -> None:
    total = 0
    for pid, column in bank.balance_column.items():
        state: dict[bytes, tuple[int, str, bytes]] = {}
        for key, cts, op, value in by_table.get(pid, []):
            if cts <= ts and (key not in state or cts >= state[key][0]):
                state[key] = (cts, op, value)
        for key, (_, op, value) in state.items():
            if op != PUT:
                continue
            try:
                total += int_column(value, column) or 0
            except RowFormatError as err:
                report.anomalies.append(Anomaly("undecodable", pid, ts, f"key {key.hex()}: {err}"))
    expected = bank.total if ts >= bank.funded_ts else 0
    if total != expected:
        report.anomalies.append(Anomaly("bank_total", 0, ts, f"balances at {ts} sum to {total}, not {expected}"))
