"""The job specs: what an Airflow plan hands a Spark job, and the only contract between them. One
JSON document per job run, of a kind and SPEC_VERSION; the plan task writes it once, and
spark_jobs/ and the warm-Spark tasks run it (tidelake.orchestration.job_entry) with no command
line in between. A spec of another version, kind or shape is refused whole, in one InputError.
Owner: the DAGs' plan tasks write it (merge_dag for merges); job_entry runs it.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields
from typing import ClassVar

from tidelake import tso
from tidelake.errors import InputError

SPEC_VERSION = 1


@dataclass(frozen=True)
class MergeJob:
    """Merge `tables` (every replicated one when empty) up to `until_ts`, or rebuild one table."""

    kind: ClassVar[str] = "merge"
    dials_pd: ClassVar[bool] = False  # whether the job reads the upstream (its [upstream])
    config: str  # the changefeed config file
    tables: tuple[str, ...] = ()
    until_ts: int | None = None
    rebuild: str | None = None


@dataclass(frozen=True)
class SyncpointJob:
    """Take the next syncpoint of the changefeed (its [merge].syncpoint_interval)."""

    kind: ClassVar[str] = "syncpoint"
    dials_pd: ClassVar[bool] = False
    config: str


@dataclass(frozen=True)
class MaintenanceJob:
    """Compact and vacuum the replicas and the changelog, drop what every replica merged past."""

    kind: ClassVar[str] = "maintenance"
    dials_pd: ClassVar[bool] = False
    config: str


@dataclass(frozen=True)
class BootstrapJob:
    """Snapshot `tables` (the filter's when empty) at `at_ts` (PD's current TSO when None)."""

    kind: ClassVar[str] = "bootstrap"
    dials_pd: ClassVar[bool] = True  # the snapshot: PD's TSO, regions and TiKV reads, driver and executors
    config: str
    tables: tuple[str, ...] = ()
    at_ts: int | None = None


@dataclass(frozen=True)
class FollowJob:
    """Run the merge follower (tidelake.merge.follow) for `run_seconds` (None: until stopped)."""

    kind: ClassVar[str] = "follow"
    dials_pd: ClassVar[bool] = False
    config: str
    run_seconds: float | None = None


JobSpec = MergeJob | SyncpointJob | MaintenanceJob | BootstrapJob | FollowJob
KINDS: dict[str, type[JobSpec]] = {k.kind: k for k in (MergeJob, SyncpointJob, MaintenanceJob, BootstrapJob,
                                                        FollowJob)}
# JSON type of each field annotation, and whether null is allowed; every int field is a TSO, every
# float field a number of seconds
_TYPES = {"str": (str, False), "str | None": (str, True), "int | None": (int, True), "tuple[str, ...]": (list, False),
          "float | None": (float, True)}


def to_json(spec: JobSpec) -> str:
    return json.dumps({"version": SPEC_VERSION, "kind": spec.kind, **asdict(spec)}, sort_keys=True)


def from_json(text: str, kind: str | None = None) -> JobSpec:
    """The spec in `text`; `kind`: the one the caller runs (a spark_jobs/ entry point)."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise InputError(f"job spec is not JSON ({exc}): {text[:80]!r}") from None
    if not isinstance(raw, dict):
        raise InputError(f"job spec must be a JSON object, got {text[:80]!r}")
    if type(raw.get("version")) is not int or raw["version"] != SPEC_VERSION:
        raise InputError(f"job spec version {raw.get('version')!r}: this tidelake runs version {SPEC_VERSION}")
    cls = KINDS.get(raw.get("kind")) if isinstance(raw.get("kind"), str) else None
    if cls is None or (kind is not None and cls.kind != kind):
        raise InputError(f"job spec kind {raw.get('kind')!r}: expected {kind or ' or '.join(KINDS)}")
    names = {f.name: f for f in fields(cls)}
    extra = sorted(set(raw) - set(names) - {"version", "kind"})
    if extra:
        raise InputError(f"{cls.kind} job spec: unknown field {extra[0]!r}")
    values = {}
    for name, f in names.items():
        if name not in raw:
            if f.default is MISSING:
                raise InputError(f"{cls.kind} job spec: field {name!r} is missing")
            continue
        values[name] = _value(cls.kind, name, raw[name], str(f.type))
    return cls(**values)


def _value(kind: str, name: str, value: object, annotation: str) -> object:
    expected, nullable = _TYPES[annotation]
    if value is None and nullable:
        return None
    ok = type(value) is expected or (expected is float and type(value) is int)
    if ok and expected is float and not 0 < value < float("inf"):
        raise InputError(f"{kind} job spec: field {name!r} must be seconds above zero, got {value!r}")
    if ok and expected is list:
        ok = all(isinstance(v, str) for v in value)
        value = tuple(value)
    if not ok:
        raise InputError(f"{kind} job spec: field {name!r} must be {annotation}, got {value!r}")
    if expected is int and not 0 < value < tso.LIMIT:
        raise InputError(f"{kind} job spec: field {name!r} must be a TSO (0 < ts < 2^64), got {value!r}")
    return value
