"""SQL through the front -> the real puller -> merge runs -> `verify`: the harness of the SQL
replication tests (each replica compared with the upstream at its checkpoint)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pymysql

from tests.capture.pull_harness import make_config, wait_resolved
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.failpoints import armed
from tidelake.lake.layout import LakeLayout
from tidelake.sim.cluster import SimCluster
from tidelake.sim.sql.server import SqlServer
from tidelake.sim.tidb.session import SimTiDB
from tidelake.table_filter import TableFilter
from tidelake.upstream.kv_snapshot import SnapshotReader
from tidelake.upstream.pd_client import PDClient

Fault = Callable[[str, object], None]


def replicate_and_verify(spark, tmp_path: Path, db: str, script: list[str], merge_runs: int = 1,
                         faults: tuple[list[str], Fault] | None = None,
                         cap: Callable[[LakeLayout], int] | None = None, threads: int | None = None):
    """Run `script` in a new database `db` with the puller on, then merges to the final ts (or to
    `cap(layout)`) until one leaves no table blocked or failed, `merge_runs` at most (with `faults`,
    (failpoint names, action), armed; `threads` tables at once, run_merge's default if None), then
    verify: (layout, merge reports, verify report)."""
    from tidelake.merge.merge_log import MergeStatus  # pyspark: imported by the Spark tests only
    from tidelake.merge.merge_run import run_merge  # pyspark, as above
    from tidelake.verify.verifier import Verifier  # pyspark, as above

    cluster = SimCluster(n_stores=2, split_check_interval_s=0, gc_interval_s=0, server_workers=8,
                         cdc_options={"min_ts_interval_s": 0.2})
    with cluster:
        tidb = SimTiDB(cluster)
        layout = LakeLayout(str(tmp_path / "lake"))
        config = make_config(cluster, tmp_path / "lake", rules=(f"{db}.*",), flush="300ms")
        with SqlServer(tidb, port=0) as server, PullerThread(config, progress_interval_s=3600) as puller:
            wait_resolved(layout.root, {}, 1, puller)
            conn = pymysql.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
            with conn.cursor() as cursor:
                cursor.execute(f"CREATE DATABASE {db}")
                cursor.execute(f"USE {db}")
                for statement in script:
                    cursor.execute(statement)
            conn.close()
            final = cluster.tso.next()
            ids = tidb.physical_ids(TableFilter.parse([f"{db}.*"]))
            wait_resolved(layout.root, dict.fromkeys(ids, final), final, puller)
        until = final if cap is None else cap(layout)
        with armed(*faults) if faults is not None else contextlib.nullcontext():
            more = {} if threads is None else {"threads": threads}
            reports = [run_merge(spark, layout, until_ts=until, **more)]
            while len(reports) < merge_runs and (reports[-1].failed or any(
                    t.status == MergeStatus.BLOCKED for t in reports[-1].tables)):
                reports.append(run_merge(spark, layout, until_ts=until, **more))
        pd = PDClient([cluster.pd_address])
        try:
            with SnapshotReader(pd) as reader:
                verified = Verifier(spark, layout, reader).run()
        finally:
            pd.close()
    return layout, reports, verified
