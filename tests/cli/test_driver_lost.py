"""A command whose Spark driver JVM died (here py4j's errors, faked by class name) ends in one line
naming it and how to give a local driver more heap, not in a traceback of the dead gateway."""

from __future__ import annotations

import pytest

from tidelake.cli import main
from tidelake.cli import verify_command
from tidelake.lake.store_room import refusal
from tidelake.spark.driver_lost import driver_lost


class Py4JJavaError(Exception):
    def __str__(self) -> str:  # py4j asks the JVM for the Java error's text
        raise ConnectionResetError(104, "Connection reset by peer")


class Py4JNetworkError(Exception):
    pass


def _dead_jvm() -> Exception:
    try:
        try:
            raise Py4JJavaError("An error occurred while calling o1.collectAsArrowToPython")
        except Py4JJavaError as exc:
            raise Py4JNetworkError("Error while sending or receiving") from exc
    except Py4JNetworkError as exc:
        return exc


@pytest.mark.parametrize("exc, lost", [
    (_dead_jvm(), True),
    (Py4JJavaError("unreadable"), True),
    (RuntimeError("boom"), False),
])
def test_a_lost_driver_is_told_from_other_failures(exc, lost):
    assert driver_lost(exc) is lost
    assert refusal(exc) is None  # never raises on an error whose text cannot be read


def test_verify_whose_driver_died_ends_in_one_line(tmp_path, capsys, monkeypatch):
    def dies(args):
        raise _dead_jvm()

    monkeypatch.setattr(verify_command, "_verify", dies)
    assert main(["verify", "--lake", str(tmp_path), "--pd", "127.0.0.1:1"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("tidelake: error: the Spark driver JVM went away (")
    assert "--driver-memory 4g" in line and "(full trace: " in line
