"""Every bad input is refused where it enters: one line naming the input and the problem, exit 2,
no traceback, before any server, Spark session or PD dial (issue 18's reproductions and more)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidelake.cli import main
from tidelake.config_writer import changefeed_document, to_toml
from tidelake.errors import InputError
from tidelake.orchestration.params import merge_param_schemas, parse_merge_request

PD = "127.0.0.1:1"  # never dialled: every case fails before


def _config(tmp_path: Path, **kwargs) -> str:
    doc = changefeed_document("cf", kwargs.pop("pd", [PD]), tmp_path / "lake", **kwargs)
    path = tmp_path / "cf.toml"
    path.write_text(to_toml(doc))
    return str(path)


def _not_utf8(tmp_path: Path) -> str:
    path = tmp_path / "latin1.toml"
    path.write_bytes('[changefeed]\nid = "caf\xe9"\n'.encode("latin-1"))
    return str(path)


def _huge_start_ts(tmp_path: Path) -> str:
    path = Path(_config(tmp_path))
    path.write_text(path.read_text().replace('id = "cf"', f'id = "cf"\nstart_ts = {2**64}'))
    return str(path)


def _plain_file(tmp_path: Path) -> Path:
    (tmp_path / "plain").write_text("x")
    return tmp_path / "plain"


CLI_CASES = {
    "gc_ttl 1ms": (lambda t: ["pull", "--config", _config(t, gc_ttl="1ms")], "[upstream].gc_ttl: expected a duration from 3s"),
    "config not UTF-8": (lambda t: ["pull", "--config", _not_utf8(t)], "not UTF-8 text"),
    "config missing": (lambda t: ["pull", "--config", str(t / "nope.toml")], "cannot read config"),
    "config start_ts 2^64": (lambda t: ["pull", "--config", _huge_start_ts(t)], "[changefeed].start_ts"),
    "config PD port 99999": (lambda t: ["pull", "--config", _config(t, pd=["127.0.0.1:99999"])], "port 99999, outside 1-65535"),
    "config PD without port": (lambda t: ["pull", "--config", _config(t, pd=["pd-host"])], "is not host:port"),
    "lake under a file": (lambda t: ["pull", "--config", _config_in(t, _plain_file(t) / "lake")], "is a file, not a folder"),
    "pull --max-run-seconds nan": (lambda t: ["pull", "--config", _config(t), "--max-run-seconds", "nan"],
                                   "--max-run-seconds must be a finite number above zero, got nan"),
    "pull --progress-interval inf": (lambda t: ["pull", "--config", _config(t), "--progress-interval", "inf"],
                                     "--progress-interval must be a finite number above zero"),
    "status --pd port 99999": (lambda t: ["status", "--lake", str(t), "--pd", "127.0.0.1:99999"], "--pd: PD address"),
    "verify --pd no port": (lambda t: ["verify", "--lake", str(t), "--pd", "localhost"], "is not host:port"),
    "freshness --since 5x": (lambda t: ["freshness", "--lake", str(t), "--since", "5x"], "--since '5x' is not a span"),
    "freshness --since 0": (lambda t: ["freshness", "--lake", str(t), "--since", "0"], "--since '0' is not a span"),
    "merge --until-ts 2^70": (lambda t: ["merge", "--lake", str(t), "--until-ts", str(2**70)], "below 2^64"),
    "bootstrap --at-ts 2^70": (lambda t: ["bootstrap", "--config", _config(t), "--at-ts", str(2**70)], "below 2^64"),
    "bootstrap --join-timeout nan": (lambda t: ["bootstrap", "--config", _config(t), "--join-timeout", "nan"],
                                     "--join-timeout must be a finite number"),
    "maintenance --vacuum-retention-hours nan": (
        lambda t: ["maintenance", "--lake", str(t), "--vacuum-retention-hours", "nan"], "must be a finite number >= 0"),
    "maintenance --merge-log-retention-hours 1": (
        lambda t: ["maintenance", "--lake", str(t), "--merge-log-retention-hours", "1"], "must be a finite number >= 4"),
    "sim --rate nan": (lambda t: ["sim", "--rate", "nan"], "--rate must be a finite number > 0, got nan"),
    "sim --duration inf": (lambda t: ["sim", "--duration", "inf"], "--duration must be a finite number > 0"),
    "sim --progress-interval nan": (lambda t: ["sim", "--progress-interval", "nan"], "--progress-interval must be"),
    "sim --pd-port 99999": (lambda t: ["sim", "--pd-port", "99999"], "--pd-port must be 0..65535"),
    "sim --record under a file": (lambda t: ["sim", "--record", str(_plain_file(t) / "rec")], "is a file, not a folder"),
    "sim --record a file": (lambda t: ["sim", "--record", str(_plain_file(t))], "is a file, not a folder"),
    "sim --info-file under a file": (lambda t: ["sim", "--info-file", str(_plain_file(t) / "info.json")],
                                     "is a file, not a folder"),
    "sim --info-file in a missing folder": (lambda t: ["sim", "--info-file", str(t / "no" / "info.json")],
                                            "does not exist"),
    "sim --info-file a folder": (lambda t: ["sim", "--info-file", str(t)], "is a folder, not a file"),
    "sim-replay --port 70000": (lambda t: ["sim-replay", _plain_file(t).as_posix(), "--port", "70000"], "--port must be"),
}


def _config_in(tmp_path: Path, lake: Path) -> str:
    path = tmp_path / "cf.toml"
    path.write_text(to_toml(changefeed_document("cf", [PD], lake)))
    return str(path)


@pytest.mark.parametrize("case", CLI_CASES, ids=str)
def test_bad_cli_input_is_one_line_and_exit_2(tmp_path, capsys, case):
    argv, message = CLI_CASES[case]
    assert main(argv(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.startswith("tidelake: error:") and err.count("\n") == 1 and message in err, err
    assert "Traceback" not in err


TSO_2026 = 463267587686399999
KNOWN = ["shop.orders"]

PARAM_CASES = {
    "until_time 1900": ({"until_time": "1900-01-01"}, "param 'until_time': '1900-01-01' is outside"),
    "until_time 9999": ({"until_time": "9999-12-31T00:00:00Z"}, "param 'until_time': '9999-12-31T00:00:00Z' is outside"),
    "until_ts 2^70": ({"until_ts": 2**70}, "param 'until_ts': 1180591620717411303424 is beyond"),
    "until_ts negative": ({"until_ts": -5}, "param 'until_ts': expected a TSO"),
    "until_ts float": ({"until_ts": 1.5}, "param 'until_ts': expected a TSO"),
    "unknown param": ({"until": TSO_2026}, "param 'until': unknown"),
    "tables a number": ({"tables": 7}, "param 'tables': expected a list"),
    "tables unknown": ({"tables": ["shop.nope"]}, "param 'tables': unknown table shop.nope"),
    "groups 0": ({"groups": 0}, "param 'groups'"),
    "groups 65": ({"groups": 65}, "param 'groups'"),
    "dry_run a string": ({"dry_run": "no"}, "param 'dry_run'"),
}


@pytest.mark.parametrize("case", PARAM_CASES, ids=str)
def test_bad_merge_params_name_the_param(case):
    params, message = PARAM_CASES[case]
    defaults = {name: schema["default"] for name, schema in merge_param_schemas(KNOWN).items()}
    with pytest.raises(InputError) as err:
        parse_merge_request({**defaults, **params}, KNOWN)
    assert message in str(err.value) and "\n" not in str(err.value)
