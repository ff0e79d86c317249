"""`tidelake sim`: a simulated TiDB cluster (PD + TiKV stores) on loopback that speaks the real protocols.

One logical Percolator keyspace (mvcc.py) stands for the raft groups; a RegionMap (regions.py) says
which store leads which region; each store is its own gRPC server that answers only for the regions
it leads, exactly as TiKV does, so a client that works here works against a real cluster.
"""
