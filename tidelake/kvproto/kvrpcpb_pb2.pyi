from tidelake.kvproto import errorpb_pb2 as _errorpb_pb2
from tidelake.kvproto import metapb_pb2 as _metapb_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExtraOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Noop: _ClassVar[ExtraOp]
    ReadOldValue: _ClassVar[ExtraOp]

class CommandPri(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Normal: _ClassVar[CommandPri]
    Low: _ClassVar[CommandPri]
    High: _ClassVar[CommandPri]

class IsolationLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SI: _ClassVar[IsolationLevel]
    RC: _ClassVar[IsolationLevel]
    RCCheckTS: _ClassVar[IsolationLevel]

class APIVersion(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    V1: _ClassVar[APIVersion]
    V1TTL: _ClassVar[APIVersion]
    V2: _ClassVar[APIVersion]
    V3: _ClassVar[APIVersion]

class DiskFullOpt(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NotAllowedOnFull: _ClassVar[DiskFullOpt]
    AllowedOnAlmostFull: _ClassVar[DiskFullOpt]
    AllowedOnAlreadyFull: _ClassVar[DiskFullOpt]

class RequestOrigin(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RequestOriginUnknown: _ClassVar[RequestOrigin]
    RequestOriginTiDB: _ClassVar[RequestOrigin]

class Op(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Put: _ClassVar[Op]
    Del: _ClassVar[Op]
    Lock: _ClassVar[Op]
    Rollback: _ClassVar[Op]
    Insert: _ClassVar[Op]
    PessimisticLock: _ClassVar[Op]
    CheckNotExists: _ClassVar[Op]
    SharedLock: _ClassVar[Op]
    SharedPessimisticLock: _ClassVar[Op]

class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NoAction: _ClassVar[Action]
    TTLExpireRollback: _ClassVar[Action]
    LockNotExistRollback: _ClassVar[Action]
    MinCommitTSPushed: _ClassVar[Action]
    TTLExpirePessimisticRollback: _ClassVar[Action]
    LockNotExistDoNothing: _ClassVar[Action]

class CommitRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Unknown: _ClassVar[CommitRole]
    Primary: _ClassVar[CommitRole]
    Secondary: _ClassVar[CommitRole]

class AssertionLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Off: _ClassVar[AssertionLevel]
    Fast: _ClassVar[AssertionLevel]
    Strict: _ClassVar[AssertionLevel]

class PessimisticLockWakeUpMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WakeUpModeNormal: _ClassVar[PessimisticLockWakeUpMode]
    WakeUpModeForceLock: _ClassVar[PessimisticLockWakeUpMode]

class PessimisticLockKeyResultType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LockResultNormal: _ClassVar[PessimisticLockKeyResultType]
    LockResultLockedWithConflict: _ClassVar[PessimisticLockKeyResultType]
    LockResultFailed: _ClassVar[PessimisticLockKeyResultType]
Noop: ExtraOp
ReadOldValue: ExtraOp
Normal: CommandPri
Low: CommandPri
High: CommandPri
SI: IsolationLevel
RC: IsolationLevel
RCCheckTS: IsolationLevel
V1: APIVersion
V1TTL: APIVersion
V2: APIVersion
V3: APIVersion
NotAllowedOnFull: DiskFullOpt
AllowedOnAlmostFull: DiskFullOpt
AllowedOnAlreadyFull: DiskFullOpt
RequestOriginUnknown: RequestOrigin
RequestOriginTiDB: RequestOrigin
Put: Op
Del: Op
Lock: Op
Rollback: Op
Insert: Op
PessimisticLock: Op
CheckNotExists: Op
SharedLock: Op
SharedPessimisticLock: Op
NoAction: Action
TTLExpireRollback: Action
LockNotExistRollback: Action
MinCommitTSPushed: Action
TTLExpirePessimisticRollback: Action
LockNotExistDoNothing: Action
Unknown: CommitRole
Primary: CommitRole
Secondary: CommitRole
Off: AssertionLevel
Fast: AssertionLevel
Strict: AssertionLevel
WakeUpModeNormal: PessimisticLockWakeUpMode
WakeUpModeForceLock: PessimisticLockWakeUpMode
LockResultNormal: PessimisticLockKeyResultType
LockResultLockedWithConflict: PessimisticLockKeyResultType
LockResultFailed: PessimisticLockKeyResultType

class Context(_message.Message):
    __slots__ = ("region_id", "region_epoch", "peer", "term", "priority", "isolation_level", "not_fill_cache", "sync_log", "record_time_stat", "record_scan_stat", "replica_read", "resolved_locks", "max_execution_duration_ms", "applied_index", "task_id", "stale_read", "resource_group_tag", "disk_full_opt", "is_retry_request", "api_version", "committed_locks", "request_source", "txn_source", "busy_threshold_ms", "request_origin", "keyspace_name", "keyspace_id", "buckets_version", "source_stmt", "cluster_id", "trace_id", "trace_control_flags")
    REGION_ID_FIELD_NUMBER: _ClassVar[int]
    REGION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    NOT_FILL_CACHE_FIELD_NUMBER: _ClassVar[int]
    SYNC_LOG_FIELD_NUMBER: _ClassVar[int]
    RECORD_TIME_STAT_FIELD_NUMBER: _ClassVar[int]
    RECORD_SCAN_STAT_FIELD_NUMBER: _ClassVar[int]
    REPLICA_READ_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_LOCKS_FIELD_NUMBER: _ClassVar[int]
    MAX_EXECUTION_DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STALE_READ_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_GROUP_TAG_FIELD_NUMBER: _ClassVar[int]
    DISK_FULL_OPT_FIELD_NUMBER: _ClassVar[int]
    IS_RETRY_REQUEST_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_LOCKS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_SOURCE_FIELD_NUMBER: _ClassVar[int]
    TXN_SOURCE_FIELD_NUMBER: _ClassVar[int]
    BUSY_THRESHOLD_MS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ORIGIN_FIELD_NUMBER: _ClassVar[int]
    KEYSPACE_NAME_FIELD_NUMBER: _ClassVar[int]
    KEYSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_VERSION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_STMT_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTROL_FLAGS_FIELD_NUMBER: _ClassVar[int]
    region_id: int
    region_epoch: _metapb_pb2.RegionEpoch
    peer: _metapb_pb2.Peer
    term: int
    priority: CommandPri
    isolation_level: IsolationLevel
    not_fill_cache: bool
    sync_log: bool
    record_time_stat: bool
    record_scan_stat: bool
    replica_read: bool
    resolved_locks: _containers.RepeatedScalarFieldContainer[int]
    max_execution_duration_ms: int
    applied_index: int
    task_id: int
    stale_read: bool
    resource_group_tag: bytes
    disk_full_opt: DiskFullOpt
    is_retry_request: bool
    api_version: APIVersion
    committed_locks: _containers.RepeatedScalarFieldContainer[int]
    request_source: str
    txn_source: int
    busy_threshold_ms: int
    request_origin: RequestOrigin
    keyspace_name: str
    keyspace_id: int
    buckets_version: int
    source_stmt: SourceStmt
    cluster_id: int
    trace_id: bytes
    trace_control_flags: int
    def __init__(self, region_id: _Optional[int] = ..., region_epoch: _Optional[_Union[_metapb_pb2.RegionEpoch, _Mapping]] = ..., peer: _Optional[_Union[_metapb_pb2.Peer, _Mapping]] = ..., term: _Optional[int] = ..., priority: _Optional[_Union[CommandPri, str]] = ..., isolation_level: _Optional[_Union[IsolationLevel, str]] = ..., not_fill_cache: _Optional[bool] = ..., sync_log: _Optional[bool] = ..., record_time_stat: _Optional[bool] = ..., record_scan_stat: _Optional[bool] = ..., replica_read: _Optional[bool] = ..., resolved_locks: _Optional[_Iterable[int]] = ..., max_execution_duration_ms: _Optional[int] = ..., applied_index: _Optional[int] = ..., task_id: _Optional[int] = ..., stale_read: _Optional[bool] = ..., resource_group_tag: _Optional[bytes] = ..., disk_full_opt: _Optional[_Union[DiskFullOpt, str]] = ..., is_retry_request: _Optional[bool] = ..., api_version: _Optional[_Union[APIVersion, str]] = ..., committed_locks: _Optional[_Iterable[int]] = ..., request_source: _Optional[str] = ..., txn_source: _Optional[int] = ..., busy_threshold_ms: _Optional[int] = ..., request_origin: _Optional[_Union[RequestOrigin, str]] = ..., keyspace_name: _Optional[str] = ..., keyspace_id: _Optional[int] = ..., buckets_version: _Optional[int] = ..., source_stmt: _Optional[_Union[SourceStmt, _Mapping]] = ..., cluster_id: _Optional[int] = ..., trace_id: _Optional[bytes] = ..., trace_control_flags: _Optional[int] = ...) -> None: ...

class SourceStmt(_message.Message):
    __slots__ = ("start_ts", "connection_id", "stmt_id", "session_alias")
    START_TS_FIELD_NUMBER: _ClassVar[int]
    CONNECTION_ID_FIELD_NUMBER: _ClassVar[int]
    STMT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ALIAS_FIELD_NUMBER: _ClassVar[int]
    start_ts: int
    connection_id: int
    stmt_id: int
    session_alias: str
    def __init__(self, start_ts: _Optional[int] = ..., connection_id: _Optional[int] = ..., stmt_id: _Optional[int] = ..., session_alias: _Optional[str] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("context", "key", "version", "need_commit_ts")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NEED_COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    context: Context
    key: bytes
    version: int
    need_commit_ts: bool
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., key: _Optional[bytes] = ..., version: _Optional[int] = ..., need_commit_ts: _Optional[bool] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("region_error", "error", "value", "not_found", "exec_details_v2", "commit_ts")
    REGION_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    EXEC_DETAILS_V2_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    region_error: _errorpb_pb2.Error
    error: KeyError
    value: bytes
    not_found: bool
    exec_details_v2: ExecDetailsV2
    commit_ts: int
    def __init__(self, region_error: _Optional[_Union[_errorpb_pb2.Error, _Mapping]] = ..., error: _Optional[_Union[KeyError, _Mapping]] = ..., value: _Optional[bytes] = ..., not_found: _Optional[bool] = ..., exec_details_v2: _Optional[_Union[ExecDetailsV2, _Mapping]] = ..., commit_ts: _Optional[int] = ...) -> None: ...

class ScanRequest(_message.Message):
    __slots__ = ("context", "start_key", "limit", "version", "key_only", "reverse", "end_key", "sample_step")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    START_KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    KEY_ONLY_FIELD_NUMBER: _ClassVar[int]
    REVERSE_FIELD_NUMBER: _ClassVar[int]
    END_KEY_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_STEP_FIELD_NUMBER: _ClassVar[int]
    context: Context
    start_key: bytes
    limit: int
    version: int
    key_only: bool
    reverse: bool
    end_key: bytes
    sample_step: int
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., start_key: _Optional[bytes] = ..., limit: _Optional[int] = ..., version: _Optional[int] = ..., key_only: _Optional[bool] = ..., reverse: _Optional[bool] = ..., end_key: _Optional[bytes] = ..., sample_step: _Optional[int] = ...) -> None: ...

class ScanResponse(_message.Message):
    __slots__ = ("region_error", "pairs", "error")
    REGION_ERROR_FIELD_NUMBER: _ClassVar[int]
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    region_error: _errorpb_pb2.Error
    pairs: _containers.RepeatedCompositeFieldContainer[KvPair]
    error: KeyError
    def __init__(self, region_error: _Optional[_Union[_errorpb_pb2.Error, _Mapping]] = ..., pairs: _Optional[_Iterable[_Union[KvPair, _Mapping]]] = ..., error: _Optional[_Union[KeyError, _Mapping]] = ...) -> None: ...

class BatchGetRequest(_message.Message):
    __slots__ = ("context", "keys", "version", "need_commit_ts")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NEED_COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    context: Context
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    version: int
    need_commit_ts: bool
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., keys: _Optional[_Iterable[bytes]] = ..., version: _Optional[int] = ..., need_commit_ts: _Optional[bool] = ...) -> None: ...

class BatchGetResponse(_message.Message):
    __slots__ = ("region_error", "pairs", "exec_details_v2", "error")
    REGION_ERROR_FIELD_NUMBER: _ClassVar[int]
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    EXEC_DETAILS_V2_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    region_error: _errorpb_pb2.Error
    pairs: _containers.RepeatedCompositeFieldContainer[KvPair]
    exec_details_v2: ExecDetailsV2
    error: KeyError
    def __init__(self, region_error: _Optional[_Union[_errorpb_pb2.Error, _Mapping]] = ..., pairs: _Optional[_Iterable[_Union[KvPair, _Mapping]]] = ..., exec_details_v2: _Optional[_Union[ExecDetailsV2, _Mapping]] = ..., error: _Optional[_Union[KeyError, _Mapping]] = ...) -> None: ...

class KvPair(_message.Message):
    __slots__ = ("error", "key", "value", "commit_ts")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    error: KeyError
    key: bytes
    value: bytes
    commit_ts: int
    def __init__(self, error: _Optional[_Union[KeyError, _Mapping]] = ..., key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., commit_ts: _Optional[int] = ...) -> None: ...

class KeyError(_message.Message):
    __slots__ = ("locked", "retryable", "abort", "conflict", "already_exist", "deadlock", "commit_ts_expired", "txn_not_found", "commit_ts_too_large", "assertion_failed", "primary_mismatch", "txn_lock_not_found", "lock_upgrade_conflict", "shared_lock_lost")
    LOCKED_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    ABORT_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_FIELD_NUMBER: _ClassVar[int]
    ALREADY_EXIST_FIELD_NUMBER: _ClassVar[int]
    DEADLOCK_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TS_EXPIRED_FIELD_NUMBER: _ClassVar[int]
    TXN_NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TS_TOO_LARGE_FIELD_NUMBER: _ClassVar[int]
    ASSERTION_FAILED_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_MISMATCH_FIELD_NUMBER: _ClassVar[int]
    TXN_LOCK_NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    LOCK_UPGRADE_CONFLICT_FIELD_NUMBER: _ClassVar[int]
    SHARED_LOCK_LOST_FIELD_NUMBER: _ClassVar[int]
    locked: LockInfo
    retryable: str
    abort: str
    conflict: WriteConflict
    already_exist: AlreadyExist
    deadlock: Deadlock
    commit_ts_expired: CommitTsExpired
    txn_not_found: TxnNotFound
    commit_ts_too_large: CommitTsTooLarge
    assertion_failed: AssertionFailed
    primary_mismatch: PrimaryMismatch
    txn_lock_not_found: TxnLockNotFound
    lock_upgrade_conflict: LockUpgradeConflict
    shared_lock_lost: SharedLockLost
    def __init__(self, locked: _Optional[_Union[LockInfo, _Mapping]] = ..., retryable: _Optional[str] = ..., abort: _Optional[str] = ..., conflict: _Optional[_Union[WriteConflict, _Mapping]] = ..., already_exist: _Optional[_Union[AlreadyExist, _Mapping]] = ..., deadlock: _Optional[_Union[Deadlock, _Mapping]] = ..., commit_ts_expired: _Optional[_Union[CommitTsExpired, _Mapping]] = ..., txn_not_found: _Optional[_Union[TxnNotFound, _Mapping]] = ..., commit_ts_too_large: _Optional[_Union[CommitTsTooLarge, _Mapping]] = ..., assertion_failed: _Optional[_Union[AssertionFailed, _Mapping]] = ..., primary_mismatch: _Optional[_Union[PrimaryMismatch, _Mapping]] = ..., txn_lock_not_found: _Optional[_Union[TxnLockNotFound, _Mapping]] = ..., lock_upgrade_conflict: _Optional[_Union[LockUpgradeConflict, _Mapping]] = ..., shared_lock_lost: _Optional[_Union[SharedLockLost, _Mapping]] = ...) -> None: ...

class LockInfo(_message.Message):
    __slots__ = ("primary_lock", "lock_version", "key", "lock_ttl", "txn_size", "lock_type", "lock_for_update_ts", "use_async_commit", "min_commit_ts", "secondaries", "duration_to_last_update_ms", "shared_lock_infos", "is_txn_file")
    PRIMARY_LOCK_FIELD_NUMBER: _ClassVar[int]
    LOCK_VERSION_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    LOCK_TTL_FIELD_NUMBER: _ClassVar[int]
    TXN_SIZE_FIELD_NUMBER: _ClassVar[int]
    LOCK_TYPE_FIELD_NUMBER: _ClassVar[int]
    LOCK_FOR_UPDATE_TS_FIELD_NUMBER: _ClassVar[int]
    USE_ASYNC_COMMIT_FIELD_NUMBER: _ClassVar[int]
    MIN_COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    SECONDARIES_FIELD_NUMBER: _ClassVar[int]
    DURATION_TO_LAST_UPDATE_MS_FIELD_NUMBER: _ClassVar[int]
    SHARED_LOCK_INFOS_FIELD_NUMBER: _ClassVar[int]
    IS_TXN_FILE_FIELD_NUMBER: _ClassVar[int]
    primary_lock: bytes
    lock_version: int
    key: bytes
    lock_ttl: int
    txn_size: int
    lock_type: Op
    lock_for_update_ts: int
    use_async_commit: bool
    min_commit_ts: int
    secondaries: _containers.RepeatedScalarFieldContainer[bytes]
    duration_to_last_update_ms: int
    shared_lock_infos: _containers.RepeatedCompositeFieldContainer[LockInfo]
    is_txn_file: bool
    def __init__(self, primary_lock: _Optional[bytes] = ..., lock_version: _Optional[int] = ..., key: _Optional[bytes] = ..., lock_ttl: _Optional[int] = ..., txn_size: _Optional[int] = ..., lock_type: _Optional[_Union[Op, str]] = ..., lock_for_update_ts: _Optional[int] = ..., use_async_commit: _Optional[bool] = ..., min_commit_ts: _Optional[int] = ..., secondaries: _Optional[_Iterable[bytes]] = ..., duration_to_last_update_ms: _Optional[int] = ..., shared_lock_infos: _Optional[_Iterable[_Union[LockInfo, _Mapping]]] = ..., is_txn_file: _Optional[bool] = ...) -> None: ...

class WriteConflict(_message.Message):
    __slots__ = ("start_ts", "conflict_ts", "key", "primary", "conflict_commit_ts", "reason")
    class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        Unknown: _ClassVar[WriteConflict.Reason]
        Optimistic: _ClassVar[WriteConflict.Reason]
        PessimisticRetry: _ClassVar[WriteConflict.Reason]
        SelfRolledBack: _ClassVar[WriteConflict.Reason]
        RcCheckTs: _ClassVar[WriteConflict.Reason]
        LazyUniquenessCheck: _ClassVar[WriteConflict.Reason]
        NotLockedKeyConflict: _ClassVar[WriteConflict.Reason]
    Unknown: WriteConflict.Reason
    Optimistic: WriteConflict.Reason
    PessimisticRetry: WriteConflict.Reason
    SelfRolledBack: WriteConflict.Reason
    RcCheckTs: WriteConflict.Reason
    LazyUniquenessCheck: WriteConflict.Reason
    NotLockedKeyConflict: WriteConflict.Reason
    START_TS_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_TS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    start_ts: int
    conflict_ts: int
    key: bytes
    primary: bytes
    conflict_commit_ts: int
    reason: WriteConflict.Reason
    def __init__(self, start_ts: _Optional[int] = ..., conflict_ts: _Optional[int] = ..., key: _Optional[bytes] = ..., primary: _Optional[bytes] = ..., conflict_commit_ts: _Optional[int] = ..., reason: _Optional[_Union[WriteConflict.Reason, str]] = ...) -> None: ...

class AlreadyExist(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    def __init__(self, key: _Optional[bytes] = ...) -> None: ...

class Deadlock(_message.Message):
    __slots__ = ("lock_ts", "lock_key", "deadlock_key_hash", "deadlock_key")
    LOCK_TS_FIELD_NUMBER: _ClassVar[int]
    LOCK_KEY_FIELD_NUMBER: _ClassVar[int]
    DEADLOCK_KEY_HASH_FIELD_NUMBER: _ClassVar[int]
    DEADLOCK_KEY_FIELD_NUMBER: _ClassVar[int]
    lock_ts: int
    lock_key: bytes
    deadlock_key_hash: int
    deadlock_key: bytes
    def __init__(self, lock_ts: _Optional[int] = ..., lock_key: _Optional[bytes] = ..., deadlock_key_hash: _Optional[int] = ..., deadlock_key: _Optional[bytes] = ...) -> None: ...

class CommitTsExpired(_message.Message):
    __slots__ = ("start_ts", "attempted_commit_ts", "key", "min_commit_ts")
    START_TS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTED_COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MIN_COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    start_ts: int
    attempted_commit_ts: int
    key: bytes
    min_commit_ts: int
    def __init__(self, start_ts: _Optional[int] = ..., attempted_commit_ts: _Optional[int] = ..., key: _Optional[bytes] = ..., min_commit_ts: _Optional[int] = ...) -> None: ...

class TxnNotFound(_message.Message):
    __slots__ = ("start_ts", "primary_key")
    START_TS_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    start_ts: int
    primary_key: bytes
    def __init__(self, start_ts: _Optional[int] = ..., primary_key: _Optional[bytes] = ...) -> None: ...

class CommitTsTooLarge(_message.Message):
    __slots__ = ("commit_ts",)
    COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    commit_ts: int
    def __init__(self, commit_ts: _Optional[int] = ...) -> None: ...

class AssertionFailed(_message.Message):
    __slots__ = ("start_ts", "key", "existing_start_ts", "existing_commit_ts")
    START_TS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    EXISTING_START_TS_FIELD_NUMBER: _ClassVar[int]
    EXISTING_COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    start_ts: int
    key: bytes
    existing_start_ts: int
    existing_commit_ts: int
    def __init__(self, start_ts: _Optional[int] = ..., key: _Optional[bytes] = ..., existing_start_ts: _Optional[int] = ..., existing_commit_ts: _Optional[int] = ...) -> None: ...

class PrimaryMismatch(_message.Message):
    __slots__ = ("lock_info",)
    LOCK_INFO_FIELD_NUMBER: _ClassVar[int]
    lock_info: LockInfo
    def __init__(self, lock_info: _Optional[_Union[LockInfo, _Mapping]] = ...) -> None: ...

class TxnLockNotFound(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    def __init__(self, key: _Optional[bytes] = ...) -> None: ...

class LockUpgradeConflict(_message.Message):
    __slots__ = ("key", "start_ts", "owner_start_ts", "reason")
    class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        Unknown: _ClassVar[LockUpgradeConflict.Reason]
        DuplicateInFlight: _ClassVar[LockUpgradeConflict.Reason]
        SecondUpgrader: _ClassVar[LockUpgradeConflict.Reason]
    Unknown: LockUpgradeConflict.Reason
    DuplicateInFlight: LockUpgradeConflict.Reason
    SecondUpgrader: LockUpgradeConflict.Reason
    KEY_FIELD_NUMBER: _ClassVar[int]
    START_TS_FIELD_NUMBER: _ClassVar[int]
    OWNER_START_TS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    start_ts: int
    owner_start_ts: int
    reason: LockUpgradeConflict.Reason
    def __init__(self, key: _Optional[bytes] = ..., start_ts: _Optional[int] = ..., owner_start_ts: _Optional[int] = ..., reason: _Optional[_Union[LockUpgradeConflict.Reason, str]] = ...) -> None: ...

class SharedLockLost(_message.Message):
    __slots__ = ("key", "start_ts")
    KEY_FIELD_NUMBER: _ClassVar[int]
    START_TS_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    start_ts: int
    def __init__(self, key: _Optional[bytes] = ..., start_ts: _Optional[int] = ...) -> None: ...

class CheckTxnStatusRequest(_message.Message):
    __slots__ = ("context", "primary_key", "lock_ts", "caller_start_ts", "current_ts", "rollback_if_not_exist", "force_sync_commit", "resolving_pessimistic_lock", "verify_is_primary", "is_txn_file")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    LOCK_TS_FIELD_NUMBER: _ClassVar[int]
    CALLER_START_TS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TS_FIELD_NUMBER: _ClassVar[int]
    ROLLBACK_IF_NOT_EXIST_FIELD_NUMBER: _ClassVar[int]
    FORCE_SYNC_COMMIT_FIELD_NUMBER: _ClassVar[int]
    RESOLVING_PESSIMISTIC_LOCK_FIELD_NUMBER: _ClassVar[int]
    VERIFY_IS_PRIMARY_FIELD_NUMBER: _ClassVar[int]
    IS_TXN_FILE_FIELD_NUMBER: _ClassVar[int]
    context: Context
    primary_key: bytes
    lock_ts: int
    caller_start_ts: int
    current_ts: int
    rollback_if_not_exist: bool
    force_sync_commit: bool
    resolving_pessimistic_lock: bool
    verify_is_primary: bool
    is_txn_file: bool
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., primary_key: _Optional[bytes] = ..., lock_ts: _Optional[int] = ..., caller_start_ts: _Optional[int] = ..., current_ts: _Optional[int] = ..., rollback_if_not_exist: _Optional[bool] = ..., force_sync_commit: _Optional[bool] = ..., resolving_pessimistic_lock: _Optional[bool] = ..., verify_is_primary: _Optional[bool] = ..., is_txn_file: _Optional[bool] = ...) -> None: ...

class CheckTxnStatusResponse(_message.Message):
    __slots__ = ("region_error", "error", "lock_ttl", "commit_version", "action", "lock_info", "exec_details_v2")
    REGION_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LOCK_TTL_FIELD_NUMBER: _ClassVar[int]
    COMMIT_VERSION_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    LOCK_INFO_FIELD_NUMBER: _ClassVar[int]
    EXEC_DETAILS_V2_FIELD_NUMBER: _ClassVar[int]
    region_error: _errorpb_pb2.Error
    error: KeyError
    lock_ttl: int
    commit_version: int
    action: Action
    lock_info: LockInfo
    exec_details_v2: ExecDetailsV2
    def __init__(self, region_error: _Optional[_Union[_errorpb_pb2.Error, _Mapping]] = ..., error: _Optional[_Union[KeyError, _Mapping]] = ..., lock_ttl: _Optional[int] = ..., commit_version: _Optional[int] = ..., action: _Optional[_Union[Action, str]] = ..., lock_info: _Optional[_Union[LockInfo, _Mapping]] = ..., exec_details_v2: _Optional[_Union[ExecDetailsV2, _Mapping]] = ...) -> None: ...

class CheckSecondaryLocksRequest(_message.Message):
    __slots__ = ("context", "keys", "start_version")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    START_VERSION_FIELD_NUMBER: _ClassVar[int]
    context: Context
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    start_version: int
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., keys: _Optional[_Iterable[bytes]] = ..., start_version: _Optional[int] = ...) -> None: ...

class CheckSecondaryLocksResponse(_message.Message):
    __slots__ = ("region_error", "error", "locks", "commit_ts", "exec_details_v2")
    REGION_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    EXEC_DETAILS_V2_FIELD_NUMBER: _ClassVar[int]
    region_error: _errorpb_pb2.Error
    error: KeyError
    locks: _containers.RepeatedCompositeFieldContainer[LockInfo]
    commit_ts: int
    exec_details_v2: ExecDetailsV2
    def __init__(self, region_error: _Optional[_Union[_errorpb_pb2.Error, _Mapping]] = ..., error: _Optional[_Union[KeyError, _Mapping]] = ..., locks: _Optional[_Iterable[_Union[LockInfo, _Mapping]]] = ..., commit_ts: _Optional[int] = ..., exec_details_v2: _Optional[_Union[ExecDetailsV2, _Mapping]] = ...) -> None: ...

class ResolveLockRequest(_message.Message):
    __slots__ = ("context", "start_version", "commit_version", "txn_infos", "keys", "is_async", "is_txn_file")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    START_VERSION_FIELD_NUMBER: _ClassVar[int]
    COMMIT_VERSION_FIELD_NUMBER: _ClassVar[int]
    TXN_INFOS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    IS_ASYNC_FIELD_NUMBER: _ClassVar[int]
    IS_TXN_FILE_FIELD_NUMBER: _ClassVar[int]
    context: Context
    start_version: int
    commit_version: int
    txn_infos: _containers.RepeatedCompositeFieldContainer[TxnInfo]
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    is_async: bool
    is_txn_file: bool
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., start_version: _Optional[int] = ..., commit_version: _Optional[int] = ..., txn_infos: _Optional[_Iterable[_Union[TxnInfo, _Mapping]]] = ..., keys: _Optional[_Iterable[bytes]] = ..., is_async: _Optional[bool] = ..., is_txn_file: _Optional[bool] = ...) -> None: ...

class ResolveLockResponse(_message.Message):
    __slots__ = ("region_error", "error", "exec_details_v2")
    REGION_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EXEC_DETAILS_V2_FIELD_NUMBER: _ClassVar[int]
    region_error: _errorpb_pb2.Error
    error: KeyError
    exec_details_v2: ExecDetailsV2
    def __init__(self, region_error: _Optional[_Union[_errorpb_pb2.Error, _Mapping]] = ..., error: _Optional[_Union[KeyError, _Mapping]] = ..., exec_details_v2: _Optional[_Union[ExecDetailsV2, _Mapping]] = ...) -> None: ...

class TxnInfo(_message.Message):
    __slots__ = ("txn", "status", "is_txn_file")
    TXN_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    IS_TXN_FILE_FIELD_NUMBER: _ClassVar[int]
    txn: int
    status: int
    is_txn_file: bool
    def __init__(self, txn: _Optional[int] = ..., status: _Optional[int] = ..., is_txn_file: _Optional[bool] = ...) -> None: ...

class ScanLockRequest(_message.Message):
    __slots__ = ("context", "max_version", "start_key", "limit", "end_key")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    MAX_VERSION_FIELD_NUMBER: _ClassVar[int]
    START_KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    END_KEY_FIELD_NUMBER: _ClassVar[int]
    context: Context
    max_version: int
    start_key: bytes
    limit: int
    end_key: bytes
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., max_version: _Optional[int] = ..., start_key: _Optional[bytes] = ..., limit: _Optional[int] = ..., end_key: _Optional[bytes] = ...) -> None: ...

class ScanLockResponse(_message.Message):
    __slots__ = ("region_error", "error", "locks", "exec_details_v2")
    REGION_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    EXEC_DETAILS_V2_FIELD_NUMBER: _ClassVar[int]
    region_error: _errorpb_pb2.Error
    error: KeyError
    locks: _containers.RepeatedCompositeFieldContainer[LockInfo]
    exec_details_v2: ExecDetailsV2
    def __init__(self, region_error: _Optional[_Union[_errorpb_pb2.Error, _Mapping]] = ..., error: _Optional[_Union[KeyError, _Mapping]] = ..., locks: _Optional[_Iterable[_Union[LockInfo, _Mapping]]] = ..., exec_details_v2: _Optional[_Union[ExecDetailsV2, _Mapping]] = ...) -> None: ...

class ExecDetailsV2(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Mutation(_message.Message):
    __slots__ = ("op", "key", "value")
    OP_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    op: Op
    key: bytes
    value: bytes
    def __init__(self, op: _Optional[_Union[Op, str]] = ..., key: _Optional[bytes] = ..., value: _Optional[bytes] = ...) -> None: ...

class PrewriteRequest(_message.Message):
    __slots__ = ("context", "mutations", "primary_lock", "start_version", "lock_ttl", "skip_constraint_check", "pessimistic_actions", "txn_size", "for_update_ts", "min_commit_ts", "use_async_commit", "secondaries", "try_one_pc", "max_commit_ts", "assertion_level", "for_update_ts_constraints", "txn_file_chunks")
    class PessimisticAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SKIP_PESSIMISTIC_CHECK: _ClassVar[PrewriteRequest.PessimisticAction]
        DO_PESSIMISTIC_CHECK: _ClassVar[PrewriteRequest.PessimisticAction]
        DO_CONSTRAINT_CHECK: _ClassVar[PrewriteRequest.PessimisticAction]
    SKIP_PESSIMISTIC_CHECK: PrewriteRequest.PessimisticAction
    DO_PESSIMISTIC_CHECK: PrewriteRequest.PessimisticAction
    DO_CONSTRAINT_CHECK: PrewriteRequest.PessimisticAction
    class ForUpdateTSConstraint(_message.Message):
        __slots__ = ("index", "expected_for_update_ts")
        INDEX_FIELD_NUMBER: _ClassVar[int]
        EXPECTED_FOR_UPDATE_TS_FIELD_NUMBER: _ClassVar[int]
        index: int
        expected_for_update_ts: int
        def __init__(self, index: _Optional[int] = ..., expected_for_update_ts: _Optional[int] = ...) -> None: ...
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_LOCK_FIELD_NUMBER: _ClassVar[int]
    START_VERSION_FIELD_NUMBER: _ClassVar[int]
    LOCK_TTL_FIELD_NUMBER: _ClassVar[int]
    SKIP_CONSTRAINT_CHECK_FIELD_NUMBER: _ClassVar[int]
    PESSIMISTIC_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    TXN_SIZE_FIELD_NUMBER: _ClassVar[int]
    FOR_UPDATE_TS_FIELD_NUMBER: _ClassVar[int]
    MIN_COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    USE_ASYNC_COMMIT_FIELD_NUMBER: _ClassVar[int]
    SECONDARIES_FIELD_NUMBER: _ClassVar[int]
    TRY_ONE_PC_FIELD_NUMBER: _ClassVar[int]
    MAX_COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    ASSERTION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    FOR_UPDATE_TS_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    TXN_FILE_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    context: Context
    mutations: _containers.RepeatedCompositeFieldContainer[Mutation]
    primary_lock: bytes
    start_version: int
    lock_ttl: int
    skip_constraint_check: bool
    pessimistic_actions: _containers.RepeatedScalarFieldContainer[PrewriteRequest.PessimisticAction]
    txn_size: int
    for_update_ts: int
    min_commit_ts: int
    use_async_commit: bool
    secondaries: _containers.RepeatedScalarFieldContainer[bytes]
    try_one_pc: bool
    max_commit_ts: int
    assertion_level: AssertionLevel
    for_update_ts_constraints: _containers.RepeatedCompositeFieldContainer[PrewriteRequest.ForUpdateTSConstraint]
    txn_file_chunks: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., mutations: _Optional[_Iterable[_Union[Mutation, _Mapping]]] = ..., primary_lock: _Optional[bytes] = ..., start_version: _Optional[int] = ..., lock_ttl: _Optional[int] = ..., skip_constraint_check: _Optional[bool] = ..., pessimistic_actions: _Optional[_Iterable[_Union[PrewriteRequest.PessimisticAction, str]]] = ..., txn_size: _Optional[int] = ..., for_update_ts: _Optional[int] = ..., min_commit_ts: _Optional[int] = ..., use_async_commit: _Optional[bool] = ..., secondaries: _Optional[_Iterable[bytes]] = ..., try_one_pc: _Optional[bool] = ..., max_commit_ts: _Optional[int] = ..., assertion_level: _Optional[_Union[AssertionLevel, str]] = ..., for_update_ts_constraints: _Optional[_Iterable[_Union[PrewriteRequest.ForUpdateTSConstraint, _Mapping]]] = ..., txn_file_chunks: _Optional[_Iterable[int]] = ...) -> None: ...

class PrewriteResponse(_message.Message):
    __slots__ = ("region_error", "errors", "min_commit_ts", "one_pc_commit_ts", "exec_details_v2")
    REGION_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    MIN_COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    ONE_PC_COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    EXEC_DETAILS_V2_FIELD_NUMBER: _ClassVar[int]
    region_error: _errorpb_pb2.Error
    errors: _containers.RepeatedCompositeFieldContainer[KeyError]
    min_commit_ts: int
    one_pc_commit_ts: int
    exec_details_v2: ExecDetailsV2
    def __init__(self, region_error: _Optional[_Union[_errorpb_pb2.Error, _Mapping]] = ..., errors: _Optional[_Iterable[_Union[KeyError, _Mapping]]] = ..., min_commit_ts: _Optional[int] = ..., one_pc_commit_ts: _Optional[int] = ..., exec_details_v2: _Optional[_Union[ExecDetailsV2, _Mapping]] = ...) -> None: ...

class CommitRequest(_message.Message):
    __slots__ = ("context", "start_version", "keys", "commit_version", "commit_role", "primary_key", "use_async_commit", "is_txn_file")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    START_VERSION_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    COMMIT_VERSION_FIELD_NUMBER: _ClassVar[int]
    COMMIT_ROLE_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    USE_ASYNC_COMMIT_FIELD_NUMBER: _ClassVar[int]
    IS_TXN_FILE_FIELD_NUMBER: _ClassVar[int]
    context: Context
    start_version: int
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    commit_version: int
    commit_role: CommitRole
    primary_key: bytes
    use_async_commit: bool
    is_txn_file: bool
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., start_version: _Optional[int] = ..., keys: _Optional[_Iterable[bytes]] = ..., commit_version: _Optional[int] = ..., commit_role: _Optional[_Union[CommitRole, str]] = ..., primary_key: _Optional[bytes] = ..., use_async_commit: _Optional[bool] = ..., is_txn_file: _Optional[bool] = ...) -> None: ...

class CommitResponse(_message.Message):
    __slots__ = ("region_error", "error", "commit_version", "exec_details_v2")
    REGION_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    COMMIT_VERSION_FIELD_NUMBER: _ClassVar[int]
    EXEC_DETAILS_V2_FIELD_NUMBER: _ClassVar[int]
    region_error: _errorpb_pb2.Error
    error: KeyError
    commit_version: int
    exec_details_v2: ExecDetailsV2
    def __init__(self, region_error: _Optional[_Union[_errorpb_pb2.Error, _Mapping]] = ..., error: _Optional[_Union[KeyError, _Mapping]] = ..., commit_version: _Optional[int] = ..., exec_details_v2: _Optional[_Union[ExecDetailsV2, _Mapping]] = ...) -> None: ...

class CleanupRequest(_message.Message):
    __slots__ = ("context", "key", "start_version", "current_ts")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    START_VERSION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TS_FIELD_NUMBER: _ClassVar[int]
    context: Context
    key: bytes
    start_version: int
    current_ts: int
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., key: _Optional[bytes] = ..., start_version: _Optional[int] = ..., current_ts: _Optional[int] = ...) -> None: ...

class CleanupResponse(_message.Message):
    __slots__ = ("region_error", "error", "commit_version")
    REGION_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    COMMIT_VERSION_FIELD_NUMBER: _ClassVar[int]
    region_error: _errorpb_pb2.Error
    error: KeyError
    commit_version: int
    def __init__(self, region_error: _Optional[_Union[_errorpb_pb2.Error, _Mapping]] = ..., error: _Optional[_Union[KeyError, _Mapping]] = ..., commit_version: _Optional[int] = ...) -> None: ...

class BatchRollbackRequest(_message.Message):
    __slots__ = ("context", "start_version", "keys", "is_txn_file")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    START_VERSION_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    IS_TXN_FILE_FIELD_NUMBER: _ClassVar[int]
    context: Context
    start_version: int
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    is_txn_file: bool
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., start_version: _Optional[int] = ..., keys: _Optional[_Iterable[bytes]] = ..., is_txn_file: _Optional[bool] = ...) -> None: ...

class BatchRollbackResponse(_message.Message):
    __slots__ = ("region_error", "error", "exec_details_v2")
    REGION_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EXEC_DETAILS_V2_FIELD_NUMBER: _ClassVar[int]
    region_error: _errorpb_pb2.Error
    error: KeyError
    exec_details_v2: ExecDetailsV2
    def __init__(self, region_error: _Optional[_Union[_errorpb_pb2.Error, _Mapping]] = ..., error: _Optional[_Union[KeyError, _Mapping]] = ..., exec_details_v2: _Optional[_Union[ExecDetailsV2, _Mapping]] = ...) -> None: ...

class PessimisticLockRequest(_message.Message):
    __slots__ = ("context", "mutations", "primary_lock", "start_version", "lock_ttl", "for_update_ts", "is_first_lock", "wait_timeout", "force", "return_values", "min_commit_ts", "check_existence", "lock_only_if_exists", "wake_up_mode")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    MUTATIONS_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_LOCK_FIELD_NUMBER: _ClassVar[int]
    START_VERSION_FIELD_NUMBER: _ClassVar[int]
    LOCK_TTL_FIELD_NUMBER: _ClassVar[int]
    FOR_UPDATE_TS_FIELD_NUMBER: _ClassVar[int]
    IS_FIRST_LOCK_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    RETURN_VALUES_FIELD_NUMBER: _ClassVar[int]
    MIN_COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    CHECK_EXISTENCE_FIELD_NUMBER: _ClassVar[int]
    LOCK_ONLY_IF_EXISTS_FIELD_NUMBER: _ClassVar[int]
    WAKE_UP_MODE_FIELD_NUMBER: _ClassVar[int]
    context: Context
    mutations: _containers.RepeatedCompositeFieldContainer[Mutation]
    primary_lock: bytes
    start_version: int
    lock_ttl: int
    for_update_ts: int
    is_first_lock: bool
    wait_timeout: int
    force: bool
    return_values: bool
    min_commit_ts: int
    check_existence: bool
    lock_only_if_exists: bool
    wake_up_mode: PessimisticLockWakeUpMode
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., mutations: _Optional[_Iterable[_Union[Mutation, _Mapping]]] = ..., primary_lock: _Optional[bytes] = ..., start_version: _Optional[int] = ..., lock_ttl: _Optional[int] = ..., for_update_ts: _Optional[int] = ..., is_first_lock: _Optional[bool] = ..., wait_timeout: _Optional[int] = ..., force: _Optional[bool] = ..., return_values: _Optional[bool] = ..., min_commit_ts: _Optional[int] = ..., check_existence: _Optional[bool] = ..., lock_only_if_exists: _Optional[bool] = ..., wake_up_mode: _Optional[_Union[PessimisticLockWakeUpMode, str]] = ...) -> None: ...

class PessimisticLockKeyResult(_message.Message):
    __slots__ = ("type", "value", "existence", "locked_with_conflict_ts", "skip_resolving_lock")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EXISTENCE_FIELD_NUMBER: _ClassVar[int]
    LOCKED_WITH_CONFLICT_TS_FIELD_NUMBER: _ClassVar[int]
    SKIP_RESOLVING_LOCK_FIELD_NUMBER: _ClassVar[int]
    type: PessimisticLockKeyResultType
    value: bytes
    existence: bool
    locked_with_conflict_ts: int
    skip_resolving_lock: bool
    def __init__(self, type: _Optional[_Union[PessimisticLockKeyResultType, str]] = ..., value: _Optional[bytes] = ..., existence: _Optional[bool] = ..., locked_with_conflict_ts: _Optional[int] = ..., skip_resolving_lock: _Optional[bool] = ...) -> None: ...

class PessimisticLockResponse(_message.Message):
    __slots__ = ("region_error", "errors", "commit_ts", "value", "values", "not_founds", "exec_details_v2", "results")
    REGION_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    NOT_FOUNDS_FIELD_NUMBER: _ClassVar[int]
    EXEC_DETAILS_V2_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    region_error: _errorpb_pb2.Error
    errors: _containers.RepeatedCompositeFieldContainer[KeyError]
    commit_ts: int
    value: bytes
    values: _containers.RepeatedScalarFieldContainer[bytes]
    not_founds: _containers.RepeatedScalarFieldContainer[bool]
    exec_details_v2: ExecDetailsV2
    results: _containers.RepeatedCompositeFieldContainer[PessimisticLockKeyResult]
    def __init__(self, region_error: _Optional[_Union[_errorpb_pb2.Error, _Mapping]] = ..., errors: _Optional[_Iterable[_Union[KeyError, _Mapping]]] = ..., commit_ts: _Optional[int] = ..., value: _Optional[bytes] = ..., values: _Optional[_Iterable[bytes]] = ..., not_founds: _Optional[_Iterable[bool]] = ..., exec_details_v2: _Optional[_Union[ExecDetailsV2, _Mapping]] = ..., results: _Optional[_Iterable[_Union[PessimisticLockKeyResult, _Mapping]]] = ...) -> None: ...

class PessimisticRollbackRequest(_message.Message):
    __slots__ = ("context", "start_version", "for_update_ts", "keys")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    START_VERSION_FIELD_NUMBER: _ClassVar[int]
    FOR_UPDATE_TS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    context: Context
    start_version: int
    for_update_ts: int
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., start_version: _Optional[int] = ..., for_update_ts: _Optional[int] = ..., keys: _Optional[_Iterable[bytes]] = ...) -> None: ...

class PessimisticRollbackResponse(_message.Message):
    __slots__ = ("region_error", "errors", "exec_details_v2")
    REGION_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    EXEC_DETAILS_V2_FIELD_NUMBER: _ClassVar[int]
    region_error: _errorpb_pb2.Error
    errors: _containers.RepeatedCompositeFieldContainer[KeyError]
    exec_details_v2: ExecDetailsV2
    def __init__(self, region_error: _Optional[_Union[_errorpb_pb2.Error, _Mapping]] = ..., errors: _Optional[_Iterable[_Union[KeyError, _Mapping]]] = ..., exec_details_v2: _Optional[_Union[ExecDetailsV2, _Mapping]] = ...) -> None: ...

class TxnHeartBeatRequest(_message.Message):
    __slots__ = ("context", "primary_lock", "start_version", "advise_lock_ttl", "min_commit_ts", "is_txn_file")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_LOCK_FIELD_NUMBER: _ClassVar[int]
    START_VERSION_FIELD_NUMBER: _ClassVar[int]
    ADVISE_LOCK_TTL_FIELD_NUMBER: _ClassVar[int]
    MIN_COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    IS_TXN_FILE_FIELD_NUMBER: _ClassVar[int]
    context: Context
    primary_lock: bytes
    start_version: int
    advise_lock_ttl: int
    min_commit_ts: int
    is_txn_file: bool
    def __init__(self, context: _Optional[_Union[Context, _Mapping]] = ..., primary_lock: _Optional[bytes] = ..., start_version: _Optional[int] = ..., advise_lock_ttl: _Optional[int] = ..., min_commit_ts: _Optional[int] = ..., is_txn_file: _Optional[bool] = ...) -> None: ...

class TxnHeartBeatResponse(_message.Message):
    __slots__ = ("region_error", "error", "lock_ttl", "exec_details_v2")
    REGION_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LOCK_TTL_FIELD_NUMBER: _ClassVar[int]
    EXEC_DETAILS_V2_FIELD_NUMBER: _ClassVar[int]
    region_error: _errorpb_pb2.Error
    error: KeyError
    lock_ttl: int
    exec_details_v2: ExecDetailsV2
    def __init__(self, region_error: _Optional[_Union[_errorpb_pb2.Error, _Mapping]] = ..., error: _Optional[_Union[KeyError, _Mapping]] = ..., lock_ttl: _Optional[int] = ..., exec_details_v2: _Optional[_Union[ExecDetailsV2, _Mapping]] = ...) -> None: ...
