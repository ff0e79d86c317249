"""Property tests for the changefeed config loader: any TOML document, or any file, is either a
valid config or one InputError line naming the file (and the key when one is to blame)."""

from __future__ import annotations

import copy
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from fuzz_support import decodes_or_rejects
from hypothesis import example, given
from hypothesis import strategies as st

from tidelake.config import load_config, parse_config

BASE = {"changefeed": {"id": "cf1"}, "upstream": {"pd": ["127.0.0.1:2379"]}, "lake": {"root": "lake"}}
KEYS = {
    "changefeed": ["id", "start_ts"],
    "upstream": ["pd", "gc_ttl", "tls"],
    "filter": ["rules", "case_sensitive"],
    "lake": ["root", "commit_bucket", "storage_options"],
    "puller": ["memory_quota", "flush_interval", "flush_size", "shards"],
    "merge": ["syncpoint_interval", "parallel_jobs"],
    "": ["changefeed", "upstream", "lake", "extra"],
}
LIKELY = ["1h", "0s", "500ms", "1.5h30m", "64MiB", "1e3", "-1s", "0", "5 GB", "*.*", "!test.*", "/[/", "`a`.b",
          "127.0.0.1:2379", "a\x00b", "9" * 400, "9" * 400 + "s"]

scalars = (st.text(max_size=12) | st.sampled_from(LIKELY) | st.integers(-(1 << 70), 1 << 70) | st.floats()
           | st.booleans() | st.dates() | st.times() | st.datetimes(timezones=st.none() | st.just(UTC)))
toml_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
edits = st.lists(st.tuples(st.sampled_from([(s, k) for s, ks in KEYS.items() for k in ks]), toml_values), max_size=4)


def edited(changes) -> dict:
    doc = copy.deepcopy(BASE)
    for (section, key), value in changes:
        target = doc if not section else doc.setdefault(section, {})
        if isinstance(target, dict):
            target[key] = value
    return doc


@given(edits)
# before the fixes: OverflowError (inf seconds/bytes), ValueError (NUL in a path), or accepted
@example([(("lake", "commit_bucket"), "9" * 400 + "s")])
@example([(("merge", "syncpoint_interval"), "9" * 400 + "s")])
@example([(("puller", "memory_quota"), "9" * 400)])
@example([(("lake", "root"), "a\x00b")])
@example([(("changefeed", "start_ts"), 1 << 64)])
def test_parse_config_on_edited_documents(changes):
    config = decodes_or_rejects(parse_config, edited(changes), "cf.toml", Path("/nonexistent"), where="^cf.toml: ")
    if config is not None:
        assert config.start_ts is None or 0 < config.start_ts < 1 << 64
        assert config.puller.flush_interval_s < float("inf") and config.upstream.gc_ttl_s < float("inf")


@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
# before the fix: ValueError from tomllib (an integer of more than 4300 digits)
@example(b"[changefeed]\nid = 'a'\nstart_ts = " + b"9" * 5000)
def test_load_config_on_arbitrary_files(data):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "cf.toml"
        path.write_bytes(data)
        decodes_or_rejects(load_config, path, where=f"^{path}: ")


@given(st.dates() | st.times() | st.datetimes(timezones=st.none() | st.just(UTC)))
def test_start_ts_dates_and_times(value):
    """Only a datetime between 1970 and what a u64 TSO holds is a start_ts; dates and times are not."""
    doc = edited([(("changefeed", "start_ts"), value)])
    config = decodes_or_rejects(parse_config, doc, "cf.toml", where=r"^cf.toml: \[changefeed\]\.start_ts: ")
    if config is not None:
        assert isinstance(value, datetime) and 0 < config.start_ts < 1 << 64
