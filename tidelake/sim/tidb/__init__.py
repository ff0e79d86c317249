"""A TiDB-like front for the simulated cluster: DDL and DML written exactly as TiDB writes them.

It speaks to the simulated TiKV through Percolator transactions only, so a replicator that reads
TiDB's meta keys, DDL job table and rows works on it unchanged.
"""
