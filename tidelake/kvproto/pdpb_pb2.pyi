from tidelake.kvproto import metapb_pb2 as _metapb_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OK: _ClassVar[ErrorType]
    UNKNOWN: _ClassVar[ErrorType]
    NOT_BOOTSTRAPPED: _ClassVar[ErrorType]
    STORE_TOMBSTONE: _ClassVar[ErrorType]
    ALREADY_BOOTSTRAPPED: _ClassVar[ErrorType]
    INCOMPATIBLE_VERSION: _ClassVar[ErrorType]
    REGION_NOT_FOUND: _ClassVar[ErrorType]
    GLOBAL_CONFIG_NOT_FOUND: _ClassVar[ErrorType]
    DUPLICATED_ENTRY: _ClassVar[ErrorType]
    ENTRY_NOT_FOUND: _ClassVar[ErrorType]
    INVALID_VALUE: _ClassVar[ErrorType]
    DATA_COMPACTED: _ClassVar[ErrorType]
    REGIONS_NOT_CONTAIN_ALL_KEY_RANGE: _ClassVar[ErrorType]

class ServiceMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_SVC_MODE: _ClassVar[ServiceMode]
    PD_SVC_MODE: _ClassVar[ServiceMode]
    API_SVC_MODE: _ClassVar[ServiceMode]
OK: ErrorType
UNKNOWN: ErrorType
NOT_BOOTSTRAPPED: ErrorType
STORE_TOMBSTONE: ErrorType
ALREADY_BOOTSTRAPPED: ErrorType
INCOMPATIBLE_VERSION: ErrorType
REGION_NOT_FOUND: ErrorType
GLOBAL_CONFIG_NOT_FOUND: ErrorType
DUPLICATED_ENTRY: ErrorType
ENTRY_NOT_FOUND: ErrorType
INVALID_VALUE: ErrorType
DATA_COMPACTED: ErrorType
REGIONS_NOT_CONTAIN_ALL_KEY_RANGE: ErrorType
UNKNOWN_SVC_MODE: ServiceMode
PD_SVC_MODE: ServiceMode
API_SVC_MODE: ServiceMode

class RequestHeader(_message.Message):
    __slots__ = ("cluster_id", "sender_id", "caller_id", "caller_component")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    SENDER_ID_FIELD_NUMBER: _ClassVar[int]
    CALLER_ID_FIELD_NUMBER: _ClassVar[int]
    CALLER_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    cluster_id: int
    sender_id: int
    caller_id: str
    caller_component: str
    def __init__(self, cluster_id: _Optional[int] = ..., sender_id: _Optional[int] = ..., caller_id: _Optional[str] = ..., caller_component: _Optional[str] = ...) -> None: ...

class ResponseHeader(_message.Message):
    __slots__ = ("cluster_id", "error")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    cluster_id: int
    error: Error
    def __init__(self, cluster_id: _Optional[int] = ..., error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("type", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: ErrorType
    message: str
    def __init__(self, type: _Optional[_Union[ErrorType, str]] = ..., message: _Optional[str] = ...) -> None: ...

class Member(_message.Message):
    __slots__ = ("name", "member_id", "peer_urls", "client_urls", "leader_priority", "deploy_path", "binary_version", "git_hash", "dc_location")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    PEER_URLS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_URLS_FIELD_NUMBER: _ClassVar[int]
    LEADER_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    DEPLOY_PATH_FIELD_NUMBER: _ClassVar[int]
    BINARY_VERSION_FIELD_NUMBER: _ClassVar[int]
    GIT_HASH_FIELD_NUMBER: _ClassVar[int]
    DC_LOCATION_FIELD_NUMBER: _ClassVar[int]
    name: str
    member_id: int
    peer_urls: _containers.RepeatedScalarFieldContainer[str]
    client_urls: _containers.RepeatedScalarFieldContainer[str]
    leader_priority: int
    deploy_path: str
    binary_version: str
    git_hash: str
    dc_location: str
    def __init__(self, name: _Optional[str] = ..., member_id: _Optional[int] = ..., peer_urls: _Optional[_Iterable[str]] = ..., client_urls: _Optional[_Iterable[str]] = ..., leader_priority: _Optional[int] = ..., deploy_path: _Optional[str] = ..., binary_version: _Optional[str] = ..., git_hash: _Optional[str] = ..., dc_location: _Optional[str] = ...) -> None: ...

class GetMembersRequest(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ...) -> None: ...

class GetMembersResponse(_message.Message):
    __slots__ = ("header", "members", "leader", "etcd_leader", "tso_allocator_leaders")
    class TsoAllocatorLeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Member
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Member, _Mapping]] = ...) -> None: ...
    HEADER_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    ETCD_LEADER_FIELD_NUMBER: _ClassVar[int]
    TSO_ALLOCATOR_LEADERS_FIELD_NUMBER: _ClassVar[int]
    header: ResponseHeader
    members: _containers.RepeatedCompositeFieldContainer[Member]
    leader: Member
    etcd_leader: Member
    tso_allocator_leaders: _containers.MessageMap[str, Member]
    def __init__(self, header: _Optional[_Union[ResponseHeader, _Mapping]] = ..., members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., leader: _Optional[_Union[Member, _Mapping]] = ..., etcd_leader: _Optional[_Union[Member, _Mapping]] = ..., tso_allocator_leaders: _Optional[_Mapping[str, Member]] = ...) -> None: ...

class GetClusterInfoRequest(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: ResponseHeader
    def __init__(self, header: _Optional[_Union[ResponseHeader, _Mapping]] = ...) -> None: ...

class GetClusterInfoResponse(_message.Message):
    __slots__ = ("header", "serviceModes", "tso_urls")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SERVICEMODES_FIELD_NUMBER: _ClassVar[int]
    TSO_URLS_FIELD_NUMBER: _ClassVar[int]
    header: ResponseHeader
    serviceModes: _containers.RepeatedScalarFieldContainer[ServiceMode]
    tso_urls: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, header: _Optional[_Union[ResponseHeader, _Mapping]] = ..., serviceModes: _Optional[_Iterable[_Union[ServiceMode, str]]] = ..., tso_urls: _Optional[_Iterable[str]] = ...) -> None: ...

class TsoRequest(_message.Message):
    __slots__ = ("header", "count", "dc_location")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    DC_LOCATION_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    count: int
    dc_location: str
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ..., count: _Optional[int] = ..., dc_location: _Optional[str] = ...) -> None: ...

class Timestamp(_message.Message):
    __slots__ = ("physical", "logical", "suffix_bits")
    PHYSICAL_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_FIELD_NUMBER: _ClassVar[int]
    SUFFIX_BITS_FIELD_NUMBER: _ClassVar[int]
    physical: int
    logical: int
    suffix_bits: int
    def __init__(self, physical: _Optional[int] = ..., logical: _Optional[int] = ..., suffix_bits: _Optional[int] = ...) -> None: ...

class TsoResponse(_message.Message):
    __slots__ = ("header", "count", "timestamp")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    header: ResponseHeader
    count: int
    timestamp: Timestamp
    def __init__(self, header: _Optional[_Union[ResponseHeader, _Mapping]] = ..., count: _Optional[int] = ..., timestamp: _Optional[_Union[Timestamp, _Mapping]] = ...) -> None: ...

class GetStoreRequest(_message.Message):
    __slots__ = ("header", "store_id")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    store_id: int
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ..., store_id: _Optional[int] = ...) -> None: ...

class GetStoreResponse(_message.Message):
    __slots__ = ("header", "store", "stats")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    header: ResponseHeader
    store: _metapb_pb2.Store
    stats: StoreStats
    def __init__(self, header: _Optional[_Union[ResponseHeader, _Mapping]] = ..., store: _Optional[_Union[_metapb_pb2.Store, _Mapping]] = ..., stats: _Optional[_Union[StoreStats, _Mapping]] = ...) -> None: ...

class GetAllStoresRequest(_message.Message):
    __slots__ = ("header", "exclude_tombstone_stores")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_TOMBSTONE_STORES_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    exclude_tombstone_stores: bool
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ..., exclude_tombstone_stores: _Optional[bool] = ...) -> None: ...

class GetAllStoresResponse(_message.Message):
    __slots__ = ("header", "stores")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    STORES_FIELD_NUMBER: _ClassVar[int]
    header: ResponseHeader
    stores: _containers.RepeatedCompositeFieldContainer[_metapb_pb2.Store]
    def __init__(self, header: _Optional[_Union[ResponseHeader, _Mapping]] = ..., stores: _Optional[_Iterable[_Union[_metapb_pb2.Store, _Mapping]]] = ...) -> None: ...

class GetRegionRequest(_message.Message):
    __slots__ = ("header", "region_key", "need_buckets")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    REGION_KEY_FIELD_NUMBER: _ClassVar[int]
    NEED_BUCKETS_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    region_key: bytes
    need_buckets: bool
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ..., region_key: _Optional[bytes] = ..., need_buckets: _Optional[bool] = ...) -> None: ...

class GetRegionResponse(_message.Message):
    __slots__ = ("header", "region", "leader", "down_peers", "pending_peers", "buckets")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    DOWN_PEERS_FIELD_NUMBER: _ClassVar[int]
    PENDING_PEERS_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    header: ResponseHeader
    region: _metapb_pb2.Region
    leader: _metapb_pb2.Peer
    down_peers: _containers.RepeatedCompositeFieldContainer[PeerStats]
    pending_peers: _containers.RepeatedCompositeFieldContainer[_metapb_pb2.Peer]
    buckets: _metapb_pb2.Buckets
    def __init__(self, header: _Optional[_Union[ResponseHeader, _Mapping]] = ..., region: _Optional[_Union[_metapb_pb2.Region, _Mapping]] = ..., leader: _Optional[_Union[_metapb_pb2.Peer, _Mapping]] = ..., down_peers: _Optional[_Iterable[_Union[PeerStats, _Mapping]]] = ..., pending_peers: _Optional[_Iterable[_Union[_metapb_pb2.Peer, _Mapping]]] = ..., buckets: _Optional[_Union[_metapb_pb2.Buckets, _Mapping]] = ...) -> None: ...

class GetRegionByIDRequest(_message.Message):
    __slots__ = ("header", "region_id", "need_buckets")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    REGION_ID_FIELD_NUMBER: _ClassVar[int]
    NEED_BUCKETS_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    region_id: int
    need_buckets: bool
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ..., region_id: _Optional[int] = ..., need_buckets: _Optional[bool] = ...) -> None: ...

class ScanRegionsRequest(_message.Message):
    __slots__ = ("header", "start_key", "limit", "end_key")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    START_KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    END_KEY_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    start_key: bytes
    limit: int
    end_key: bytes
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ..., start_key: _Optional[bytes] = ..., limit: _Optional[int] = ..., end_key: _Optional[bytes] = ...) -> None: ...

class Region(_message.Message):
    __slots__ = ("region", "leader", "down_peers", "pending_peers", "buckets")
    REGION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    DOWN_PEERS_FIELD_NUMBER: _ClassVar[int]
    PENDING_PEERS_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    region: _metapb_pb2.Region
    leader: _metapb_pb2.Peer
    down_peers: _containers.RepeatedCompositeFieldContainer[PeerStats]
    pending_peers: _containers.RepeatedCompositeFieldContainer[_metapb_pb2.Peer]
    buckets: _metapb_pb2.Buckets
    def __init__(self, region: _Optional[_Union[_metapb_pb2.Region, _Mapping]] = ..., leader: _Optional[_Union[_metapb_pb2.Peer, _Mapping]] = ..., down_peers: _Optional[_Iterable[_Union[PeerStats, _Mapping]]] = ..., pending_peers: _Optional[_Iterable[_Union[_metapb_pb2.Peer, _Mapping]]] = ..., buckets: _Optional[_Union[_metapb_pb2.Buckets, _Mapping]] = ...) -> None: ...

class ScanRegionsResponse(_message.Message):
    __slots__ = ("header", "region_metas", "leaders", "regions")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    REGION_METAS_FIELD_NUMBER: _ClassVar[int]
    LEADERS_FIELD_NUMBER: _ClassVar[int]
    REGIONS_FIELD_NUMBER: _ClassVar[int]
    header: ResponseHeader
    region_metas: _containers.RepeatedCompositeFieldContainer[_metapb_pb2.Region]
    leaders: _containers.RepeatedCompositeFieldContainer[_metapb_pb2.Peer]
    regions: _containers.RepeatedCompositeFieldContainer[Region]
    def __init__(self, header: _Optional[_Union[ResponseHeader, _Mapping]] = ..., region_metas: _Optional[_Iterable[_Union[_metapb_pb2.Region, _Mapping]]] = ..., leaders: _Optional[_Iterable[_Union[_metapb_pb2.Peer, _Mapping]]] = ..., regions: _Optional[_Iterable[_Union[Region, _Mapping]]] = ...) -> None: ...

class KeyRange(_message.Message):
    __slots__ = ("start_key", "end_key")
    START_KEY_FIELD_NUMBER: _ClassVar[int]
    END_KEY_FIELD_NUMBER: _ClassVar[int]
    start_key: bytes
    end_key: bytes
    def __init__(self, start_key: _Optional[bytes] = ..., end_key: _Optional[bytes] = ...) -> None: ...

class BatchScanRegionsRequest(_message.Message):
    __slots__ = ("header", "need_buckets", "ranges", "limit", "contain_all_key_range")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    NEED_BUCKETS_FIELD_NUMBER: _ClassVar[int]
    RANGES_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    CONTAIN_ALL_KEY_RANGE_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    need_buckets: bool
    ranges: _containers.RepeatedCompositeFieldContainer[KeyRange]
    limit: int
    contain_all_key_range: bool
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ..., need_buckets: _Optional[bool] = ..., ranges: _Optional[_Iterable[_Union[KeyRange, _Mapping]]] = ..., limit: _Optional[int] = ..., contain_all_key_range: _Optional[bool] = ...) -> None: ...

class BatchScanRegionsResponse(_message.Message):
    __slots__ = ("header", "regions")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    REGIONS_FIELD_NUMBER: _ClassVar[int]
    header: ResponseHeader
    regions: _containers.RepeatedCompositeFieldContainer[Region]
    def __init__(self, header: _Optional[_Union[ResponseHeader, _Mapping]] = ..., regions: _Optional[_Iterable[_Union[Region, _Mapping]]] = ...) -> None: ...

class PeerStats(_message.Message):
    __slots__ = ("peer", "down_seconds")
    PEER_FIELD_NUMBER: _ClassVar[int]
    DOWN_SECONDS_FIELD_NUMBER: _ClassVar[int]
    peer: _metapb_pb2.Peer
    down_seconds: int
    def __init__(self, peer: _Optional[_Union[_metapb_pb2.Peer, _Mapping]] = ..., down_seconds: _Optional[int] = ...) -> None: ...

class TimeInterval(_message.Message):
    __slots__ = ("start_timestamp", "end_timestamp")
    START_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    END_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    start_timestamp: int
    end_timestamp: int
    def __init__(self, start_timestamp: _Optional[int] = ..., end_timestamp: _Optional[int] = ...) -> None: ...

class RecordPair(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...

class StoreStats(_message.Message):
    __slots__ = ("store_id", "capacity", "available", "region_count", "sending_snap_count", "receiving_snap_count", "start_time", "applying_snap_count", "is_busy", "used_size", "bytes_written", "keys_written", "bytes_read", "keys_read", "interval", "cpu_usages", "read_io_rates", "write_io_rates", "op_latencies", "slow_score", "damaged_regions_id", "is_apply_busy", "is_grpc_paused", "total_memory", "used_memory", "network_slow_scores", "is_stopping")
    class NetworkSlowScoresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    REGION_COUNT_FIELD_NUMBER: _ClassVar[int]
    SENDING_SNAP_COUNT_FIELD_NUMBER: _ClassVar[int]
    RECEIVING_SNAP_COUNT_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    APPLYING_SNAP_COUNT_FIELD_NUMBER: _ClassVar[int]
    IS_BUSY_FIELD_NUMBER: _ClassVar[int]
    USED_SIZE_FIELD_NUMBER: _ClassVar[int]
    BYTES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    KEYS_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    BYTES_READ_FIELD_NUMBER: _ClassVar[int]
    KEYS_READ_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    CPU_USAGES_FIELD_NUMBER: _ClassVar[int]
    READ_IO_RATES_FIELD_NUMBER: _ClassVar[int]
    WRITE_IO_RATES_FIELD_NUMBER: _ClassVar[int]
    OP_LATENCIES_FIELD_NUMBER: _ClassVar[int]
    SLOW_SCORE_FIELD_NUMBER: _ClassVar[int]
    DAMAGED_REGIONS_ID_FIELD_NUMBER: _ClassVar[int]
    IS_APPLY_BUSY_FIELD_NUMBER: _ClassVar[int]
    IS_GRPC_PAUSED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MEMORY_FIELD_NUMBER: _ClassVar[int]
    USED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    NETWORK_SLOW_SCORES_FIELD_NUMBER: _ClassVar[int]
    IS_STOPPING_FIELD_NUMBER: _ClassVar[int]
    store_id: int
    capacity: int
    available: int
    region_count: int
    sending_snap_count: int
    receiving_snap_count: int
    start_time: int
    applying_snap_count: int
    is_busy: bool
    used_size: int
    bytes_written: int
    keys_written: int
    bytes_read: int
    keys_read: int
    interval: TimeInterval
    cpu_usages: _containers.RepeatedCompositeFieldContainer[RecordPair]
    read_io_rates: _containers.RepeatedCompositeFieldContainer[RecordPair]
    write_io_rates: _containers.RepeatedCompositeFieldContainer[RecordPair]
    op_latencies: _containers.RepeatedCompositeFieldContainer[RecordPair]
    slow_score: int
    damaged_regions_id: _containers.RepeatedScalarFieldContainer[int]
    is_apply_busy: bool
    is_grpc_paused: bool
    total_memory: int
    used_memory: int
    network_slow_scores: _containers.ScalarMap[int, int]
    is_stopping: bool
    def __init__(self, store_id: _Optional[int] = ..., capacity: _Optional[int] = ..., available: _Optional[int] = ..., region_count: _Optional[int] = ..., sending_snap_count: _Optional[int] = ..., receiving_snap_count: _Optional[int] = ..., start_time: _Optional[int] = ..., applying_snap_count: _Optional[int] = ..., is_busy: _Optional[bool] = ..., used_size: _Optional[int] = ..., bytes_written: _Optional[int] = ..., keys_written: _Optional[int] = ..., bytes_read: _Optional[int] = ..., keys_read: _Optional[int] = ..., interval: _Optional[_Union[TimeInterval, _Mapping]] = ..., cpu_usages: _Optional[_Iterable[_Union[RecordPair, _Mapping]]] = ..., read_io_rates: _Optional[_Iterable[_Union[RecordPair, _Mapping]]] = ..., write_io_rates: _Optional[_Iterable[_Union[RecordPair, _Mapping]]] = ..., op_latencies: _Optional[_Iterable[_Union[RecordPair, _Mapping]]] = ..., slow_score: _Optional[int] = ..., damaged_regions_id: _Optional[_Iterable[int]] = ..., is_apply_busy: _Optional[bool] = ..., is_grpc_paused: _Optional[bool] = ..., total_memory: _Optional[int] = ..., used_memory: _Optional[int] = ..., network_slow_scores: _Optional[_Mapping[int, int]] = ..., is_stopping: _Optional[bool] = ...) -> None: ...

class GetGCSafePointRequest(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ...) -> None: ...

class GetGCSafePointResponse(_message.Message):
    __slots__ = ("header", "safe_point")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SAFE_POINT_FIELD_NUMBER: _ClassVar[int]
    header: ResponseHeader
    safe_point: int
    def __init__(self, header: _Optional[_Union[ResponseHeader, _Mapping]] = ..., safe_point: _Optional[int] = ...) -> None: ...

class UpdateServiceGCSafePointRequest(_message.Message):
    __slots__ = ("header", "service_id", "TTL", "safe_point")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    SAFE_POINT_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    service_id: bytes
    TTL: int
    safe_point: int
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ..., service_id: _Optional[bytes] = ..., TTL: _Optional[int] = ..., safe_point: _Optional[int] = ...) -> None: ...

class UpdateServiceGCSafePointResponse(_message.Message):
    __slots__ = ("header", "service_id", "TTL", "min_safe_point")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    MIN_SAFE_POINT_FIELD_NUMBER: _ClassVar[int]
    header: ResponseHeader
    service_id: bytes
    TTL: int
    min_safe_point: int
    def __init__(self, header: _Optional[_Union[ResponseHeader, _Mapping]] = ..., service_id: _Optional[bytes] = ..., TTL: _Optional[int] = ..., min_safe_point: _Optional[int] = ...) -> None: ...

class GetMinTSRequest(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: RequestHeader
    def __init__(self, header: _Optional[_Union[RequestHeader, _Mapping]] = ...) -> None: ...

class GetMinTSResponse(_message.Message):
    __slots__ = ("header", "timestamp")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    header: ResponseHeader
    timestamp: Timestamp
    def __init__(self, header: _Optional[_Union[ResponseHeader, _Mapping]] = ..., timestamp: _Optional[_Union[Timestamp, _Mapping]] = ...) -> None: ...
