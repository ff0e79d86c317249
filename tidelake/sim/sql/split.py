"""TiDB's SPLIT TABLE on the simulator's regions: record-key splits of an integer-handle table.

`SPLIT TABLE t BETWEEN (lo) AND (hi) REGIONS n` splits each physical table (each partition) at
the row keys lo, lo + step, ..., lo + (n - 1) * step with step = (hi - lo) / n, and `SPLIT TABLE t
BY (v1), (v2), ...` at the listed handles, as pingcap/tidb's SplitTableRegionExec does for an
integer handle (pkg/executor/split.go, `getSplitTableKeysBySplitRange`). The answer is TiDB's
one row (TOTAL_SPLIT_REGION, SCATTER_FINISH_RATIO). No DDL job: TiCDC sees only the regions
change. Index splits and common-handle tables are refused by name.
"""

from __future__ import annotations

from tidelake.codec.keys import record_key
from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.sim.sql.result import Result
from tidelake.sim.sql.select import evaluate_constants
from tidelake.sim.sql.state import SessionState, table_name
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.dialect import SplitTable

MAX_REGIONS = 1000  # TiDB's split-region-max-num default is 1000 per statement


def execute_split(node: SplitTable, state: SessionState) -> Result:
    db, name = table_name(node.this, state)
    info = state.tidb.catalog.table(db, name)
    if node.args.get("index") is not None:
        raise er.not_supported("SPLIT TABLE ... INDEX (the simulator splits record keys only)")
    if info.is_common_handle:
        raise er.not_supported("SPLIT TABLE of a clustered non-integer primary key")
    if node.args.get("by"):
        handles = [_handle(evaluate_constants(t.expressions, state)) for t in node.args["by"]]
    else:
        lower = _handle(evaluate_constants(node.args["lower"], state))
        upper = _handle(evaluate_constants(node.args["upper"], state))
        count = int(node.args["regions"].name)
        if upper <= lower:
            raise er.sql_error(er.INVALID_SPLIT_REGION_RANGES, "Failed to split region ranges: the lower value "
                                                                "should be less than the upper value")
        if not 1 <= count <= MAX_REGIONS:
            raise er.sql_error(er.INVALID_SPLIT_REGION_RANGES, f"Failed to split region ranges: the region size is "
                                                                f"too large, the expected size is in [1, {MAX_REGIONS}]")
        step = (upper - lower) // count
        handles = [lower + i * step for i in range(count)] if step else [lower]
    regions = state.tidb.cluster.regions
    done = 0
    for physical in info.physical_ids():
        for handle in sorted(set(handles)):
            key = encode_bytes(record_key(physical, handle))
            region = regions.locate(key)
            if region.start_key != key:
                regions.split(region.id, key)
                done += 1
    return Result(rows=[(done, 1.0)], columns=["TOTAL_SPLIT_REGION", "SCATTER_FINISH_RATIO"])


def _handle(values: list) -> int:
    if len(values) != 1 or not isinstance(values[0], int) or isinstance(values[0], bool):
        raise er.sql_error(er.INVALID_SPLIT_REGION_RANGES, "Failed to split region ranges: an integer handle "
                                                            "value is expected")
    return values[0]
