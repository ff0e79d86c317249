"""The lake's object-store endpoint, region and credentials from an Airflow `aws` connection, read
as the amazon provider defines that type (apache/airflow providers/amazon/docs/connections/aws.rst):
login and password are the access key id and secret (or the extras `aws_access_key_id` and
`aws_secret_access_key`), extras `aws_session_token`, `region_name`, `endpoint_url` and
`service_config.s3.endpoint_url` (which wins for S3). The amazon provider need not be installed:
the fields are read here. Roles and profiles are refused: delta-rs and s3a get static settings.
A bad field is one InputError line naming the connection id and the field.
Owner: the lake's connection in Airflow (tidelake.orchestration.airflow.hooks.aws_lake): the tasks'
environment, the storage options of the triggerer, the api-server and the DAG parse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from tidelake.config import LakeConfig
from tidelake.errors import InputError
from tidelake.lake.object_store import CREDENTIALS, ENV_KEYS, setting_of

CONN_TYPE = "aws"
# Extras that make boto3 fetch credentials itself: neither lake engine can follow them.
UNSUPPORTED_EXTRAS = ("role_arn", "assume_role_method", "profile_name")
SECRET_SETTINGS = ("secret_access_key", "session_token")
# The variable each setting is set as: the names every AWS SDK, delta-rs and s3a read.
VARIABLES = {"endpoint": "AWS_ENDPOINT_URL", "region": "AWS_REGION", "access_key_id": "AWS_ACCESS_KEY_ID",
             "secret_access_key": "AWS_SECRET_ACCESS_KEY", "session_token": "AWS_SESSION_TOKEN"}


@dataclass(frozen=True)
class AwsLakeSettings:
    """The settings one `aws` connection gives the lake (setting name of object_store.ALIASES -> value)."""

    conn_id: str
    values: dict[str, str]

    def __repr__(self) -> str:
        return f"AwsLakeSettings(conn_id={self.conn_id!r}, settings={sorted(self.values)})"

    def secrets(self) -> list[str]:
        return [self.values[name] for name in SECRET_SETTINGS if name in self.values]

    def environment(self) -> dict[str, str | None]:
        """The AWS variables both engines read, as the lake of a task process gets them: each one
        the connection gives is set, its other spellings removed (None), and with keys in the
        connection every credential variable is replaced, so no token of the worker mixes in."""
        given = set(self.values)
        if given & set(CREDENTIALS):
            given |= set(CREDENTIALS)
        env: dict[str, str | None] = {}
        for setting in sorted(given):
            for name in ENV_KEYS[setting]:
                env[name] = None
            if setting in self.values:
                env[VARIABLES[setting]] = self.values[setting]
        return env

    def lake(self, lake: LakeConfig) -> LakeConfig:
        """`lake` reading the store as a task with this connection does, its settings given as
        [lake.storage_options] (which win over the process's AWS variables per setting, and with
        keys take no credential from them), for a process serving many changefeeds at once, whose
        environment must not change: the triggerer, the api-server, the DAG parse."""
        options = {**lake.storage_options, **{VARIABLES[setting]: value for setting, value in self.values.items()}}
        return replace(lake, storage_options=options, aws_conn_id=None)

    def summary(self) -> dict[str, Any]:
        """For a log line or XCom: where the store is and whether keys are set, never a secret."""
        return {"aws_conn_id": self.conn_id, "endpoint": self.values.get("endpoint"),
                "region": self.values.get("region"), "keys": "access_key_id" in self.values}


def not_defined(conn_id: str) -> InputError:
    """The one line for a connection Airflow does not know, whichever process asked."""
    return InputError(f"{CONN_TYPE} connection {conn_id!r}: not defined (add it in Admin > Connections, "
                      "an AIRFLOW_CONN_* variable or the secrets backend)")


def aws_lake_settings(conn_id: str, conn_type: str | None, login: str | None, password: str | None,
                      extra: Mapping[str, Any], storage_options: Mapping[str, str]) -> AwsLakeSettings:
    """The lake settings of connection `conn_id`; `storage_options` ([lake.storage_options]) must not
    set what the connection gives."""
    where = f"{CONN_TYPE} connection {conn_id!r}"
    if conn_type != CONN_TYPE:
        raise InputError(f"{where}: conn_type: is {conn_type!r}, expected {CONN_TYPE!r}")
    for name in UNSUPPORTED_EXTRAS:
        if extra.get(name):
            raise InputError(f"{where}: {name}: not supported for the lake (delta-rs and Spark's s3a get the "
                             "endpoint and static keys); give the keys as login and password")
    values: dict[str, str] = {}
    fields = {"access_key_id": ("login", login or extra.get("aws_access_key_id")),
              "secret_access_key": ("password", password or extra.get("aws_secret_access_key")),
              "session_token": ("aws_session_token", extra.get("aws_session_token")),
              "region": ("region_name", extra.get("region_name")),
              "endpoint": ("endpoint_url", _s3_endpoint(where, extra))}
    for setting, (field, value) in fields.items():
        if value is None or value == "":
            continue
        if not isinstance(value, str) or "\x00" in value:
            raise InputError(f"{where}: {field}: expected a string, got {type(value).__name__}")
        values[setting] = value.strip()
    if ("access_key_id" in values) != ("secret_access_key" in values):
        missing = "password" if "access_key_id" in values else "login"
        raise InputError(f"{where}: {missing}: the access key id (login) and secret (password) go together")
    if "session_token" in values and "access_key_id" not in values:
        raise InputError(f"{where}: aws_session_token: given without the access key id and secret")
    endpoint = values.get("endpoint")
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise InputError(f"{where}: endpoint_url: expected an http:// or https:// URL, got {endpoint!r}")
    for setting in values:
        if setting_of(storage_options, setting) is not None:
            raise InputError(f"{where}: [lake.storage_options] also sets the {setting}: keep it in one place "
                             "(the connection, as [lake].aws_conn_id names it)")
    return AwsLakeSettings(conn_id, values)


def _s3_endpoint(where: str, extra: Mapping[str, Any]) -> Any:
    service_config = extra.get("service_config")
    if service_config is None:
        return extra.get("endpoint_url")
    if not isinstance(service_config, Mapping) or not isinstance(service_config.get("s3", {}), Mapping):
        raise InputError(f"{where}: service_config: expected a JSON object of services, got {service_config!r}")
    s3 = service_config.get("s3", {})
    return s3["endpoint_url"] if "endpoint_url" in s3 else extra.get("endpoint_url")
