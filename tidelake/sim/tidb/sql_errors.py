"""Errors of the simulated TiDB that carry TiDB's MySQL error code, SQLSTATE and message.

Codes and texts are those of pingcap/tidb `pkg/errno/errcode.go`, `pkg/errno/errname.go` and
`pkg/errno/sqlstate.go`, so a client of the SQL front (tidelake/sim/sql) sees what TiDB answers.
They are InputErrors: callers of the Python front keep getting one clear line.
"""

from __future__ import annotations

from tidelake.errors import InputError


class SqlError(InputError):
    """`code` and `sqlstate` go on the MySQL error packet; the message is TiDB's."""

    def __init__(self, code: int, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.sqlstate = sqlstate
        self.message = message


# (code, SQLSTATE) of the errors the front and the SQL layer raise
DB_CREATE_EXISTS = (1007, "HY000")
DB_DROP_EXISTS = (1008, "HY000")
NO_DB = (1046, "3D000")
BAD_NULL = (1048, "23000")
BAD_DB = (1049, "42000")
TABLE_EXISTS = (1050, "42S01")
BAD_TABLE = (1051, "42S02")
BAD_FIELD = (1054, "42S22")
DUP_FIELDNAME = (1060, "42S21")
DUP_KEYNAME = (1061, "42000")
DUP_ENTRY = (1062, "23000")
PARSE = (1064, "42000")
NONUNIQ_TABLE = (1066, "42000")
INVALID_DEFAULT = (1067, "42000")
MULTIPLE_PRI_KEY = (1068, "42000")
KEY_COLUMN_MISSING = (1072, "42000")
CANT_DROP_FIELD_OR_KEY = (1091, "42000")
UNKNOWN = (1105, "HY000")
TABLE_MUST_HAVE_COLUMNS = (1113, "42000")
WRONG_VALUE_COUNT = (1136, "21S01")
NO_SUCH_TABLE = (1146, "42S02")
PRIMARY_CANT_HAVE_NULL = (1171, "42000")
UNKNOWN_SYSTEM_VARIABLE = (1193, "HY000")
LOCK_WAIT_TIMEOUT = (1205, "HY000")
SP_DOES_NOT_EXIST = (1305, "42000")
DEADLOCK = (1213, "40001")
WRONG_VALUE_FOR_VAR = (1231, "42000")
NOT_SUPPORTED_YET = (1235, "42000")
OUT_OF_RANGE = (1264, "22003")
DATA_TRUNCATED = (1265, "01000")
TRUNCATED_WRONG_VALUE = (1292, "22007")
NO_DEFAULT_FOR_FIELD = (1364, "HY000")
WRONG_VALUE_FOR_FIELD = (1366, "HY000")
DATA_TOO_LONG = (1406, "22001")
RANGE_NOT_INCREASING = (1493, "HY000")
UNIQUE_KEY_NEEDS_ALL_FIELDS_IN_PF = (1503, "HY000")
PARTITION_MGMT_ON_NONPARTITIONED = (1505, "HY000")
DROP_PARTITION_NON_EXISTENT = (1507, "HY000")
DROP_LAST_PARTITION = (1508, "HY000")
SAME_NAME_PARTITION = (1517, "HY000")
NO_PARTITION_FOR_VALUE = (1526, "HY000")
DATA_OUT_OF_RANGE = (1690, "22003")
TABLES_DIFFERENT_METADATA = (1736, "HY000")
ROW_DOES_NOT_MATCH_PARTITION = (1737, "HY000")
UNKNOWN_PARTITION = (1735, "HY000")
GENERATED_COLUMN_VALUE = (3105, "HY000")
INVALID_JSON_TEXT = (3140, "22032")
UNSUPPORTED_DDL = (8200, "HY000")
INVALID_AUTO_RANDOM = (8216, "HY000")
INVALID_SPLIT_REGION_RANGES = (8212, "HY000")
INFO_SCHEMA_CHANGED = (8028, "HY000")
WRITE_CONFLICT = (9007, "HY000")


def sql_error(kind: tuple[int, str], message: str) -> SqlError:
    code, sqlstate = kind
    return SqlError(code, sqlstate, message)


def no_such_table(db: str, table: str) -> SqlError:
    return sql_error(NO_SUCH_TABLE, f"Table '{db}.{table}' doesn't exist")


def bad_db(db: str) -> SqlError:
    return sql_error(BAD_DB, f"Unknown database '{db}'")


def table_exists(table: str) -> SqlError:
    return sql_error(TABLE_EXISTS, f"Table '{table}' already exists")


def duplicate_entry(value: str, key: str) -> SqlError:
    return sql_error(DUP_ENTRY, f"Duplicate entry '{value}' for key '{key}'")


def bad_field(column: str, where: str) -> SqlError:
    return sql_error(BAD_FIELD, f"Unknown column '{column}' in '{where}'")


def not_supported(what: str) -> SqlError:
    """What TiDB answers for syntax it parses but does not run; here also what the simulator's
    front does not implement, named."""
    return sql_error(NOT_SUPPORTED_YET, f"This version of TiDB doesn't yet support '{what}'")


def unsupported_ddl(what: str) -> SqlError:
    return sql_error(UNSUPPORTED_DDL, f"Unsupported {what}")
