"""Which Spark merge, syncpoint and maintenance run on (docs/operations.md#warm-spark): --remote, then
[spark] remote of the changefeed config, then SPARK_REMOTE, else local Spark."""

from __future__ import annotations

import pytest

from tidelake.cli import build_parser
from tidelake.cli.spark_choice import remote_choice
from tidelake.cli.target import Target
from tidelake.config import load_config
from tidelake.config_writer import changefeed_document, write_config
from tidelake.errors import InputError
from tidelake.lake.layout import LakeLayout

ENV = {"SPARK_REMOTE": "sc://from-env:15002"}


def choose(tmp_path, argv: list[str], remote_in_config: str | None, env: dict[str, str]) -> str | None:
    doc = changefeed_document("cf", ["127.0.0.1:2379"], tmp_path / "lake",
                              spark={"remote": remote_in_config} if remote_in_config else None)
    config = write_config(tmp_path / "cf.toml", doc)
    args = build_parser().parse_args(["merge", "--config", str(config), *argv])
    return remote_choice(args, Target(LakeLayout(str(tmp_path / "lake")), [], config=load_config(config)), env)


@pytest.mark.parametrize("command", ["merge", "syncpoint", "maintenance"])
def test_the_spark_commands_take_remote_and_master(command):
    args = build_parser().parse_args([command, "--lake", "x", "--remote", "sc://h:1", "--master", "local[2]"])
    assert (args.remote, args.master) == ("sc://h:1", "local[2]")


def test_the_flag_wins_then_the_config_then_the_environment_then_local(tmp_path):
    assert choose(tmp_path, ["--remote", "sc://flag:1"], "sc://config:2", ENV) == "sc://flag:1"
    assert choose(tmp_path, [], "sc://config:2", ENV) == "sc://config:2"
    assert choose(tmp_path, [], None, ENV) == "sc://from-env:15002"
    assert choose(tmp_path, [], None, {}) is None
    assert choose(tmp_path, ["--master", "local[2]"], None, ENV) is None  # --master asks for local Spark


def test_a_remote_that_is_not_a_connect_url_or_clashes_with_master_is_one_clear_error(tmp_path):
    with pytest.raises(InputError, match="Spark Connect URL"):
        choose(tmp_path, ["--remote", "spark://h:7077"], None, {})
    with pytest.raises(InputError, match="not both"):
        choose(tmp_path, ["--master", "local[2]"], "sc://config:2", {})
    doc = changefeed_document("cf", ["127.0.0.1:2379"], tmp_path / "lake", spark={"remote": "http://h:1"})
    with pytest.raises(InputError, match=r"\[spark\]\.remote|spark.*remote"):
        write_config(tmp_path / "bad.toml", doc)
