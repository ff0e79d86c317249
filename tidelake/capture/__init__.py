"""Capture: upstream changes into the lake, as TiCDC's puller does.

`eventfeed/` is the TiKV EventFeed protocol client (docs/wire.md §9): one gRPC stream per
store, one state machine per (subscription, region), one span frontier per table, so a table's
resolved ts is the minimum over its regions and never runs ahead of a row still to come. Rows
leave it raw; nothing here decodes row values.

`changefeed/` drives it for one changefeed: the DDL puller and schema tracking, tables joining
the feed, shards, and the runner that lands rows and watermarks through `tidelake.lake`.
"""
