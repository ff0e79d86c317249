"""Which changefeeds get DAGs: TIDELAKE_CONFIG paths, primary keeps the plain DAG ids."""

from __future__ import annotations

import os

import pytest
from airflow_test_env import write_changefeed

from tidelake.errors import InputError
from tidelake.orchestration.changefeeds import load_changefeeds


def test_first_config_keeps_plain_ids_others_are_suffixed(tmp_path):
    paths = [str(write_changefeed(tmp_path, "main")), str(write_changefeed(tmp_path, "crm"))]
    feeds = load_changefeeds({"TIDELAKE_CONFIG": os.pathsep.join(paths)})
    assert [f.dag_id("merge") for f in feeds] == ["tidelake_merge", "tidelake_merge__crm"]
    assert feeds[0].config.lake.root == str(tmp_path / "lake")


def test_missing_variable_and_duplicate_ids_are_clear_errors(tmp_path):
    with pytest.raises(InputError, match="TIDELAKE_CONFIG is not set"):
        load_changefeeds({})
    path = str(write_changefeed(tmp_path, "main"))
    with pytest.raises(InputError, match="changefeed id 'main' is used by both"):
        load_changefeeds({"TIDELAKE_CONFIG": os.pathsep.join([path, path])})
    with pytest.raises(InputError, match="cannot read config"):
        load_changefeeds({"TIDELAKE_CONFIG": str(tmp_path / "absent.toml")})
