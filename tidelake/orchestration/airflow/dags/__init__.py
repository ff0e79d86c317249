"""The DAGs of one changefeed, one module per DAG, each `build(feed) -> DAG`; the DAG factory composes them."""
