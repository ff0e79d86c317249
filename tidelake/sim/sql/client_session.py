"""One client connection: mysql-mimic's Session with the statements run on the TiDB-like front.

mysql-mimic (pinned in pyproject.toml) owns the protocol: handshake, authentication (any user, a
local test cluster), COM_QUERY, prepared statements (prepared.py), COM_INIT_DB. This session
parses each query and runs its statements, in the client's order, on the connection's own
thread, so a lock wait never holds up another connection. SELECTs without a table, SHOW
VARIABLES/STATUS/WARNINGS and information_schema are mysql-mimic's; OK packets carry the affected
rows and last insert id, the status flags autocommit and an open transaction.

More: docs/internals.md#client_session.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mysql_mimic import Session
from mysql_mimic.errors import MysqlError
from mysql_mimic.session import Query
from mysql_mimic.types import ServerStatus
from mysql_mimic.variables import Variables
from sqlglot import exp

from tidelake.sim.sql import statements
from tidelake.sim.sql import variables as sv
from tidelake.sim.sql.error_packets import to_mysql
from tidelake.sim.sql.parse import Statement, parse
from tidelake.sim.sql.prepared import keep_parameter_types
from tidelake.sim.sql.result import Result
from tidelake.sim.sql.show import OURS
from tidelake.sim.sql.state import SessionState
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.show_create import type_sql

_SYSTEM_DBS = {"information_schema", "performance_schema", "metrics_schema", "mysql"}


class SqlSession(Session):
    def __init__(self, tidb: Any, globals_: Variables) -> None:
        super().__init__(sv.session_variables(globals_))
        self.state = SessionState(tidb, self.variables, globals_)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sim-sql-conn")
        self._counts = (0, 0, 0)  # affected rows, last insert id, warnings of the last OK

    # ---- lifecycle -------------------------------------------------------------------------

    async def init(self, connection: Any) -> None:
        await super().init(connection)
        original_ok = connection.ok

        def ok(**kwargs: Any) -> bytes:
            affected, last_id, warnings = self._counts
            self._counts = (0, 0, 0)
            kwargs.setdefault("affected_rows", affected)
            kwargs.setdefault("last_insert_id", last_id)
            kwargs.setdefault("warnings", warnings)
            return original_ok(**kwargs)

        connection.ok = ok
        keep_parameter_types(connection)
        self.state.database = self.database  # the handshake's database (mysql-mimic sets the attribute)
        self._update_status()

    async def close(self) -> None:
        """A client that goes away mid-transaction has it rolled back, as TiDB does."""
        try:
            await self._run(self.state.close)
        finally:
            self._thread.shutdown(wait=False)
            await super().close()

    async def use(self, database: str) -> None:
        await self._run(lambda: self.state.tidb.catalog.db(database))
        self.state.database = self.database = self.state.tidb.catalog.db(database).name

    # ---- queries -----------------------------------------------------------------------------

    async def handle_query(self, sql: str, attrs: dict[str, str]) -> Any:
        parsed = await self._run(lambda: parse(sql))
        result: Any = None
        for statement in parsed:
            self._counts = (0, 0, 0)
            if self._for_mimic(statement.tree):
                self.database = self.state.database
                result = await Query(statement.tree, statement.text, attrs, self.middlewares, self._refuse).start()
            else:
                result = self._answer(await self._run(lambda s=statement: self._execute(s)))
            self._update_status()
        return result

    async def _refuse(self, expression: exp.Expr, sql: str, attrs: dict[str, str]) -> Any:
        raise to_mysql(er.not_supported(f"this statement ({' '.join(sql.split()[:3])})"))

    def _execute(self, statement: Statement) -> Result:
        result = statements.execute(statement, self.state)
        self.database = self.state.database
        return result

    def _answer(self, result: Result) -> Any:
        if result.columns:
            return result.rows, result.columns
        self._counts = (result.affected, result.last_insert_id or 0, result.warnings)
        return None

    async def _run(self, fn: Any) -> Any:
        """Run on this connection's thread; failures become the MySQL error they answer."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._thread, fn)
        except MysqlError:
            raise
        except Exception as err:  # noqa: BLE001 - every failure answers the client with an error
            raise to_mysql(err) from None

    def _for_mimic(self, tree: exp.Expr) -> bool:
        if isinstance(tree, exp.Show):
            return tree.name.upper() not in OURS
        if isinstance(tree, exp.Kill):
            return True
        if isinstance(tree, exp.Select):
            tables = list(tree.find_all(exp.Table))
            if not tables:  # @@variables, DATABASE(), VERSION()... are mysql-mimic's; SLEEP is ours
                return not any(f.name.upper() == "SLEEP" for f in tree.find_all(exp.Anonymous))
            return all((t.args.get("db").name if t.args.get("db") else (self.state.database or "")).lower()
                       in _SYSTEM_DBS for t in tables)
        return False

    def _update_status(self) -> None:
        connection = self._connection
        if connection is None:
            return
        flags = ServerStatus(0)
        if self.state.autocommit:
            flags |= ServerStatus.SERVER_STATUS_AUTOCOMMIT
        if self.state.in_transaction:
            flags |= ServerStatus.SERVER_STATUS_IN_TRANS
        connection.status_flags = flags

    async def schema(self) -> dict:
        """Databases, tables and column types for mysql-mimic's information_schema."""
        def build() -> dict:
            out: dict = {}
            for db, name, info in self.state.tidb.tables():
                out.setdefault(db, {})[name] = {c.name: type_sql(c).split(" ")[0].upper() for c in info.public_columns()}
            return out
        return await self._run(build)

