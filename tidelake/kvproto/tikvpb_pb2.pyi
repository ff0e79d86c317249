from tidelake.kvproto import kvrpcpb_pb2 as _kvrpcpb_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BatchCommandsRequest(_message.Message):
    __slots__ = ("requests", "request_ids", "client_send_time_ns")
    class Request(_message.Message):
        __slots__ = ("Get", "Scan", "Prewrite", "Commit", "Cleanup", "BatchGet", "BatchRollback", "ScanLock", "ResolveLock", "PessimisticLock", "PessimisticRollback", "CheckTxnStatus", "TxnHeartBeat", "CheckSecondaryLocks", "Empty")
        GET_FIELD_NUMBER: _ClassVar[int]
        SCAN_FIELD_NUMBER: _ClassVar[int]
        PREWRITE_FIELD_NUMBER: _ClassVar[int]
        COMMIT_FIELD_NUMBER: _ClassVar[int]
        CLEANUP_FIELD_NUMBER: _ClassVar[int]
        BATCHGET_FIELD_NUMBER: _ClassVar[int]
        BATCHROLLBACK_FIELD_NUMBER: _ClassVar[int]
        SCANLOCK_FIELD_NUMBER: _ClassVar[int]
        RESOLVELOCK_FIELD_NUMBER: _ClassVar[int]
        PESSIMISTICLOCK_FIELD_NUMBER: _ClassVar[int]
        PESSIMISTICROLLBACK_FIELD_NUMBER: _ClassVar[int]
        CHECKTXNSTATUS_FIELD_NUMBER: _ClassVar[int]
        TXNHEARTBEAT_FIELD_NUMBER: _ClassVar[int]
        CHECKSECONDARYLOCKS_FIELD_NUMBER: _ClassVar[int]
        EMPTY_FIELD_NUMBER: _ClassVar[int]
        Get: _kvrpcpb_pb2.GetRequest
        Scan: _kvrpcpb_pb2.ScanRequest
        Prewrite: _kvrpcpb_pb2.PrewriteRequest
        Commit: _kvrpcpb_pb2.CommitRequest
        Cleanup: _kvrpcpb_pb2.CleanupRequest
        BatchGet: _kvrpcpb_pb2.BatchGetRequest
        BatchRollback: _kvrpcpb_pb2.BatchRollbackRequest
        ScanLock: _kvrpcpb_pb2.ScanLockRequest
        ResolveLock: _kvrpcpb_pb2.ResolveLockRequest
        PessimisticLock: _kvrpcpb_pb2.PessimisticLockRequest
        PessimisticRollback: _kvrpcpb_pb2.PessimisticRollbackRequest
        CheckTxnStatus: _kvrpcpb_pb2.CheckTxnStatusRequest
        TxnHeartBeat: _kvrpcpb_pb2.TxnHeartBeatRequest
        CheckSecondaryLocks: _kvrpcpb_pb2.CheckSecondaryLocksRequest
        Empty: BatchCommandsEmptyRequest
        def __init__(self, Get: _Optional[_Union[_kvrpcpb_pb2.GetRequest, _Mapping]] = ..., Scan: _Optional[_Union[_kvrpcpb_pb2.ScanRequest, _Mapping]] = ..., Prewrite: _Optional[_Union[_kvrpcpb_pb2.PrewriteRequest, _Mapping]] = ..., Commit: _Optional[_Union[_kvrpcpb_pb2.CommitRequest, _Mapping]] = ..., Cleanup: _Optional[_Union[_kvrpcpb_pb2.CleanupRequest, _Mapping]] = ..., BatchGet: _Optional[_Union[_kvrpcpb_pb2.BatchGetRequest, _Mapping]] = ..., BatchRollback: _Optional[_Union[_kvrpcpb_pb2.BatchRollbackRequest, _Mapping]] = ..., ScanLock: _Optional[_Union[_kvrpcpb_pb2.ScanLockRequest, _Mapping]] = ..., ResolveLock: _Optional[_Union[_kvrpcpb_pb2.ResolveLockRequest, _Mapping]] = ..., PessimisticLock: _Optional[_Union[_kvrpcpb_pb2.PessimisticLockRequest, _Mapping]] = ..., PessimisticRollback: _Optional[_Union[_kvrpcpb_pb2.PessimisticRollbackRequest, _Mapping]] = ..., CheckTxnStatus: _Optional[_Union[_kvrpcpb_pb2.CheckTxnStatusRequest, _Mapping]] = ..., TxnHeartBeat: _Optional[_Union[_kvrpcpb_pb2.TxnHeartBeatRequest, _Mapping]] = ..., CheckSecondaryLocks: _Optional[_Union[_kvrpcpb_pb2.CheckSecondaryLocksRequest, _Mapping]] = ..., Empty: _Optional[_Union[BatchCommandsEmptyRequest, _Mapping]] = ...) -> None: ...
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_IDS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SEND_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[BatchCommandsRequest.Request]
    request_ids: _containers.RepeatedScalarFieldContainer[int]
    client_send_time_ns: int
    def __init__(self, requests: _Optional[_Iterable[_Union[BatchCommandsRequest.Request, _Mapping]]] = ..., request_ids: _Optional[_Iterable[int]] = ..., client_send_time_ns: _Optional[int] = ...) -> None: ...

class BatchCommandsResponse(_message.Message):
    __slots__ = ("responses", "request_ids", "transport_layer_load", "tikv_send_time_ns")
    class Response(_message.Message):
        __slots__ = ("Get", "Scan", "Prewrite", "Commit", "Cleanup", "BatchGet", "BatchRollback", "ScanLock", "ResolveLock", "PessimisticLock", "PessimisticRollback", "CheckTxnStatus", "TxnHeartBeat", "CheckSecondaryLocks", "Empty")
        GET_FIELD_NUMBER: _ClassVar[int]
        SCAN_FIELD_NUMBER: _ClassVar[int]
        PREWRITE_FIELD_NUMBER: _ClassVar[int]
        COMMIT_FIELD_NUMBER: _ClassVar[int]
        CLEANUP_FIELD_NUMBER: _ClassVar[int]
        BATCHGET_FIELD_NUMBER: _ClassVar[int]
        BATCHROLLBACK_FIELD_NUMBER: _ClassVar[int]
        SCANLOCK_FIELD_NUMBER: _ClassVar[int]
        RESOLVELOCK_FIELD_NUMBER: _ClassVar[int]
        PESSIMISTICLOCK_FIELD_NUMBER: _ClassVar[int]
        PESSIMISTICROLLBACK_FIELD_NUMBER: _ClassVar[int]
        CHECKTXNSTATUS_FIELD_NUMBER: _ClassVar[int]
        TXNHEARTBEAT_FIELD_NUMBER: _ClassVar[int]
        CHECKSECONDARYLOCKS_FIELD_NUMBER: _ClassVar[int]
        EMPTY_FIELD_NUMBER: _ClassVar[int]
        Get: _kvrpcpb_pb2.GetResponse
        Scan: _kvrpcpb_pb2.ScanResponse
        Prewrite: _kvrpcpb_pb2.PrewriteResponse
        Commit: _kvrpcpb_pb2.CommitResponse
        Cleanup: _kvrpcpb_pb2.CleanupResponse
        BatchGet: _kvrpcpb_pb2.BatchGetResponse
        BatchRollback: _kvrpcpb_pb2.BatchRollbackResponse
        ScanLock: _kvrpcpb_pb2.ScanLockResponse
        ResolveLock: _kvrpcpb_pb2.ResolveLockResponse
        PessimisticLock: _kvrpcpb_pb2.PessimisticLockResponse
        PessimisticRollback: _kvrpcpb_pb2.PessimisticRollbackResponse
        CheckTxnStatus: _kvrpcpb_pb2.CheckTxnStatusResponse
        TxnHeartBeat: _kvrpcpb_pb2.TxnHeartBeatResponse
        CheckSecondaryLocks: _kvrpcpb_pb2.CheckSecondaryLocksResponse
        Empty: BatchCommandsEmptyResponse
        def __init__(self, Get: _Optional[_Union[_kvrpcpb_pb2.GetResponse, _Mapping]] = ..., Scan: _Optional[_Union[_kvrpcpb_pb2.ScanResponse, _Mapping]] = ..., Prewrite: _Optional[_Union[_kvrpcpb_pb2.PrewriteResponse, _Mapping]] = ..., Commit: _Optional[_Union[_kvrpcpb_pb2.CommitResponse, _Mapping]] = ..., Cleanup: _Optional[_Union[_kvrpcpb_pb2.CleanupResponse, _Mapping]] = ..., BatchGet: _Optional[_Union[_kvrpcpb_pb2.BatchGetResponse, _Mapping]] = ..., BatchRollback: _Optional[_Union[_kvrpcpb_pb2.BatchRollbackResponse, _Mapping]] = ..., ScanLock: _Optional[_Union[_kvrpcpb_pb2.ScanLockResponse, _Mapping]] = ..., ResolveLock: _Optional[_Union[_kvrpcpb_pb2.ResolveLockResponse, _Mapping]] = ..., PessimisticLock: _Optional[_Union[_kvrpcpb_pb2.PessimisticLockResponse, _Mapping]] = ..., PessimisticRollback: _Optional[_Union[_kvrpcpb_pb2.PessimisticRollbackResponse, _Mapping]] = ..., CheckTxnStatus: _Optional[_Union[_kvrpcpb_pb2.CheckTxnStatusResponse, _Mapping]] = ..., TxnHeartBeat: _Optional[_Union[_kvrpcpb_pb2.TxnHeartBeatResponse, _Mapping]] = ..., CheckSecondaryLocks: _Optional[_Union[_kvrpcpb_pb2.CheckSecondaryLocksResponse, _Mapping]] = ..., Empty: _Optional[_Union[BatchCommandsEmptyResponse, _Mapping]] = ...) -> None: ...
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_IDS_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_LAYER_LOAD_FIELD_NUMBER: _ClassVar[int]
    TIKV_SEND_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedCompositeFieldContainer[BatchCommandsResponse.Response]
    request_ids: _containers.RepeatedScalarFieldContainer[int]
    transport_layer_load: int
    tikv_send_time_ns: int
    def __init__(self, responses: _Optional[_Iterable[_Union[BatchCommandsResponse.Response, _Mapping]]] = ..., request_ids: _Optional[_Iterable[int]] = ..., transport_layer_load: _Optional[int] = ..., tikv_send_time_ns: _Optional[int] = ...) -> None: ...

class BatchCommandsEmptyRequest(_message.Message):
    __slots__ = ("test_id", "delay_time")
    TEST_ID_FIELD_NUMBER: _ClassVar[int]
    DELAY_TIME_FIELD_NUMBER: _ClassVar[int]
    test_id: int
    delay_time: int
    def __init__(self, test_id: _Optional[int] = ..., delay_time: _Optional[int] = ...) -> None: ...

class BatchCommandsEmptyResponse(_message.Message):
    __slots__ = ("test_id",)
    TEST_ID_FIELD_NUMBER: _ClassVar[int]
    test_id: int
    def __init__(self, test_id: _Optional[int] = ...) -> None: ...
