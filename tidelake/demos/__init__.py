"""Demos of the whole path on the embedded default; nothing in the library imports them."""
