"""Where an object-store lake's endpoint, credentials and options come from, for both engines.

delta-rs (the puller, bootstrap's control tables, status, retention) takes `storage_options`;
Spark's s3a connector takes Hadoop confs (tidelake.apply.s3a). Both are derived from one set of
options so the two engines always reach the same bucket with the same credentials:

1. the standard AWS variables of the process (`AWS_ENDPOINT_URL`, `AWS_REGION`, ...), then
2. the changefeed config's `[lake.storage_options]`, which override them key by key.

Concurrent commits: several puller shards append to one changelog. delta-rs 1.x commits a log
entry with a conditional PUT (`If-None-Match: *`, object_store `PutMode::Create`), so of two
commits of one version exactly one lands and the other retries on the next version; it no longer
supports a DynamoDB lock (delta-rs discussion #4482). `conditional_put = "etag"` is set explicitly
for s3 lakes so the requirement is visible: the store must answer a second create of an existing
key with 412 (AWS S3 since 2024-11, MinIO, R2, moto's server; docs/stack.md §16).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlparse

S3_SCHEMES = ("s3", "s3a")
# The AWS variables read from the environment, in the names delta-rs (object_store) also reads.
ENV_KEYS = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ALLOW_HTTP",
)
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
    options = {key: env[key] for key in ENV_KEYS if env.get(key)}
    options.update(configured)
    endpoint = option(options, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT", "ENDPOINT_URL", "ENDPOINT")
    if endpoint and endpoint.startswith("http://") and option(options, "AWS_ALLOW_HTTP", "ALLOW_HTTP") is None:
        options["AWS_ALLOW_HTTP"] = "true"
    if option(options, "AWS_CONDITIONAL_PUT", CONDITIONAL_PUT) is None:
        options[CONDITIONAL_PUT] = "etag"
    return options


def option(options: Mapping[str, str], *names: str) -> str | None:
    """The first of `names` present in `options`, matched case-insensitively as delta-rs does."""
    lowered = {key.lower(): value for key, value in options.items()}
    for name in names:
        if lowered.get(name.lower()):
            return lowered[name.lower()]
    return None


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def store_error(exc: BaseException) -> str:
    """One line out of delta-rs's multi-line object-store error chain (each cause on its own line
    behind an arrow), keeping every cause: the innermost says what the server answered."""
    lines = [_ANSI.sub("", line).strip().lstrip("↳").strip() for line in str(exc).splitlines()]
    return ": ".join(line for line in lines if line) or repr(exc)
