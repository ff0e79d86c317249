"""The soak's samples, its flatness verdicts and its page, without the stack (the soak itself is
`make soak`, hours long)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tidelake.demos.soak import main
from tidelake.demos.soak_chart import write_page
from tidelake.demos.soak_run import Soak, SoakOptions, _task_ids, new_run_id
from tidelake.demos.soak_samples import RUN_MARK, Sample, flatness, memory_by_role, role_of, series
from tidelake.errors import InputError


@pytest.mark.parametrize("command, role", [
    (["/venv/bin/python", "-m", "tidelake", "pull", "--config", "cf.toml"], "puller"),
    (["/venv/bin/python", "-m", "tidelake", "sim", "--pd-port", "0"], "simulator"),
    (["/venv/bin/airflow", "scheduler"], "airflow scheduler"),
    (["java", "-cp", "x", "org.apache.spark.executor.CoarseGrainedExecutorBackend"], "spark executor"),
    (["java", "-cp", "x", "org.apache.spark.deploy.worker.Worker", "spark://h:7077"], "spark worker"),
    (["/usr/lib/postgresql/15/bin/postgres", "-D", "/data"], "postgres"),
    (["airflow api_server -- host:0.0.0.0 port:8080"], "airflow api-server"),
    (["airflow worker -- LocalExecutor: <idle>"], "airflow executor"),
    (["airflow worker -- LocalExecutor [team_a]: <idle>"], "airflow executor"),
    (["airflow worker -- LocalExecutor: 01a22b57-505c-7f2a-9316-a310d25c7ed0"], "airflow executor"),
    (["/venv/bin/python", "/venv/lib/site-packages/tidelake/orchestration/spark_jobs/merge_job.py"], "spark driver"),
    (["/usr/bin/unknown-thing", "--flag"], "unknown-thing"),
])
def test_a_process_is_named_by_its_command_line(command, role):
    assert role_of(command) == role


def test_an_airflow_task_process_is_named_by_its_task():
    tasks = {"0193f1c2-7e4a": "pull"}
    assert role_of(["airflow worker -- 0193f1c2-7e4a"], tasks) == "task pull"
    assert role_of(["airflow worker -- 0193ffff-0000"], tasks) == "task unknown"
    assert role_of(["airflow supervisor: 0193f1c2-7e4a"], tasks) == "airflow supervisor"


def test_the_memory_of_marked_processes_and_their_descendants_only_is_summed_per_role():
    """The marked process starts a child without the mark, as a process that retitles itself
    (setproctitle overwrites its environment) looks; an unmarked process of another run is left out."""
    run_id = new_run_id()
    sleep = "import time; time.sleep(30)"
    parent = (f"import os, subprocess, sys, time; env = dict(os.environ); env.pop({RUN_MARK!r}); "
              f"subprocess.Popen([sys.executable, '-c', {sleep!r}], env=env); {sleep}")
    marked = subprocess.Popen([sys.executable, "-c", parent], env={**os.environ, RUN_MARK: run_id},
                              start_new_session=True)
    other = subprocess.Popen([sys.executable, "-c", sleep], env={**os.environ, RUN_MARK: "another run"})
    try:
        time.sleep(0.5)
        pss, count = memory_by_role(run_id)
    finally:
        os.killpg(marked.pid, 9)
        other.kill()
        marked.wait()
        other.wait()
    name = os.path.basename(sys.executable)
    assert count == {name: 2} and pss[name] > 2 << 20


def _samples(pss_mib: list[float], lag_s: list[float]) -> list[Sample]:
    return [Sample(at=60.0 * i, pss={"puller": int(m * 2**20)}, processes={"puller": 1},
                   replica_lag_max_s=lag, replica_lag_median_s=lag / 2, capture_lag_s=1.0)
            for i, (m, lag) in enumerate(zip(pss_mib, lag_s))]


def test_a_series_that_keeps_growing_is_not_flat_and_a_warm_up_does_not_count():
    warm_then_flat = _samples([50, 200, 210, 205, 208, 211, 207, 209], [300, 20, 22, 21, 20, 23, 22, 21])
    assert all(v.flat for v in flatness(warm_then_flat)), flatness(warm_then_flat)
    leaking = _samples([200, 220, 260, 300, 340, 380, 420, 460], [20, 20, 21, 22, 60, 90, 120, 150])
    verdicts = {v.series: v for v in flatness(leaking)}
    assert not verdicts["pss puller"].flat and not verdicts["replica lag max"].flat
    assert verdicts["capture lag"].flat
    assert verdicts["pss puller"].last == pytest.approx(440.0)


def test_the_stand_ins_holding_the_data_are_charted_and_not_judged():
    growing = [Sample(at=60.0 * i, pss={"s3 server": (100 + 50 * i) << 20, "puller": 200 << 20},
                      processes={"s3 server": 1, "puller": 1}, replica_lag_max_s=20.0, replica_lag_median_s=10.0,
                      capture_lag_s=1.0) for i in range(8)]
    verdicts = {v.series: v for v in flatness(growing)}
    assert not verdicts["pss s3 server"].flat and not verdicts["pss s3 server"].judged
    assert verdicts["pss puller"].flat and verdicts["pss puller"].judged


def test_the_page_draws_each_series_and_marks_each_fault(tmp_path):
    samples = _samples([200, 210, 205, 208], [20, 22, 21, 20])
    page = write_page(tmp_path / "soak.html", series(samples), [(90.0, "scheduler")], flatness(samples), "soak")
    text = page.read_text()
    assert text.count("<polyline") == 4  # pss puller, and the three lags
    assert "scheduler at 1.5 min" in text and "GROWING" not in text


def test_the_soak_strikes_its_faults_in_turn_and_writes_its_results(tmp_path, monkeypatch):
    struck = []
    monkeypatch.setattr("tidelake.demos.soak_run.take_sample",
                        lambda run_id, layout, started, tasks: Sample(time.monotonic() - started, {"puller": 100 << 20},
                                                               {"puller": 1}, 5.0, 2.0, 1.0))
    faults = [("a", lambda say, airflow: struck.append("a")), ("b", lambda say, airflow: struck.append("b"))]
    soak = Soak(SoakOptions(minutes=0.02, fault_every_s=0.2, sample_every_s=0.05), faults, str(tmp_path / "lake"),
                tmp_path / "soak", "run1")

    class Api:
        def running_tasks(self, dag_id):
            return [{"id": f"ti-{dag_id}", "task_id": dag_id}]

    class Airflow:
        checks = [lambda stage: None]
        api = Api()
        dags = type("Dags", (), {"merge": "merge", "puller": "pull"})

    soak(lambda line: None, Airflow())
    assert struck[:3] == ["a", "b", "a"][:len(struck)] and len(struck) >= 3
    assert soak.write_results(verified=True)
    assert (tmp_path / "soak" / "soak.jsonl").read_text().count("\n") == len(soak.samples)
    assert '"flat": true' in (tmp_path / "soak" / "soak.json").read_text()


def test_a_soak_of_no_minutes_is_refused():
    with pytest.raises(InputError, match="--minutes, --fault-every and --sample-every must be above zero"):
        SoakOptions(minutes=0)


def test_the_soak_command_refuses_a_soak_of_no_minutes_in_one_line(capsys):
    assert main(["--minutes", "0"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


@pytest.mark.parametrize("failure", [OSError("refused"), ValueError("not json"), KeyError("task_instances")])
def test_a_sample_names_no_tasks_while_the_api_answers_badly(failure):
    class Api:
        def running_tasks(self, dag_id):
            raise failure

    class Airflow:
        api = Api()
        dags = type("Dags", (), {"merge": "merge", "puller": "pull"})

    assert _task_ids(Airflow()) == {}
