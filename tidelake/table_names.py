"""How tidelake compares TiDB database and table names: case-insensitively, as TiDB does
(lower_case_table_names is always 2 in TiDB), so `Shop.Orders` and `shop.orders` are one table.
Owner: every stage that matches names (schema tracker, table starts, bootstrap).
"""

from __future__ import annotations


def table_key(db: str, table: str) -> tuple[str, str]:
    """The key two spellings of one table share."""
    return db.lower(), table.lower()
