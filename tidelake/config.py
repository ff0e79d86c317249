"""Changefeed configuration: one TOML file per changefeed (see examples/changefeed.toml).

Each TOML table maps to one dataclass and every key is validated here, so a typo or a bad value
fails at start with one line naming the file, the section and the key, instead of deep inside
the puller. Unknown keys are errors for the same reason. New features add new sections.
Owner: this loader; every command, DAG and job reads a changefeed's settings through it.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tidelake import tso
from tidelake.errors import InputError
from tidelake.table_filter import DEFAULT_RULES, TableFilter

_SIZE_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
    "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4,
}  # fmt: skip
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_TSO_LIMIT = tso.LIMIT
_CHANGEFEED_ID = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$")
# What a puller shard appends to the id (tidelake.capture.changefeed.reshard): an id ending so would read as
# another changefeed's shard.
SHARD_SUFFIX = re.compile(r"-shard(\d+)of(\d+)$")
# PD keeps a service safepoint for its TTL; TiCDC and PD refuse less than this (the keeper
# refreshes every TTL/3, so anything shorter lapses between refreshes).
GC_TTL_MIN_S = 3.0
# What PD accepts as a safepoint TTL: seconds as int64 (pdpb.UpdateServiceGCSafePointRequest.TTL).
GC_TTL_MAX_S = float((1 << 63) - 1)
PD_SCHEMES = ("http://", "https://", "grpc://", "grpcs://")
MIN_COMMIT_BUCKET_S = 60  # a changelog bucket's partition label names its minute
# dialect[+driver]://rest, as SQLAlchemy's make_url parses it (sqlalchemy.engine.url)
_SQLALCHEMY_URL = re.compile(r"^[a-z][a-z0-9]*(\+[a-z0-9_]+)?://", re.IGNORECASE)
_PD_ADDRESS = re.compile(r"^(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<host>[A-Za-z0-9_.-]+)):(?P<port>\d{1,5})/?$")


def check_pd_address(address: str) -> str:
    """`address` if it is `host:port` (optionally with a URL scheme PD advertises) and the port is
    1-65535; otherwise ValueError saying what is wrong, so a typo never dials some other port."""
    bare = address.strip()
    for scheme in PD_SCHEMES:
        if bare.startswith(scheme):
            bare = bare[len(scheme):]
            break
    found = _PD_ADDRESS.match(bare)
    if found is None:
        raise ValueError(f"PD address {address!r} is not host:port (like 127.0.0.1:2379)")
    port = int(found.group("port"))
    if not 1 <= port <= 65535:
        raise ValueError(f"PD address {address!r} has port {port}, outside 1-65535")
    return address.strip()


@dataclass(frozen=True)
class TlsConfig:
    """PEM file paths; cert and key together enable mutual TLS (TiDB `cert-allowed-cn`).

    Only paths: tidelake.upstream.channels reads the files when it dials.
    """

    ca: str
    cert: str | None = None
    key: str | None = None


@dataclass(frozen=True)
class UpstreamConfig:
    """PD endpoints and TLS, or `connection`: a tidb_pd Airflow connection id holding them, which
    the puller task (tidelake.orchestration.airflow.puller_operator), the Spark task for the jobs it
    starts (tidelake.orchestration.upstream_handoff) and the `tidelake` commands
    (tidelake.cli.upstream_connection) resolve; pd is then empty."""

    pd: tuple[str, ...]
    tls: TlsConfig | None = None
    gc_ttl_s: float = 86400.0  # TiCDC gc-ttl default: the safepoint outlives a day of downtime
    connection: str | None = None

    def endpoints(self, user: str) -> list[str]:
        """The PD endpoints for `user`; a connection id is one InputError line: it is not resolved there."""
        if self.connection is not None:
            raise InputError(f"[upstream].connection {self.connection!r}: {user} cannot read Airflow connections "
                             "(the Airflow tasks and the tidelake commands resolve it for it): run it from one "
                             "of those, or give [upstream].pd")
        return list(self.pd)


@dataclass(frozen=True)
class FilterConfig:
    rules: tuple[str, ...] = DEFAULT_RULES
    case_sensitive: bool = False  # TiCDC default since v7.5.0 (docs/metadata.md#table-filter-rules)

    def table_filter(self) -> TableFilter:
        return TableFilter.parse(self.rules, case_sensitive=self.case_sensitive)


@dataclass(frozen=True)
class LeaseSettings:
    """The replica writers' leases (tidelake.lake.lease): a lease not renewed for `ttl_s` may be
    taken over; its holder renews it every `renew_s`; a second writer waits up to `wait_s` for it."""

    ttl_s: float = 120.0
    renew_s: float = 20.0
    wait_s: float = 0.0


@dataclass(frozen=True)
class LakeConfig:
    root: str
    commit_bucket_s: int = 3600
    # Passed to delta-rs as-is: endpoint, region, credentials, conditional-put/locking for
    # object stores (delta-rs "Storage configuration"); empty for a local folder.
    storage_options: dict[str, str] = field(default_factory=dict, repr=False)  # may hold keys
    leases: LeaseSettings = field(default_factory=LeaseSettings)
    # An Airflow `aws` connection holding the object store's endpoint, region and credentials, which
    # Airflow's tasks, triggerer, api-server and DAG parse resolve (tidelake.orchestration.airflow.hooks.aws_lake);
    # None: environment and storage_options only.
    aws_conn_id: str | None = None


@dataclass(frozen=True)
class PullerConfig:
    memory_quota_bytes: int = 1024**3  # TiCDC memory-quota default (1 GiB)
    flush_interval_s: float = 5.0
    flush_bytes: int = 64 * 1024**2
    shards: int = 1
    # TCP port of the Prometheus /metrics endpoint (shard I of N serves on port + I); None: no endpoint.
    metrics_port: int | None = None
    # Local folder of the spill file for prewrites waiting for their commit beyond the feed's
    # memory budget (tidelake.capture.eventfeed.prewrites); checked writable when the puller starts.
    spill_dir: str = field(default_factory=tempfile.gettempdir)
    # Seconds between rounds of compaction of the changelog's closed commit buckets by each
    # puller shard (tidelake.capture.landing.bucket_compaction).
    compact_interval_s: float = 60.0

    def shard_of(self, logical_table_id: int) -> int:
        """Shard that pulls a table; all partitions of a table go with its logical id."""
        return logical_table_id % self.shards

    def metrics_port_of(self, shard_index: int) -> int | None:
        """Shard I's metrics port: metrics_port + I, so the shards on one host do not collide."""
        return None if self.metrics_port is None else self.metrics_port + shard_index


@dataclass(frozen=True)
class MergeConfig:
    """How the orchestrated merge runs (tidelake_merge DAG, `tidelake merge --follow`); a single
    `tidelake merge` ignores it."""

    # Seconds between cross-table syncpoints (tidelake.syncpoint.records); None: no syncpoints.
    # Like TiCDC's sync-point-interval (default 10m when enabled), off unless asked for.
    syncpoint_interval_s: int | None = None
    parallel_jobs: int = 4  # Spark jobs one merge run spreads its tables over (the `groups` param)
    # Seconds at least between merge runs started by new data in the changelog (besides the cron
    # schedule; tidelake.orchestration.new_data_watch); None: runs only by schedule and by hand.
    run_on_new_data_s: float | None = None
    # Seconds between the merge follower's looks at the watermarks when it is idle (`tidelake merge
    # --follow`, tidelake.merge.follow).
    follow_poll_s: float = 1.0
    # Whether the DAG factory builds the merge follower DAG (tidelake_merge_follow, @continuous),
    # which runs the follower as a Spark job; the scheduled merge DAG then leaves the merge to it.
    follow: bool = False


@dataclass(frozen=True)
class SparkConfig:
    """Which Spark the merge, syncpoint and maintenance commands use (docs/operations.md#warm-spark)."""

    # A Spark Connect server (sc://host:port) to reach as a thin client; None: SPARK_REMOTE, else
    # a local session (or spark-submit's, under the DAGs' SparkSubmitOperator).
    remote: str | None = None

    def remote_or_env(self, env: Mapping[str, str]) -> str | None:
        """The configured server, else SPARK_REMOTE from `env`; the one place both are read in order
        (the commands' --remote comes before it, tidelake.cli.spark_choice)."""
        remote = self.remote or env.get("SPARK_REMOTE", "").strip() or None
        if remote is not None and not remote.startswith("sc://"):
            raise InputError(f"SPARK_REMOTE must be a Spark Connect URL like sc://127.0.0.1:15002, got {remote!r}")
        return remote


@dataclass(frozen=True)
class CatalogConfig:
    """Where `tidelake catalog sync` registers the replicas (tidelake.consumers.metastore)."""

    # Folder of Spark's embedded Hive metastore (Derby); None: replicas are not registered.
    metastore_dir: str | None = None
    # How many of the newest syncpoints are registered as snapshot databases (`<db>__sp_<ts>`,
    # plus `<db>__sp_latest`); 0: none. Older ones are unregistered (a VACUUM past the maintenance
    # retention makes their versions unreadable anyway).
    syncpoints: int = 12


@dataclass(frozen=True)
class IcebergConfig:
    """Where `tidelake iceberg sync` and the syncpoint job publish the replicas as Iceberg tables
    (tidelake.consumers.iceberg, docs/operations.md#reading-replicas-as-iceberg)."""

    # The syncpoint job publishes after each cut; `tidelake iceberg sync` runs either way.
    enabled: bool = False
    # SQLAlchemy URL of pyiceberg's SQL catalog (postgresql+psycopg2://..., sqlite:///...); None:
    # a SQLite file in the lake's _tidelake/iceberg folder (a local lake only).
    catalog_uri: str | None = None
    # The catalog's name: pyiceberg's SQL catalog keeps several in one database, keyed by it.
    catalog_name: str = "tidelake"
    # Seconds a syncpoint's Iceberg snapshot stays readable, counted from the syncpoint's TSO:
    # maintenance expires older ones and holds back each replica's VACUUM for the files of the rest
    # (tidelake.consumers.iceberg.retention). Default: maintenance's default VACUUM retention, 7 days.
    retention_s: float = 7 * 86400.0


@dataclass(frozen=True)
class HistoryConfig:
    """Which replicas get an SCD type 2 history table and which keep deleted rows (docs/history.md). Each is a list of table-filter rules, matched like [filter].rules against the
    table's current upstream name, with [filter].case_sensitive. Empty: no table."""

    scd2: tuple[str, ...] = ()
    soft_deletes: tuple[str, ...] = ()
    case_sensitive: bool = False

    def wants_scd2(self, db: str, table: str) -> bool:
        return bool(self.scd2) and TableFilter.parse(self.scd2, self.case_sensitive).match_table(db, table)

    def wants_soft_deletes(self, db: str, table: str) -> bool:
        return bool(self.soft_deletes) and TableFilter.parse(self.soft_deletes, self.case_sensitive).match_table(db, table)


@dataclass(frozen=True)
class ChangefeedConfig:
    changefeed_id: str
    upstream: UpstreamConfig
    lake: LakeConfig
    start_ts: int | None = None  # None: the PD TSO when the changefeed is first started
    filter: FilterConfig = field(default_factory=FilterConfig)
    puller: PullerConfig = field(default_factory=PullerConfig)
    merge: MergeConfig = field(default_factory=MergeConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    catalog: CatalogConfig = field(default_factory=CatalogConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    iceberg: IcebergConfig = field(default_factory=IcebergConfig)
    source: str = ""

    @property
    def gc_service_id(self) -> str:
        return f"tidelake-{self.changefeed_id}"


def load_config(path: str | Path) -> ChangefeedConfig:
    """Read and validate a changefeed TOML file; any problem is one InputError line."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            doc = tomllib.load(fh)
    except OSError as exc:
        raise InputError(f"{path}: cannot read config: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x}); "
                         "TOML files are UTF-8") from None
    except ValueError as exc:  # TOMLDecodeError, or an integer of more than 4300 digits
        raise InputError(f"{path}: not valid TOML: {exc}") from None
    return parse_config(doc, str(path), base_dir=path.parent)


def parse_config(doc: dict[str, Any], source: str, base_dir: Path | None = None) -> ChangefeedConfig:
    """Validate an already-parsed TOML document; relative local paths resolve against base_dir."""
    base = base_dir or Path.cwd()
    root = _Section(doc, source, "")
    changefeed = root.section("changefeed", required=True)
    changefeed_id = changefeed.string("id", required=True)
    if not _CHANGEFEED_ID.match(changefeed_id) or SHARD_SUFFIX.search(changefeed_id):
        expected = ("letters, digits, '-' and '_' (at most 128, starting with a letter or digit, "
                    "not ending like a shard suffix '-shard<I>of<N>')")
        raise changefeed.bad("id", expected, changefeed_id)
    start_ts = changefeed.start_ts("start_ts")
    changefeed.done()

    upstream = root.section("upstream", required=True)
    connection = upstream.string("connection")
    if connection is not None and (upstream.raw("pd") is not None or upstream.raw("tls") is not None):
        raise InputError(f"{source}: [upstream].connection: the connection holds the PD endpoints and TLS; "
                         "remove [upstream].pd and [upstream.tls], or the connection")
    pd = [] if connection is not None else upstream.string_list("pd", required=True)
    if not pd and connection is None:
        raise upstream.bad("pd", "at least one PD address like '127.0.0.1:2379'", pd)
    for address in pd:
        try:
            check_pd_address(address)
        except ValueError as exc:
            raise InputError(f"{source}: [upstream].pd: {exc}") from None
    tls_section = upstream.section("tls")
    tls = None
    if tls_section.present:
        ca = tls_section.path("ca", base, required=True)
        cert = tls_section.path("cert", base)
        key = tls_section.path("key", base)
        if (cert is None) != (key is None):
            missing, given = ("key", "cert") if key is None else ("cert", "key")
            raise InputError(
                f"{source}: [upstream.tls].{missing}: required when {given} is set (mutual TLS needs both)"
            )
        tls_section.done()
        tls = TlsConfig(ca=ca, cert=cert, key=key)
    gc_ttl_s = upstream.duration("gc_ttl", 86400.0)
    if not GC_TTL_MIN_S <= gc_ttl_s <= GC_TTL_MAX_S:
        raise upstream.bad("gc_ttl", f"a duration from {GC_TTL_MIN_S:.0f}s (PD's minimum safepoint TTL) like '24h'",
                           upstream.raw("gc_ttl"))
    upstream.done()

    filter_section = root.section("filter")
    rules = tuple(filter_section.string_list("rules")) or DEFAULT_RULES
    case_sensitive = filter_section.boolean("case_sensitive", False)
    try:
        TableFilter.parse(rules, case_sensitive=case_sensitive)
    except InputError as exc:
        raise InputError(f"{source}: [filter].rules: {exc}") from None
    filter_section.done()

    lake = root.section("lake", required=True)
    lake_root = lake.string("root", required=True)
    if "://" not in lake_root:
        lake_root = str((base / lake_root).resolve())
    commit_bucket_s = lake.duration("commit_bucket", 3600.0)
    # Bucket labels have minute resolution (layout.BUCKET_FORMAT): shorter buckets would share one.
    if commit_bucket_s < MIN_COMMIT_BUCKET_S or commit_bucket_s != int(commit_bucket_s):
        raise lake.bad("commit_bucket", "a whole number of seconds >= 1m like '1h' (partition labels name the "
                       "minute)", lake.raw("commit_bucket"))
    defaults = LeaseSettings()
    lease_ttl_s = lake.duration("lease_ttl", defaults.ttl_s)
    leases = LeaseSettings(ttl_s=lease_ttl_s, renew_s=lake.duration("lease_renew", min(defaults.renew_s, lease_ttl_s / 3)),
                           wait_s=lake.duration("lease_wait", defaults.wait_s))
    # Two renewals per TTL at least: one late renewal must not let the lease expire under its holder.
    if leases.renew_s * 2 > leases.ttl_s:
        raise lake.bad("lease_renew", f"a duration at most half of lease_ttl ({leases.ttl_s:g}s)", lake.raw("lease_renew"))
    options = lake.section("storage_options")
    storage_options = options.string_table()
    aws_conn_id = lake.string("aws_conn_id")
    lake.done()

    puller = root.section("puller")
    puller_config = PullerConfig(
        memory_quota_bytes=puller.size("memory_quota", PullerConfig.memory_quota_bytes),
        flush_interval_s=puller.duration("flush_interval", PullerConfig.flush_interval_s),
        flush_bytes=puller.size("flush_size", PullerConfig.flush_bytes),
        shards=puller.positive_int("shards", PullerConfig.shards),
        metrics_port=puller.port("metrics_port"),
        spill_dir=_folder(puller, "spill_dir", base) or tempfile.gettempdir(),
        compact_interval_s=puller.duration("compact_interval", PullerConfig.compact_interval_s),
    )
    puller.done()

    merge = root.section("merge")
    seconds = merge.duration("syncpoint_interval", 0.0)  # 0.0: absent (a given duration is > 0)
    if seconds and (seconds < 1 or seconds != int(seconds)):  # cuts align to whole seconds (tidelake.syncpoint.records)
        raise merge.bad("syncpoint_interval", "a whole number of seconds >= 1s like '10m'", merge.raw("syncpoint_interval"))
    syncpoint_interval_s = int(seconds) or None
    merge_config = MergeConfig(
        syncpoint_interval_s=syncpoint_interval_s,
        parallel_jobs=merge.positive_int("parallel_jobs", MergeConfig.parallel_jobs),
        run_on_new_data_s=merge.duration("run_on_new_data", 0.0) or None,
        follow_poll_s=merge.duration("follow_poll", MergeConfig.follow_poll_s),
        follow=merge.boolean("follow", False),
    )
    merge.done()

    spark = root.section("spark")
    remote = spark.string("remote")
    if remote is not None and not (remote.startswith("sc://") and len(remote) > len("sc://")):
        raise spark.bad("remote", "a Spark Connect URL like 'sc://127.0.0.1:15002'", remote)
    spark.done()

    catalog = root.section("catalog")
    metastore_dir = catalog.string("metastore_dir")
    if metastore_dir is not None:
        folder = (base / metastore_dir).resolve()
        if folder.exists() and not folder.is_dir():
            raise catalog.bad("metastore_dir", "a folder (created when missing)", metastore_dir)
        metastore_dir = str(folder)
    syncpoints = catalog.non_negative_int("syncpoints", CatalogConfig.syncpoints)
    catalog.done()

    history = root.section("history")
    history_rules = {}
    for key in ("scd2", "soft_deletes"):
        history_rules[key] = tuple(history.string_list(key))
        try:
            TableFilter.parse(history_rules[key], case_sensitive=case_sensitive)
        except InputError as exc:
            raise InputError(f"{source}: [history].{key}: {exc}") from None
    history.done()

    iceberg = root.section("iceberg")
    catalog_uri = iceberg.string("catalog_uri")
    if catalog_uri is not None and not _SQLALCHEMY_URL.match(catalog_uri):
        raise iceberg.bad("catalog_uri", "a SQLAlchemy URL like 'postgresql+psycopg2://user@host/db' or "
                          "'sqlite:////path/catalog.db'", catalog_uri)
    catalog_name = iceberg.string("catalog_name") or IcebergConfig.catalog_name
    if not _CHANGEFEED_ID.match(catalog_name):
        raise iceberg.bad("catalog_name", "letters, digits, '-' and '_'", catalog_name)
    iceberg_config = IcebergConfig(enabled=iceberg.boolean("enabled", False), catalog_uri=catalog_uri,
                                   catalog_name=catalog_name,
                                   retention_s=iceberg.duration("retention", IcebergConfig.retention_s))
    if iceberg_config.enabled and catalog_uri is None and "://" in lake_root:
        raise InputError(f"{source}: [iceberg].catalog_uri: required for the object-store lake {lake_root} (the "
                         "default SQLite catalog file lives in a local lake only)")
    iceberg.done()
    root.done()
    return ChangefeedConfig(
        changefeed_id=changefeed_id,
        upstream=UpstreamConfig(pd=tuple(pd), tls=tls, gc_ttl_s=gc_ttl_s, connection=connection),
        lake=LakeConfig(root=lake_root, commit_bucket_s=int(commit_bucket_s), storage_options=storage_options,
                        aws_conn_id=aws_conn_id,
                        leases=leases),
        start_ts=start_ts,
        filter=FilterConfig(rules=rules, case_sensitive=case_sensitive),
        puller=puller_config,
        merge=merge_config,
        spark=SparkConfig(remote=remote),
        catalog=CatalogConfig(metastore_dir=metastore_dir, syncpoints=syncpoints),
        history=HistoryConfig(history_rules["scd2"], history_rules["soft_deletes"], case_sensitive),
        iceberg=iceberg_config,
        source=source,
    )


def parse_size(text: str) -> int:
    """'512MiB' -> bytes; binary (KiB/K) and decimal (KB) units, a bare number is bytes."""
    found = _SIZE.match(text)
    if found is None or found.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(text)
    size = float(found.group(1)) * _SIZE_UNITS[found.group(2).lower()]
    if not math.isfinite(size):  # hundreds of digits overflow the float to inf
        raise ValueError(text)
    return int(size)


def parse_duration(text: str) -> float:
    """'5s', '500ms', '1h30m' -> seconds (Go time.ParseDuration style, plus 'd')."""
    compact = text.strip()
    pos = 0
    total = 0.0
    for part in _DURATION_PART.finditer(compact):
        if part.start() != pos:
            raise ValueError(text)
        total += float(part.group(1)) * _DURATION_UNITS[part.group(2)]
        pos = part.end()
    if pos == 0 or pos != len(compact) or not math.isfinite(total):  # inf: hundreds of digits
        raise ValueError(text)
    return total


class _Section:
    """One TOML table being validated; remembers which keys were read to reject the rest."""

    def __init__(self, data: Any, source: str, name: str) -> None:
        self.source = source
        self.name = name
        self.present = data is not None
        if data is not None and not isinstance(data, dict):
            raise InputError(f"{source}: [{name}]: expected a table, got {_show(data)}")
        self.data: dict[str, Any] = data or {}
        self.known: set[str] = set()

    def _label(self, key: str) -> str:
        return f"[{self.name}].{key}" if self.name else key

    def bad(self, key: str, expected: str, got: Any) -> InputError:
        return InputError(f"{self.source}: {self._label(key)}: expected {expected}, got {_show(got)}")

    def raw(self, key: str) -> Any:
        return self.data.get(key)

    def _get(self, key: str, required: bool) -> Any:
        self.known.add(key)
        if key not in self.data:
            if required:
                raise InputError(f"{self.source}: {self._label(key)}: required key is missing")
            return None
        return self.data[key]

    def section(self, key: str, required: bool = False) -> "_Section":
        name = f"{self.name}.{key}" if self.name else key
        if required and key not in self.data:
            raise InputError(f"{self.source}: [{name}]: required section is missing")
        value = self._get(key, False)
        return _Section(value, self.source, name)

    def string_table(self) -> dict[str, str]:
        """Every key of this table, each with a string value (free-form options passed on as-is)."""
        for key in self.data:
            self.string(key)
        return dict(self.data)

    def string(self, key: str, required: bool = False) -> str | None:
        value = self._get(key, required)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise self.bad(key, "a non-empty string", value)
        if value is not None and "\x00" in value:  # no path, address or option can hold one
            raise self.bad(key, "a string without NUL characters", value)
        return value

    def string_list(self, key: str, required: bool = False) -> list[str]:
        value = self._get(key, required)
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise self.bad(key, "a list of non-empty strings", value)
        return list(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self._get(key, False)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.bad(key, "true or false", value)
        return value

    def positive_int(self, key: str, default: int) -> int:
        return self._int_at_least(key, default, 1, "a positive integer")

    def non_negative_int(self, key: str, default: int) -> int:
        return self._int_at_least(key, default, 0, "an integer >= 0")

    def _int_at_least(self, key: str, default: int, minimum: int, expected: str) -> int:
        value = self._get(key, False)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.bad(key, expected, value)
        return value

    def port(self, key: str) -> int | None:
        value = self._get(key, False)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
            raise self.bad(key, "a TCP port number 1-65535", value)
        return value

    def size(self, key: str, default: int) -> int:
        value = self._get(key, False)
        if value is None:
            return default
        try:
            size = value if isinstance(value, int) and not isinstance(value, bool) else parse_size(value)
        except (TypeError, ValueError):
            raise self.bad(key, "a size like '512MiB'", value) from None
        if size <= 0:
            raise self.bad(key, "a size above zero like '512MiB'", value)
        return size

    def duration(self, key: str, default: float) -> float:
        value = self._get(key, False)
        if value is None:
            return default
        try:
            if not isinstance(value, str):
                raise TypeError(value)
            seconds = parse_duration(value)
        except (TypeError, ValueError):
            raise self.bad(key, "a duration like '5s'", value) from None
        if seconds <= 0:
            raise self.bad(key, "a duration above zero like '5s'", value)
        return seconds

    def path(self, key: str, base: Path, required: bool = False) -> str | None:
        value = self.string(key, required)
        if value is None:
            return None
        resolved = (base / value).resolve()
        if not resolved.is_file():
            raise self.bad(key, "an existing file", value)
        return str(resolved)

    def start_ts(self, key: str) -> int | None:
        """A TSO integer or a TOML datetime (naive = UTC); 0 or absent means 'now'."""
        value = self._get(key, False)
        if value is None or value == 0:
            return None
        expected = "a TSO (positive integer) or a datetime like 2026-01-01T00:00:00Z"
        if isinstance(value, datetime):
            ts = tso.from_datetime(value)
            if not 0 < ts < _TSO_LIMIT:  # before 1970 or past what a u64 TSO can hold (docs/wire.md#tso-format)
                raise self.bad(key, f"{expected} between 1970 and {tso.to_datetime(_TSO_LIMIT - 1):%Y}",
                               value.isoformat())
            return ts
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _TSO_LIMIT:
            raise self.bad(key, expected + " below 2^64", value)
        return value

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.known)
        if unknown:
            where = f"[{self.name}]." if self.name else ""
            valid = ", ".join(sorted(self.known))
            raise InputError(f"{self.source}: {where}{unknown[0]}: unknown key (valid here: {valid})")


def _folder(section: _Section, key: str, base: Path) -> str | None:
    """An existing writable local folder; the puller checks it again by creating a file at start."""
    value = section.string(key)
    if value is None:
        return None
    folder = (base / value).resolve()
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise section.bad(key, "an existing writable folder", value)
    return str(folder)


_SHOW_MAX = 80


def _show(value: Any) -> str:
    """The offending value, cut short so one line stays readable."""
    text = repr(value) if not isinstance(value, dict) else "a table"
    return text if len(text) <= _SHOW_MAX else text[: _SHOW_MAX - 3] + "..."
