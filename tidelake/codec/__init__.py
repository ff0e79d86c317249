"""TiDB's on-disk encodings (keys, rows, meta, schema JSON) read and written byte-for-byte.

Each module implements one section of docs/encoding.md so the puller, the simulator and the
Spark mounter agree with a real TiDB cluster on every byte. Owner: the codec.
"""
