"""DuckDB over a lake: a view per replica at its current version, syncpoint cuts as schemas of
views, and reads as of a Delta version, all through DuckDB's delta extension (delta-kernel-rs),
with httpfs for object-store lakes. Both are the signed binaries installed as packages
(duckdb-extension-delta, -httpfs); the connection can neither download nor autoload extensions,
nor load unsigned ones. Owner: `tidelake duckdb`.

More: docs/operations.md#reading-replicas-with-duckdb.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.resources import files
from urllib.parse import urlparse

import duckdb
import duckdb_extension_delta
import duckdb_extension_httpfs
from deltalake import DeltaTable

from tidelake.consumers.metastore import snapshot_database
from tidelake.errors import InputError, TidelakeError
from tidelake.lake.layout import LakeLayout
from tidelake.lake.object_store import is_s3, setting_of
from tidelake.lake.replica_catalog import ReplicaEntry, ReplicaState, read_entries
from tidelake.syncpoint.records import read_syncpoints, replicas_at

# Nothing is fetched or loaded behind the caller's back (DuckDB "Securing DuckDB" settings);
# allow_unsigned_extensions stays off, so LOAD checks the binary is DuckDB's signed build.
OFFLINE_CONFIG = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def extension_file(package: object, name: str) -> str:
    """Extension `name` built for the installed DuckDB, from its duckdb-extension-<name> package."""
    found = files(package) / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if not found.is_file():
        raise TidelakeError(f"duckdb-extension-{name} holds no extension for DuckDB {duckdb.__version__} "
                            f"(looked for {found}): install the versions pyproject.toml pins")
    return str(found)


def offline_connection(layout: LakeLayout | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the delta and httpfs extensions loaded and no way to
    fetch another, holding an S3 secret for `layout` if it is an object-store lake; TIMESTAMP
    WITH TIME ZONE values come out in UTC, as the replicas hold them."""
    con = duckdb.connect(":memory:", config=OFFLINE_CONFIG)
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"LOAD {_string(extension_file(duckdb_extension_delta, 'delta'))}")
    con.execute(f"LOAD {_string(extension_file(duckdb_extension_httpfs, 'httpfs'))}")
    if layout is not None and is_s3(layout.root):
        con.execute(s3_secret(layout))
    return con


def s3_secret(layout: LakeLayout) -> str:
    """CREATE SECRET for the lake's bucket from the storage options delta-rs uses (DuckDB "S3 API
    Support": KEY_ID, SECRET, SESSION_TOKEN, REGION, ENDPOINT, URL_STYLE, USE_SSL, SCOPE)."""
    options = layout.storage_options or {}
    key, secret = setting_of(options, "access_key_id"), setting_of(options, "secret_access_key")
    if not (key and secret):
        raise InputError(f"{layout.root}: DuckDB needs access_key_id and secret_access_key in the lake's "
                         "storage options or the AWS_* environment (instance credentials need DuckDB's aws "
                         "extension, which tidelake does not install)")
    fields = {"TYPE": "s3", "KEY_ID": key, "SECRET": secret, "SCOPE": f"s3://{urlparse(layout.root).netloc}",
              "SESSION_TOKEN": setting_of(options, "session_token"), "REGION": setting_of(options, "region")}
    endpoint = setting_of(options, "endpoint")
    if endpoint:
        parsed = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        fields |= {"ENDPOINT": parsed.netloc, "USE_SSL": parsed.scheme == "https"}
        vhost = (setting_of(options, "virtual_hosted_style_request") or "").lower() == "true"
        fields["URL_STYLE"] = "vhost" if vhost else "path"
    shown = ", ".join(f"{k} {v if isinstance(v, bool) or k == 'TYPE' else _string(v)}"
                      for k, v in fields.items() if v is not None)
    return f"CREATE OR REPLACE SECRET tidelake_lake ({shown})"


def _scan(path: str, version: int | None = None) -> str:
    at = "" if version is None else f", version => {int(version)}"
    return f"delta_scan({_string(path)}{at})"


def _readable(layout: LakeLayout) -> list[ReplicaEntry]:
    """The replicas a reader sees: active and stopped ones (a stopped replica keeps its last rows)."""
    entries = [e for e in read_entries(layout).values() if e.state != ReplicaState.DROPPED]
    return sorted(entries, key=lambda e: (e.db, e.name))


def replica_entry(layout: LakeLayout, table: str) -> ReplicaEntry:
    """The readable replica of upstream `db.table`; an InputError naming the lake otherwise."""
    db, dot, name = table.partition(".")
    if not dot:
        raise InputError(f"table {table!r}: give it as DB.TABLE")
    found = next((e for e in _readable(layout) if (e.db, e.name) == (db, name)), None)
    if found is None:
        raise InputError(f"table {table}: no replica of that name in {layout.root}")
    return found


def open_lake(layout: LakeLayout, syncpoints: Iterable[int] = (),
              con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
    """Views `db.table` over every readable replica at its current version (a view binds the newest
    Delta version each time a query reads it), and for the newest syncpoint and each of
    `syncpoints`, schemas `<db>__sp_<ts>` / `<db>__sp_latest` of views at the cut's versions
    (the names tidelake.consumers.metastore gives them in Spark). A TS that is no syncpoint is an
    InputError naming the nearest ones."""
    con = con or offline_connection(layout)
    for entry in _readable(layout):
        if not DeltaTable.is_deltatable(entry.path, storage_options=layout.storage_options):
            continue  # assigned, its first merge not committed yet: nothing to read
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(entry.db)}")
        try:
            con.execute(f"CREATE OR REPLACE VIEW {_quote(entry.db)}.{_quote(entry.name)} AS SELECT * FROM "
                        f"{_scan(entry.path)}")
        except duckdb.Error as exc:
            raise TidelakeError(f"replica {entry.db}.{entry.name} at {entry.path}: {first_line(exc)}") from exc
    recorded = {sp.ts: sp for sp in read_syncpoints(layout)}
    wanted = [(ts, ts) for ts in syncpoints] + [(max(recorded), None)] * bool(recorded)
    for ts, label in wanted:
        replicas_at(layout, ts)  # raises with the nearest syncpoints when TS is not one
        for replica in recorded[ts].replicas:
            schema = _quote(snapshot_database(replica.db, label))
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            con.execute(f"CREATE OR REPLACE VIEW {schema}.{_quote(replica.name)} AS SELECT * FROM "
                        f"{_scan(replica.path, replica.version)}")
    return con


def _relation(con: duckdb.DuckDBPyConnection, what: str, path: str, version: int) -> duckdb.DuckDBPyRelation:
    try:
        return con.sql(f"SELECT * FROM {_scan(path, version)}")
    except duckdb.Error as exc:
        raise InputError(f"{what} at version {version}: {first_line(exc)}") from exc


def read_version(con: duckdb.DuckDBPyConnection, layout: LakeLayout, table: str, version: int) -> duckdb.DuckDBPyRelation:
    """Replica `db.table` as of Delta `version` (time travel by version), on a connection of
    open_lake or offline_connection(layout)."""
    return _relation(con, f"table {table}", replica_entry(layout, table).path, version)


def read_syncpoint(con: duckdb.DuckDBPyConnection, layout: LakeLayout, table: str, ts: int) -> duckdb.DuckDBPyRelation:
    """Replica `db.table` (its name at the cut) as the syncpoint at `ts` cut it; InputError if
    `ts` is no syncpoint or the table is not in its cut."""
    replicas_at(layout, ts)  # raises with the nearest syncpoints when TS is not one
    cut = next(sp for sp in read_syncpoints(layout) if sp.ts == ts)
    replica = next((r for r in cut.replicas if r.qualified_name == table), None)
    if replica is None:
        raise InputError(f"table {table} is not in the cut of syncpoint {ts}")
    return _relation(con, f"table {table} of syncpoint {ts}", replica.path, replica.version)


def first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
