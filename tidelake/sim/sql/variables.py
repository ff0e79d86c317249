"""System variables a TiDB session answers to, with TiDB's defaults (pkg/sessionctx/vardef).

mysql-mimic keeps the variables (its `Variables` classes); this adds TiDB's to its MySQL set and
applies SET statements: SESSION values per connection, GLOBAL values for the whole server (new
sessions start from them). Variables the front acts on: autocommit, tidb_txn_mode, sql_mode,
time_zone, tidb_enable_clustered_index; the others are kept and shown, as a client expects.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any

from mysql_mimic.variables import SYSTEM_VARIABLES, GlobalVariables, SessionVariables, Variables

from tidelake.sim.tidb import sql_errors as er

TIDB_VERSION = "8.0.11-TiDB-v8.5.0"
DEFAULT_SQL_MODE = ("ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,"
                    "NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION")


def _on_off(value: Any) -> str:
    text = str(value).strip().upper()
    if text in ("1", "ON", "TRUE"):
        return "ON"
    if text in ("0", "OFF", "FALSE"):
        return "OFF"
    raise er.sql_error(er.WRONG_VALUE_FOR_VAR, f"Variable can't be set to the value of '{value}'")


def _bool(value: Any) -> bool:
    return _on_off(value) == "ON"


def _txn_mode(value: Any) -> str:
    text = str(value).strip().lower()
    if text not in ("", "pessimistic", "optimistic"):
        raise er.sql_error(er.WRONG_VALUE_FOR_VAR, f"Variable 'tidb_txn_mode' can't be set to the value of '{value}'")
    return text


def _text(value: Any) -> str:
    return str(value)


# name: (type, default, dynamic), mysql-mimic's VariableSchema
TIDB_VARIABLES = {
    **SYSTEM_VARIABLES,
    "autocommit": (_bool, True, True),
    "version": (str, TIDB_VERSION, False),
    "version_comment": (str, "TiDB Server (tidelake simulator: the TiDB-like front of tidelake sim)", False),
    "sql_mode": (_text, DEFAULT_SQL_MODE, True),
    "time_zone": (str, "SYSTEM", True),
    "system_time_zone": (str, "UTC", False),
    "transaction_isolation": (str, "REPEATABLE-READ", True),
    "tx_isolation": (str, "REPEATABLE-READ", True),
    "collation_connection": (str, "utf8mb4_bin", True),
    "collation_database": (str, "utf8mb4_bin", True),
    "collation_server": (str, "utf8mb4_bin", True),
    "default_storage_engine": (str, "InnoDB", True),
    "default_tmp_storage_engine": (str, "InnoDB", True),
    "lower_case_table_names": (int, 2, False),
    "foreign_key_checks": (_on_off, "ON", True),
    "unique_checks": (_on_off, "ON", True),
    "sql_safe_updates": (_on_off, "OFF", True),
    "sql_select_limit": (int, 18446744073709551615, True),
    "max_execution_time": (int, 0, True),
    "innodb_lock_wait_timeout": (int, 50, True),
    "group_concat_max_len": (int, 1024, True),
    "div_precision_increment": (int, 4, True),
    "tidb_txn_mode": (_txn_mode, "", True),
    "tidb_enable_clustered_index": (str, "ON", True),
    "tidb_enable_async_commit": (_on_off, "ON", True),
    "tidb_enable_1pc": (_on_off, "ON", True),
    "tidb_enable_exchange_partition": (_on_off, "ON", True),
    "tidb_enable_list_partition": (_on_off, "ON", True),
    "tidb_enable_global_index": (_on_off, "ON", True),
    "tidb_enable_foreign_key": (_on_off, "ON", True),
    "tidb_enable_check_constraint": (_on_off, "OFF", True),
    "tidb_enable_metadata_lock": (_on_off, "ON", True),
    "tidb_ddl_enable_fast_reorg": (_on_off, "ON", True),
    "tidb_enable_fast_create_table": (_on_off, "ON", True),
    "tidb_enable_resource_control": (_on_off, "ON", True),
    "tidb_row_format_version": (int, 2, True),
    "tidb_snapshot": (str, "", True),
    "tidb_current_ts": (int, 0, False),
    "tidb_cdc_write_source": (int, 0, True),
    "tidb_enable_noop_functions": (_on_off, "OFF", True),
    "tidb_enable_mutation_checker": (_on_off, "ON", True),
    "tidb_constraint_check_in_place": (_on_off, "OFF", True),
    "tidb_constraint_check_in_place_pessimistic": (_on_off, "ON", True),
    "tidb_multi_statement_mode": (str, "OFF", True),
    "tidb_allow_remove_auto_inc": (_on_off, "OFF", True),
    "tidb_allow_auto_random_explicit_insert": (_on_off, "OFF", True),
    "tidb_enable_vector_index": (_on_off, "ON", True),
    "tidb_enable_tiflash_read_for_write_stmt": (_on_off, "ON", True),
    "tidb_isolation_read_engines": (str, "tikv,tiflash,tidb", True),
    "tidb_gc_life_time": (str, "10m0s", True),
    "tidb_scatter_region": (str, "", True),
    "tidb_wait_split_region_finish": (_on_off, "ON", True),
    "tidb_enable_amend_pessimistic_txn": (_on_off, "OFF", True),
    "interactive_timeout": (int, 28800, True),
    "wait_timeout": (int, 28800, True),
    "net_write_timeout": (int, 60, True),
    "net_read_timeout": (int, 30, True),
    "character_set_filesystem": (str, "binary", True),
    "explicit_defaults_for_timestamp": (_on_off, "ON", True),
    "sql_notes": (_on_off, "ON", True),
    "sql_warnings": (_on_off, "OFF", True),
    "sql_quote_show_create": (_on_off, "ON", True),
    "sql_log_bin": (_on_off, "ON", True),
    "transaction_read_only": (_bool, False, True),
    "tx_read_only": (_bool, False, True),
    "last_insert_id": (int, 0, True),
    "identity": (int, 0, True),
    "max_allowed_packet": (int, 67108864, True),
    "port": (int, 4000, False),
    "hostname": (str, "tidelake-sim", False),
    "have_ssl": (str, "DISABLED", False),
    "performance_schema": (_on_off, "OFF", False),
    "query_cache_type": (_on_off, "OFF", True),
    "query_cache_size": (int, 1048576, True),
    "license": (str, "Apache License 2.0", False),
}


def global_variables() -> GlobalVariables:
    """The server's GLOBAL values; one instance per SQL server."""
    return GlobalVariables(TIDB_VARIABLES)


def session_variables(globals_: Variables) -> SessionVariables:
    """A new session starts from the GLOBAL values."""
    session = SessionVariables(globals_)
    for name, value in globals_.list():
        try:
            session.set(name, value, force=True)
        except Exception:  # noqa: BLE001 - a value mimic's schema cannot take stays at its default
            continue
    return session


def set_variable(variables: Variables, globals_: Variables, name: str, value: Any, scope: str) -> None:
    """SET [GLOBAL|SESSION] name = value; an unknown name is TiDB's 1193."""
    name = name.lower()
    if name not in variables.schema:
        raise er.sql_error(er.UNKNOWN_SYSTEM_VARIABLE, f"Unknown system variable '{name}'")
    target = globals_ if scope == "GLOBAL" else variables
    _, _, dynamic = target.schema[name]
    if not dynamic:
        raise er.sql_error((1238, "HY000"), f"Variable '{name}' is a read only variable")
    try:
        target.set(name, value, force=True)
    except er.SqlError:
        raise
    except (TypeError, ValueError):
        raise er.sql_error(er.WRONG_VALUE_FOR_VAR, f"Variable '{name}' can't be set to the value of '{value}'") from None


def session_time_zone(variables: Variables) -> tzinfo:
    """time_zone: SYSTEM is the simulator's UTC; '+08:00' style offsets and UTC are understood."""
    text = str(variables.get("time_zone") or "SYSTEM").strip()
    if text.upper() in ("SYSTEM", "UTC", "+00:00", "GMT"):
        return timezone.utc
    sign = -1 if text.startswith("-") else 1
    try:
        hours, minutes = text.lstrip("+-").split(":")
        return timezone(sign * timedelta(hours=int(hours), minutes=int(minutes)))
    except ValueError:
        raise er.sql_error((1298, "HY000"), f"Unknown or incorrect time zone: '{text}'") from None


def now_in(variables: Variables) -> datetime:
    """The statement's NOW() as a naive wall-clock time in the session's time zone."""
    return datetime.now(session_time_zone(variables)).replace(tzinfo=None)
