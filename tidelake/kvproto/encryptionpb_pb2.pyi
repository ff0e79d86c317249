from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class EncryptionMeta(_message.Message):
    __slots__ = ("key_id", "iv")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    IV_FIELD_NUMBER: _ClassVar[int]
    key_id: int
    iv: bytes
    def __init__(self, key_id: _Optional[int] = ..., iv: _Optional[bytes] = ...) -> None: ...
