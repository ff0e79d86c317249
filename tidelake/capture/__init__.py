"""Capture: upstream changes into the lake, as TiCDC's puller does. `eventfeed/` is the EventFeed
client (a table's resolved ts is the minimum over its regions; rows leave it raw), `landing/`
commits changelog, DDL rows and watermarks in that order, `changefeed/` drives both for one
changefeed.
Owner: the puller (`tidelake pull`, or the Airflow puller task), one per changefeed shard.

More: docs/internals.md#capture__init__.
"""
