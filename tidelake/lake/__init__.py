"""The lake side: tidelake's own Delta tables (changelog, ddl, watermarks), the lander that the
puller lands raw changes through, and the readers merge uses. The puller writes with delta-rs
(no JVM in the long-running process); Spark reads the same standard Delta tables."""
