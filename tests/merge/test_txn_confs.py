"""txn_confs sets the Delta txn confs for one DML and restores the session's own afterwards."""

from __future__ import annotations

from tidelake.lake.checkpoint import MERGE_APP_ID
from tidelake.merge.txn_confs import TXN_APP_ID_CONF, TXN_VERSION_CONF, USER_METADATA_CONF, txn_confs


class _Conf:
    def __init__(self, values):
        self.values = dict(values)

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value):
        self.values[key] = value

    def unset(self, key):
        self.values.pop(key, None)


class _Spark:
    def __init__(self, values):
        self.conf = _Conf(values)


def test_txn_confs_set_inside_and_restore_after():
    spark = _Spark({TXN_APP_ID_CONF: "previous-app"})
    with txn_confs(spark, 42):
        assert spark.conf.values[TXN_APP_ID_CONF] == MERGE_APP_ID
        assert spark.conf.values[TXN_VERSION_CONF] == "42"
        assert "42" in spark.conf.values[USER_METADATA_CONF]
    assert spark.conf.values == {TXN_APP_ID_CONF: "previous-app"}
    try:
        with txn_confs(spark, 43):
            raise RuntimeError("merge failed")
    except RuntimeError:
        pass
    assert spark.conf.values == {TXN_APP_ID_CONF: "previous-app"}
