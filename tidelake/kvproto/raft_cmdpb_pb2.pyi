from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AdminCmdType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    InvalidAdmin: _ClassVar[AdminCmdType]
    ChangePeer: _ClassVar[AdminCmdType]
    Split: _ClassVar[AdminCmdType]
    CompactLog: _ClassVar[AdminCmdType]
    TransferLeader: _ClassVar[AdminCmdType]
    ComputeHash: _ClassVar[AdminCmdType]
    VerifyHash: _ClassVar[AdminCmdType]
    PrepareMerge: _ClassVar[AdminCmdType]
    CommitMerge: _ClassVar[AdminCmdType]
    RollbackMerge: _ClassVar[AdminCmdType]
    BatchSplit: _ClassVar[AdminCmdType]
    ChangePeerV2: _ClassVar[AdminCmdType]
    PrepareFlashback: _ClassVar[AdminCmdType]
    FinishFlashback: _ClassVar[AdminCmdType]
    BatchSwitchWitness: _ClassVar[AdminCmdType]
    UpdateGcPeer: _ClassVar[AdminCmdType]
InvalidAdmin: AdminCmdType
ChangePeer: AdminCmdType
Split: AdminCmdType
CompactLog: AdminCmdType
TransferLeader: AdminCmdType
ComputeHash: AdminCmdType
VerifyHash: AdminCmdType
PrepareMerge: AdminCmdType
CommitMerge: AdminCmdType
RollbackMerge: AdminCmdType
BatchSplit: AdminCmdType
ChangePeerV2: AdminCmdType
PrepareFlashback: AdminCmdType
FinishFlashback: AdminCmdType
BatchSwitchWitness: AdminCmdType
UpdateGcPeer: AdminCmdType

class AdminRequest(_message.Message):
    __slots__ = ("cmd_type",)
    CMD_TYPE_FIELD_NUMBER: _ClassVar[int]
    cmd_type: AdminCmdType
    def __init__(self, cmd_type: _Optional[_Union[AdminCmdType, str]] = ...) -> None: ...

class AdminResponse(_message.Message):
    __slots__ = ("cmd_type",)
    CMD_TYPE_FIELD_NUMBER: _ClassVar[int]
    cmd_type: AdminCmdType
    def __init__(self, cmd_type: _Optional[_Union[AdminCmdType, str]] = ...) -> None: ...
