"""For the replicas' consumers: their change feed between TSOs, and Hive metastore registration."""
