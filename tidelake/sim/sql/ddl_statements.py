"""DDL statements translated onto the front's DDL executor (tidelake/sim/tidb/ddl.py).

CREATE/DROP DATABASE, CREATE TABLE (columns, keys, partitioning, table options), CREATE TABLE
LIKE, CREATE/DROP INDEX, DROP/TRUNCATE TABLE, RENAME TABLE(S) and ALTER TABLE. An ALTER TABLE
with several actions becomes one multi-schema change job, as in TiDB; the partition
re-organisations (EXCHANGE, REORGANIZE, PARTITION BY, REMOVE PARTITIONING) stand alone, as TiDB
requires. Every job carries the statement's own text as its query. Nothing TiDB would refuse is
accepted; options that change no row and no key (ENGINE, ROW_FORMAT, placement, TTL comments) are
accepted and ignored, as TiDB keeps them only as metadata.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlglot import exp

from tidelake.codec.schema import IndexInfo, TableInfo
from tidelake.sim.sql.columns import ParsedColumn, default_value, parse_column
from tidelake.sim.sql.result import Result
from tidelake.sim.sql.state import SessionState, state_variable, table_name
from tidelake.sim.tidb import dialect as td
from tidelake.sim.tidb import partition as part
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb import table_changes as tc
from tidelake.sim.tidb.dialect import TiDB
from tidelake.sim.tidb.show_create import type_sql
from tidelake.sim.tidb.table_spec import IndexSpec, TableSpec, default_collation, index_name

Planner = Callable[[TableInfo], tc.TableChange]
_IGNORED_TABLE_OPTIONS = (exp.EngineProperty, exp.RowFormatProperty, exp.ChecksumProperty)


def execute_create(node: exp.Create, text: str, state: SessionState) -> Result:
    kind = (node.args.get("kind") or "").upper()
    if kind in ("DATABASE", "SCHEMA"):
        return _create_database(node, text, state)
    if kind == "TABLE":
        return _create_table(node, text, state)
    if kind == "INDEX":
        return _create_index(node, text, state)
    raise er.not_supported(f"CREATE {kind}")


def _create_database(node: exp.Create, text: str, state: SessionState) -> Result:
    name = node.this.name
    charset, collate = "utf8mb4", None
    for prop in (node.args.get("properties") or exp.Properties(expressions=[])).expressions:
        if isinstance(prop, exp.CharacterSetProperty):
            charset = prop.this.name.lower()
        elif isinstance(prop, exp.CollateProperty):
            collate = prop.this.name.lower()
    if node.args.get("exists") and name.lower() in state.tidb.catalog.dbs:
        return Result(warnings=1)
    state.run_ddl(lambda: state.tidb.create_database(name, charset, collate or default_collation(charset), query=text))
    return Result(affected=1)


def _create_table(node: exp.Create, text: str, state: SessionState) -> Result:
    db, name = table_name(node.this, state)
    if node.args.get("expression") is not None:
        raise er.not_supported("CREATE TABLE ... SELECT")
    props = (node.args.get("properties") or exp.Properties(expressions=[])).expressions
    like = next((p for p in props if isinstance(p, exp.LikeProperty)), None)
    exists = node.args.get("exists") and state.tidb.catalog.has_table(db, name)
    if exists:
        return Result(warnings=1)
    if like is not None:
        src_db, src = table_name(like.this, state)
        state.run_ddl(lambda: state.tidb.create_table_like(db, name, src_db, src, query=text))
        return Result()
    if not isinstance(node.this, exp.Schema):
        raise er.sql_error(er.TABLE_MUST_HAVE_COLUMNS, "A table must have at least 1 column")
    spec = table_spec(node.this, name, props, state)
    state.run_ddl(lambda: state.tidb.create_table_spec(db, spec, query=text))
    return Result()


def table_spec(schema: exp.Schema, name: str, props: list, state: SessionState) -> TableSpec:
    """The TableSpec of a CREATE TABLE's column list and options."""
    columns: list[ParsedColumn] = []
    primary: tuple[tuple[str, int], ...] = ()
    clustered: bool | None = None
    indexes: list[IndexSpec] = []
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            columns.append(parse_column(item, state_variable(state)))
            continue
        if isinstance(item, exp.Constraint):
            inner = item.expressions
            label = item.name
        else:
            inner, label = [item], ""
        for constraint in inner:
            if isinstance(constraint, exp.PrimaryKey):
                if primary:
                    raise er.sql_error(er.MULTIPLE_PRI_KEY, "Multiple primary key defined")
                primary = key_parts(constraint.expressions)
                clustered = _clustering(constraint)
            else:
                index = index_spec(constraint, label, [c.column.name for c in columns])
                if index is not None:
                    indexes.append(index)
    for parsed in columns:
        if parsed.primary_key:
            if primary:
                raise er.sql_error(er.MULTIPLE_PRI_KEY, "Multiple primary key defined")
            primary = ((parsed.column.name, -1),)
            clustered = parsed.clustered if parsed.clustered is not None else clustered
        if parsed.unique:
            indexes.append(IndexSpec(parsed.column.name, ((parsed.column.name, -1),), unique=True))
    auto_random = next((c.auto_random for c in columns if c.auto_random is not None), None)
    if auto_random is not None and clustered is False:
        raise er.sql_error(er.INVALID_AUTO_RANDOM, "Invalid auto random: auto_random is only allowed on a clustered "
                                                   "bigint primary key")
    spec = TableSpec(name=name, columns=tuple(c.column for c in columns), primary_key=primary,
                     clustered=True if auto_random is not None else clustered,
                     cluster_mode=str(state.variable("tidb_enable_clustered_index")).upper().replace("1", "ON"),
                     indexes=tuple(_named(indexes)), auto_random=auto_random)
    return _with_options(spec, props, state)


def _clustering(key: exp.PrimaryKey) -> bool | None:
    flag = key.args.get("clustered")
    return None if flag is None else flag == exp.true()


def key_parts(items: list[exp.Expr]) -> tuple[tuple[str, int], ...]:
    """(column, prefix length or -1) of an index's key parts; expressions are refused."""
    parts = []
    for item in items:
        node = item.this if isinstance(item, exp.Ordered) else item
        if isinstance(node, exp.ColumnPrefix):
            parts.append((node.this.name, int(node.expression.name)))
        elif isinstance(node, (exp.Column, exp.Identifier)):
            parts.append((node.name, -1))
        else:
            raise er.not_supported(f"expression index part {node.sql(dialect=TiDB)}")
    return tuple(parts)


def index_spec(node: exp.Expr, label: str, columns: list[str]) -> IndexSpec | None:
    """An index definition of CREATE TABLE or ALTER TABLE ADD; FOREIGN KEY and CHECK give None (TiDB
    keeps them as metadata only; the simulator does not enforce them)."""
    if isinstance(node, (exp.ForeignKey, exp.CheckColumnConstraint, exp.Reference)):
        return None
    if isinstance(node, exp.UniqueColumnConstraint):
        target = node.this
        name = target.this.name if isinstance(target, exp.Schema) and target.this else label
        parts = key_parts(target.expressions if isinstance(target, exp.Schema) else [target])
        return IndexSpec(name, parts, unique=True)
    if isinstance(node, exp.IndexColumnConstraint):
        kind = (node.args.get("kind") or "").upper()
        if kind == "SPATIAL":
            raise er.not_supported("SPATIAL indexes")
        if kind == "FULLTEXT":
            return None  # TiDB parses FULLTEXT and ignores it with a warning (ErrTableCantHandleFt)
        return IndexSpec(node.this.name if node.this else label, key_parts(node.expressions))
    raise er.not_supported(f"table constraint {node.sql(dialect=TiDB)}")


def _named(indexes: list[IndexSpec]) -> list[IndexSpec]:
    """Unnamed indexes get TiDB's generated names (first column, then _2, _3...)."""
    out: list[IndexSpec] = []
    for index in indexes:
        if not index.name:
            taken = TableInfo(id=0, name="", indices=[_stub(i) for i in out])
            index = replace(index, name=index_name(taken, [index.columns[0][0]]))
        out.append(index)
    return out


def _stub(index: IndexSpec) -> IndexInfo:
    return IndexInfo(id=0, name=index.name, columns=[])  # only the name matters for the naming rule


def _with_options(spec: TableSpec, props: list, state: SessionState) -> TableSpec:
    fields: dict[str, Any] = {}
    for prop in props:
        if isinstance(prop, exp.CharacterSetProperty):
            fields["charset"] = prop.this.name.lower()
            fields.setdefault("collate", default_collation(fields["charset"]))
        elif isinstance(prop, exp.CollateProperty):
            fields["collate"] = prop.this.name.lower()
        elif isinstance(prop, exp.SchemaCommentProperty):
            fields["comment"] = prop.this.name
        elif isinstance(prop, exp.AutoIncrementProperty):
            fields["auto_increment"] = int(prop.this.name)
        elif isinstance(prop, (exp.PartitionByRangeProperty, exp.PartitionByListProperty, td.PartitionByHash,
                               td.PartitionByColumns)):
            fields["partition"] = partition_spec(prop, state)
        elif isinstance(prop, exp.Property) and isinstance(prop.this, exp.Literal):
            option = prop.this.name.upper()
            value = int(prop.args["value"].name)
            key = {"SHARD_ROW_ID_BITS": "shard_row_id_bits", "PRE_SPLIT_REGIONS": "pre_split_regions",
                   "AUTO_ID_CACHE": "auto_id_cache"}.get(option)
            if key is not None:
                fields[key] = value
        elif isinstance(prop, _IGNORED_TABLE_OPTIONS) or isinstance(prop, exp.LikeProperty):
            continue
        elif isinstance(prop, exp.Property) and prop.name.upper() in ("PLACEMENT", "TTL", "TTL_ENABLE",
                                                                       "TTL_JOB_INTERVAL", "STATS_PERSISTENT"):
            continue
        else:
            raise er.not_supported(f"table option {prop.sql(dialect=TiDB)}")
    if "collate" in fields and "charset" not in fields:
        fields["charset"] = fields["collate"].split("_")[0]
    return replace(spec, **fields)


def partition_spec(prop: exp.Expr, state: SessionState) -> part.PartitionSpec:
    """PARTITION BY RANGE|LIST [COLUMNS] | [LINEAR] HASH | KEY as the front's PartitionSpec."""
    if isinstance(prop, td.PartitionByHash):
        exprs = prop.expressions
        count = int(prop.args["partitions"].name) if prop.args.get("partitions") is not None else 0
        names = tuple((n.name, None) for n in prop.args.get("names") or [])
        if prop.args.get("key"):
            return part.PartitionSpec(part.KEY, columns=tuple(e.name for e in exprs), definitions=names,
                                      count=count or len(names) or 1)
        return part.PartitionSpec(part.HASH, expr=_expr_text(exprs[0]), definitions=names,
                                  count=count or len(names) or 1)
    columns_form = isinstance(prop, td.PartitionByColumns)
    inner = prop.this if columns_form else prop
    targets = inner.args["partition_expressions"]
    kind = part.RANGE if isinstance(inner, exp.PartitionByRangeProperty) else part.LIST
    definitions = tuple(_definition(d, kind) for d in inner.args["create_expressions"])
    if columns_form:
        return part.PartitionSpec(kind, columns=tuple(t.name for t in targets), definitions=definitions)
    return part.PartitionSpec(kind, expr=_expr_text(targets[0]), definitions=definitions)


def _definition(node: exp.Expr, kind: int) -> tuple[str, Any]:
    inner = node.expressions[0] if isinstance(node, exp.Partition) else node
    name = inner.this.name
    if kind == part.RANGE:
        return name, [b.name.upper() if isinstance(b, exp.Var) else _expr_text(b) for b in inner.expressions]
    groups = []
    for value in inner.expressions:
        groups.append([_expr_text(v) for v in value.expressions] if isinstance(value, exp.Tuple) else [_expr_text(value)])
    return name, groups


def _expr_text(node: exp.Expr) -> str:
    """An expression as TiDB keeps partition expressions and bounds: restored SQL, names quoted."""
    inner = node.this if isinstance(node, exp.Paren) else node
    return inner.sql(dialect=TiDB, identify=True)


def _create_index(node: exp.Create, text: str, state: SessionState) -> Result:
    index = node.this
    db, table = table_name(index.args["table"], state)
    params = index.args.get("params")
    parts = key_parts(params.args.get("columns") or [])
    spec = IndexSpec(index.name, parts, unique=bool(node.args.get("unique")))
    state.run_ddl(lambda: state.tidb.alter_table(db, table, lambda t: [tc.add_index(t, spec, state.tidb.cluster)],
                                                 query=text))
    return Result()


def execute_drop(node: exp.Drop, text: str, state: SessionState) -> Result:
    kind = (node.args.get("kind") or "").upper()
    if kind in ("DATABASE", "SCHEMA"):
        name = (node.args.get("tables") or [node.this])[0].name  # sqlglot keeps the name as a table
        if name.lower() not in state.tidb.catalog.dbs:
            if node.args.get("exists"):
                return Result(warnings=1)
            raise er.sql_error(er.DB_DROP_EXISTS, f"Can't drop database '{name}'; database doesn't exist")
        state.run_ddl(lambda: state.tidb.drop_database(name, query=text))
        if state.database and state.database.lower() == name.lower():
            state.database = None
        return Result()
    if kind == "TABLE":
        tables = node.args.get("tables") or [node.this]
        missing = [table_name(t, state) for t in tables if not state.tidb.catalog.has_table(*table_name(t, state))]
        if missing and not node.args.get("exists"):
            raise er.sql_error(er.BAD_TABLE, "Unknown table '" + ",".join(f"{d}.{t}" for d, t in missing) + "'")
        for table in tables:
            db, name = table_name(table, state)
            if state.tidb.catalog.has_table(db, name):
                state.run_ddl(lambda db=db, name=name: state.tidb.drop_table(db, name, query=text))
        return Result(warnings=len(missing))
    if kind == "INDEX":
        db, table = table_name(node.args["cluster"].this, state)
        name = (node.args.get("tables") or [node.this])[0].name
        state.run_ddl(lambda: state.tidb.alter_table(db, table, lambda t: [tc.drop_index(t, name)], query=text))
        return Result()
    raise er.not_supported(f"DROP {kind}")


def execute_truncate(node: exp.TruncateTable, text: str, state: SessionState) -> Result:
    for table in node.expressions:
        db, name = table_name(table, state)
        state.run_ddl(lambda db=db, name=name: state.tidb.truncate_table(db, name, query=text))
    return Result()


def execute_rename(node: td.RenameTables, text: str, state: SessionState) -> Result:
    pairs = []
    for pair in node.expressions:
        old, new = pair.expressions
        pairs.append((*table_name(old, state), *table_name(new, state)))
    state.run_ddl(lambda: state.tidb.rename_tables(pairs, query=text))
    return Result()


# ---- ALTER TABLE ----------------------------------------------------------------------------------

_ALONE = (td.ExchangePartition, td.ReorganizePartition, td.Repartition, td.RemovePartitioning, exp.AlterRename)


def execute_alter(node: exp.Alter, text: str, state: SessionState) -> Result:
    if (node.args.get("kind") or "").upper() != "TABLE":
        raise er.not_supported(f"ALTER {node.args.get('kind')}")
    db, table = table_name(node.this, state)
    actions = list(node.args.get("actions") or [])
    alone = [a for a in actions if isinstance(a, _ALONE)]
    if alone:
        if len(actions) > 1 or node.args.get("options"):
            raise er.unsupported_ddl(f"multi schema change for {type(alone[0]).__name__}")
        return _alone(alone[0], db, table, text, state)
    planners: list[Planner] = []
    now = datetime.now()
    for action in actions:
        planners.extend(_planners(action, state, now))
    for option in node.args.get("options") or []:
        planner = _option_planner(option)
        if planner is not None:
            planners.append(planner)
    if not planners:
        state.tidb.catalog.table(db, table)  # an unknown table is still an error
        return Result()

    def plan(info: TableInfo) -> list[tc.TableChange]:
        changes, current = [], info
        for planner in planners:
            change = planner(current)
            changes.append(change)
            current = change.apply_all(current)
        return changes

    state.run_ddl(lambda: state.tidb.alter_table(db, table, plan, query=text))
    return Result()


def _planners(action: exp.Expr, state: SessionState, now: datetime) -> list[Planner]:
    cluster = state.tidb.cluster
    if isinstance(action, exp.ColumnDef):
        parsed = parse_column(action, state_variable(state))
        if parsed.primary_key or parsed.unique:
            raise er.unsupported_ddl("add column with a key constraint")
        position = _position(action.args.get("position"))
        return [lambda t: tc.add_column(t, parsed.column, position, now)]
    if isinstance(action, exp.Schema):
        return [p for item in action.expressions for p in _planners(item, state, now)]
    if isinstance(action, exp.Drop):
        kind = (action.args.get("kind") or "").upper()
        targets = action.args.get("tables") or [action.this]
        if kind == "COLUMN":
            return [lambda t, n=target.name: tc.drop_column(t, n) for target in targets]
        if kind in ("INDEX", "KEY"):
            return [lambda t, n=target.name: tc.drop_index(t, n) for target in targets]
        if kind == "FOREIGN KEY":
            raise er.not_supported("FOREIGN KEY constraints (the simulator keeps none)")
        raise er.not_supported(f"ALTER TABLE DROP {kind}")
    if isinstance(action, exp.DropPrimaryKey):
        return [lambda t: tc.drop_index(t, "PRIMARY")]
    if isinstance(action, exp.ModifyColumn):
        column_node = action.this
        parsed = parse_column(column_node, state_variable(state))
        old = action.args.get("rename_from")
        old_name = old.name if old is not None else parsed.column.name
        position = _position(column_node.args.get("position"))
        mode = state.mode()
        return [lambda t: tc.modify_column(t, old_name, parsed.column, position, mode, cluster)]
    if isinstance(action, exp.RenameColumn):
        old, new = action.this.name, action.args["to"].name
        return [lambda t: tc.rename_column(t, old, new)]
    if isinstance(action, exp.AlterColumn):
        name = action.this.name
        if action.args.get("drop"):
            return [lambda t: tc.set_default(t, name, None, drop=True)]
        if action.args.get("default") is not None:
            default = action.args["default"]
            return [lambda t: tc.set_default(t, name, _default_for(t, name, default, state))]
        raise er.not_supported(f"ALTER COLUMN {action.sql(dialect=TiDB)}")
    if isinstance(action, exp.AddConstraint):
        out: list[Planner] = []
        for constraint in action.expressions:
            inner = constraint.expressions if isinstance(constraint, exp.Constraint) else [constraint]
            label = constraint.name if isinstance(constraint, exp.Constraint) else ""
            for item in inner:
                out.extend(_add_key(item, label, cluster))
        return out
    if isinstance(action, exp.RenameIndex):
        old, new = action.this.name, action.args["to"].name
        return [lambda t: tc.rename_index(t, old, new)]
    if isinstance(action, exp.AlterIndex):
        name, visible = action.this.name, action.args.get("visible")
        return [lambda t: tc.index_visibility(t, name, invisible=visible is False)]
    if isinstance(action, td.AddPartitions):
        return [_add_partitions(action, state)]
    if isinstance(action, td.DropPartitions):
        names = [n.name for n in action.expressions]
        return [lambda t: tc.drop_partitions(t, names)]
    if isinstance(action, td.TruncatePartitions):
        return [_truncate_partitions(action, state)]
    raise er.not_supported(f"ALTER TABLE {action.sql(dialect=TiDB) if hasattr(action, 'sql') else action}")


def _position(node: exp.Expr | None) -> Any:
    if node is None:
        return None
    where = (node.args.get("position") or "").upper()
    if where == "FIRST":
        return "FIRST"
    return ("AFTER", node.this.name)


def _default_for(info: TableInfo, name: str, node: exp.Expr, state: SessionState) -> Any:
    column = tc.column_of(info, name)
    ft = column.field_type
    fields = {"name": column.name, "charset": ft.charset or None, "collate": ft.collate or None}
    return default_value(node, type_sql(column), fields, state_variable(state))


def _add_key(item: exp.Expr, label: str, cluster: Any) -> list[Planner]:
    if isinstance(item, exp.PrimaryKey):
        if item.args.get("clustered") == exp.true():
            raise er.unsupported_ddl("Adding clustered primary key is not supported. Please consider adding "
                                     "NONCLUSTERED primary key instead")
        spec = IndexSpec("PRIMARY", key_parts(item.expressions), unique=True, primary=True)
        return [lambda t: tc.add_index(t, spec, cluster)]
    index = index_spec(item, label, [])
    if index is None:
        if isinstance(item, exp.ForeignKey):
            raise er.not_supported("FOREIGN KEY constraints (the simulator keeps none)")
        return []

    def plan(t: TableInfo) -> tc.TableChange:
        named = index if index.name else replace(index, name=index_name(t, [index.columns[0][0]]))
        return tc.add_index(t, named, cluster)
    return [plan]


def _option_planner(option: exp.Expr) -> Planner | None:
    if isinstance(option, exp.SchemaCommentProperty):
        comment = option.this.name
        return lambda t: tc.table_comment(t, comment)
    if isinstance(option, exp.AutoIncrementProperty):
        base = int(option.this.name)
        return lambda t: tc.rebase_auto_id(t, base)
    if isinstance(option, exp.Property) and isinstance(option.this, exp.Literal) and \
            option.this.name.upper() == "AUTO_RANDOM_BASE":
        base = int(option.args["value"].name)
        return lambda t: tc.rebase_auto_id(t, base, random=True)
    if isinstance(option, exp.CharacterSetProperty):
        charset = option.this.name.lower()
        return lambda t: tc.table_charset(t, charset, default_collation(charset))
    if isinstance(option, exp.CollateProperty):
        collate = option.this.name.lower()
        return lambda t: tc.table_charset(t, collate.split("_")[0], collate)
    if isinstance(option, _IGNORED_TABLE_OPTIONS):
        return None
    raise er.not_supported(f"table option {option.sql(dialect=TiDB)}")


def _add_partitions(action: td.AddPartitions, state: SessionState) -> Planner:
    if action.args.get("partitions") is not None:
        raise er.not_supported("ADD PARTITION PARTITIONS n (HASH/KEY re-partitioning)")

    def plan(t: TableInfo) -> tc.TableChange:
        kind = t.partition.type if t.partition is not None else part.RANGE
        definitions = [_definition(d, kind) for d in action.expressions]
        ids = state.tidb.catalog.alloc_ids(len(definitions))
        return tc.add_partitions(t, definitions, ids)
    return plan


def _truncate_partitions(action: td.TruncatePartitions, state: SessionState) -> Planner:
    def plan(t: TableInfo) -> tc.TableChange:
        if t.partition is None:
            raise er.sql_error(er.PARTITION_MGMT_ON_NONPARTITIONED,
                               "Partition management on a not partitioned table is not possible")
        names = [d.name for d in t.partition.definitions] if action.args.get("all") else \
            [n.name for n in action.expressions]
        return tc.truncate_partitions(t, names, state.tidb.catalog.alloc_ids(len(names)))
    return plan


def _alone(action: exp.Expr, db: str, table: str, text: str, state: SessionState) -> Result:
    """Statements TiDB runs only on their own (one job, no multi-schema change)."""
    tidb = state.tidb
    if isinstance(action, exp.AlterRename):
        new_db, new_name = table_name(action.this, state)
        state.run_ddl(lambda: tidb.rename_tables([(db, table, new_db, new_name)], query=text))
        return Result()
    if isinstance(action, td.ExchangePartition):
        other_db, other = table_name(action.args["table"], state)
        validation = action.args.get("validation") != exp.false()
        state.run_ddl(lambda: tidb.exchange_partition(db, table, action.this.name, other_db, other,
                                                      validation=validation, query=text))
        return Result()
    if isinstance(action, td.ReorganizePartition):
        names = [n.name for n in action.expressions]

        def reorganize() -> Any:
            kind = tidb.catalog.table(db, table).partition
            if kind is None:
                raise er.sql_error(er.PARTITION_MGMT_ON_NONPARTITIONED,
                                   "Partition management on a not partitioned table is not possible")
            definitions = [_definition(d, kind.type) for d in action.args["definitions"]]
            return tidb.reorganize_partition(db, table, names, definitions, query=text)
        state.run_ddl(reorganize)
        return Result()
    if isinstance(action, td.Repartition):
        spec = partition_spec(action.this, state)
        state.run_ddl(lambda: tidb.alter_partitioning(db, table, spec, query=text))
        return Result()
    state.run_ddl(lambda: tidb.remove_partitioning(db, table, query=text))
    return Result()

