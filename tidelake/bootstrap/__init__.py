"""Initial snapshot of upstream tables at one TSO and its gap-free handoff to the changefeed."""
