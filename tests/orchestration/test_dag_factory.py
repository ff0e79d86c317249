"""changefeed_dags: a user's DAG file is one call, its config from a file, a connection's extras, the
files TIDELAKE_CONFIG names or an Airflow Variable; an unknown changefeed breaks only its own file."""

from __future__ import annotations

import pytest
from airflow_test_env import write_changefeed

from tidelake.errors import InputError

KINDS = ("puller", "merge", "maintenance", "bootstrap")


def dag_file(folder, name: str, call: str):
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(f"from tidelake.orchestration.airflow.dag_factory import changefeed_dags\n\n{call}\n")
    return path


def test_a_dag_file_of_one_call_builds_the_changefeeds_dags_and_a_bad_one_fails_alone(tmp_path, monkeypatch):
    from airflow.models import DagBag

    monkeypatch.delenv("TIDELAKE_CONFIG", raising=False)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    config = write_changefeed(tmp_path, "orders", shards=2)
    dags = tmp_path / "dags"
    dag_file(dags, "orders", f"changefeed_dags('orders', config_path={str(config)!r})")
    bad = dag_file(dags, "typo", "changefeed_dags('ordres')")
    bag = DagBag(dag_folder=str(dags))
    assert sorted(bag.dag_ids) == sorted(f"tidelake_{kind}__orders" for kind in KINDS)
    assert bag.dags["tidelake_puller__orders"].tasks[0].expand_input.value["shard"] == ["0/2", "1/2"]
    assert bag.dags["tidelake_merge__orders"].get_task("publish").upstream_task_ids == {"merge"}
    assert all(dag.fileloc == str(dags / "orders.py") for dag in bag.dags.values())
    assert list(bag.import_errors) == [str(bad)]
    assert bag.import_errors[str(bad)].strip().splitlines()[-1] == (
        "tidelake.errors.InputError: changefeed 'ordres' not found: looked in TIDELAKE_CONFIG (not set) "
        "and Airflow Variable 'tidelake_config__ordres' (not set)")


def test_the_callers_globals_get_every_dag_by_id(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    config = write_changefeed(tmp_path, "orders")
    namespace: dict = {}
    exec("from tidelake.orchestration.airflow.dag_factory import changefeed_dags\n"
         f"built = changefeed_dags('orders', config_path={str(config)!r})", namespace)
    assert {name for name in namespace if name.startswith("tidelake_")} == {f"tidelake_{k}__orders" for k in KINDS}
    assert all(namespace[dag_id] is dag for dag_id, dag in namespace["built"].items())


def test_an_airflow_variable_names_the_config_file(tmp_path, monkeypatch):
    from tidelake.orchestration.airflow.dag_factory import find_changefeed

    monkeypatch.delenv("TIDELAKE_CONFIG", raising=False)
    config = write_changefeed(tmp_path, "orders")
    monkeypatch.setenv("AIRFLOW_VAR_TIDELAKE_CONFIG__ORDERS", str(config))  # Airflow's env secrets backend
    feed = find_changefeed("orders")
    assert (feed.config_path, feed.dag_id("merge")) == (str(config), "tidelake_merge__orders")
    monkeypatch.setenv("AIRFLOW_VAR_TIDELAKE_CONFIG__CRM", str(config))
    with pytest.raises(InputError, match=r"^changefeed 'crm' not found: Airflow Variable 'tidelake_config__crm' "
                                         rf"names {config}, whose \[changefeed\].id is 'orders'$"):
        find_changefeed("crm")
    monkeypatch.setenv("AIRFLOW_VAR_TIDELAKE_CONFIG__CRM", str(tmp_path / "crm.toml"))
    with pytest.raises(InputError, match=r"^changefeed 'crm': Airflow Variable 'tidelake_config__crm': .*crm.toml: "
                                         "cannot read config"):
        find_changefeed("crm")


def test_an_airflow_variable_holds_the_configs_text(tmp_path, monkeypatch):
    """A Variable of several lines is the TOML text, written to its own file on the parsing host;
    `config_variable` names any Variable; a bad or missing one is one line naming it."""
    from tidelake.orchestration.airflow.dag_factory import find_changefeed
    from tidelake.orchestration.config_text import config_file, variable_config_file
    from tidelake.orchestration.config_record import config_record

    monkeypatch.delenv("TIDELAKE_CONFIG", raising=False)
    text = write_changefeed(tmp_path, "orders").read_text()
    written = variable_config_file("tidelake_config__orders")
    written.unlink(missing_ok=True)
    monkeypatch.setenv("AIRFLOW_VAR_TIDELAKE_CONFIG__ORDERS", text)
    feed = find_changefeed("orders")
    assert (feed.config_path, feed.config_variable, feed.dag_id("merge")) == (
        str(written), "tidelake_config__orders", "tidelake_merge__orders")
    assert written.read_text() == text and written != config_file("tidelake_config__orders")
    assert config_record(feed) == {"changefeed_id": "orders", "config_variable": "tidelake_config__orders"}
    monkeypatch.setenv("AIRFLOW_VAR_TIDELAKE_TEST_FEEDS_ORDERS", text)
    assert find_changefeed("orders", config_variable="tidelake_test_feeds_orders").config_path == str(
        variable_config_file("tidelake_test_feeds_orders"))
    monkeypatch.setenv("AIRFLOW_VAR_TIDELAKE_TEST_FEEDS_ORDERS", "[changefeed]\nid = 'orders'\n")
    with pytest.raises(InputError) as err:
        find_changefeed("orders", config_variable="tidelake_test_feeds_orders")
    assert str(err.value).startswith("changefeed 'orders': Airflow Variable 'tidelake_test_feeds_orders': ")
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match=r"^changefeed 'orders': config_variable: Airflow Variable "
                                         r"'tidelake_test_absent' is not set$"):
        find_changefeed("orders", config_variable="tidelake_test_absent")


def test_tidelake_config_keeps_its_dag_ids_and_lists_its_changefeeds_when_the_name_is_not_there(tmp_path, monkeypatch):
    from tidelake.orchestration.airflow.dag_factory import find_changefeed

    monkeypatch.setenv("TIDELAKE_CONFIG", str(write_changefeed(tmp_path, "main")))
    assert find_changefeed("main").dag_id("merge") == "tidelake_merge"
    with pytest.raises(InputError, match=r"^changefeed 'crm' not found: looked in TIDELAKE_CONFIG \(changefeeds "
                                         r"'main'\) and Airflow Variable 'tidelake_config__crm' \(not set\)$"):
        find_changefeed("crm")


def define(monkeypatch, conn_id: str, fields: dict) -> None:
    import json

    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def test_a_connections_extras_hold_the_config(tmp_path, monkeypatch):
    """config_conn_id: the TOML text in the connection's extra `changefeed_toml`, written to a file on
    the parsing host for the tasks; DAG ids carry the changefeed id and the tasks carry the conn id."""
    from airflow.models import DagBag

    from tidelake.orchestration.config_text import config_file

    monkeypatch.delenv("TIDELAKE_CONFIG", raising=False)
    text = write_changefeed(tmp_path, "orders", shards=2).read_text()
    define(monkeypatch, "tidelake_test_orders_cfg", {"conn_type": "generic", "extra": {"changefeed_toml": text}})
    config_file("tidelake_test_orders_cfg").unlink(missing_ok=True)
    dags = tmp_path / "dags"
    dag_file(dags, "orders", "changefeed_dags('orders', config_conn_id='tidelake_test_orders_cfg')")
    bad = dag_file(dags, "typo", "changefeed_dags('ordres', config_conn_id='tidelake_test_orders_cfg')")
    bag = DagBag(dag_folder=str(dags))
    assert sorted(bag.dag_ids) == sorted(f"tidelake_{kind}__orders" for kind in KINDS)
    written = config_file("tidelake_test_orders_cfg")
    assert written.read_text() == text
    pull = bag.dags["tidelake_puller__orders"].get_task("pull")
    assert pull.partial_kwargs["config_path"] == str(written)
    assert pull.partial_kwargs["config_conn_id"] == "tidelake_test_orders_cfg"
    assert bag.dags["tidelake_merge__orders"].get_task("merge").partial_kwargs["config_conn_id"] == (
        "tidelake_test_orders_cfg")
    assert list(bag.import_errors) == [str(bad)]
    assert bag.import_errors[str(bad)].strip().splitlines()[-1] == (
        f"tidelake.errors.InputError: changefeed 'ordres' not found: connection 'tidelake_test_orders_cfg' names "
        f"{written}, whose [changefeed].id is 'orders'")


@pytest.mark.parametrize("fields, message", [
    (None, "changefeed 'orders': connection 'tidelake_test_cfg': not defined"),
    ({"conn_type": "generic", "extra": {"toml": "x"}},
     "changefeed 'orders': connection 'tidelake_test_cfg': extra changefeed_toml: missing or empty"),
    ({"conn_type": "generic", "extra": {"changefeed_toml": "[changefeed]\nid = 'orders'\n"}},
     "changefeed 'orders': connection 'tidelake_test_cfg': extra changefeed_toml: "),
])
def test_a_missing_connection_or_field_is_one_line_naming_them(monkeypatch, fields, message):
    from tidelake.orchestration.airflow.dag_factory import find_changefeed

    monkeypatch.delenv("AIRFLOW_CONN_TIDELAKE_TEST_CFG", raising=False)
    if fields is not None:
        define(monkeypatch, "tidelake_test_cfg", fields)
    with pytest.raises(InputError) as err:
        find_changefeed("orders", config_conn_id="tidelake_test_cfg")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_task_writes_the_connections_config_again_or_fails_in_one_line(tmp_path, monkeypatch):
    """A worker that never parsed the DAG gets the file from the connection; a connection removed
    since the parse fails the task without retries, naming it."""
    from airflow.sdk.exceptions import AirflowFailException

    from tidelake.orchestration.airflow.hooks.config_source import refresh_config
    from tidelake.orchestration.airflow.puller_operator import PullerOperator
    from tidelake.orchestration.config_text import config_file

    text = write_changefeed(tmp_path, "orders").read_text()
    written = config_file("tidelake_test_task_cfg")
    written.unlink(missing_ok=True)
    task = PullerOperator(task_id="pull", config_path=str(written), shard="0/1", max_run_seconds=60,
                          config_conn_id="tidelake_test_task_cfg")
    with pytest.raises(AirflowFailException) as err:
        task.execute(context={})
    assert str(err.value).startswith("connection 'tidelake_test_task_cfg': not defined")
    define(monkeypatch, "tidelake_test_task_cfg", {"conn_type": "generic", "extra": {"changefeed_toml": text}})
    refresh_config("tidelake_test_task_cfg")
    assert written.read_text() == text
