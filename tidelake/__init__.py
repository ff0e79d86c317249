"""tidelake: replicate TiDB tables into Delta Lake with transactional consistency."""

import os

# delta-rs allocates with its own jemalloc, which keeps freed pages for 10 s by default: under a
# backlog the puller's RSS then holds every recent flush's working memory (~20 MiB more, bench/
# README.md "Memory under backpressure"). jemalloc reads this when delta-rs first allocates, so it
# is set here, before anything imports deltalake; a value the user set wins.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")

__version__ = "0.1.0"
