"""Commands that read a lake refuse a path that is not a tidelake lake: one line naming it, exit 2,
before Spark starts or PD is dialled (the PD address below is never reachable)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tidelake.cli import main
from tidelake.config_writer import changefeed_document, write_config
from tidelake.lake.lake_check import require_lake
from tidelake.lake.layout import WATERMARKS_SCHEMA, LakeLayout, open_or_create

UNREACHABLE_PD = "127.0.0.1:1"


def _missing(tmp_path: Path) -> tuple[Path, str]:
    return tmp_path / "no-such-lake", "does not exist"


def _empty(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty", "is an empty folder"


def _file(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "plain").write_text("x")
    return tmp_path / "plain", "is a file, not a folder"


def _under_a_file(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "plain").write_text("x")
    return tmp_path / "plain" / "lake", "is a file, not a folder"


def _delta_table(tmp_path: Path) -> tuple[Path, str]:
    write_deltalake(str(tmp_path / "other"), pa.table({"a": [1]}))
    return tmp_path / "other", "is a Delta table itself"


def _other_folder(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "a.jpg").write_text("x")
    return tmp_path / "photos", "has no _tidelake/ folder"


def _no_control_tables(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "half" / "_tidelake").mkdir(parents=True)
    return tmp_path / "half", "holds no tidelake control table"


LAKES = [_missing, _empty, _file, _under_a_file, _delta_table, _other_folder, _no_control_tables]
COMMANDS = [
    ["verify", "--pd", UNREACHABLE_PD],
    ["status"],
    ["status", "--pd", UNREACHABLE_PD],
    ["freshness"],
    ["snapshot-at", "1"],
    ["duckdb", "-c", "SELECT 1"],
    ["iceberg", "sync"],
    ["merge"],
    ["syncpoint"],
    ["maintenance"],
]


@pytest.mark.parametrize("make", LAKES, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_reader_refuses_what_is_not_a_lake(tmp_path, capsys, make, command):
    lake, problem = make(tmp_path)
    assert main([*command, "--lake", str(lake)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"lake {lake}" in err and problem in err, err


@pytest.mark.parametrize("make", [_file, _under_a_file, _delta_table], ids=lambda f: f.__name__.strip("_"))
def test_bootstrap_refuses_a_root_that_cannot_be_a_lake(tmp_path, capsys, make):
    lake, problem = make(tmp_path)
    config = write_config(tmp_path / "cf.toml", changefeed_document("cf", [UNREACHABLE_PD], lake))
    assert main(["bootstrap", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and problem in err, err


@pytest.mark.parametrize("make", [_file, _under_a_file, _delta_table], ids=lambda f: f.__name__.strip("_"))
def test_pull_refuses_a_root_that_cannot_be_a_lake(tmp_path, capsys, make):
    lake, problem = make(tmp_path)
    config = write_config(tmp_path / "cf.toml", changefeed_document("cf", [UNREACHABLE_PD], lake))
    assert main(["pull", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and problem in err, err


def test_a_lake_with_its_control_tables_is_accepted(tmp_path):
    layout = LakeLayout(str(tmp_path / "lake"))
    open_or_create(layout, layout.watermarks, WATERMARKS_SCHEMA)
    require_lake(layout)


def test_the_airflow_merge_plan_refuses_what_is_not_a_lake(tmp_path):
    from tidelake.errors import InputError
    from tidelake.orchestration.merge_dag import plan_run

    (tmp_path / "plain").write_text("x")
    config = write_config(tmp_path / "cf.toml", changefeed_document("cf", [UNREACHABLE_PD], tmp_path / "plain"))
    with pytest.raises(InputError, match="is a file, not a folder"):
        plan_run(str(config), {}, {})


@pytest.mark.parametrize("make", [lambda lake: None, lambda lake: lake.mkdir()], ids=["missing", "empty"])
def test_a_scheduled_merge_before_the_first_flush_plans_nothing_and_does_not_fail(tmp_path, make):
    """The first scheduled run of `make demo` came before the puller's first flush and failed."""
    from tidelake.orchestration.merge_dag import plan_run

    make(tmp_path / "lake")
    config = write_config(tmp_path / "cf.toml", changefeed_document("cf", [UNREACHABLE_PD], tmp_path / "lake"))
    assert plan_run(str(config), {}, {}) == {"merge_jobs": [], "before": {}, "syncpoint": False}
