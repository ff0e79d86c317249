"""Spark side of tidelake: session construction and the Spark implementations of lake jobs."""
