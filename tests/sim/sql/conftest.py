"""A SimTiDB behind the SQL front on a free loopback port, and pymysql connections to it.

The cluster is not started (no gRPC ports): the SQL front needs only its MVCC store, regions and
TSO, which keeps these tests fast. One server per module; each test gets its own database.
"""

from __future__ import annotations

import itertools

import pymysql
import pytest

from tidelake.sim.cluster import SimCluster
from tidelake.sim.sql.server import SqlServer
from tidelake.sim.tidb.session import SimTiDB

_NAMES = itertools.count()


@pytest.fixture(scope="module")
def server():
    tidb = SimTiDB(SimCluster(n_stores=3, split_check_interval_s=0, gc_interval_s=0))
    with SqlServer(tidb, port=0) as sql:
        yield sql


@pytest.fixture
def connect(server):
    """`connect(db=None, **kw)` opens a pymysql connection (autocommit on unless told otherwise)."""
    opened = []

    def open_one(db: str | None = None, **kwargs) -> pymysql.Connection:
        kwargs.setdefault("autocommit", True)
        conn = pymysql.connect(host="127.0.0.1", port=server.port, user="root", database=db, **kwargs)
        opened.append(conn)
        return conn

    yield open_one
    for conn in opened:
        if conn.open:
            conn.close()


@pytest.fixture
def db(server, connect):
    """A fresh database, and a cursor whose connection USEs it."""
    name = f"t{next(_NAMES)}"
    cursor = connect().cursor()
    cursor.execute(f"CREATE DATABASE {name}")
    cursor.execute(f"USE {name}")
    return name, cursor


def run(cursor, sql: str, *args):
    """Execute and fetch everything (None for statements without a result set)."""
    cursor.execute(sql, args or None)
    return cursor.fetchall() if cursor.description else None
