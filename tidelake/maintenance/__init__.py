"""Maintenance: compaction and vacuum of the replicas, and landing's changelog retention, on a schedule."""
