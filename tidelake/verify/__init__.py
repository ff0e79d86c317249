"""Verify: each replica at its checkpoint compared with a snapshot read of the upstream."""
