"""The EventFeed client: streams, region state machines, span frontiers (docs/wire.md#ticdc-client-behaviour)."""
