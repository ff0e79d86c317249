"""Recent replication lag per table, from the merge log, for the Replication page's sparklines.

Each merge-log row says when a run finished and which checkpoint it left the replica at; the
lag a reader saw right then is finished_at - time(checkpoint_after). The last `limit` runs of a
table make its sparkline, oldest first.
"""

from __future__ import annotations

from collections import defaultdict

from deltalake import DeltaTable

from tidelake import tso
from tidelake.lake.layout import LakeLayout
from tidelake.lake.merge_log import merge_log_path

DEFAULT_POINTS = 48


def lag_history(layout: LakeLayout, limit: int = DEFAULT_POINTS) -> dict[int, list[float]]:
    """Table key -> lag in seconds after each of its last `limit` merges with a checkpoint."""
    path = merge_log_path(layout)
    if not DeltaTable.is_deltatable(path, storage_options=layout.storage_options):
        return {}
    rows = (
        DeltaTable(path, storage_options=layout.storage_options)
        .to_pyarrow_table(columns=["table_key", "checkpoint_after", "finished_at"])
        .to_pylist()
    )
    series: dict[int, list[float]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: r["finished_at"]):
        if row["checkpoint_after"] is None:
            continue
        lag = (row["finished_at"] - tso.to_datetime(row["checkpoint_after"])).total_seconds()
        series[row["table_key"]].append(max(lag, 0.0))
    return {key: values[-limit:] for key, values in series.items()}
