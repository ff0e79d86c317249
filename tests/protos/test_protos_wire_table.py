"""Generated descriptors against field tables transcribed from docs/wire.md and docs/metadata.md.

The tables were read from pingcap/kvproto proto/*.proto at b6cdca19; a mismatch here means our
messages would not interoperate with TiKV, PD or TiCDC.
"""

from __future__ import annotations

from collections.abc import Callable
from unittest import mock

import pytest
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from tidelake.kvproto import (
    cdcpb_pb2,
    cdcpb_pb2_grpc,
    errorpb_pb2,
    etcdserverpb_pb2,
    etcdserverpb_pb2_grpc,
    kvrpcpb_pb2,
    metapb_pb2,
    mvccpb_pb2,
    pdpb_pb2,
    pdpb_pb2_grpc,
    tikvpb_pb2,
    tikvpb_pb2_grpc,
)

MODULES = {
    "cdcpb": cdcpb_pb2,
    "pdpb": pdpb_pb2,
    "metapb": metapb_pb2,
    "errorpb": errorpb_pb2,
    "kvrpcpb": kvrpcpb_pb2,
    "tikvpb": tikvpb_pb2,
    "etcdserverpb": etcdserverpb_pb2,
    "mvccpb": mvccpb_pb2,
}

# kvproto tikvpb.proto BatchCommandsRequest.Request / Response oneof `cmd`: name -> number.
_BATCH_NUMBERS = {"Get": 1, "Scan": 2, "Prewrite": 3, "Commit": 4, "Cleanup": 6, "BatchGet": 7, "BatchRollback": 8,
                  "ScanLock": 9, "ResolveLock": 10, "PessimisticLock": 23, "PessimisticRollback": 24,
                  "CheckTxnStatus": 25, "TxnHeartBeat": 26, "CheckSecondaryLocks": 33, "Empty": 255}
_BATCH_CMDS = set(_BATCH_NUMBERS)

# (message full name, field, number, type); "repeated X" and "map<K, V>" as in the .proto.
FIELDS: list[tuple[str, str, int, str]] = [
    # docs/wire.md#small-messages
    ("cdcpb.Header", "cluster_id", 1, "uint64"),
    ("cdcpb.Header", "ticdc_version", 2, "string"),
    ("cdcpb.DuplicateRequest", "region_id", 1, "uint64"),
    ("cdcpb.Compatibility", "required_version", 1, "string"),
    ("cdcpb.ClusterIDMismatch", "current", 1, "uint64"),
    ("cdcpb.ClusterIDMismatch", "request", 2, "uint64"),
    ("cdcpb.Congested", "region_id", 1, "uint64"),
    ("cdcpb.TxnInfo", "start_ts", 1, "uint64"),
    ("cdcpb.TxnInfo", "primary", 2, "bytes"),
    ("cdcpb.TxnStatus", "start_ts", 1, "uint64"),
    ("cdcpb.TxnStatus", "min_commit_ts", 2, "uint64"),
    ("cdcpb.TxnStatus", "commit_ts", 3, "uint64"),
    ("cdcpb.TxnStatus", "is_rolled_back", 4, "bool"),
    # docs/wire.md#error
    ("cdcpb.Error", "not_leader", 1, "errorpb.NotLeader"),
    ("cdcpb.Error", "region_not_found", 2, "errorpb.RegionNotFound"),
    ("cdcpb.Error", "epoch_not_match", 3, "errorpb.EpochNotMatch"),
    ("cdcpb.Error", "duplicate_request", 4, "cdcpb.DuplicateRequest"),
    ("cdcpb.Error", "compatibility", 5, "cdcpb.Compatibility"),
    ("cdcpb.Error", "cluster_id_mismatch", 6, "cdcpb.ClusterIDMismatch"),
    ("cdcpb.Error", "server_is_busy", 7, "errorpb.ServerIsBusy"),
    ("cdcpb.Error", "congested", 8, "cdcpb.Congested"),
    # docs/wire.md#event
    ("cdcpb.Event.Row", "start_ts", 1, "uint64"),
    ("cdcpb.Event.Row", "commit_ts", 2, "uint64"),
    ("cdcpb.Event.Row", "type", 3, "cdcpb.Event.LogType"),
    ("cdcpb.Event.Row", "op_type", 4, "cdcpb.Event.Row.OpType"),
    ("cdcpb.Event.Row", "key", 5, "bytes"),
    ("cdcpb.Event.Row", "value", 6, "bytes"),
    ("cdcpb.Event.Row", "old_value", 7, "bytes"),
    ("cdcpb.Event.Row", "expire_ts_unix_secs", 8, "uint64"),
    ("cdcpb.Event.Row", "txn_source", 9, "uint64"),
    ("cdcpb.Event.Row", "generation", 10, "uint64"),
    ("cdcpb.Event.Entries", "entries", 1, "repeated cdcpb.Event.Row"),
    ("cdcpb.Event.Admin", "admin_request", 1, "raft_cmdpb.AdminRequest"),
    ("cdcpb.Event.Admin", "admin_response", 2, "raft_cmdpb.AdminResponse"),
    ("cdcpb.Event.LongTxn", "txn_info", 1, "repeated cdcpb.TxnInfo"),
    ("cdcpb.Event", "region_id", 1, "uint64"),
    ("cdcpb.Event", "index", 2, "uint64"),
    ("cdcpb.Event", "request_id", 7, "uint64"),
    ("cdcpb.Event", "entries", 3, "cdcpb.Event.Entries"),
    ("cdcpb.Event", "admin", 4, "cdcpb.Event.Admin"),
    ("cdcpb.Event", "error", 5, "cdcpb.Error"),
    ("cdcpb.Event", "resolved_ts", 6, "uint64"),
    ("cdcpb.Event", "long_txn", 8, "cdcpb.Event.LongTxn"),
    # docs/wire.md#resolvedts, docs/wire.md#changedataevent
    ("cdcpb.ResolvedTs", "regions", 1, "repeated uint64"),
    ("cdcpb.ResolvedTs", "ts", 2, "uint64"),
    ("cdcpb.ResolvedTs", "request_id", 3, "uint64"),
    ("cdcpb.ChangeDataEvent", "events", 1, "repeated cdcpb.Event"),
    ("cdcpb.ChangeDataEvent", "resolved_ts", 2, "cdcpb.ResolvedTs"),
    # docs/wire.md#changedatarequest
    ("cdcpb.ChangeDataRequest.NotifyTxnStatus", "txn_status", 1, "repeated cdcpb.TxnStatus"),
    ("cdcpb.ChangeDataRequest", "header", 1, "cdcpb.Header"),
    ("cdcpb.ChangeDataRequest", "region_id", 2, "uint64"),
    ("cdcpb.ChangeDataRequest", "region_epoch", 3, "metapb.RegionEpoch"),
    ("cdcpb.ChangeDataRequest", "checkpoint_ts", 4, "uint64"),
    ("cdcpb.ChangeDataRequest", "start_key", 5, "bytes"),
    ("cdcpb.ChangeDataRequest", "end_key", 6, "bytes"),
    ("cdcpb.ChangeDataRequest", "request_id", 7, "uint64"),
    ("cdcpb.ChangeDataRequest", "extra_op", 8, "kvrpcpb.ExtraOp"),
    ("cdcpb.ChangeDataRequest", "register", 9, "cdcpb.ChangeDataRequest.Register"),
    ("cdcpb.ChangeDataRequest", "notify_txn_status", 10, "cdcpb.ChangeDataRequest.NotifyTxnStatus"),
    ("cdcpb.ChangeDataRequest", "deregister", 13, "cdcpb.ChangeDataRequest.Deregister"),
    ("cdcpb.ChangeDataRequest", "kv_api", 11, "cdcpb.ChangeDataRequest.KvAPI"),
    ("cdcpb.ChangeDataRequest", "filter_loop", 12, "bool"),
    ("cdcpb.ChangeDataRequest", "scan_priority", 14, "cdcpb.ScanPriority"),
    # docs/wire.md#metapb-subset
    ("metapb.RegionEpoch", "conf_ver", 1, "uint64"),
    ("metapb.RegionEpoch", "version", 2, "uint64"),
    ("metapb.Peer", "id", 1, "uint64"),
    ("metapb.Peer", "store_id", 2, "uint64"),
    ("metapb.Peer", "role", 3, "metapb.PeerRole"),
    ("metapb.Peer", "is_witness", 4, "bool"),
    ("metapb.Region", "id", 1, "uint64"),
    ("metapb.Region", "start_key", 2, "bytes"),
    ("metapb.Region", "end_key", 3, "bytes"),
    ("metapb.Region", "region_epoch", 4, "metapb.RegionEpoch"),
    ("metapb.Region", "peers", 5, "repeated metapb.Peer"),
    ("metapb.Region", "encryption_meta", 6, "encryptionpb.EncryptionMeta"),
    ("metapb.Region", "is_in_flashback", 7, "bool"),
    ("metapb.Region", "flashback_start_ts", 8, "uint64"),
    ("metapb.StoreLabel", "key", 1, "string"),
    ("metapb.StoreLabel", "value", 2, "string"),
    ("metapb.Store", "id", 1, "uint64"),
    ("metapb.Store", "address", 2, "string"),
    ("metapb.Store", "state", 3, "metapb.StoreState"),
    ("metapb.Store", "labels", 4, "repeated metapb.StoreLabel"),
    ("metapb.Store", "version", 5, "string"),
    ("metapb.Store", "peer_address", 6, "string"),
    ("metapb.Store", "status_address", 7, "string"),
    ("metapb.Store", "git_hash", 8, "string"),
    ("metapb.Store", "start_timestamp", 9, "int64"),
    ("metapb.Store", "deploy_path", 10, "string"),
    ("metapb.Store", "last_heartbeat", 11, "int64"),
    ("metapb.Store", "physically_destroyed", 12, "bool"),
    ("metapb.Store", "node_state", 13, "metapb.NodeState"),
    ("metapb.Cluster", "id", 1, "uint64"),
    ("metapb.Cluster", "max_peer_count", 2, "uint32"),
    # docs/wire.md#errorpb-subset
    ("errorpb.NotLeader", "region_id", 1, "uint64"),
    ("errorpb.NotLeader", "leader", 2, "metapb.Peer"),
    ("errorpb.RegionNotFound", "region_id", 1, "uint64"),
    ("errorpb.EpochNotMatch", "current_regions", 1, "repeated metapb.Region"),
    ("errorpb.ServerIsBusy", "reason", 1, "string"),
    ("errorpb.ServerIsBusy", "backoff_ms", 2, "uint64"),
    ("errorpb.ServerIsBusy", "estimated_wait_ms", 3, "uint32"),
    ("errorpb.ServerIsBusy", "applied_index", 4, "uint64"),
    ("errorpb.Error", "message", 1, "string"),
    ("errorpb.Error", "not_leader", 2, "errorpb.NotLeader"),
    ("errorpb.Error", "region_not_found", 3, "errorpb.RegionNotFound"),
    ("errorpb.Error", "key_not_in_region", 4, "errorpb.KeyNotInRegion"),
    ("errorpb.Error", "epoch_not_match", 5, "errorpb.EpochNotMatch"),
    ("errorpb.Error", "server_is_busy", 6, "errorpb.ServerIsBusy"),
    ("errorpb.Error", "stale_command", 7, "errorpb.StaleCommand"),
    ("errorpb.Error", "store_not_match", 8, "errorpb.StoreNotMatch"),
    ("errorpb.Error", "raft_entry_too_large", 9, "errorpb.RaftEntryTooLarge"),
    ("errorpb.Error", "max_timestamp_not_synced", 10, "errorpb.MaxTimestampNotSynced"),
    ("errorpb.Error", "read_index_not_ready", 11, "errorpb.ReadIndexNotReady"),
    ("errorpb.Error", "proposal_in_merging_mode", 12, "errorpb.ProposalInMergingMode"),
    ("errorpb.Error", "data_is_not_ready", 13, "errorpb.DataIsNotReady"),
    ("errorpb.Error", "region_not_initialized", 14, "errorpb.RegionNotInitialized"),
    ("errorpb.Error", "disk_full", 15, "errorpb.DiskFull"),
    ("errorpb.Error", "RecoveryInProgress", 16, "errorpb.RecoveryInProgress"),
    ("errorpb.Error", "FlashbackInProgress", 17, "errorpb.FlashbackInProgress"),
    ("errorpb.Error", "FlashbackNotPrepared", 18, "errorpb.FlashbackNotPrepared"),
    ("errorpb.Error", "is_witness", 19, "errorpb.IsWitness"),
    ("errorpb.Error", "mismatch_peer_id", 20, "errorpb.MismatchPeerId"),
    ("errorpb.Error", "bucket_version_not_match", 21, "errorpb.BucketVersionNotMatch"),
    ("errorpb.Error", "undetermined_result", 22, "errorpb.UndeterminedResult"),
    # docs/wire.md#headers-and-errors and docs/wire.md#tso
    ("pdpb.RequestHeader", "cluster_id", 1, "uint64"),
    ("pdpb.RequestHeader", "sender_id", 2, "uint64"),
    ("pdpb.RequestHeader", "caller_id", 3, "string"),
    ("pdpb.RequestHeader", "caller_component", 4, "string"),
    ("pdpb.ResponseHeader", "cluster_id", 1, "uint64"),
    ("pdpb.ResponseHeader", "error", 2, "pdpb.Error"),
    ("pdpb.Error", "type", 1, "pdpb.ErrorType"),
    ("pdpb.Error", "message", 2, "string"),
    ("pdpb.Member", "name", 1, "string"),
    ("pdpb.Member", "member_id", 2, "uint64"),
    ("pdpb.Member", "peer_urls", 3, "repeated string"),
    ("pdpb.Member", "client_urls", 4, "repeated string"),
    ("pdpb.Member", "leader_priority", 5, "int32"),
    ("pdpb.Member", "deploy_path", 6, "string"),
    ("pdpb.Member", "binary_version", 7, "string"),
    ("pdpb.Member", "git_hash", 8, "string"),
    ("pdpb.Member", "dc_location", 9, "string"),
    ("pdpb.GetMembersRequest", "header", 1, "pdpb.RequestHeader"),
    ("pdpb.GetMembersResponse", "header", 1, "pdpb.ResponseHeader"),
    ("pdpb.GetMembersResponse", "members", 2, "repeated pdpb.Member"),
    ("pdpb.GetMembersResponse", "leader", 3, "pdpb.Member"),
    ("pdpb.GetMembersResponse", "etcd_leader", 4, "pdpb.Member"),
    ("pdpb.GetMembersResponse", "tso_allocator_leaders", 5, "map<string, pdpb.Member>"),
    ("pdpb.GetClusterInfoRequest", "header", 1, "pdpb.ResponseHeader"),
    ("pdpb.GetClusterInfoResponse", "header", 1, "pdpb.ResponseHeader"),
    ("pdpb.GetClusterInfoResponse", "serviceModes", 2, "repeated pdpb.ServiceMode"),
    ("pdpb.GetClusterInfoResponse", "tso_urls", 3, "repeated string"),
    ("pdpb.TsoRequest", "header", 1, "pdpb.RequestHeader"),
    ("pdpb.TsoRequest", "count", 2, "uint32"),
    ("pdpb.TsoRequest", "dc_location", 3, "string"),
    ("pdpb.TsoResponse", "header", 1, "pdpb.ResponseHeader"),
    ("pdpb.TsoResponse", "count", 2, "uint32"),
    ("pdpb.TsoResponse", "timestamp", 3, "pdpb.Timestamp"),
    ("pdpb.Timestamp", "physical", 1, "int64"),
    ("pdpb.Timestamp", "logical", 2, "int64"),
    ("pdpb.Timestamp", "suffix_bits", 3, "uint32"),
    # docs/wire.md#regions
    ("pdpb.GetRegionRequest", "header", 1, "pdpb.RequestHeader"),
    ("pdpb.GetRegionRequest", "region_key", 2, "bytes"),
    ("pdpb.GetRegionRequest", "need_buckets", 3, "bool"),
    ("pdpb.GetRegionByIDRequest", "header", 1, "pdpb.RequestHeader"),
    ("pdpb.GetRegionByIDRequest", "region_id", 2, "uint64"),
    ("pdpb.GetRegionByIDRequest", "need_buckets", 3, "bool"),
    ("pdpb.GetRegionResponse", "header", 1, "pdpb.ResponseHeader"),
    ("pdpb.GetRegionResponse", "region", 2, "metapb.Region"),
    ("pdpb.GetRegionResponse", "leader", 3, "metapb.Peer"),
    ("pdpb.GetRegionResponse", "down_peers", 5, "repeated pdpb.PeerStats"),
    ("pdpb.GetRegionResponse", "pending_peers", 6, "repeated metapb.Peer"),
    ("pdpb.GetRegionResponse", "buckets", 7, "metapb.Buckets"),
    ("pdpb.PeerStats", "peer", 1, "metapb.Peer"),
    ("pdpb.PeerStats", "down_seconds", 2, "uint64"),
    ("pdpb.ScanRegionsRequest", "header", 1, "pdpb.RequestHeader"),
    ("pdpb.ScanRegionsRequest", "start_key", 2, "bytes"),
    ("pdpb.ScanRegionsRequest", "limit", 3, "int32"),
    ("pdpb.ScanRegionsRequest", "end_key", 4, "bytes"),
    ("pdpb.ScanRegionsResponse", "header", 1, "pdpb.ResponseHeader"),
    ("pdpb.ScanRegionsResponse", "region_metas", 2, "repeated metapb.Region"),
    ("pdpb.ScanRegionsResponse", "leaders", 3, "repeated metapb.Peer"),
    ("pdpb.ScanRegionsResponse", "regions", 4, "repeated pdpb.Region"),
    ("pdpb.Region", "region", 1, "metapb.Region"),
    ("pdpb.Region", "leader", 2, "metapb.Peer"),
    ("pdpb.Region", "down_peers", 3, "repeated pdpb.PeerStats"),
    ("pdpb.Region", "pending_peers", 4, "repeated metapb.Peer"),
    ("pdpb.Region", "buckets", 5, "metapb.Buckets"),
    ("pdpb.KeyRange", "start_key", 1, "bytes"),
    ("pdpb.KeyRange", "end_key", 2, "bytes"),
    ("pdpb.BatchScanRegionsRequest", "header", 1, "pdpb.RequestHeader"),
    ("pdpb.BatchScanRegionsRequest", "need_buckets", 2, "bool"),
    ("pdpb.BatchScanRegionsRequest", "ranges", 3, "repeated pdpb.KeyRange"),
    ("pdpb.BatchScanRegionsRequest", "limit", 4, "int32"),
    ("pdpb.BatchScanRegionsRequest", "contain_all_key_range", 5, "bool"),
    ("pdpb.BatchScanRegionsResponse", "header", 1, "pdpb.ResponseHeader"),
    ("pdpb.BatchScanRegionsResponse", "regions", 2, "repeated pdpb.Region"),
    # docs/wire.md#stores and docs/wire.md#gc-safepoint
    ("pdpb.GetStoreRequest", "header", 1, "pdpb.RequestHeader"),
    ("pdpb.GetStoreRequest", "store_id", 2, "uint64"),
    ("pdpb.GetStoreResponse", "header", 1, "pdpb.ResponseHeader"),
    ("pdpb.GetStoreResponse", "store", 2, "metapb.Store"),
    ("pdpb.GetStoreResponse", "stats", 3, "pdpb.StoreStats"),
    ("pdpb.GetAllStoresRequest", "header", 1, "pdpb.RequestHeader"),
    ("pdpb.GetAllStoresRequest", "exclude_tombstone_stores", 2, "bool"),
    ("pdpb.GetAllStoresResponse", "header", 1, "pdpb.ResponseHeader"),
    ("pdpb.GetAllStoresResponse", "stores", 2, "repeated metapb.Store"),
    ("pdpb.GetMinTSRequest", "header", 1, "pdpb.RequestHeader"),
    ("pdpb.GetMinTSResponse", "header", 1, "pdpb.ResponseHeader"),
    ("pdpb.GetMinTSResponse", "timestamp", 2, "pdpb.Timestamp"),
    ("pdpb.UpdateServiceGCSafePointRequest", "header", 1, "pdpb.RequestHeader"),
    ("pdpb.UpdateServiceGCSafePointRequest", "service_id", 2, "bytes"),
    ("pdpb.UpdateServiceGCSafePointRequest", "TTL", 3, "int64"),
    ("pdpb.UpdateServiceGCSafePointRequest", "safe_point", 4, "uint64"),
    ("pdpb.UpdateServiceGCSafePointResponse", "header", 1, "pdpb.ResponseHeader"),
    ("pdpb.UpdateServiceGCSafePointResponse", "service_id", 2, "bytes"),
    ("pdpb.UpdateServiceGCSafePointResponse", "TTL", 3, "int64"),
    ("pdpb.UpdateServiceGCSafePointResponse", "min_safe_point", 4, "uint64"),
    ("pdpb.GetGCSafePointRequest", "header", 1, "pdpb.RequestHeader"),
    ("pdpb.GetGCSafePointResponse", "header", 1, "pdpb.ResponseHeader"),
    ("pdpb.GetGCSafePointResponse", "safe_point", 2, "uint64"),
    # docs/metadata.md#kvrpcpbcontext
    ("kvrpcpb.Context", "region_id", 1, "uint64"),
    ("kvrpcpb.Context", "region_epoch", 2, "metapb.RegionEpoch"),
    ("kvrpcpb.Context", "peer", 3, "metapb.Peer"),
    ("kvrpcpb.Context", "term", 5, "uint64"),
    ("kvrpcpb.Context", "priority", 6, "kvrpcpb.CommandPri"),
    ("kvrpcpb.Context", "isolation_level", 7, "kvrpcpb.IsolationLevel"),
    ("kvrpcpb.Context", "not_fill_cache", 8, "bool"),
    ("kvrpcpb.Context", "sync_log", 9, "bool"),
    ("kvrpcpb.Context", "record_time_stat", 10, "bool"),
    ("kvrpcpb.Context", "record_scan_stat", 11, "bool"),
    ("kvrpcpb.Context", "replica_read", 12, "bool"),
    ("kvrpcpb.Context", "resolved_locks", 13, "repeated uint64"),
    ("kvrpcpb.Context", "max_execution_duration_ms", 14, "uint64"),
    ("kvrpcpb.Context", "applied_index", 15, "uint64"),
    ("kvrpcpb.Context", "task_id", 16, "uint64"),
    ("kvrpcpb.Context", "stale_read", 17, "bool"),
    ("kvrpcpb.Context", "resource_group_tag", 18, "bytes"),
    ("kvrpcpb.Context", "disk_full_opt", 19, "kvrpcpb.DiskFullOpt"),
    ("kvrpcpb.Context", "is_retry_request", 20, "bool"),
    ("kvrpcpb.Context", "api_version", 21, "kvrpcpb.APIVersion"),
    ("kvrpcpb.Context", "committed_locks", 22, "repeated uint64"),
    ("kvrpcpb.Context", "request_source", 24, "string"),
    ("kvrpcpb.Context", "txn_source", 25, "uint64"),
    ("kvrpcpb.Context", "busy_threshold_ms", 27, "uint32"),
    ("kvrpcpb.Context", "request_origin", 29, "kvrpcpb.RequestOrigin"),
    ("kvrpcpb.Context", "keyspace_name", 31, "string"),
    ("kvrpcpb.Context", "keyspace_id", 32, "uint32"),
    ("kvrpcpb.Context", "buckets_version", 33, "uint64"),
    ("kvrpcpb.Context", "source_stmt", 34, "kvrpcpb.SourceStmt"),
    ("kvrpcpb.Context", "cluster_id", 35, "uint64"),
    ("kvrpcpb.Context", "trace_id", 36, "bytes"),
    ("kvrpcpb.Context", "trace_control_flags", 37, "uint64"),
    # docs/metadata.md#read-messages
    ("kvrpcpb.GetRequest", "context", 1, "kvrpcpb.Context"),
    ("kvrpcpb.GetRequest", "key", 2, "bytes"),
    ("kvrpcpb.GetRequest", "version", 3, "uint64"),
    ("kvrpcpb.GetRequest", "need_commit_ts", 4, "bool"),
    ("kvrpcpb.GetResponse", "region_error", 1, "errorpb.Error"),
    ("kvrpcpb.GetResponse", "error", 2, "kvrpcpb.KeyError"),
    ("kvrpcpb.GetResponse", "value", 3, "bytes"),
    ("kvrpcpb.GetResponse", "not_found", 4, "bool"),
    ("kvrpcpb.GetResponse", "exec_details_v2", 6, "kvrpcpb.ExecDetailsV2"),
    ("kvrpcpb.GetResponse", "commit_ts", 7, "uint64"),
    ("kvrpcpb.ScanRequest", "context", 1, "kvrpcpb.Context"),
    ("kvrpcpb.ScanRequest", "start_key", 2, "bytes"),
    ("kvrpcpb.ScanRequest", "limit", 3, "uint32"),
    ("kvrpcpb.ScanRequest", "version", 4, "uint64"),
    ("kvrpcpb.ScanRequest", "key_only", 5, "bool"),
    ("kvrpcpb.ScanRequest", "reverse", 6, "bool"),
    ("kvrpcpb.ScanRequest", "end_key", 7, "bytes"),
    ("kvrpcpb.ScanRequest", "sample_step", 8, "uint32"),
    ("kvrpcpb.ScanResponse", "region_error", 1, "errorpb.Error"),
    ("kvrpcpb.ScanResponse", "pairs", 2, "repeated kvrpcpb.KvPair"),
    ("kvrpcpb.ScanResponse", "error", 3, "kvrpcpb.KeyError"),
    ("kvrpcpb.BatchGetRequest", "context", 1, "kvrpcpb.Context"),
    ("kvrpcpb.BatchGetRequest", "keys", 2, "repeated bytes"),
    ("kvrpcpb.BatchGetRequest", "version", 3, "uint64"),
    ("kvrpcpb.BatchGetRequest", "need_commit_ts", 4, "bool"),
    ("kvrpcpb.BatchGetResponse", "region_error", 1, "errorpb.Error"),
    ("kvrpcpb.BatchGetResponse", "pairs", 2, "repeated kvrpcpb.KvPair"),
    ("kvrpcpb.BatchGetResponse", "exec_details_v2", 4, "kvrpcpb.ExecDetailsV2"),
    ("kvrpcpb.BatchGetResponse", "error", 5, "kvrpcpb.KeyError"),
    ("kvrpcpb.KvPair", "error", 1, "kvrpcpb.KeyError"),
    ("kvrpcpb.KvPair", "key", 2, "bytes"),
    ("kvrpcpb.KvPair", "value", 3, "bytes"),
    ("kvrpcpb.KvPair", "commit_ts", 4, "uint64"),
    ("kvrpcpb.LockInfo", "primary_lock", 1, "bytes"),
    ("kvrpcpb.LockInfo", "lock_version", 2, "uint64"),
    ("kvrpcpb.LockInfo", "key", 3, "bytes"),
    ("kvrpcpb.LockInfo", "lock_ttl", 4, "uint64"),
    ("kvrpcpb.LockInfo", "txn_size", 5, "uint64"),
    ("kvrpcpb.LockInfo", "lock_type", 6, "kvrpcpb.Op"),
    ("kvrpcpb.LockInfo", "lock_for_update_ts", 7, "uint64"),
    ("kvrpcpb.LockInfo", "use_async_commit", 8, "bool"),
    ("kvrpcpb.LockInfo", "min_commit_ts", 9, "uint64"),
    ("kvrpcpb.LockInfo", "secondaries", 10, "repeated bytes"),
    ("kvrpcpb.LockInfo", "duration_to_last_update_ms", 11, "uint64"),
    ("kvrpcpb.LockInfo", "shared_lock_infos", 12, "repeated kvrpcpb.LockInfo"),
    ("kvrpcpb.LockInfo", "is_txn_file", 100, "bool"),
    ("kvrpcpb.KeyError", "locked", 1, "kvrpcpb.LockInfo"),
    ("kvrpcpb.KeyError", "retryable", 2, "string"),
    ("kvrpcpb.KeyError", "abort", 3, "string"),
    ("kvrpcpb.KeyError", "conflict", 4, "kvrpcpb.WriteConflict"),
    ("kvrpcpb.KeyError", "already_exist", 5, "kvrpcpb.AlreadyExist"),
    ("kvrpcpb.KeyError", "deadlock", 6, "kvrpcpb.Deadlock"),
    ("kvrpcpb.KeyError", "commit_ts_expired", 7, "kvrpcpb.CommitTsExpired"),
    ("kvrpcpb.KeyError", "txn_not_found", 8, "kvrpcpb.TxnNotFound"),
    ("kvrpcpb.KeyError", "commit_ts_too_large", 9, "kvrpcpb.CommitTsTooLarge"),
    ("kvrpcpb.KeyError", "assertion_failed", 10, "kvrpcpb.AssertionFailed"),
    ("kvrpcpb.KeyError", "primary_mismatch", 11, "kvrpcpb.PrimaryMismatch"),
    ("kvrpcpb.KeyError", "txn_lock_not_found", 12, "kvrpcpb.TxnLockNotFound"),
    ("kvrpcpb.KeyError", "lock_upgrade_conflict", 13, "kvrpcpb.LockUpgradeConflict"),
    ("kvrpcpb.KeyError", "shared_lock_lost", 14, "kvrpcpb.SharedLockLost"),
    ("kvrpcpb.TxnNotFound", "start_ts", 1, "uint64"),
    ("kvrpcpb.TxnNotFound", "primary_key", 2, "bytes"),
    ("kvrpcpb.PrimaryMismatch", "lock_info", 1, "kvrpcpb.LockInfo"),
    ("kvrpcpb.CheckTxnStatusRequest", "context", 1, "kvrpcpb.Context"),
    ("kvrpcpb.CheckTxnStatusRequest", "primary_key", 2, "bytes"),
    ("kvrpcpb.CheckTxnStatusRequest", "lock_ts", 3, "uint64"),
    ("kvrpcpb.CheckTxnStatusRequest", "caller_start_ts", 4, "uint64"),
    ("kvrpcpb.CheckTxnStatusRequest", "current_ts", 5, "uint64"),
    ("kvrpcpb.CheckTxnStatusRequest", "rollback_if_not_exist", 6, "bool"),
    ("kvrpcpb.CheckTxnStatusRequest", "force_sync_commit", 7, "bool"),
    ("kvrpcpb.CheckTxnStatusRequest", "resolving_pessimistic_lock", 8, "bool"),
    ("kvrpcpb.CheckTxnStatusRequest", "verify_is_primary", 9, "bool"),
    ("kvrpcpb.CheckTxnStatusRequest", "is_txn_file", 100, "bool"),
    ("kvrpcpb.CheckTxnStatusResponse", "region_error", 1, "errorpb.Error"),
    ("kvrpcpb.CheckTxnStatusResponse", "error", 2, "kvrpcpb.KeyError"),
    ("kvrpcpb.CheckTxnStatusResponse", "lock_ttl", 3, "uint64"),
    ("kvrpcpb.CheckTxnStatusResponse", "commit_version", 4, "uint64"),
    ("kvrpcpb.CheckTxnStatusResponse", "action", 5, "kvrpcpb.Action"),
    ("kvrpcpb.CheckTxnStatusResponse", "lock_info", 6, "kvrpcpb.LockInfo"),
    ("kvrpcpb.CheckTxnStatusResponse", "exec_details_v2", 7, "kvrpcpb.ExecDetailsV2"),
    ("kvrpcpb.ResolveLockRequest", "context", 1, "kvrpcpb.Context"),
    ("kvrpcpb.ResolveLockRequest", "start_version", 2, "uint64"),
    ("kvrpcpb.ResolveLockRequest", "commit_version", 3, "uint64"),
    ("kvrpcpb.ResolveLockRequest", "txn_infos", 4, "repeated kvrpcpb.TxnInfo"),
    ("kvrpcpb.ResolveLockRequest", "keys", 5, "repeated bytes"),
    ("kvrpcpb.ResolveLockRequest", "is_async", 6, "bool"),
    ("kvrpcpb.ResolveLockRequest", "is_txn_file", 100, "bool"),
    ("kvrpcpb.ResolveLockResponse", "region_error", 1, "errorpb.Error"),
    ("kvrpcpb.ResolveLockResponse", "error", 2, "kvrpcpb.KeyError"),
    ("kvrpcpb.ResolveLockResponse", "exec_details_v2", 3, "kvrpcpb.ExecDetailsV2"),
    ("kvrpcpb.TxnInfo", "txn", 1, "uint64"),
    ("kvrpcpb.TxnInfo", "status", 2, "uint64"),
    ("kvrpcpb.CheckSecondaryLocksRequest", "context", 1, "kvrpcpb.Context"),
    ("kvrpcpb.CheckSecondaryLocksRequest", "keys", 2, "repeated bytes"),
    ("kvrpcpb.CheckSecondaryLocksRequest", "start_version", 3, "uint64"),
    ("kvrpcpb.CheckSecondaryLocksResponse", "region_error", 1, "errorpb.Error"),
    ("kvrpcpb.CheckSecondaryLocksResponse", "error", 2, "kvrpcpb.KeyError"),
    ("kvrpcpb.CheckSecondaryLocksResponse", "locks", 3, "repeated kvrpcpb.LockInfo"),
    ("kvrpcpb.CheckSecondaryLocksResponse", "commit_ts", 4, "uint64"),
    ("kvrpcpb.CheckSecondaryLocksResponse", "exec_details_v2", 5, "kvrpcpb.ExecDetailsV2"),
    # docs/wire.md#transactional-writes: the write RPCs' fields a client sets (kvproto kvrpcpb.proto)
    ("kvrpcpb.Mutation", "op", 1, "kvrpcpb.Op"),
    ("kvrpcpb.Mutation", "key", 2, "bytes"),
    ("kvrpcpb.Mutation", "value", 3, "bytes"),
    ("kvrpcpb.PrewriteRequest", "mutations", 2, "repeated kvrpcpb.Mutation"),
    ("kvrpcpb.PrewriteRequest", "primary_lock", 3, "bytes"),
    ("kvrpcpb.PrewriteRequest", "start_version", 4, "uint64"),
    ("kvrpcpb.PrewriteRequest", "lock_ttl", 5, "uint64"),
    ("kvrpcpb.PrewriteRequest", "pessimistic_actions", 7, "repeated kvrpcpb.PrewriteRequest.PessimisticAction"),
    ("kvrpcpb.PrewriteRequest", "for_update_ts", 9, "uint64"),
    ("kvrpcpb.PrewriteRequest", "min_commit_ts", 10, "uint64"),
    ("kvrpcpb.PrewriteRequest", "use_async_commit", 11, "bool"),
    ("kvrpcpb.PrewriteRequest", "secondaries", 12, "repeated bytes"),
    ("kvrpcpb.PrewriteRequest", "try_one_pc", 13, "bool"),
    ("kvrpcpb.PrewriteRequest", "max_commit_ts", 14, "uint64"),
    ("kvrpcpb.PrewriteResponse", "errors", 2, "repeated kvrpcpb.KeyError"),
    ("kvrpcpb.PrewriteResponse", "min_commit_ts", 3, "uint64"),
    ("kvrpcpb.PrewriteResponse", "one_pc_commit_ts", 4, "uint64"),
    ("kvrpcpb.CommitRequest", "commit_version", 4, "uint64"),
    ("kvrpcpb.CommitRequest", "commit_role", 6, "kvrpcpb.CommitRole"),
    ("kvrpcpb.CommitResponse", "commit_version", 3, "uint64"),
    ("kvrpcpb.CleanupRequest", "current_ts", 4, "uint64"),
    ("kvrpcpb.CleanupResponse", "commit_version", 3, "uint64"),
    ("kvrpcpb.PessimisticLockRequest", "for_update_ts", 6, "uint64"),
    ("kvrpcpb.PessimisticLockRequest", "wait_timeout", 8, "int64"),
    ("kvrpcpb.PessimisticLockRequest", "wake_up_mode", 14, "kvrpcpb.PessimisticLockWakeUpMode"),
    ("kvrpcpb.PessimisticLockResponse", "values", 5, "repeated bytes"),
    ("kvrpcpb.PessimisticLockResponse", "not_founds", 6, "repeated bool"),
    ("kvrpcpb.PessimisticLockResponse", "results", 8, "repeated kvrpcpb.PessimisticLockKeyResult"),
    ("kvrpcpb.PessimisticRollbackRequest", "keys", 4, "repeated bytes"),
    ("kvrpcpb.TxnHeartBeatRequest", "advise_lock_ttl", 4, "uint64"),
    ("kvrpcpb.TxnHeartBeatResponse", "lock_ttl", 3, "uint64"),
    ("tikvpb.BatchCommandsRequest", "requests", 1, "repeated tikvpb.BatchCommandsRequest.Request"),
    ("tikvpb.BatchCommandsRequest", "request_ids", 2, "repeated uint64"),
    ("tikvpb.BatchCommandsResponse", "responses", 1, "repeated tikvpb.BatchCommandsResponse.Response"),
    ("tikvpb.BatchCommandsResponse", "request_ids", 2, "repeated uint64"),
    ("tikvpb.BatchCommandsResponse", "transport_layer_load", 3, "uint64"),
    ("tikvpb.BatchCommandsEmptyRequest", "delay_time", 2, "uint64"),
    # docs/wire.md#pds-etcd-kv (etcd api/etcdserverpb/rpc.proto, api/mvccpb/kv.proto)
    ("etcdserverpb.RangeRequest", "key", 1, "bytes"),
    ("etcdserverpb.RangeRequest", "range_end", 2, "bytes"),
    ("etcdserverpb.RangeRequest", "limit", 3, "int64"),
    ("etcdserverpb.RangeRequest", "count_only", 9, "bool"),
    ("etcdserverpb.RangeResponse", "header", 1, "etcdserverpb.ResponseHeader"),
    ("etcdserverpb.RangeResponse", "kvs", 2, "repeated mvccpb.KeyValue"),
    ("etcdserverpb.RangeResponse", "more", 3, "bool"),
    ("etcdserverpb.RangeResponse", "count", 4, "int64"),
    ("etcdserverpb.ResponseHeader", "revision", 3, "int64"),
    ("mvccpb.KeyValue", "key", 1, "bytes"),
    ("mvccpb.KeyValue", "mod_revision", 3, "int64"),
    ("mvccpb.KeyValue", "value", 5, "bytes"),
    ("mvccpb.KeyValue", "create_revision", 2, "int64"),
    ("mvccpb.KeyValue", "version", 4, "int64"),
    ("etcdserverpb.PutRequest", "key", 1, "bytes"),
    ("etcdserverpb.PutRequest", "value", 2, "bytes"),
    ("etcdserverpb.PutRequest", "prev_kv", 4, "bool"),
    ("etcdserverpb.PutResponse", "prev_kv", 2, "mvccpb.KeyValue"),
    ("etcdserverpb.RequestOp", "request_range", 1, "etcdserverpb.RangeRequest"),
    ("etcdserverpb.RequestOp", "request_put", 2, "etcdserverpb.PutRequest"),
    ("etcdserverpb.ResponseOp", "response_range", 1, "etcdserverpb.RangeResponse"),
    ("etcdserverpb.ResponseOp", "response_put", 2, "etcdserverpb.PutResponse"),
    ("etcdserverpb.Compare", "result", 1, "etcdserverpb.Compare.CompareResult"),
    ("etcdserverpb.Compare", "target", 2, "etcdserverpb.Compare.CompareTarget"),
    ("etcdserverpb.Compare", "key", 3, "bytes"),
    ("etcdserverpb.Compare", "version", 4, "int64"),
    ("etcdserverpb.Compare", "create_revision", 5, "int64"),
    ("etcdserverpb.Compare", "mod_revision", 6, "int64"),
    ("etcdserverpb.Compare", "value", 7, "bytes"),
    ("etcdserverpb.Compare", "range_end", 64, "bytes"),
    ("etcdserverpb.TxnRequest", "compare", 1, "repeated etcdserverpb.Compare"),
    ("etcdserverpb.TxnRequest", "success", 2, "repeated etcdserverpb.RequestOp"),
    ("etcdserverpb.TxnRequest", "failure", 3, "repeated etcdserverpb.RequestOp"),
    ("etcdserverpb.TxnResponse", "succeeded", 2, "bool"),
    ("etcdserverpb.TxnResponse", "responses", 3, "repeated etcdserverpb.ResponseOp"),
]

# (enum full name, [(value name, number), ...]) from docs/wire.md#cdcpb-pingcapkvproto-protocdcpbproto, docs/wire.md#metapb-subset, docs/wire.md#kvrpcpb-and-raft_cmdpb-pieces-used-by-cdcpb, docs/wire.md#pdpb-subset and
# docs/metadata.md#kvrpcpbcontext, docs/metadata.md#read-messages, docs/metadata.md#locks-seen-by-a-read-only-snapshot-reader.
ENUMS: list[tuple[str, list[tuple[str, int]]]] = [
    ("cdcpb.ScanPriority", [("SCAN_PRIORITY_UNKNOWN", 0), ("SCAN_PRIORITY_LOW", 1), ("SCAN_PRIORITY_HIGH", 2)]),
    (
        "cdcpb.Event.LogType",
        [("UNKNOWN", 0), ("PREWRITE", 1), ("COMMIT", 2), ("ROLLBACK", 3), ("COMMITTED", 4), ("INITIALIZED", 5)],
    ),
    ("cdcpb.Event.Row.OpType", [("UNKNOWN", 0), ("PUT", 1), ("DELETE", 2)]),
    ("cdcpb.ChangeDataRequest.KvAPI", [("TiDB", 0), ("RawKV", 1), ("TxnKV", 2)]),
    ("kvrpcpb.ExtraOp", [("Noop", 0), ("ReadOldValue", 1)]),
    ("metapb.PeerRole", [("Voter", 0), ("Learner", 1), ("IncomingVoter", 2), ("DemotingVoter", 3)]),
    ("metapb.StoreState", [("Up", 0), ("Offline", 1), ("Tombstone", 2)]),
    ("metapb.NodeState", [("Preparing", 0), ("Serving", 1), ("Removing", 2), ("Removed", 3)]),
    (
        "pdpb.ErrorType",
        [
            ("OK", 0),
            ("UNKNOWN", 1),
            ("NOT_BOOTSTRAPPED", 2),
            ("STORE_TOMBSTONE", 3),
            ("ALREADY_BOOTSTRAPPED", 4),
            ("INCOMPATIBLE_VERSION", 5),
            ("REGION_NOT_FOUND", 6),
            ("GLOBAL_CONFIG_NOT_FOUND", 7),
            ("DUPLICATED_ENTRY", 8),
            ("ENTRY_NOT_FOUND", 9),
            ("INVALID_VALUE", 10),
            ("DATA_COMPACTED", 11),
            ("REGIONS_NOT_CONTAIN_ALL_KEY_RANGE", 12),
        ],
    ),
    ("pdpb.ServiceMode", [("UNKNOWN_SVC_MODE", 0), ("PD_SVC_MODE", 1), ("API_SVC_MODE", 2)]),
    ("kvrpcpb.CommandPri", [("Normal", 0), ("Low", 1), ("High", 2)]),
    ("kvrpcpb.IsolationLevel", [("SI", 0), ("RC", 1), ("RCCheckTS", 2)]),
    ("kvrpcpb.APIVersion", [("V1", 0), ("V1TTL", 1), ("V2", 2), ("V3", 3)]),
    ("kvrpcpb.RequestOrigin", [("RequestOriginUnknown", 0), ("RequestOriginTiDB", 1)]),
    (
        "kvrpcpb.Op",
        [
            ("Put", 0),
            ("Del", 1),
            ("Lock", 2),
            ("Rollback", 3),
            ("Insert", 4),
            ("PessimisticLock", 5),
            ("CheckNotExists", 6),
            ("SharedLock", 7),
            ("SharedPessimisticLock", 8),
        ],
    ),
    (
        "kvrpcpb.Action",
        [
            ("NoAction", 0),
            ("TTLExpireRollback", 1),
            ("LockNotExistRollback", 2),
            ("MinCommitTSPushed", 3),
            ("TTLExpirePessimisticRollback", 4),
            ("LockNotExistDoNothing", 5),
        ],
    ),
    # docs/wire.md#pds-etcd-kv (etcd api/etcdserverpb/rpc.proto Compare)
    ("etcdserverpb.Compare.CompareResult", [("EQUAL", 0), ("GREATER", 1), ("LESS", 2), ("NOT_EQUAL", 3)]),
    ("etcdserverpb.Compare.CompareTarget", [("VERSION", 0), ("CREATE", 1), ("MOD", 2), ("VALUE", 3), ("LEASE", 4)]),
]

# (oneof owner, oneof name, members) — docs/wire.md#event, docs/wire.md#changedatarequest; docs/metadata.md#kvrpcpbcontext.
ONEOFS: list[tuple[str, str, set[str]]] = [
    ("cdcpb.Event", "event", {"entries", "admin", "error", "resolved_ts", "long_txn"}),
    ("cdcpb.ChangeDataRequest", "request", {"register", "notify_txn_status", "deregister"}),
    ("kvrpcpb.Context", "keyspace", {"keyspace_id"}),
    # docs/wire.md#batchcommands: the oneof members this subset declares (kvproto numbers in FIELDS below)
    ("tikvpb.BatchCommandsRequest.Request", "cmd", _BATCH_CMDS),
    ("tikvpb.BatchCommandsResponse.Response", "cmd", _BATCH_CMDS),
]

# (full method path, client streaming, server streaming) — docs/wire.md#packages-and-grpc-method-paths, docs/metadata.md#grpc-paths.
METHODS: list[tuple[str, bool, bool]] = [
    ("/cdcpb.ChangeData/EventFeed", True, True),
    ("/cdcpb.ChangeData/EventFeedV2", True, True),
    ("/pdpb.PD/GetClusterInfo", False, False),
    ("/pdpb.PD/GetMembers", False, False),
    ("/pdpb.PD/Tso", True, True),
    ("/pdpb.PD/GetStore", False, False),
    ("/pdpb.PD/GetAllStores", False, False),
    ("/pdpb.PD/GetRegion", False, False),
    ("/pdpb.PD/GetPrevRegion", False, False),
    ("/pdpb.PD/GetRegionByID", False, False),
    ("/pdpb.PD/ScanRegions", False, False),
    ("/pdpb.PD/BatchScanRegions", False, False),
    ("/pdpb.PD/GetMinTS", False, False),
    ("/pdpb.PD/GetGCSafePoint", False, False),
    ("/pdpb.PD/UpdateServiceGCSafePoint", False, False),
    ("/tikvpb.Tikv/KvGet", False, False),
    ("/tikvpb.Tikv/KvScan", False, False),
    ("/tikvpb.Tikv/KvBatchGet", False, False),
    ("/tikvpb.Tikv/KvCheckTxnStatus", False, False),
    ("/tikvpb.Tikv/KvCheckSecondaryLocks", False, False),
    ("/tikvpb.Tikv/KvResolveLock", False, False),
    ("/tikvpb.Tikv/KvScanLock", False, False),
    # docs/wire.md#what-other-tikv-clients-need-from-a-store, docs/wire.md#pds-etcd-kv
    ("/tikvpb.Tikv/KvPrewrite", False, False),
    ("/tikvpb.Tikv/KvPessimisticLock", False, False),
    ("/tikvpb.Tikv/KVPessimisticRollback", False, False),
    ("/tikvpb.Tikv/KvTxnHeartBeat", False, False),
    ("/tikvpb.Tikv/KvCommit", False, False),
    ("/tikvpb.Tikv/KvCleanup", False, False),
    ("/tikvpb.Tikv/KvBatchRollback", False, False),
    ("/tikvpb.Tikv/BatchCommands", True, True),
    ("/etcdserverpb.KV/Range", False, False),
    ("/etcdserverpb.KV/Put", False, False),
    ("/etcdserverpb.KV/Txn", False, False),
]

_SCALARS = {
    FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes",
}


def _message(full_name: str) -> Descriptor:
    package, *path = full_name.split(".")
    descriptor = MODULES[package].DESCRIPTOR.message_types_by_name[path[0]]
    for nested in path[1:]:
        descriptor = descriptor.nested_types_by_name[nested]
    return descriptor


def _type_name(field: FieldDescriptor) -> str:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = (_type_name(field.message_type.fields_by_name[n]) for n in ("key", "value"))
        return f"map<{key}, {value}>"
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        base = field.message_type.full_name
    elif field.type == FieldDescriptor.TYPE_ENUM:
        base = field.enum_type.full_name
    else:
        base = _SCALARS[field.type]
    return f"repeated {base}" if field.is_repeated else base


@pytest.mark.parametrize(("message", "field", "number", "type_name"), FIELDS)
def test_field_number_and_type(message: str, field: str, number: int, type_name: str) -> None:
    descriptor = _message(message).fields_by_name.get(field)
    assert descriptor is not None, f"{message}.{field} missing"
    assert (descriptor.number, _type_name(descriptor)) == (number, type_name)


def test_cdcpb_is_complete() -> None:
    """Every field of every cdcpb message is in the table: cdcpb is declared in full (docs/wire.md#cdcpb-pingcapkvproto-protocdcpbproto)."""
    listed = {(m, f) for m, f, _, _ in FIELDS if m.startswith("cdcpb.")}

    def walk(descriptor: Descriptor) -> set[tuple[str, str]]:
        found = {(descriptor.full_name, f.name) for f in descriptor.fields}
        for nested in descriptor.nested_types:
            found |= walk(nested)
        return found

    declared: set[tuple[str, str]] = set()
    for descriptor in cdcpb_pb2.DESCRIPTOR.message_types_by_name.values():
        declared |= walk(descriptor)
    assert declared == listed


@pytest.mark.parametrize(("enum", "values"), ENUMS)
def test_enum_values(enum: str, values: list[tuple[str, int]]) -> None:
    package, *path = enum.split(".")
    module_descriptor = MODULES[package].DESCRIPTOR
    if len(path) == 1:
        descriptor = module_descriptor.enum_types_by_name[path[0]]
    else:
        descriptor = _message(".".join([package, *path[:-1]])).enum_types_by_name[path[-1]]
    assert [(v.name, v.number) for v in descriptor.values] == values


@pytest.mark.parametrize(("message", "oneof", "members"), ONEOFS)
def test_oneof_members(message: str, oneof: str, members: set[str]) -> None:
    assert {f.name for f in _message(message).oneofs_by_name[oneof].fields} == members


@pytest.mark.parametrize("message", ["tikvpb.BatchCommandsRequest.Request", "tikvpb.BatchCommandsResponse.Response"])
def test_batch_commands_members_keep_kvproto_numbers(message: str) -> None:
    fields = _message(message).oneofs_by_name["cmd"].fields
    assert {f.name: f.number for f in fields} == _BATCH_NUMBERS


def test_deprecated_resolved_ts_keeps_its_option() -> None:
    options = _message("cdcpb.Event").fields_by_name["resolved_ts"].GetOptions()
    assert options.deprecated


@pytest.mark.parametrize(
    ("message", "numbers"),
    [("pdpb.GetRegionResponse", [(4, 5)]), ("kvrpcpb.Context", [(4, 5), (26, 27)]), ("kvrpcpb.GetResponse", [(5, 6)])],
)
def test_reserved_numbers(message: str, numbers: list[tuple[int, int]]) -> None:
    proto = descriptor_pb2.DescriptorProto()
    _message(message).CopyToProto(proto)
    assert [(r.start, r.end) for r in proto.reserved_range] == numbers


@pytest.mark.parametrize(("path", "client_streaming", "server_streaming"), METHODS)
def test_method_path_and_streaming(path: str, client_streaming: bool, server_streaming: bool) -> None:
    _, service_name, method_name = path.split("/")
    package, service = service_name.split(".")
    method = MODULES[package].DESCRIPTOR.services_by_name[service].methods_by_name[method_name]
    assert (method.client_streaming, method.server_streaming) == (client_streaming, server_streaming)


@pytest.mark.parametrize(
    "make_stub",
    [cdcpb_pb2_grpc.ChangeDataStub, pdpb_pb2_grpc.PDStub, tikvpb_pb2_grpc.TikvStub, etcdserverpb_pb2_grpc.KVStub],
    ids=["ChangeData", "PD", "Tikv", "KV"],
)
def test_stubs_call_the_kvproto_paths(make_stub: Callable[[object], object]) -> None:
    channel = mock.Mock()
    make_stub(channel)
    used = {
        (call.args[0], kind)
        for kind in ("unary_unary", "stream_stream", "unary_stream", "stream_unary")
        for call in getattr(channel, kind).call_args_list
    }
    prefix = "/" + {"ChangeDataStub": "cdcpb.", "PDStub": "pdpb.", "TikvStub": "tikvpb.", "KVStub": "etcdserverpb."}[make_stub.__name__]
    expected = {
        (path, {(True, True): "stream_stream", (False, False): "unary_unary"}[(cs, ss)])
        for path, cs, ss in METHODS
        if path.startswith(prefix)
    }
    assert used == expected
