"""tidelake's entry points as an install would publish them, for tests in the shared venv.

The shared venv's tidelake metadata may predate an entry point of pyproject.toml, so `installed`
writes the metadata an install would for the entry points it lacks (a dist-info folder on
sys.path; none in a fresh venv, whose install has them all) and clears Airflow's caches of entry
points, providers and plugins; Airflow then finds tidelake as it finds any installed provider
and plugin. That a built wheel carries them is
tests/demos/test_installed_airflow.py's, and an Airflow installed from it `make integration`'s.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from importlib import metadata
from contextlib import contextmanager
from pathlib import Path

import pytest
from airflow_test_env import REPO


def _missing_entry_points(project: dict) -> dict[str, dict[str, str]]:
    """pyproject.toml's entry points the installed tidelake metadata lacks (all without an install)."""
    try:
        have = {(ep.group, ep.name) for ep in metadata.distribution(project["name"]).entry_points}
    except metadata.PackageNotFoundError:
        have = set()
    missing = {group: {name: value for name, value in points.items() if (group, name) not in have}
               for group, points in project["entry-points"].items()}
    return {group: points for group, points in missing.items() if points}


def _clear_caches() -> None:
    from airflow import plugins_manager
    from airflow._shared.module_loading import _get_grouped_entry_points as core_entry_points
    from airflow.sdk._shared.module_loading import _get_grouped_entry_points as sdk_entry_points

    core_entry_points.cache_clear()
    sdk_entry_points.cache_clear()
    for cached in (plugins_manager._get_plugins, plugins_manager._get_ui_plugins,
                   plugins_manager.get_fastapi_plugins, plugins_manager.get_flask_plugins):
        cached.cache_clear()


@contextmanager
def installed(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """While the block runs, fresh provider managers and plugin lists see tidelake's entry points."""
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    missing = _missing_entry_points(project)
    if missing:  # only those: one published twice is registered twice (a plugin: "already registered")
        dist_info = folder / f"{project['name']}-{project['version']}.dist-info"
        dist_info.mkdir(parents=True)
        (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                            f"Version: {project['version']}\n")
        (dist_info / "entry_points.txt").write_text("".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) for group, points in missing.items()))
        monkeypatch.syspath_prepend(str(folder))
    for manager in (ProvidersManager, ProvidersManagerTaskRuntime):  # singletons: restored after the test
        monkeypatch.setattr(manager, "_instance", None)
        monkeypatch.setattr(manager, "_initialized", False)
    _clear_caches()
    try:
        yield
    finally:
        _clear_caches()  # the next scan runs after monkeypatch has dropped the folder
