"""The replicas as Iceberg tables with no copy of data: each syncpoint's Delta version of a replica
becomes an Iceberg snapshot whose manifests list the same Parquet files (as Delta UniForm and
Apache XTable do), tagged by the syncpoint TSO. Owner: `tidelake iceberg sync` and the syncpoint job.

More: docs/operations.md#reading-replicas-as-iceberg.
"""
