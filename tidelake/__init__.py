"""tidelake: replicate TiDB tables into Delta Lake with transactional consistency."""

__version__ = "0.1.0"
