"""Per-connection CDC feature gates, as TiKV derives them (docs/wire.md#connection-setup).

Two sources: the `features` gRPC metadata of EventFeedV2 (explicit, unknown names fail the
stream with UNIMPLEMENTED), and `header.ticdc_version` of the first request (default gates).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FEATURES_KEY = "features"
STREAM_MULTIPLEXING = "stream-multiplexing"
KNOWN_FEATURES = (STREAM_MULTIPLEXING,)

BATCH_RESOLVED_TS_SINCE = (4, 0, 8)
VALIDATE_CLUSTER_ID_SINCE = (5, 3, 0)

# semver 2.0 (TiKV parses with the `semver` crate; anything else counts as 0.0.0).
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)


class UnknownFeatures(Exception):
    """The V2 `features` header named features this server does not know."""


def parse_features(value: str) -> tuple[str, ...]:
    """Split the comma list; every unknown name (an empty one included) is an error, as in TiKV."""
    known, unknown = [], []
    for feature in (part.strip() for part in value.split(",")):
        (known if feature in KNOWN_FEATURES else unknown).append(feature)
    if unknown:
        raise UnknownFeatures(",".join(unknown))
    return tuple(known)


def features_from_metadata(metadata: tuple[tuple[str, str | bytes], ...] | None) -> tuple[str, ...]:
    features: tuple[str, ...] = ()
    for key, value in metadata or ():
        if key == FEATURES_KEY:
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            features = parse_features(text)
    return features


def _at_least(version: str, since: tuple[int, int, int]) -> bool:
    """semver `version >= since` (a pre-release sorts before its release)."""
    match = _SEMVER.match(version)
    if match is None:
        return False
    core = (int(match.group(1)), int(match.group(2)), int(match.group(3)))
    if core != since:
        return core > since
    return match.group(4) is None


@dataclass(frozen=True)
class FeatureGate:
    batch_resolved_ts: bool
    validate_cluster_id: bool
    stream_multiplexing: bool

    @classmethod
    def for_connection(cls, ticdc_version: str, explicit: tuple[str, ...]) -> FeatureGate:
        return cls(
            batch_resolved_ts=_at_least(ticdc_version, BATCH_RESOLVED_TS_SINCE),
            validate_cluster_id=_at_least(ticdc_version, VALIDATE_CLUSTER_ID_SINCE),
            stream_multiplexing=STREAM_MULTIPLEXING in explicit,
        )
