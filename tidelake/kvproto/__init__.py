"""kvproto-compatible protobuf and gRPC modules (packages cdcpb, pdpb, metapb, errorpb, kvrpcpb, tikvpb, etcdserverpb, mvccpb).

Generated from protos/*.proto by `make protos` (tools/gen_protos.py). Do not edit: edit the
.proto files and regenerate; tests/protos fails when this folder is stale.
"""
