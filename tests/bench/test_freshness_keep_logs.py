"""bench_freshness --keep-logs: a run's own logs and Airflow's task logs are copied out of the
run's work folder (removed after the run); a copy that fails is a warning, never the run's failure."""

from __future__ import annotations

import shutil

from bench.bench_freshness import keep_logs


def test_the_runs_logs_and_airflows_task_logs_are_copied(tmp_path):
    work = tmp_path / "t10-r1"
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "puller.log").write_text("puller\n")
    task_log = work / "airflow_home" / "logs" / "dag_id=merge" / "attempt=1.log"
    task_log.parent.mkdir(parents=True)
    task_log.write_text("merge task\n")
    (work / "lake").mkdir()
    keep_logs(work, tmp_path / "kept" / work.name)
    kept = tmp_path / "kept" / "t10-r1"
    assert (kept / "puller.log").read_text() == "puller\n"
    assert (kept / "airflow" / "dag_id=merge" / "attempt=1.log").read_text() == "merge task\n"
    assert sorted(p.name for p in kept.iterdir()) == ["airflow", "puller.log"]  # the lake stays behind


def test_a_failed_copy_is_a_warning(tmp_path, monkeypatch, capsys):
    work = tmp_path / "t10-r1"
    (work / "logs").mkdir(parents=True)

    def refuse(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(shutil, "copytree", refuse)
    keep_logs(work, tmp_path / "kept")
    err = capsys.readouterr().err
    assert f"--keep-logs: {work / 'logs'} not copied: No space left on device" in err
