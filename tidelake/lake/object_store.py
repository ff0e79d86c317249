"""Where an object-store lake's endpoint, credentials and options come from, for both engines.

delta-rs (the puller, bootstrap's control tables, status, retention) takes `storage_options`;
Spark's s3a connector takes Hadoop confs (tidelake.spark.s3a). Both are derived from one set of
options so the two engines always reach the same bucket with the same credentials:

1. the standard AWS variables of the process (`AWS_ENDPOINT_URL`, `AWS_REGION`, ...), then
2. the changefeed config's `[lake.storage_options]`, which override them per setting: a key of
   the config drops every environment variable naming the same setting under another alias
   (`region` drops `AWS_REGION`), and credentials are one set: if the config names any
   credential key, no credential comes from the environment (no config key with an env token).

Concurrent commits: several puller shards append to one changelog. delta-rs 1.x commits a log
entry with a conditional PUT (`If-None-Match: *`, object_store `PutMode::Create`), so of two
commits of one version exactly one lands and the other retries on the next version; it no longer
supports a DynamoDB lock (delta-rs discussion #4482). `conditional_put = "etag"` is set explicitly
for s3 lakes so the requirement is visible: the store must answer a second create of an existing
key with 412 (AWS S3 since 2024-08, when it added `If-None-Match` on PutObject; MinIO, R2,
moto's server; docs/stack.md#object-store-the-lake-on-s3).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlparse

S3_SCHEMES = ("s3", "s3a")
# Every setting both engines read, with the option names delta-rs (object_store's
# AmazonS3ConfigKey) accepts for it, most specific first; matched case-insensitively.
ALIASES: dict[str, tuple[str, ...]] = {
    "endpoint": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT", "ENDPOINT_URL", "ENDPOINT"),
    "region": ("AWS_REGION", "AWS_DEFAULT_REGION", "REGION"),
    "access_key_id": ("AWS_ACCESS_KEY_ID", "ACCESS_KEY_ID"),
    "secret_access_key": ("AWS_SECRET_ACCESS_KEY", "SECRET_ACCESS_KEY"),
    "session_token": ("AWS_SESSION_TOKEN", "SESSION_TOKEN", "TOKEN"),
    "allow_http": ("AWS_ALLOW_HTTP", "ALLOW_HTTP"),
    "conditional_put": ("AWS_CONDITIONAL_PUT", "conditional_put"),
    "virtual_hosted_style_request": ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "VIRTUAL_HOSTED_STYLE_REQUEST"),
}
CREDENTIALS = ("access_key_id", "secret_access_key", "session_token")
# The AWS variables read from the environment (the names delta-rs also reads), by setting.
ENV_KEYS: dict[str, tuple[str, ...]] = {
    "endpoint": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "access_key_id": ("AWS_ACCESS_KEY_ID",),
    "secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
    "session_token": ("AWS_SESSION_TOKEN",),
    "allow_http": ("AWS_ALLOW_HTTP",),
}
CONDITIONAL_PUT = "conditional_put"


def is_s3(root: str) -> bool:
    """Whether a lake root is on an S3 API store (s3:// or s3a://; both engines accept either)."""
    return urlparse(root).scheme in S3_SCHEMES


def lake_storage_options(root: str, configured: Mapping[str, str] | None = None,
                         environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """The delta-rs storage options of a lake: for an s3 root the AWS environment overridden by
    the configured options, with plain-HTTP endpoints allowed and conditional put named; for any
    other root the configured options as given (None when there are none)."""
    configured = dict(configured or {})
    if not is_s3(root):
        return configured or None
    env = os.environ if environ is None else environ
    named = {setting for setting in ALIASES if setting_of(configured, setting) is not None}
    if named & set(CREDENTIALS):
        named |= set(CREDENTIALS)
    options = {}
    for setting, keys in ENV_KEYS.items():
        present = [key for key in keys if env.get(key)]
        if setting not in named and present:
            options[present[0]] = env[present[0]]
    options.update(configured)
    endpoint = setting_of(options, "endpoint")
    if endpoint and endpoint.startswith("http://") and setting_of(options, "allow_http") is None:
        options["AWS_ALLOW_HTTP"] = "true"
    if setting_of(options, "conditional_put") is None:
        options[CONDITIONAL_PUT] = "etag"
    return options


def setting_of(options: Mapping[str, str], setting: str) -> str | None:
    """The value `options` give a setting of ALIASES under its most specific alias present,
    matched case-insensitively as delta-rs does."""
    lowered = {key.lower(): value for key, value in options.items()}
    for name in ALIASES[setting]:
        if lowered.get(name.lower()):
            return lowered[name.lower()]
    return None


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def store_error(exc: BaseException) -> str:
    """One line out of delta-rs's multi-line object-store error chain (each cause on its own line
    behind an arrow), keeping every cause: the innermost says what the server answered."""
    lines = [_ANSI.sub("", line).strip().lstrip("↳").strip() for line in str(exc).splitlines()]
    return ": ".join(line for line in lines if line) or repr(exc)
