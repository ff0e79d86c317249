"""Which Iceberg catalog a lake's replicas are published to, recorded in the lake itself
(`<lake>/_tidelake/iceberg/catalog.json`: the catalog's name and URL, password hidden), so a
command that has the lake but not the catalog (`tidelake maintenance --lake s3://...`) knows that
snapshots may list the replicas' files and refuses to VACUUM unguarded. Written before each sync
publishes; read by tidelake.consumers.iceberg.retention. Owner: tidelake.consumers.iceberg.sync.

More: docs/operations.md#reading-replicas-as-iceberg.
"""

from __future__ import annotations

import json

from pyiceberg.catalog import Catalog
from sqlalchemy.engine import make_url

from tidelake.consumers.iceberg.iceberg_catalog import iceberg_root, lake_file_io
from tidelake.lake.layout import LakeLayout

MARK_FILE = "catalog.json"


def mark_path(layout: LakeLayout) -> str:
    return f"{iceberg_root(layout)}/{MARK_FILE}"


def record_catalog(catalog: Catalog, layout: LakeLayout) -> None:
    """Write (or rewrite) the lake's record of `catalog`."""
    shown = make_url(catalog.properties["uri"]).render_as_string(hide_password=True)
    body = json.dumps({"catalog_name": catalog.name, "catalog_uri": shown}).encode()
    with lake_file_io(layout).new_output(mark_path(layout)).create(overwrite=True) as out:
        out.write(body)


def recorded_catalog(layout: LakeLayout) -> str | None:
    """`<name> at <url>` of the catalog the lake records, None when it records none."""
    found = lake_file_io(layout).new_input(mark_path(layout))
    if not found.exists():
        return None
    with found.open() as stream:
        mark = json.loads(stream.read())
    return f"{mark['catalog_name']} at {mark['catalog_uri']}"
