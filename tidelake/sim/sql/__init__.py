"""The simulator's MySQL-protocol front: `tidelake sim --sql-port` serves SQL like a TiDB server.

mysql-mimic speaks the wire protocol (server.py, client_session.py), the TiDB dialect of sqlglot
parses (parse.py, over tidelake/sim/tidb/dialect.py), and each statement is translated onto the
TiDB-like front of tidelake/sim/tidb (statements.py dispatches to ddl_statements.py,
dml_statements.py, select.py, show.py), so SQL reaches TiKV, CDC and the DDL job table through
exactly the writes the workload's statements take.
"""
