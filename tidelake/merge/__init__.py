"""Merge: each replica advanced to min(resolved ts, barrier ts, cap), DDLs applied at barriers."""
