"""A pyiceberg table update that makes a given schema current with the field ids it carries.
pyiceberg's UpdateSchema assigns new ids itself, which would break the ids Delta's column mapping
wrote into the Parquet files; this adds the schema as it is (Iceberg REST spec "AddSchemaUpdate",
"SetCurrentSchemaUpdate"), guarded by the schema it replaces. Owner: tidelake.consumers.iceberg.publish.
"""

from __future__ import annotations

from pyiceberg.schema import Schema
from pyiceberg.table import Transaction
from pyiceberg.table.update import (
    AddSchemaUpdate,
    AssertCurrentSchemaId,
    SetCurrentSchemaUpdate,
    UpdatesAndRequirements,
    UpdateTableMetadata,
)


class SetSchema(UpdateTableMetadata["SetSchema"]):
    def __init__(self, transaction: Transaction, schema: Schema) -> None:
        super().__init__(transaction)
        self._schema = schema

    def _commit(self) -> UpdatesAndRequirements:
        metadata = self._transaction.table_metadata
        new_id = max(s.schema_id for s in metadata.schemas) + 1
        schema = Schema(*self._schema.fields, schema_id=new_id)
        return ((AddSchemaUpdate(schema=schema), SetCurrentSchemaUpdate(schema_id=-1)),
                (AssertCurrentSchemaId(current_schema_id=metadata.current_schema_id),))
