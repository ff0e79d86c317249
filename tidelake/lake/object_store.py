"""Where an object-store lake's endpoint, credentials and options come from, shared by every stage
and both engines: the process's AWS variables, overridden per setting by `[lake.storage_options]`,
so delta-rs and Spark's s3a always reach the same bucket with the same credentials. Several writers commit with
conditional PUTs, which the store must honour (docs/stack.md#object-store-the-lake-on-s3).
Which store a root names is read here too: an S3 API store (`is_s3`) or a local directory
(`local_root`), the one reading of a lake or table root as a local path.
Owner: the lake's configuration; every stage and both engines read it here.

More: docs/internals.md#object_store.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlparse

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


def local_root(root: str) -> Path | None:
    """The directory a lake or table root names on the local filesystem: a plain path as given, a
    file:// URI's path percent-decoded (delta-rs' table_uri escapes spaces and non-ASCII names);
    None for an object store (any other scheme)."""
    parsed = urlparse(root)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    return Path(root) if parsed.scheme == "" else None


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
