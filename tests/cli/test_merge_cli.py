"""`tidelake merge` refuses bad arguments with one line naming the flag, before Spark starts."""

import pytest

from tidelake.cli import main


@pytest.mark.parametrize("flags, message", [
    (["--threads", "0"], "--threads must be positive, got 0"),
    (["--max-chunk-rows", "-5"], "--max-chunk-rows must be positive, got -5"),
    (["--until-ts", "0"], "--until-ts must be a positive TSO below 2^64, got 0"),
])
def test_bad_merge_arguments_are_named(tmp_path, capsys, flags, message):
    assert main(["merge", "--lake", str(tmp_path), *flags]) == 2
    assert message in capsys.readouterr().err


def test_merge_needs_exactly_one_of_lake_and_config(tmp_path, capsys):
    assert main(["merge"]) == 2
    assert "no lake given: pass --config FILE or --lake PATH" in capsys.readouterr().err
