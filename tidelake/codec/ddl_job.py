"""TiDB DDL jobs (`model.Job`) as stored in `mysql.tidb_ddl_job.job_meta` and read by TiCDC.

JSON keys follow pingcap/tidb `pkg/meta/model/job.go` (docs/wire.md#modeljob-json): tagged snake_case
keys for the job, untagged Go names (`SchemaVersion`, `DBInfo`, `TableInfo`, `FinishedTS`,
`MultipleTableInfos`) inside `binlog`. Unknown keys are kept in `raw` and written back.
Owner: the codec.
"""

import json
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from tidelake.codec.schema import DBInfo, JSONInput, TableInfo, load_json_object
from tidelake.errors import InputError


class ActionType(IntEnum):
    """DDL action codes (docs/wire.md#actiontype-codes; full list from pkg/meta/model/job.go)."""

    NONE = 0
    CREATE_SCHEMA = 1
    DROP_SCHEMA = 2
    CREATE_TABLE = 3
    DROP_TABLE = 4
    ADD_COLUMN = 5
    DROP_COLUMN = 6
    ADD_INDEX = 7
    DROP_INDEX = 8
    ADD_FOREIGN_KEY = 9
    DROP_FOREIGN_KEY = 10
    TRUNCATE_TABLE = 11
    MODIFY_COLUMN = 12  # also RENAME COLUMN / CHANGE COLUMN
    REBASE_AUTO_ID = 13
    RENAME_TABLE = 14
    SET_DEFAULT_VALUE = 15
    SHARD_ROW_ID = 16
    MODIFY_TABLE_COMMENT = 17
    RENAME_INDEX = 18
    ADD_TABLE_PARTITION = 19
    DROP_TABLE_PARTITION = 20
    CREATE_VIEW = 21
    MODIFY_TABLE_CHARSET_AND_COLLATE = 22
    TRUNCATE_TABLE_PARTITION = 23
    DROP_VIEW = 24
    RECOVER_TABLE = 25
    MODIFY_SCHEMA_CHARSET_AND_COLLATE = 26
    LOCK_TABLE = 27
    UNLOCK_TABLE = 28
    REPAIR_TABLE = 29
    SET_TIFLASH_REPLICA = 30
    UPDATE_TIFLASH_REPLICA_STATUS = 31
    ADD_PRIMARY_KEY = 32
    DROP_PRIMARY_KEY = 33
    CREATE_SEQUENCE = 34
    ALTER_SEQUENCE = 35
    DROP_SEQUENCE = 36
    ADD_COLUMNS = 37  # deprecated upstream in favour of MULTI_SCHEMA_CHANGE
    DROP_COLUMNS = 38  # deprecated upstream in favour of MULTI_SCHEMA_CHANGE
    MODIFY_TABLE_AUTO_ID_CACHE = 39
    REBASE_AUTO_RANDOM_BASE = 40
    ALTER_INDEX_VISIBILITY = 41
    EXCHANGE_TABLE_PARTITION = 42
    ADD_CHECK_CONSTRAINT = 43
    DROP_CHECK_CONSTRAINT = 44
    ALTER_CHECK_CONSTRAINT = 45
    ALTER_TABLE_ALTER_PARTITION = 46  # removed upstream, kept as a tombstone
    RENAME_TABLES = 47
    DROP_INDEXES = 48  # deprecated upstream
    ALTER_TABLE_ATTRIBUTES = 49
    ALTER_TABLE_PARTITION_ATTRIBUTES = 50
    CREATE_PLACEMENT_POLICY = 51
    ALTER_PLACEMENT_POLICY = 52
    DROP_PLACEMENT_POLICY = 53
    ALTER_TABLE_PARTITION_PLACEMENT = 54
    MODIFY_SCHEMA_DEFAULT_PLACEMENT = 55
    ALTER_TABLE_PLACEMENT = 56
    ALTER_CACHE_TABLE = 57
    ALTER_TABLE_STATS_OPTIONS = 58
    ALTER_NO_CACHE_TABLE = 59
    CREATE_TABLES = 60
    MULTI_SCHEMA_CHANGE = 61
    FLASHBACK_CLUSTER = 62
    RECOVER_SCHEMA = 63
    REORGANIZE_PARTITION = 64
    ALTER_TTL_INFO = 65
    ALTER_TTL_REMOVE = 67
    CREATE_RESOURCE_GROUP = 68
    ALTER_RESOURCE_GROUP = 69
    DROP_RESOURCE_GROUP = 70
    ALTER_TABLE_PARTITIONING = 71
    REMOVE_PARTITIONING = 72
    ADD_COLUMNAR_INDEX = 73
    MODIFY_ENGINE_ATTRIBUTE = 74
    ALTER_TABLE_MODE = 75
    REFRESH_META = 76
    MODIFY_SCHEMA_READ_ONLY = 77

    @property
    def label(self) -> str:
        """TiDB's own wording (`ActionMap`), e.g. 'add column'; used in ADMIN SHOW DDL output."""
        return _ACTION_LABELS.get(self, self.name.lower().replace("_", " "))


_ACTION_LABELS = {
    ActionType.NONE: "none",
    ActionType.REBASE_AUTO_ID: "rebase auto_increment ID",
    ActionType.SHARD_ROW_ID: "shard row ID",
    ActionType.ADD_TABLE_PARTITION: "add partition",
    ActionType.DROP_TABLE_PARTITION: "drop partition",
    ActionType.TRUNCATE_TABLE_PARTITION: "truncate partition",
    ActionType.MODIFY_TABLE_AUTO_ID_CACHE: "modify auto id cache",
    ActionType.REBASE_AUTO_RANDOM_BASE: "rebase auto_random ID",
    ActionType.EXCHANGE_TABLE_PARTITION: "exchange partition",
    ActionType.ALTER_TABLE_ALTER_PARTITION: "alter partition",
    ActionType.ALTER_CACHE_TABLE: "alter table cache",
    ActionType.ALTER_NO_CACHE_TABLE: "alter table nocache",
    ActionType.ALTER_TABLE_STATS_OPTIONS: "alter table statistics options",
    ActionType.MULTI_SCHEMA_CHANGE: "alter table multi-schema change",
    ActionType.RECOVER_SCHEMA: "flashback schema",
    ActionType.REORGANIZE_PARTITION: "alter table reorganize partition",
    ActionType.ALTER_TTL_INFO: "alter table ttl",
    ActionType.ALTER_TTL_REMOVE: "alter table no_ttl",
    ActionType.ALTER_TABLE_PARTITIONING: "alter table partition by",
    ActionType.REMOVE_PARTITIONING: "alter table remove partitioning",
    ActionType.UPDATE_TIFLASH_REPLICA_STATUS: "update tiflash replica status",
}


# Jobs that copy rows into new physical ids, each row to the partition TiDB's routing of its values
# picks, in write reorganization, before the job is done (pingcap/tidb pkg/ddl/partition.go
# `onReorganizePartition`, docs/design/2022-09-29-reorganize-partition.md). REMOVE PARTITIONING
# copies too, but to one id under the same handles, which the replica follows without them.
REPARTITIONS = frozenset({ActionType.REORGANIZE_PARTITION, ActionType.ALTER_TABLE_PARTITIONING})
_COLUMN_CHANGES = frozenset({ActionType.MODIFY_COLUMN, ActionType.MULTI_SCHEMA_CHANGE})


def copied_physical_ids(action: int, before: TableInfo | None, after: TableInfo | None) -> list[int]:
    """The physical ids whose rows a job rewrote where no row event carries them as the schema after
    it reads them, so the puller reads them at the finished ts F and lands them as puts at F
    (docs/sql-front.md#what-the-replica-side-does): a re-partitioning's new ids, which join the feed
    only at F; every id of a table whose MODIFY COLUMN reorganised data, i.e. gave the column a new
    id (TiDB writes each row's converted value into a changing column under that id, and its row
    events decode, before F, with the old column: pkg/ddl/modify_column.go `doModifyColumnTypeWithData`).
    A multi-schema change that both adds and drops a column counts too: a read more, never a row less.
    EXCHANGE PARTITION: the id the table received, whose rows are in the lake only when the other
    table is replicated (its replica then gives them; else the puller reads them at F)."""
    if before is None or after is None:
        return []
    if action in REPARTITIONS or action == ActionType.EXCHANGE_TABLE_PARTITION:
        kept = set(before.physical_ids())
        return [pid for pid in after.physical_ids() if pid not in kept]
    if action in _COLUMN_CHANGES:
        old, new = {c.id for c in before.public_columns()}, {c.id for c in after.public_columns()}
        if new - old and old - new:
            return after.physical_ids()
    return []


class JobState(IntEnum):
    """Job states (docs/wire.md#jobstate-codes). TiCDC replicates only DONE jobs from tidb_ddl_job."""

    NONE = 0
    RUNNING = 1
    ROLLINGBACK = 2
    ROLLBACK_DONE = 3
    DONE = 4
    CANCELLED = 5
    SYNCED = 6  # only in DDL history, never written to tidb_ddl_job
    CANCELLING = 7
    QUEUEING = 8
    PAUSED = 9
    PAUSING = 10


class SchemaState(IntEnum):
    """Online schema-change states of a schema element (docs/encoding.md#schema-json)."""

    NONE = 0
    DELETE_ONLY = 1
    WRITE_ONLY = 2
    WRITE_REORGANIZATION = 3
    DELETE_REORGANIZATION = 4
    PUBLIC = 5
    REPLICA_ONLY = 6
    GLOBAL_TXN_ONLY = 7


# Go's encoding/json escapes these even outside HTML; they can only occur inside JSON strings.
_GO_HTML_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def _enum_or_int(enum: type[IntEnum], value: int) -> IntEnum | int:
    """Codes from newer TiDB versions stay plain ints instead of failing the puller."""
    try:
        return enum(value)
    except ValueError:
        return value


def _field(obj: dict, key: str, kind: type, default: Any, what: str = "DDL job") -> Any:
    value = obj.get(key, default)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InputError(f"{what}: key {key!r} has {type(value).__name__} {value!r}, expected {kind.__name__}")
    return value


def _required_int(obj: dict, key: str) -> int:
    if key not in obj:
        raise InputError(f"DDL job: missing key {key!r} (not TiDB job JSON?)")
    return _field(obj, key, int, 0)


def _binlog_get(binlog: dict, key: str) -> Any:
    """Go's JSON decoder matches untagged field names case-insensitively; TiDB writes them capitalised."""
    if key in binlog:
        return binlog[key]
    lowered = key.lower()
    return next((v for k, v in binlog.items() if k.lower() == lowered), None)


def _binlog_schema(cls: type[DBInfo] | type[TableInfo], value: Any, where: str) -> Any:
    """A schema object inside the job's binlog; its errors say where in the job it sits."""
    if not isinstance(value, dict):
        raise InputError(f"DDL job: binlog {where!r} must be an object, got {type(value).__name__}")
    try:
        return cls.from_json(value)
    except InputError as exc:
        raise InputError(f"DDL job: binlog {where!r}: {exc}") from None


@dataclass
class DDLJob:
    """A DDL job and, once done, the schema it produced (`binlog`)."""

    id: int
    type: ActionType | int
    schema_id: int = 0
    table_id: int = 0
    schema_name: str = ""
    table_name: str = ""
    state: JobState | int = JobState.NONE
    schema_state: SchemaState | int = SchemaState.NONE
    query: str = ""
    start_ts: int = 0
    real_start_ts: int = 0
    schema_version: int = 0
    db_info: DBInfo | None = None
    table_info: TableInfo | None = None
    finished_ts: int = 0
    multiple_table_infos: list[TableInfo] = field(default_factory=list)
    raw_args: Any = None
    involving_schema_info: list[dict] | None = None
    version: int = 1
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: JSONInput) -> "DDLJob":
        obj = load_json_object(obj, "DDL job")
        binlog = obj.get("binlog") or {}
        if not isinstance(binlog, dict):
            raise InputError(f"DDL job: key 'binlog' must be an object, got {type(binlog).__name__}")
        db_info = _binlog_get(binlog, "DBInfo")
        table_info = _binlog_get(binlog, "TableInfo")
        multiple = _binlog_get(binlog, "MultipleTableInfos") or []
        if not isinstance(multiple, list):
            raise InputError("DDL job: binlog 'MultipleTableInfos' must be an array")
        schema_version = _binlog_get(binlog, "SchemaVersion") or 0
        finished_ts = _binlog_get(binlog, "FinishedTS") or 0
        if any(not isinstance(v, int) or isinstance(v, bool) for v in (schema_version, finished_ts)):
            raise InputError("DDL job: binlog 'SchemaVersion'/'FinishedTS' must be integers")
        involving = obj.get("involving_schema_info")
        if involving is not None and not isinstance(involving, list):
            raise InputError("DDL job: key 'involving_schema_info' must be an array")
        return cls(
            id=_required_int(obj, "id"),
            type=_enum_or_int(ActionType, _required_int(obj, "type")),
            schema_id=_field(obj, "schema_id", int, 0),
            table_id=_field(obj, "table_id", int, 0),
            schema_name=_field(obj, "schema_name", str, ""),
            table_name=_field(obj, "table_name", str, ""),
            state=_enum_or_int(JobState, _required_int(obj, "state")),
            schema_state=_enum_or_int(SchemaState, _field(obj, "schema_state", int, 0)),
            query=_field(obj, "query", str, ""),
            start_ts=_field(obj, "start_ts", int, 0),
            real_start_ts=_field(obj, "real_start_ts", int, 0),
            schema_version=schema_version,
            db_info=_binlog_schema(DBInfo, db_info, "DBInfo") if db_info is not None else None,
            table_info=_binlog_schema(TableInfo, table_info, "TableInfo") if table_info is not None else None,
            finished_ts=finished_ts,
            multiple_table_infos=[_binlog_schema(TableInfo, t, f"MultipleTableInfos[{i}]") for i, t in enumerate(multiple)],
            raw_args=obj.get("raw_args"),
            involving_schema_info=involving,
            version=_field(obj, "version", int, 1),
            raw=obj,
        )

    def to_json(self) -> dict:
        """The job as TiDB writes it into `tidb_ddl_job.job_meta` (Go field order of model.Job)."""
        base = self.raw or {
            "id": None,
            "type": None,
            "schema_id": None,
            "table_id": None,
            "schema_name": None,
            "table_name": None,
            "state": None,
            "warning": None,
            "err": None,
            "err_count": 0,
            "row_count": 0,
            "raw_args": None,
            "schema_state": None,
            "snapshot_ver": 0,
            "real_start_ts": None,
            "start_ts": None,
            "dependency_id": 0,
            "query": None,
            "binlog": None,
            "version": None,
            "reorg_meta": None,
            "multi_schema_info": None,
            "priority": 0,
            "seq_num": 0,
            "charset": "",
            "collate": "",
            "admin_operator": 0,
            "trace_info": None,
            "bdr_role": "",
            "cdc_write_source": 0,
            "local_mode": False,
            "sql_mode": 0,
            "last_schema_version": 0,
        }
        out = {
            **base,
            "id": self.id,
            "type": int(self.type),
            "schema_id": self.schema_id,
            "table_id": self.table_id,
            "schema_name": self.schema_name,
            "table_name": self.table_name,
            "state": int(self.state),
            "raw_args": self.raw_args,
            "schema_state": int(self.schema_state),
            "real_start_ts": self.real_start_ts,
            "start_ts": self.start_ts,
            "query": self.query,
            "binlog": self._binlog_json(),
            "version": self.version,
        }
        if self.involving_schema_info:
            out["involving_schema_info"] = self.involving_schema_info
        else:
            out.pop("involving_schema_info", None)  # omitempty
        return out

    def _binlog_json(self) -> dict:
        raw_binlog = self.raw.get("binlog") if isinstance(self.raw.get("binlog"), dict) else {}
        modelled = {"schemaversion", "dbinfo", "tableinfo", "finishedts", "multipletableinfos"}
        return {
            **{k: v for k, v in raw_binlog.items() if k.lower() not in modelled},
            "SchemaVersion": self.schema_version,
            "DBInfo": self.db_info.to_json() if self.db_info is not None else None,
            "TableInfo": self.table_info.to_json() if self.table_info is not None else None,
            "FinishedTS": self.finished_ts,
            "MultipleTableInfos": [t.to_json() for t in self.multiple_table_infos] if self.multiple_table_infos else None,
        }

    def to_json_bytes(self) -> bytes:
        """Compact JSON bytes as Go's json.Marshal writes them into the `job_meta` LONGBLOB column."""
        text = json.dumps(self.to_json(), separators=(",", ":"), ensure_ascii=False)
        return text.translate(_GO_HTML_ESCAPES).encode("utf-8")

    def is_done(self) -> bool:
        """DONE is the only state TiCDC replicates from tidb_ddl_job (docs/wire.md#tidb_ddl_job-row)."""
        return self.state == JobState.DONE

    @property
    def action_label(self) -> str:
        return self.type.label if isinstance(self.type, ActionType) else f"unknown action {self.type}"
