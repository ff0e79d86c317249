"""TiDB's own statements the front runs: SPLIT TABLE on the simulator's regions, DO, and the
ones it refuses by name (ADMIN, FLASHBACK, placement policies...)."""

from __future__ import annotations

import pymysql
import pytest

from tests.sim.sql.conftest import run
from tidelake.codec.keys import record_key
from tidelake.codec.memcomparable_bytes import encode_bytes


def test_split_table_splits_every_partition_at_the_handles(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE sp (id BIGINT PRIMARY KEY, v INT) PARTITION BY HASH (id) PARTITIONS 2")
    assert run(cursor, "SPLIT TABLE sp BETWEEN (0) AND (100) REGIONS 4") == ((8, 1.0),)
    regions = server.tidb.cluster.regions
    for physical in server.tidb.table_info(name, "sp").physical_ids():
        for handle in (0, 25, 50, 75):
            key = encode_bytes(record_key(physical, handle))
            assert regions.locate(key).start_key == key
    assert run(cursor, "SPLIT TABLE sp BY (25), (30)") == ((2, 1.0),)  # 25 starts regions already: 30 twice
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, "SPLIT TABLE sp BETWEEN (10) AND (5) REGIONS 2")
    assert err.value.args[0] == 8212


def test_do_evaluates_and_tidb_only_statements_are_refused_by_name(db):
    _, cursor = db
    assert run(cursor, "DO SLEEP(0.01), 1 + 1") is None
    assert run(cursor, "SELECT SLEEP(0)") == ((0,),)
    for sql, named in (("ADMIN CHECK TABLE t", "ADMIN"), ("FLASHBACK TABLE t TO t2", "FLASHBACK"),
                       ("CREATE PLACEMENT POLICY p1 PRIMARY_REGION='r1'", "CREATE PLACEMENT POLICY")):
        with pytest.raises(pymysql.err.MySQLError) as err:
            run(cursor, sql)
        assert err.value.args[0] == 1235 and named in err.value.args[1]
