from tidelake.kvproto import encryptionpb_pb2 as _encryptionpb_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StoreState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Up: _ClassVar[StoreState]
    Offline: _ClassVar[StoreState]
    Tombstone: _ClassVar[StoreState]

class NodeState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Preparing: _ClassVar[NodeState]
    Serving: _ClassVar[NodeState]
    Removing: _ClassVar[NodeState]
    Removed: _ClassVar[NodeState]

class PeerRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Voter: _ClassVar[PeerRole]
    Learner: _ClassVar[PeerRole]
    IncomingVoter: _ClassVar[PeerRole]
    DemotingVoter: _ClassVar[PeerRole]
Up: StoreState
Offline: StoreState
Tombstone: StoreState
Preparing: NodeState
Serving: NodeState
Removing: NodeState
Removed: NodeState
Voter: PeerRole
Learner: PeerRole
IncomingVoter: PeerRole
DemotingVoter: PeerRole

class Cluster(_message.Message):
    __slots__ = ("id", "max_peer_count")
    ID_FIELD_NUMBER: _ClassVar[int]
    MAX_PEER_COUNT_FIELD_NUMBER: _ClassVar[int]
    id: int
    max_peer_count: int
    def __init__(self, id: _Optional[int] = ..., max_peer_count: _Optional[int] = ...) -> None: ...

class StoreLabel(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class Store(_message.Message):
    __slots__ = ("id", "address", "state", "labels", "version", "peer_address", "status_address", "git_hash", "start_timestamp", "deploy_path", "last_heartbeat", "physically_destroyed", "node_state")
    ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STATUS_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GIT_HASH_FIELD_NUMBER: _ClassVar[int]
    START_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DEPLOY_PATH_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    PHYSICALLY_DESTROYED_FIELD_NUMBER: _ClassVar[int]
    NODE_STATE_FIELD_NUMBER: _ClassVar[int]
    id: int
    address: str
    state: StoreState
    labels: _containers.RepeatedCompositeFieldContainer[StoreLabel]
    version: str
    peer_address: str
    status_address: str
    git_hash: str
    start_timestamp: int
    deploy_path: str
    last_heartbeat: int
    physically_destroyed: bool
    node_state: NodeState
    def __init__(self, id: _Optional[int] = ..., address: _Optional[str] = ..., state: _Optional[_Union[StoreState, str]] = ..., labels: _Optional[_Iterable[_Union[StoreLabel, _Mapping]]] = ..., version: _Optional[str] = ..., peer_address: _Optional[str] = ..., status_address: _Optional[str] = ..., git_hash: _Optional[str] = ..., start_timestamp: _Optional[int] = ..., deploy_path: _Optional[str] = ..., last_heartbeat: _Optional[int] = ..., physically_destroyed: _Optional[bool] = ..., node_state: _Optional[_Union[NodeState, str]] = ...) -> None: ...

class RegionEpoch(_message.Message):
    __slots__ = ("conf_ver", "version")
    CONF_VER_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    conf_ver: int
    version: int
    def __init__(self, conf_ver: _Optional[int] = ..., version: _Optional[int] = ...) -> None: ...

class BucketStats(_message.Message):
    __slots__ = ("read_bytes", "write_bytes", "read_qps", "write_qps", "read_keys", "write_keys")
    READ_BYTES_FIELD_NUMBER: _ClassVar[int]
    WRITE_BYTES_FIELD_NUMBER: _ClassVar[int]
    READ_QPS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QPS_FIELD_NUMBER: _ClassVar[int]
    READ_KEYS_FIELD_NUMBER: _ClassVar[int]
    WRITE_KEYS_FIELD_NUMBER: _ClassVar[int]
    read_bytes: _containers.RepeatedScalarFieldContainer[int]
    write_bytes: _containers.RepeatedScalarFieldContainer[int]
    read_qps: _containers.RepeatedScalarFieldContainer[int]
    write_qps: _containers.RepeatedScalarFieldContainer[int]
    read_keys: _containers.RepeatedScalarFieldContainer[int]
    write_keys: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, read_bytes: _Optional[_Iterable[int]] = ..., write_bytes: _Optional[_Iterable[int]] = ..., read_qps: _Optional[_Iterable[int]] = ..., write_qps: _Optional[_Iterable[int]] = ..., read_keys: _Optional[_Iterable[int]] = ..., write_keys: _Optional[_Iterable[int]] = ...) -> None: ...

class Buckets(_message.Message):
    __slots__ = ("region_id", "version", "keys", "stats", "period_in_ms")
    REGION_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    PERIOD_IN_MS_FIELD_NUMBER: _ClassVar[int]
    region_id: int
    version: int
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    stats: BucketStats
    period_in_ms: int
    def __init__(self, region_id: _Optional[int] = ..., version: _Optional[int] = ..., keys: _Optional[_Iterable[bytes]] = ..., stats: _Optional[_Union[BucketStats, _Mapping]] = ..., period_in_ms: _Optional[int] = ...) -> None: ...

class BucketMeta(_message.Message):
    __slots__ = ("version", "keys")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    version: int
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, version: _Optional[int] = ..., keys: _Optional[_Iterable[bytes]] = ...) -> None: ...

class Region(_message.Message):
    __slots__ = ("id", "start_key", "end_key", "region_epoch", "peers", "encryption_meta", "is_in_flashback", "flashback_start_ts")
    ID_FIELD_NUMBER: _ClassVar[int]
    START_KEY_FIELD_NUMBER: _ClassVar[int]
    END_KEY_FIELD_NUMBER: _ClassVar[int]
    REGION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTION_META_FIELD_NUMBER: _ClassVar[int]
    IS_IN_FLASHBACK_FIELD_NUMBER: _ClassVar[int]
    FLASHBACK_START_TS_FIELD_NUMBER: _ClassVar[int]
    id: int
    start_key: bytes
    end_key: bytes
    region_epoch: RegionEpoch
    peers: _containers.RepeatedCompositeFieldContainer[Peer]
    encryption_meta: _encryptionpb_pb2.EncryptionMeta
    is_in_flashback: bool
    flashback_start_ts: int
    def __init__(self, id: _Optional[int] = ..., start_key: _Optional[bytes] = ..., end_key: _Optional[bytes] = ..., region_epoch: _Optional[_Union[RegionEpoch, _Mapping]] = ..., peers: _Optional[_Iterable[_Union[Peer, _Mapping]]] = ..., encryption_meta: _Optional[_Union[_encryptionpb_pb2.EncryptionMeta, _Mapping]] = ..., is_in_flashback: _Optional[bool] = ..., flashback_start_ts: _Optional[int] = ...) -> None: ...

class Peer(_message.Message):
    __slots__ = ("id", "store_id", "role", "is_witness")
    ID_FIELD_NUMBER: _ClassVar[int]
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    IS_WITNESS_FIELD_NUMBER: _ClassVar[int]
    id: int
    store_id: int
    role: PeerRole
    is_witness: bool
    def __init__(self, id: _Optional[int] = ..., store_id: _Optional[int] = ..., role: _Optional[_Union[PeerRole, str]] = ..., is_witness: _Optional[bool] = ...) -> None: ...
