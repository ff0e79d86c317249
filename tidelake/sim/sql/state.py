"""One connection's state: current database, variables and its open transaction.

Transactions follow TiDB: with autocommit on, a statement outside BEGIN is its own transaction;
BEGIN (or autocommit off) keeps one open until COMMIT/ROLLBACK; a failed statement inside it is
undone alone and the transaction goes on, unless the failure ended the transaction itself (a
deadlock, a lock wait timeout, a write conflict at commit), which TiDB reports and rolls back;
DDL commits an open transaction first. A connection that closes with a transaction open has it
rolled back (`close`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from mysql_mimic.variables import Variables
from sqlglot import exp

from tidelake.sim.sql import variables as sv
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.coerce import Mode
from tidelake.sim.tidb.dml import Txn
from tidelake.sim.tidb.kvtxn import DEFAULT_TXN_MODE, TxnConflictError


class SessionState:
    def __init__(self, tidb: Any, variables: Variables, globals_: Variables) -> None:
        self.tidb = tidb
        self.variables = variables
        self.globals = globals_
        self.database: str | None = None
        self.txn: Txn | None = None
        self.explicit = False  # BEGIN/START TRANSACTION (not only autocommit=0)
        self.savepoints: list[tuple[str, dict]] = []  # SAVEPOINT name -> Txn.savepoint(), oldest first
        self.last_insert_id = 0
        self.user_variables: dict[str, Any] = {}  # SET @name = value

    # ---- settings the statements read --------------------------------------------------------

    def mode(self) -> Mode:
        return Mode.from_sql_mode(str(self.variables.get("sql_mode")), sv.session_time_zone(self.variables))

    def txn_mode(self) -> str:
        return str(self.variables.get("tidb_txn_mode") or "") or DEFAULT_TXN_MODE

    @property
    def autocommit(self) -> bool:
        return bool(self.variables.get("autocommit"))

    @property
    def in_transaction(self) -> bool:
        return self.txn is not None

    def db(self, name: str | None) -> str:
        """The database a name refers to: its own qualifier, else the session's (1046 without one)."""
        if name:
            return name
        if not self.database:
            raise er.sql_error(er.NO_DB, "No database selected")
        return self.database

    def variable(self, name: str) -> Any:
        return self.variables.get(name)

    # ---- transactions ------------------------------------------------------------------------

    def begin(self, mode: str | None = None) -> None:
        """BEGIN: commits an open transaction first, as MySQL and TiDB do."""
        self.commit()
        self.txn = self.tidb.txn(mode=mode or self.txn_mode())
        self.explicit = True

    def commit(self) -> None:
        txn, self.txn, self.explicit, self.savepoints = self.txn, None, False, []
        if txn is None:
            return
        try:
            txn.commit()
        except TxnConflictError as err:
            txn.rollback()
            raise _conflict(err) from None
        except BaseException:
            txn.rollback()
            raise

    def rollback(self) -> None:
        txn, self.txn, self.explicit, self.savepoints = self.txn, None, False, []
        if txn is not None:
            txn.rollback()

    close = rollback

    @contextmanager
    def statement(self) -> Iterator[Txn]:
        """The transaction a DML statement writes in, and its atomicity: on an error nothing of the
        statement stays; in autocommit the statement's own transaction commits on success."""
        standalone = self.txn is None
        if standalone:
            self.txn = self.tidb.txn(mode=self.txn_mode())
        txn = self.txn
        txn.sql_mode = self.mode()
        txn.now = sv.now_in(self.variables)
        savepoint = txn.begin_statement()
        try:
            yield txn
        except TxnConflictError as err:  # the transaction itself is over (deadlock, lock timeout)
            self.txn, self.explicit, self.savepoints = None, False, []
            txn.rollback()
            raise _conflict(err) from None
        except BaseException:
            if standalone and not self._keeps_open():
                self.txn = None
                txn.rollback()
            else:
                txn.rollback_statement(savepoint)
            raise
        if standalone and not self._keeps_open():
            self.commit()

    def savepoint(self, name: str) -> None:
        """SAVEPOINT: outside a transaction it is a no-op, as in TiDB; a name used again moves."""
        if self.txn is None:
            return
        self.savepoints = [(n, sp) for n, sp in self.savepoints if n.lower() != name.lower()]
        self.savepoints.append((name, self.txn.savepoint(named=True)))

    def rollback_to_savepoint(self, name: str, release: bool = False) -> None:
        """ROLLBACK TO SAVEPOINT undoes the writes since it and forgets later savepoints; RELEASE
        SAVEPOINT forgets it and later ones. 1305 for a name not set in this transaction."""
        at = next((i for i, (n, _) in enumerate(self.savepoints) if n.lower() == name.lower()), None)
        if at is None:
            raise er.sql_error(er.SP_DOES_NOT_EXIST, f"SAVEPOINT {name} does not exist")
        if release:
            del self.savepoints[at:]
            return
        self.txn.rollback_statement(self.savepoints[at][1])
        del self.savepoints[at + 1:]

    def _keeps_open(self) -> bool:
        return self.explicit or not self.autocommit

    def read_ts(self) -> int:
        """The snapshot a plain SELECT reads: the open transaction's start, else a fresh TSO."""
        if self.txn is not None:
            return self.txn.start_ts
        return self.tidb.cluster.tso.next()

    def run_ddl(self, action: Callable[[], Any]) -> Any:
        """DDL commits the open transaction first (an implicit commit), then runs alone."""
        self.commit()
        return action()


def table_name(node: exp.Expr, state: SessionState) -> tuple[str, str]:
    """(database, table) of a table reference, the session's database when it names none."""
    table = node.this if isinstance(node, exp.Schema) else node
    return state.db(table.args.get("db").name if table.args.get("db") else None), table.name


def state_variable(state: SessionState) -> Callable[[exp.Expr], Any]:
    """Resolves @@var (the session's value) and @var (a user variable; NULL when never set)."""
    def resolve(node: exp.Expr) -> Any:
        if isinstance(node, exp.SessionParameter):
            return state.variable(node.name)
        return state.user_variables.get(node.name.lower())
    return resolve


def _conflict(err: TxnConflictError) -> er.SqlError:
    """TiDB's codes for a transaction that ended: 1213 deadlock, 1205 lock wait timeout, 8028 schema
    changed, 9007 write conflict."""
    text = str(err)
    if "deadlock" in text.lower():
        return er.sql_error(er.DEADLOCK, "Deadlock found when trying to get lock; try restarting transaction")
    if "lock wait timeout" in text.lower() or "locked for over" in text.lower():
        return er.sql_error(er.LOCK_WAIT_TIMEOUT, "Lock wait timeout exceeded; try restarting transaction")
    if "information schema is changed" in text.lower():
        return er.sql_error(er.INFO_SCHEMA_CHANGED, "Information schema is changed during the execution of the "
                                                    "statement(for example, table definition may be updated by "
                                                    "other DDL ran in parallel). [try again later]")
    return er.sql_error(er.WRITE_CONFLICT, f"Write conflict, {text} [try again later]")
