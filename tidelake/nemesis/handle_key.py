"""A row key's handle, read without tidelake.codec, so replica rows can be matched to upstream rows.

Record keys are `t{table id}_r{handle}` (pingcap/tidb pkg/tablecodec EncodeRowKeyWithHandle). An
int handle is a comparable int64: 8 bytes big-endian with the sign bit flipped. A clustered
common handle is the primary key's datums in key form (pingcap/tidb pkg/util/codec/codec.go
encodeKey): flag 0x01 then memcomparable bytes (groups of 8 bytes, each followed by a marker
0xFF minus the zero padding of that group; pkg/util/codec/bytes.go EncodeBytes), or flag 0x03
then a comparable int64.
"""

from __future__ import annotations

PREFIX_LEN = 11  # 't' + 8-byte table id + '_r'
_BYTES_FLAG, _INT_FLAG = 0x01, 0x03


class KeyFormatError(ValueError):
    """Not a record key this reader understands."""



def int_handle(key: bytes) -> int:
    if len(key) != PREFIX_LEN + 8 or key[9:11] != b"_r":
        raise KeyFormatError(f"not an int-handle record key: {key.hex()}")
    return int.from_bytes(key[PREFIX_LEN:], "big") - (1 << 63)


def common_handle(key: bytes) -> tuple:
    """The datums of a clustered primary key: bytes as str (utf-8), ints as int."""
    if key[9:11] != b"_r":
        raise KeyFormatError(f"not a record key: {key.hex()}")
    pos, out = PREFIX_LEN, []
    while pos < len(key):
        flag = key[pos]
        pos += 1
        if flag == _INT_FLAG:
            out.append(int.from_bytes(key[pos:pos + 8], "big") - (1 << 63))
            pos += 8
        elif flag == _BYTES_FLAG:
            data = bytearray()
            while True:
                group, marker = key[pos:pos + 8], key[pos + 8]
                pos += 9
                pad = 0xFF - marker
                data += group[:8 - pad]
                if pad:
                    break
            out.append(data.decode())
        else:
            raise KeyFormatError(f"datum flag {flag:#x} at byte {pos - 1} of {key.hex()}")
    return tuple(out)
