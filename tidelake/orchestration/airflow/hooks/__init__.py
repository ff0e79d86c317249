"""Hooks of the tidelake provider: one connection type each (provider_info lists them)."""
