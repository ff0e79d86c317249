"""Clients for the upstream TiDB cluster outside the CDC stream.

PD (members, TSO, regions, stores, GC safepoints), consistent TiKV snapshot reads at a TSO
with lock resolution, and the TiDB schema read from meta keys at that TSO. The puller, the
bootstrap snapshot and `tidelake verify` share them, and they speak exactly the protocol
client-go speaks, so they work unchanged against a real cluster and the simulator.
Owner: this package; the puller, bootstrap and `tidelake verify` only call it.
"""
