"""The EventFeed client: streams, region state machines, span frontiers (facts/kvproto.md §9)."""
