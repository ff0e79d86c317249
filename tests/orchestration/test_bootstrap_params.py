"""tidelake_bootstrap's trigger form, without Airflow: params become a bootstrap job spec, and a
bad value fails with the param's name."""

from __future__ import annotations

import jsonschema
import pytest

from tidelake import tso
from tidelake.errors import InputError
from tidelake.orchestration.job_spec import BootstrapJob, from_json, to_json
from tidelake.orchestration.params import bootstrap_job, bootstrap_param_schemas

NOW = tso.compose(1_790_000_000_000, 0)


def test_defaults_bootstrap_every_filtered_table_now_and_satisfy_their_schema():
    schemas = bootstrap_param_schemas()
    defaults = {name: schema["default"] for name, schema in schemas.items()}
    for name, schema in schemas.items():
        body = {k: v for k, v in schema.items() if k not in ("default", "title", "description")}
        jsonschema.validate(schema["default"], body)
    assert bootstrap_job("/etc/cf.toml", defaults) == BootstrapJob("/etc/cf.toml", (), None)


def test_tables_and_ts_become_the_job_spec():
    job = bootstrap_job("cf.toml", {"tables": ["shop.orders", " shop.new ", "shop.orders"], "at_ts": NOW})
    assert job == BootstrapJob("cf.toml", ("shop.orders", "shop.new"), NOW)
    assert from_json(to_json(job), "bootstrap") == job


@pytest.mark.parametrize("params, message", [
    ({"tables": ["orders"]}, "param 'tables': 'orders' is not a db.table name"),
    ({"tables": "shop.orders"}, "param 'tables': expected a list"),
    ({"at_ts": 1_700_000_000}, "param 'at_ts': 1700000000 is not a TSO"),
    ({"at_ts": -3}, "param 'at_ts': expected a TSO"),
])
def test_bad_params_name_the_param(params, message):
    with pytest.raises(InputError, match=message):
        bootstrap_job("cf.toml", params)


def test_the_form_refuses_what_the_job_spec_refuses():
    schema = bootstrap_param_schemas()["tables"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(["orders"], {k: v for k, v in schema.items() if k in ("type", "items")})
