"""Capture: upstream changes into the lake, as TiCDC's puller does.

`eventfeed/` is the TiKV EventFeed protocol client (docs/wire.md#ticdc-client-behaviour): one gRPC stream per
store, one state machine per (subscription, region), one span frontier per table, so a table's
resolved ts is the minimum over its regions and never runs ahead of a row still to come. Rows
leave it raw; nothing here decodes row values.

`landing/` lands them: the lander buffers rows and commits changelog, DDL rows and watermarks in
that order, with delta-rs, idempotently per flush.

`changefeed/` drives both for one changefeed: the DDL puller and schema tracking, tables joining
the feed, shards, and the runner.
"""
