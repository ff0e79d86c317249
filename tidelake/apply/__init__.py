"""Apply: everything that runs on Spark (merge, DDL apply, mount, syncpoints, maintenance, verify)."""
