"""Trigger-form validation of tidelake_merge, without Airflow: every bad value fails with the
param's name, and good values become the MergeRequest the plan task acts on."""

from __future__ import annotations

from datetime import datetime, timezone

import jsonschema
import pytest

from tidelake import tso
from tidelake.errors import InputError
from tidelake.orchestration.params import (
    DEFAULT_MERGE_GROUPS,
    merge_param_schemas,
    parse_merge_request,
)

KNOWN = ["shop.orders", "shop.customers", "crm.leads"]


def defaults() -> dict:
    return {name: schema["default"] for name, schema in merge_param_schemas(KNOWN).items()}


def test_defaults_merge_everything_to_the_latest():
    request = parse_merge_request(defaults(), KNOWN)
    assert request.tables is None
    assert request.until_ts is None
    assert request.dry_run is False
    assert request.groups == DEFAULT_MERGE_GROUPS


def test_every_default_satisfies_its_own_schema():
    # Airflow refuses a scheduled DAG whose param defaults do not validate.
    for name, schema in merge_param_schemas(KNOWN).items():
        body = {k: v for k, v in schema.items() if k not in ("default", "title", "section", "examples")}
        jsonschema.validate(schema["default"], body)


def test_known_tables_are_offered_as_choices_but_do_not_restrict_the_schema():
    schemas = merge_param_schemas(KNOWN)
    assert schemas["tables"]["examples"] == KNOWN
    assert "enum" not in schemas["tables"]["items"]
    assert "examples" not in merge_param_schemas([])["tables"]


def test_tables_are_checked_against_the_lake():
    request = parse_merge_request({**defaults(), "tables": ["shop.orders", "crm.leads", "shop.orders"]}, KNOWN)
    assert request.tables == ("shop.orders", "crm.leads")
    with pytest.raises(InputError, match=r"param 'tables': unknown table shop\.order \(replicated tables: crm\.leads"):
        parse_merge_request({**defaults(), "tables": ["shop.order"]}, KNOWN)
    with pytest.raises(InputError, match="param 'tables': expected a list"):
        parse_merge_request({**defaults(), "tables": [3]}, KNOWN)


def test_tables_given_as_a_comma_separated_string_from_the_cli():
    request = parse_merge_request({**defaults(), "tables": "shop.orders, crm.leads"}, KNOWN)
    assert request.tables == ("shop.orders", "crm.leads")


def test_until_time_caps_below_its_first_millisecond():
    when = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)
    request = parse_merge_request({**defaults(), "until_time": "2026-05-01T12:00:00Z"}, KNOWN)
    assert request.until_ts == tso.from_datetime(when) - 1
    assert tso.to_datetime(request.until_ts) < when
    offset = parse_merge_request({**defaults(), "until_time": "2026-05-01T14:00:00+02:00"}, KNOWN)
    assert offset.until_ts == request.until_ts
    with pytest.raises(InputError, match="param 'until_time': 'yesterday' is not an ISO date-time"):
        parse_merge_request({**defaults(), "until_time": "yesterday"}, KNOWN)


def test_until_ts_must_look_like_a_tso():
    ts = tso.from_datetime(datetime(2026, 5, 1, tzinfo=timezone.utc))
    assert parse_merge_request({**defaults(), "until_ts": ts}, KNOWN).until_ts == ts
    unix_seconds = 1_777_000_000
    with pytest.raises(InputError, match="param 'until_ts': 1777000000 is not a TSO .*1970-01-01"):
        parse_merge_request({**defaults(), "until_ts": unix_seconds}, KNOWN)
    with pytest.raises(InputError, match="param 'until_ts': expected a TSO"):
        parse_merge_request({**defaults(), "until_ts": "449412345678901234"}, KNOWN)


def test_until_ts_and_until_time_exclude_each_other():
    ts = tso.from_datetime(datetime(2026, 5, 1, tzinfo=timezone.utc))
    with pytest.raises(InputError, match="params 'until_ts' and 'until_time'"):
        parse_merge_request({**defaults(), "until_ts": ts, "until_time": "2026-05-01T00:00:00Z"}, KNOWN)


def test_dry_run_and_groups_are_typed():
    assert parse_merge_request({**defaults(), "dry_run": True}, KNOWN).dry_run is True
    with pytest.raises(InputError, match="param 'dry_run'"):
        parse_merge_request({**defaults(), "dry_run": "yes"}, KNOWN)
    with pytest.raises(InputError, match="param 'groups': expected an integer from 1 to 64, got 0"):
        parse_merge_request({**defaults(), "groups": 0}, KNOWN)


def test_a_rebuild_merges_only_its_table():
    request = parse_merge_request({**defaults(), "rebuild": " shop.orders "}, KNOWN)
    assert request.rebuild == "shop.orders" and request.tables == ("shop.orders",)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"rebuild": "shop.nope"}, "param 'rebuild': unknown table shop.nope"),
        ({"rebuild": ["shop.orders"]}, "param 'rebuild': expected one db.table name"),
        ({"rebuild": "shop.orders", "tables": ["crm.leads"]}, "params 'rebuild' and 'tables'"),
    ],
)
def test_bad_rebuild_params_name_the_param(params, message):
    with pytest.raises(InputError) as err:
        parse_merge_request({**defaults(), **params}, KNOWN)
    assert message in str(err.value)
