"""Syncpoints: cross-table consistent cuts of the replicas, taken and recorded."""
