"""Storage options of a lake: the AWS environment, overridden by [lake.storage_options]; a root's
local directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidelake.lake.layout import LakeLayout
from tidelake.lake.object_store import lake_storage_options, local_root, store_error


def test_an_s3_lake_takes_the_aws_environment_and_the_config_overrides_it():
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "env-key",
           "AWS_SECRET_ACCESS_KEY": "env-secret", "HOME": "/root"}
    options = lake_storage_options("s3://bucket/lake", {"AWS_REGION": "us-east-1"}, environ=env)
    assert options == {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "us-east-1",
                       "AWS_ACCESS_KEY_ID": "env-key", "AWS_SECRET_ACCESS_KEY": "env-secret",
                       "AWS_ALLOW_HTTP": "true", "conditional_put": "etag"}


def test_explicit_choices_are_kept_whatever_their_case():
    options = lake_storage_options("s3a://bucket/lake", {"aws_endpoint_url": "http://minio:9000",
                                                         "aws_allow_http": "false", "aws_conditional_put": "dynamo:t"},
                                   environ={})
    assert options == {"aws_endpoint_url": "http://minio:9000", "aws_allow_http": "false",
                       "aws_conditional_put": "dynamo:t"}


def test_https_endpoints_and_plain_aws_add_no_http_permission():
    assert lake_storage_options("s3://b/l", {}, environ={}) == {"conditional_put": "etag"}
    assert "AWS_ALLOW_HTTP" not in lake_storage_options("s3://b/l", {"AWS_ENDPOINT_URL": "https://s3.example"},
                                                        environ={})


def test_local_lakes_ignore_the_aws_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    assert LakeLayout(str(tmp_path)).storage_options is None
    assert lake_storage_options(str(tmp_path), {"x": "y"}) == {"x": "y"}


def test_a_layout_given_only_an_s3_root_reads_the_environment(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    assert LakeLayout("s3://bucket/lake").storage_options["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9000"


def test_a_store_error_chain_becomes_one_line():
    exc = OSError("Generic S3 error\n          \x1b[31m↳\x1b[0m Error performing list request\n"
                  "           \x1b[31m↳\x1b[0m 404 Not Found")
    assert store_error(exc) == "Generic S3 error: Error performing list request: 404 Not Found"


def test_a_config_alias_drops_the_environment_variable_of_the_same_setting():
    env = {"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL_S3": "https://s3.env.example", "AWS_ENDPOINT_URL": "https://other"}
    options = lake_storage_options("s3://b/l", {"region": "us-east-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000"},
                                   environ=env)
    assert options == {"region": "us-east-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
                       "AWS_ALLOW_HTTP": "true", "conditional_put": "etag"}


def test_the_environment_gives_one_alias_per_setting():
    options = lake_storage_options("s3://b/l", {}, environ={"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "x",
                                                            "AWS_ENDPOINT_URL_S3": "https://a", "AWS_ENDPOINT_URL": "https://b"})
    assert options == {"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL_S3": "https://a", "conditional_put": "etag"}


def test_configured_credentials_replace_all_environment_credentials():
    env = {"AWS_ACCESS_KEY_ID": "env-key", "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_SESSION_TOKEN": "env-token"}
    options = lake_storage_options("s3://b/l", {"access_key_id": "k", "secret_access_key": "s"}, environ=env)
    assert options == {"access_key_id": "k", "secret_access_key": "s", "conditional_put": "etag"}


@pytest.mark.parametrize("root, directory", [
    ("/data/lake", Path("/data/lake")),
    ("data/my lake", Path("data/my lake")),  # a plain path is taken as written, never decoded
    ("data/a%20b", Path("data/a%20b")),
    ("file:///data/lake", Path("/data/lake")),
    ("file:///data/a%20b%25c/", Path("/data/a b%c")),  # a file URI escapes its path (delta-rs' table_uri)
    ("file:///tmp/my%20db/%E8%A1%A8%201/", Path("/tmp/my db/表 1")),
    ("s3://bucket/lake", None),
    ("s3a://bucket/lake", None),
    ("gs://bucket/lake", None),
])
def test_a_root_names_a_local_directory_or_none_for_an_object_store(root, directory):
    assert local_root(root) == directory
