"""The Iceberg catalog the replicas are published to: pyiceberg's SQL catalog on a database the
deployment already runs (PostgreSQL), or a SQLite file in a local lake's _tidelake/iceberg folder,
which also holds the tables' metadata files. Owner: `tidelake iceberg sync` and the syncpoint job.

More: docs/operations.md#reading-replicas-as-iceberg.
"""

from __future__ import annotations

from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io import FileIO, load_file_io
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from tidelake.config import IcebergConfig
from tidelake.errors import EXIT_TRY_LATER, InputError, TidelakeError
from tidelake.lake.damage import first_line
from tidelake.lake.layout import LakeLayout
from tidelake.lake.object_store import setting_of

CATALOG_FILE = "catalog.db"
# pyiceberg FileIO properties (pyiceberg.io S3_*) from the delta-rs settings of the lake's storage options
_S3_PROPERTIES = {"s3.endpoint": "endpoint", "s3.region": "region", "s3.access-key-id": "access_key_id",
                  "s3.secret-access-key": "secret_access_key", "s3.session-token": "session_token"}


class CatalogUnreachable(TidelakeError):
    """The catalog did not answer: nothing was published, the Delta side is untouched; run again."""

    exit_code = EXIT_TRY_LATER


def iceberg_root(layout: LakeLayout) -> str:
    """The folder of the Iceberg metadata files (and the default catalog file) of a lake."""
    return f"{layout.tidelake_root}/iceberg"


def catalog_uri(layout: LakeLayout, config: IcebergConfig) -> str:
    """The configured catalog URL, else the SQLite file of a local lake (open_catalog creates it)."""
    if config.catalog_uri is not None:
        return config.catalog_uri
    if "://" in layout.root:
        raise InputError(f"{layout.root}: an object-store lake needs [iceberg].catalog_uri in its config "
                         "(the default SQLite catalog file lives in a local lake only)")
    return f"sqlite:///{Path(iceberg_root(layout)) / CATALOG_FILE}"


def existing_catalog(layout: LakeLayout, config: IcebergConfig) -> SqlCatalog | None:
    """The catalog if anything may have been published to it: the configured one, or the local
    lake's SQLite file when it exists; None otherwise (an object-store lake without a catalog URL)."""
    if config.catalog_uri is None and ("://" in layout.root or not Path(iceberg_root(layout), CATALOG_FILE).is_file()):
        return None
    return open_catalog(layout, config)


def _io_properties(layout: LakeLayout) -> dict[str, str]:
    options = layout.storage_options or {}
    io = {key: setting_of(options, setting) for key, setting in _S3_PROPERTIES.items()}
    return {key: value for key, value in io.items() if value}


def lake_file_io(layout: LakeLayout) -> FileIO:
    """The FileIO the lake's catalog reads and writes its metadata with."""
    return load_file_io(_io_properties(layout), iceberg_root(layout))


def open_catalog(layout: LakeLayout, config: IcebergConfig) -> SqlCatalog:
    """The catalog, its tables created on first use; CatalogUnreachable in one line (the URL shown
    without its password) when the database does not answer."""
    uri = catalog_uri(layout, config)
    if config.catalog_uri is None:
        Path(iceberg_root(layout)).mkdir(parents=True, exist_ok=True)
    try:
        shown = make_url(uri).render_as_string(hide_password=True)
    except ArgumentError:
        raise InputError(f"Iceberg catalog URL {uri!r} is not a SQLAlchemy URL like "
                         "'postgresql+psycopg2://user@host/db'") from None
    try:
        return SqlCatalog(config.catalog_name, uri=uri, warehouse=iceberg_root(layout), **_io_properties(layout))
    except ArgumentError as exc:  # a dialect or driver SQLAlchemy does not have
        raise InputError(f"Iceberg catalog {shown}: {first_line(exc)}") from None
    except SQLAlchemyError as exc:
        raise CatalogUnreachable(f"Iceberg catalog {shown}: {first_line(exc)}") from exc
