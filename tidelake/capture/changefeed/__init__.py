"""One changefeed's capture: DDL puller, table joins, shards, and the runner that lands them."""
