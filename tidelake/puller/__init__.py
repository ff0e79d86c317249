"""The puller: TiKV EventFeed client with TiCDC's semantics (facts/kvproto.md §9).

It keeps one gRPC stream per store, one state machine per (subscription, region), and one span
frontier per table, so that a table's resolved ts is the minimum over its regions and never runs
ahead of a row that is still to come. It never decodes row values: rows leave as raw bytes.
"""
