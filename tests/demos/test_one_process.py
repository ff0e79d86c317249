"""`tidelake demo`: its config and argument checks (fast), and the full run (slow)."""

from __future__ import annotations

from datetime import datetime

import pytest

from tidelake.config import load_config
from tidelake.demos.one_process import (
    WORKLOAD_DB,
    OneProcessOptions,
    run_demo,
    write_demo_changefeed,
)
from tidelake.sim.ddl_tour import TOUR_DB, TOUR_SCRATCH_DB, DdlTour
from tidelake.table_filter import TableFilter


def test_changefeed_toml_is_a_valid_config_for_the_demo_databases(tmp_path):
    config = load_config(write_demo_changefeed(tmp_path / "changefeed.toml", "127.0.0.1:2379", tmp_path / "lake"))
    assert config.upstream.pd == ("127.0.0.1:2379",) and config.lake.root == str(tmp_path / "lake")
    rules = config.filter.table_filter()
    assert isinstance(rules, TableFilter)
    for db in (WORKLOAD_DB, TOUR_DB, TOUR_SCRATCH_DB):
        assert rules.should_replicate_table(db, "anything")
    assert not rules.should_replicate_table("other", "t")


def test_demo_rejects_a_used_workdir_and_a_bad_duration(tmp_path):
    from rich.console import Console

    from tidelake.errors import InputError

    with pytest.raises(InputError, match="duration"):
        run_demo(OneProcessOptions(tmp_path, duration_s=0), Console())
    (tmp_path / "lake").mkdir()
    with pytest.raises(InputError, match="already exists"):
        run_demo(OneProcessOptions(tmp_path, duration_s=5, keep=True), Console())
    assert (tmp_path / "lake").exists()


@pytest.mark.slow
@pytest.mark.spark
def test_full_demo_verifies_every_replica(spark, tmp_path):
    from rich.console import Console

    from tidelake.verify.verifier import Verdict

    result = run_demo(OneProcessOptions(tmp_path / "demo", duration_s=20, seed=2, keep=True), Console())
    assert result.ok, [(v.table, v.status, v.note) for v in result.verify.tables]
    assert set(result.ddl_kinds) == set(DdlTour(None, 0).kinds)
    assert sum(result.faults.values()) > 0, result.faults
    matched = {v.table for v in result.verify.tables if v.status == Verdict.MATCH}
    assert {f"{TOUR_DB}.goods", f"{TOUR_DB}.ledger", f"{WORKLOAD_DB}.orders"} <= matched
    assert all(v.checkpoint == result.final_ts for v in result.verify.tables if v.status == Verdict.MATCH)
    assert result.merge_cycles >= 2
    assert_every_reader_agrees(spark, tmp_path / "demo" / "lake")


def assert_every_reader_agrees(spark, lake) -> None:
    """Each replica at its latest version reads the same in deltalake, Polars and Spark: no DDL
    of the tour (type change, rename and drop of columns among them) left a reader feature that
    deltalake lacks, as status reports."""
    import polars as pl
    from deltalake import DeltaTable

    from tidelake.lake.layout import LakeLayout
    from tidelake.status.status_report import collect_status

    def local(value):
        # Spark's collect() gives a TIMESTAMP as naive local time; delta-rs an aware UTC one.
        return value.astimezone().replace(tzinfo=None) if isinstance(value, datetime) and value.tzinfo else value

    def rows(dicts):
        normal = [{k: local(v) for k, v in r.items()} for r in dicts]
        return sorted(normal, key=lambda r: sorted((k, repr(v)) for k, v in r.items()))

    readable = 0
    for table in collect_status(LakeLayout(str(lake))).tables:
        if table.reader_features is None:
            continue
        version = DeltaTable(table.path).version()
        assert table.deltalake_readable, (table.table, table.reader_features)
        by_spark = rows([r.asDict() for r in spark.read.format("delta").option("versionAsOf", version)
                         .load(table.path).collect()])
        assert rows(DeltaTable(table.path, version=version).to_pyarrow_table().to_pylist()) == by_spark, table.table
        assert rows(pl.read_delta(table.path, version=version).to_dicts()) == by_spark, table.table
        readable += 1
    assert readable > 0
