"""TiDB-shaped writes into a simulated cluster: meta keys, tidb_ddl_job rows and table rows.

A DDL writes its job row at every step (running first); the last step commits the meta change,
SchemaVersionKey and the job row in state done in ONE transaction (docs/metadata.md#schema-and-ddl-handoff),
and TiDB deletes the row once the job is synced (docs/wire.md#tidb_ddl_job-row).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from tidelake.codec import meta_keys
from tidelake.codec.ddl_job import ActionType, DDLJob, JobState
from tidelake.codec.keys import DDL_JOB_TABLE_ID, record_key
from tidelake.codec.row_v2 import encode_row_v2
from tidelake.codec.row_value import encode_compact_int
from tidelake.codec.schema import DBInfo, TableInfo

DATA = Path(__file__).resolve().parents[1] / "codec" / "data"


def _fixture(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def db_json(db_id: int, name: str) -> dict:
    obj = _fixture("db_info")
    obj.update(id=db_id, db_name={"O": name, "L": name.lower()}, state=5)
    return obj


def table_json(table_id: int, name: str, partition_ids: list[int] | None = None) -> dict:
    obj = _fixture("table_pk_is_handle")
    obj.update(id=table_id, name={"O": name, "L": name.lower()})
    if partition_ids:
        partition = copy.deepcopy(_fixture("table_partitioned")["partition"])
        template = partition["definitions"][-1]
        partition["definitions"] = [
            {**template, "id": pid, "name": {"O": f"p{i}", "L": f"p{i}"}} for i, pid in enumerate(partition_ids)
        ]
        partition["num"] = len(partition_ids)
        obj["partition"] = partition
    return obj


def job_row(job: DDLJob, job_meta_column_id: int = 5) -> bytes:
    """A mysql.tidb_ddl_job row value (docs/wire.md#tidb_ddl_job-row column order)."""
    columns = {2: encode_compact_int(0), 3: str(job.schema_id).encode(), 4: str(job.table_id).encode(),
               6: encode_compact_int(int(job.type)), 7: encode_compact_int(0)}
    columns[job_meta_column_id] = job.to_json_bytes()
    return encode_row_v2(columns)


class TiDBWrites:
    def __init__(self, sim) -> None:
        self.sim = sim
        self.schema_version = 0
        self.next_job_id = 100
        self.dbs: dict[int, dict] = {}
        self.tables: dict[int, tuple[int, dict]] = {}  # table id -> (db id, json)
        self.finished: dict[int, int] = {}  # job id -> commit ts of its done row

    def txn(self, mutations: dict[bytes, bytes | None]) -> int:
        """One Percolator transaction (None = delete); returns its commit ts."""
        start = self.sim.tso.next()
        ops = [("delete", k, b"") if v is None else ("put", k, v) for k, v in mutations.items()]
        keys = list(mutations)
        self.sim.mvcc.prewrite(ops, keys[0], start, 3000)
        commit_ts = self.sim.tso.next()
        self.sim.mvcc.commit(keys, start, commit_ts)
        return commit_ts

    def rows(self, table_id: int, values: dict[int, bytes | None]) -> int:
        return self.txn({record_key(table_id, h): v for h, v in values.items()})

    def _ddl(self, action: ActionType, db_id: int, table_id: int, meta: dict[bytes, bytes | None],
             table: dict | None = None, query: str = "") -> int:
        self.schema_version += 1
        self.next_job_id += 1
        db = self.dbs[db_id]
        job = DDLJob(
            id=self.next_job_id, type=action, schema_id=db_id, table_id=table_id, schema_name=db["db_name"]["O"],
            table_name=(table or {}).get("name", {}).get("O", ""), state=JobState.RUNNING, query=query,
            schema_version=self.schema_version, db_info=DBInfo.from_json(db),
            table_info=TableInfo.from_json(table) if table is not None else None,
        )
        key = record_key(DDL_JOB_TABLE_ID, job.id)
        self.txn({key: job_row(job)})
        job.state = JobState.DONE
        version_key = meta_keys.string_key(meta_keys.SCHEMA_VERSION_KEY)
        commit_ts = self.txn({**meta, version_key: str(self.schema_version).encode(), key: job_row(job)})
        self.txn({key: None})
        self.finished[job.id] = commit_ts
        return commit_ts

    def create_db(self, db_id: int, name: str) -> int:
        self.dbs[db_id] = db_json(db_id, name)
        meta = {meta_keys.db_info_key(db_id): json.dumps(self.dbs[db_id]).encode()}
        return self._ddl(ActionType.CREATE_SCHEMA, db_id, 0, meta, query=f"CREATE DATABASE {name}")

    def create_table(self, db_id: int, table_id: int, name: str, partition_ids: list[int] | None = None) -> int:
        table = table_json(table_id, name, partition_ids)
        self.tables[table_id] = (db_id, table)
        meta = {meta_keys.table_info_key(db_id, table_id): json.dumps(table).encode()}
        return self._ddl(ActionType.CREATE_TABLE, db_id, table_id, meta, table, f"CREATE TABLE {name} (...)")

    def drop_table(self, table_id: int) -> int:
        db_id, table = self.tables.pop(table_id)
        meta = {meta_keys.table_info_key(db_id, table_id): None}
        return self._ddl(ActionType.DROP_TABLE, db_id, table_id, meta, table, f"DROP TABLE {table['name']['O']}")

    def truncate_table(self, table_id: int, new_id: int) -> int:
        db_id, table = self.tables.pop(table_id)
        new = {**table, "id": new_id}
        self.tables[new_id] = (db_id, new)
        meta = {meta_keys.table_info_key(db_id, table_id): None,
                meta_keys.table_info_key(db_id, new_id): json.dumps(new).encode()}
        return self._ddl(ActionType.TRUNCATE_TABLE, db_id, table_id, meta, new, f"TRUNCATE TABLE {table['name']['O']}")

    def rename_table(self, table_id: int, new_db_id: int, new_name: str) -> int:
        db_id, table = self.tables.pop(table_id)
        new = {**table, "name": {"O": new_name, "L": new_name.lower()}}
        self.tables[table_id] = (new_db_id, new)
        meta = {meta_keys.table_info_key(db_id, table_id): None,
                meta_keys.table_info_key(new_db_id, table_id): json.dumps(new).encode()}
        return self._ddl(ActionType.RENAME_TABLE, new_db_id, table_id, meta, new, f"RENAME TABLE ... TO {new_name}")
