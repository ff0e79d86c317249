"""Landing: the puller's raw changes, DDL rows and watermarks committed to the lake, in that order;
the changelog's compaction and retention."""
