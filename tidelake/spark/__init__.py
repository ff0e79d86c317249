"""The Spark edge: sessions (local, cluster, Spark Connect), jars, the s3a confs, the warm server."""
