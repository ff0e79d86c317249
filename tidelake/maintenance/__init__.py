"""Maintenance: compaction and vacuum of the replicas and the changelog, changelog retention."""
