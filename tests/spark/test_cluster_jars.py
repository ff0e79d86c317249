"""The jar folder of a cluster (tidelake.spark.cluster_jars): Spark's resolution minus the libraries
pyspark ships, recorded in its manifest, kept when asked for the same packages again."""

from __future__ import annotations

from pathlib import Path

import pyspark

from tidelake.spark import cluster_jars
from tidelake.spark.cluster_jars import MANIFEST, install_jars, installed_packages


def test_the_folder_holds_the_resolved_jars_pyspark_lacks_and_names_its_packages(tmp_path, monkeypatch):
    shipped = sorted(p.name for p in (Path(pyspark.__file__).parent / "jars").glob("jackson-databind-*.jar"))
    assert shipped  # pyspark's own jackson-databind, whatever its version
    cache = tmp_path / "ivy-jars"
    cache.mkdir()
    resolved = [cache / name for name in ("io.delta_delta-spark_4.2_2.13-4.4.0.jar",
                                          "com.fasterxml.jackson.core_jackson-databind-2.13.5.jar",
                                          "com.github.luben_zstd-jni-1.5.7-3.jar",
                                          "software.amazon.awssdk_bundle-2.35.4.jar")]
    for jar in resolved:
        jar.write_bytes(jar.name.encode())
    calls = []
    monkeypatch.setattr(cluster_jars, "resolve", lambda packages: calls.append(list(packages)) or resolved)
    folder = tmp_path / "jars"
    packages = ["io.delta:delta-spark_4.2_2.13:4.4.0", "org.apache.hadoop:hadoop-aws:3.5.0"]
    jars = install_jars(packages, folder)
    assert [j.name for j in jars] == ["io.delta_delta-spark_4.2_2.13-4.4.0.jar", "software.amazon.awssdk_bundle-2.35.4.jar"]
    assert all(j.read_bytes() == j.name.encode() for j in jars)
    assert installed_packages(folder) == packages and (folder / MANIFEST).is_file()
    assert install_jars(packages, folder) == jars and len(calls) == 1  # same packages: kept as it is
    install_jars(packages[:1], folder)  # other packages: refilled
    assert len(calls) == 2 and installed_packages(folder) == packages[:1]
