"""Errors as the MySQL protocol carries them: TiDB's code, SQLSTATE and message.

The front raises SqlError with TiDB's codes (tidelake/sim/tidb/sql_errors.py); anything else that
reaches the protocol is answered as TiDB answers an internal error (1105) and logged with its
traceback, so a bug is never mistaken for a refusal. SQLSTATEs are registered in mysql-mimic's
table (`mysql_mimic.errors.SQLSTATES`, which its error packets read) at import.
"""

from __future__ import annotations

import logging

from mysql_mimic import errors as mimic_errors
from mysql_mimic.errors import MysqlError

from tidelake.errors import TidelakeError
from tidelake.sim.tidb import sql_errors as er

log = logging.getLogger(__name__)

for _name in dir(er):
    _kind = getattr(er, _name)
    if isinstance(_kind, tuple) and len(_kind) == 2 and isinstance(_kind[0], int):
        mimic_errors.SQLSTATES.setdefault(_kind[0], _kind[1].encode("ascii"))


def to_mysql(err: BaseException) -> MysqlError:
    """The MySQL error a statement's failure answers."""
    if isinstance(err, er.SqlError):
        mimic_errors.SQLSTATES.setdefault(err.code, err.sqlstate.encode("ascii"))
        return MysqlError(err.message, err.code)
    if isinstance(err, TidelakeError):
        return MysqlError(str(err), er.UNKNOWN[0])
    log.exception("SQL front: internal error", exc_info=err)
    return MysqlError(f"internal error in the simulator's SQL front: {type(err).__name__}: {err}", er.UNKNOWN[0])
