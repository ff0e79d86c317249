"""The two engines that run a merge window's semantics (tidelake.merge.window_spec): Spark, and
delta-rs on the driver for small windows."""
