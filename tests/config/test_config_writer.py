"""The config writer's TOML reads back, through the users' loader, as the settings it was given."""

from __future__ import annotations

import pytest

from tidelake.config import load_config
from tidelake.config_writer import changefeed_document, to_toml, write_config
from tidelake.errors import InputError
from tidelake.lake.layout import LakeLayout


def test_every_section_round_trips_through_the_loader(tmp_path):
    doc = changefeed_document(
        "orders-feed", ["10.0.0.1:2379", "10.0.0.2:2379"], "s3://bucket/lake", rules=["shop.*", "!shop.tmp_*"],
        start_ts=450_000_000_000_000_000, gc_ttl="2h", puller={"flush_interval": "2s", "shards": 2},
        merge={"syncpoint_interval": "5m", "parallel_jobs": 3},
        lake={"storage_options": {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "aws_conditional_put": "etag"}},
    )
    config = load_config(write_config(tmp_path / "cf.toml", doc, "a comment\nover two lines"))
    assert config.changefeed_id == "orders-feed" and config.start_ts == 450_000_000_000_000_000
    assert config.upstream.pd == ("10.0.0.1:2379", "10.0.0.2:2379") and config.upstream.gc_ttl_s == 7200
    assert config.filter.rules == ("shop.*", "!shop.tmp_*")
    assert config.puller.flush_interval_s == 2 and config.puller.shards == 2
    assert config.merge.syncpoint_interval_s == 300 and config.merge.parallel_jobs == 3
    assert config.lake.root == "s3://bucket/lake"
    assert config.lake.storage_options == {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "aws_conditional_put": "etag"}


def test_strings_are_escaped_and_comments_stay_comments(tmp_path):
    text = to_toml({"changefeed": {"id": "cf"}, "lake": {"root": 'a "quoted" path\\ü'}}, "line one\nline two")
    assert text.startswith("# line one\n# line two\n")
    doc = changefeed_document("cf", ["pd:2379"], 'a "quoted" path\\ü')
    assert load_config(write_config(tmp_path / "cf.toml", doc)).lake.root == str(tmp_path / 'a "quoted" path\\ü')


def test_a_setting_the_loader_refuses_is_refused_when_written(tmp_path):
    with pytest.raises(InputError, match=r"\[puller\]\.flush_interval"):
        write_config(tmp_path / "cf.toml", changefeed_document("cf", ["pd:2379"], "lake", puller={"flush_interval": "soon"}))


def test_storage_options_must_be_strings(tmp_path):
    doc = changefeed_document("cf", ["pd:2379"], "lake", lake={"storage_options": {"timeout": 5}})
    with pytest.raises(InputError, match=r"\[lake\.storage_options\]\.timeout: expected a non-empty string, got 5"):
        write_config(tmp_path / "cf.toml", doc)


def test_a_local_lake_has_no_storage_options(tmp_path):
    config = load_config(write_config(tmp_path / "cf.toml", changefeed_document("cf", ["pd:2379"], "lake")))
    assert LakeLayout.from_config(config.lake).storage_options is None
