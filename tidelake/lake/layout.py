"""Where tidelake's own Delta tables live and what their columns are (docs/design.md#lake-layout, a contract).

The schemas are defined once, as pyarrow, because the puller writes them with delta-rs; the
Spark DDL is derived from them so the merge side can never drift from what was landed.
Owner: the lake contract; the lander, the merge and bootstrap take their schemas from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError

from tidelake.config import LakeConfig, LeaseSettings
from tidelake.errors import InputError
from tidelake.lake.object_store import lake_storage_options

TIDELAKE_DIR = "_tidelake"

# Table property that records the commit-time bucket size a changelog was created with; readers
# take it from the table, so changing the lander's setting never breaks partition pruning.
BUCKET_SECONDS_PROPERTY = "tidelake.commitBucketSeconds"
DEFAULT_BUCKET_SECONDS = 3600
# Partition value format of `commit_bucket`: UTC start of the bucket. Fixed width, so string
# order is time order (range predicates prune), readable, and free of ':' (no path escaping).
BUCKET_FORMAT = "%Y-%m-%dT%H%MZ"

CHANGELOG_SCHEMA = pa.schema(
    [
        pa.field("table_id", pa.int64(), nullable=False),
        pa.field("commit_bucket", pa.string(), nullable=False),
        pa.field("commit_ts", pa.int64(), nullable=False),
        pa.field("start_ts", pa.int64(), nullable=False),
        pa.field("op", pa.string(), nullable=False),
        pa.field("key", pa.binary(), nullable=False),
        pa.field("value", pa.binary(), nullable=False),
        pa.field("old_value", pa.binary(), nullable=False),
        pa.field("region_id", pa.int64(), nullable=False),
        # Landing order (the lander's flush sequence): among duplicates of one (key, commit_ts)
        # merge may keep any; this makes the choice deterministic and shows when a row landed.
        pa.field("flush_seq", pa.int64(), nullable=False),
    ]
)
CHANGELOG_PARTITIONS = ("table_id", "commit_bucket")

class DdlSource(StrEnum):
    """Where a `ddl` row comes from: a DDL job, the schema snapshot a feed or a join starts at,
    or the puller when `[filter].rules` stopped selecting a table (a DROP TABLE for the replica:
    the table leaves the changefeed, tidelake.capture.changefeed.filter_change)."""

    SNAPSHOT = "snapshot"
    JOB = "job"
    FILTER = "filter"


FILTER_LEFT_BECAUSE = "[filter].rules no longer select it"  # why a `filter` row's table left


DDL_SCHEMA = pa.schema(
    [
        pa.field("job_id", pa.int64(), nullable=False),
        pa.field("commit_ts", pa.int64(), nullable=False),
        pa.field("schema_version", pa.int64(), nullable=False),
        pa.field("action", pa.int32(), nullable=False),
        pa.field("action_name", pa.string(), nullable=False),
        pa.field("schema_id", pa.int64(), nullable=False),
        pa.field("schema_name", pa.string(), nullable=True),
        pa.field("table_id", pa.int64(), nullable=False),
        pa.field("table_name", pa.string(), nullable=True),
        pa.field("query", pa.string(), nullable=True),
        pa.field("table_info", pa.string(), nullable=True),
        pa.field("db_info", pa.string(), nullable=True),
        pa.field("source", pa.string(), nullable=False),
    ]
)
# One row per (job, table it touched); snapshot rows have job_id 0 and commit_ts = snapshot ts.
DDL_KEY = ("source", "job_id", "commit_ts", "schema_id", "table_id")

class WatermarkKind(StrEnum):
    """What a `watermarks` row is the resolved ts of: one physical table, or the DDL stream."""

    TABLE = "table"
    DDL = "ddl"


WATERMARKS_SCHEMA = pa.schema(
    [
        pa.field("puller", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("table_id", pa.int64(), nullable=False),
        pa.field("resolved_ts", pa.int64(), nullable=False),
        pa.field("changelog_version", pa.int64(), nullable=False),
        pa.field("ddl_version", pa.int64(), nullable=False),
        pa.field("flush_seq", pa.int64(), nullable=False),
        pa.field("updated_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
WATERMARKS_PARTITIONS = ("puller",)
# Every puller rewrites its partition on every flush: a commit a second per shard. A checkpoint
# every 10 commits keeps a read's log replay at most 10 commits long whatever the history (the
# Delta default, 100, let reads slow down several times over just before each checkpoint). A checkpoint also carries
# a tombstone per file removed within the deleted-file retention (default a week: 600,000 per
# shard), so that retention and the log's are an hour: commits older than that leave the log
# (the nemesis checker reads every version of its short runs) and their tombstones the
# checkpoints, and a read stays bounded by one hour of flushes (docs/design.md#lake-layout).
WATERMARKS_PROPERTIES = {
    "delta.checkpointInterval": "10",
    "delta.logRetentionDuration": "interval 1 hours",
    "delta.deletedFileRetentionDuration": "interval 1 hours",
}

_SPARK_TYPES = {
    pa.int32(): "INT",
    pa.int64(): "BIGINT",
    pa.string(): "STRING",
    pa.binary(): "BINARY",
    pa.timestamp("us", tz="UTC"): "TIMESTAMP",
}


def spark_ddl(schema: pa.Schema) -> str:
    """Spark DDL column list (`a BIGINT NOT NULL, ...`) for one of the schemas above."""
    return ", ".join(
        f"{f.name} {_SPARK_TYPES[f.type]}{'' if f.nullable else ' NOT NULL'}" for f in schema
    )


@dataclass(frozen=True)
class LakeLayout:
    """Paths of one lake. `root` is a local folder or an object-store URI (s3://, s3a://, abfss://,
    gs://); `storage_options` are passed to delta-rs as-is (credentials, endpoints). An s3 root
    given without options takes them from the AWS environment (tidelake.lake.object_store).
    `leases` time the replica writers' leases (tidelake.lake.lease)."""

    root: str
    storage_options: dict[str, str] | None = field(default=None, compare=False, repr=False)  # may hold keys
    leases: LeaseSettings = field(default_factory=LeaseSettings, compare=False)

    @classmethod
    def from_config(cls, lake: LakeConfig) -> LakeLayout:
        """The lake a changefeed's [lake] section names, with its storage options and lease timing."""
        return cls(lake.root, lake_storage_options(lake.root, lake.storage_options), lake.leases)

    def __post_init__(self) -> None:
        if not self.root:
            raise InputError("lake root is empty: give a folder or an object-store URI")
        object.__setattr__(self, "root", self.root.rstrip("/"))
        if self.storage_options is None:
            object.__setattr__(self, "storage_options", lake_storage_options(self.root))

    @property
    def tidelake_root(self) -> str:
        return f"{self.root}/{TIDELAKE_DIR}"

    @property
    def changelog(self) -> str:
        return f"{self.tidelake_root}/changelog"

    @property
    def ddl(self) -> str:
        return f"{self.tidelake_root}/ddl"

    @property
    def watermarks(self) -> str:
        return f"{self.tidelake_root}/watermarks"

    @property
    def syncpoints(self) -> str:
        return f"{self.tidelake_root}/syncpoints"

    @property
    def announced(self) -> str:
        """What the merge DAG last announced as asset events (tidelake.orchestration.announced_states)."""
        return f"{self.tidelake_root}/announced"

    @property
    def leases_root(self) -> str:
        """Folder of the writers' lease records (tidelake.lake.lease), not a Delta table."""
        return f"{self.tidelake_root}/leases"

    def replica_path(self, db: str, table: str) -> str:
        """Replica of upstream `db`.`table`; names are used verbatim (TiDB names cannot hold '/')."""
        for what, name in (("database", db), ("table", table)):
            if not name or "/" in name or name in (".", "..") or name == TIDELAKE_DIR:
                raise InputError(f"{what} name {name!r} cannot be a replica folder name")
        return f"{self.root}/{db}/{table}"


def open_or_create(
    layout: LakeLayout,
    path: str,
    schema: pa.Schema,
    partitions: tuple[str, ...] = (),
    properties: dict[str, str] | None = None,
    added_columns: int = 0,
) -> DeltaTable:
    """Open a tidelake table, creating it on first use; a concurrent creator simply wins. A table
    written before the last `added_columns` columns of `schema` were added may lack them (its
    writer adds them with a schema merge)."""
    if not DeltaTable.is_deltatable(path, storage_options=layout.storage_options):
        try:
            DeltaTable.create(
                path,
                schema,
                mode="ignore",
                partition_by=list(partitions) or None,
                configuration=properties,
                storage_options=layout.storage_options,
                raise_if_key_not_exists=False,
            )
        except CommitFailedError:
            pass  # another puller created it between our check and our commit
    table = DeltaTable(path, storage_options=layout.storage_options)
    found = pa.schema(table.schema().to_arrow())
    older = [pa.schema(list(schema)[:len(schema) - n]) for n in range(1, added_columns + 1)]
    if found != schema and found not in older:
        raise InputError(f"{path} is not a tidelake table of the expected schema")
    return table
