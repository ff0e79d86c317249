"""TiDB's SQL as sqlglot parses it: the MySQL dialect plus the TiDB forms it lacks.

sqlglot (pinned in pyproject.toml) is extended the way its own Doris and StarRocks dialects extend
MySQL: parser productions registered in its tables, each checked against TiDB's grammar
(pingcap/tidb `pkg/parser/parser.y`). TiDB's executable comments (`/*T![feature] ...*/`, MySQL's
`/*!NNNNN ...*/`) are expanded before parsing, as TiDB's lexer does (`pkg/parser/lexer.go`), for
the features this front implements.

The forms added: docs/sql-front.md#what-sqlglots-mysql-dialect-does-not-parse.
"""

from __future__ import annotations

import re
from typing import Any

from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.parsers.mysql import MySQLParser
from sqlglot.tokens import Token, TokenType

# Features of `/*T![id] ... */` whose text TiDB executes and this front implements; the others
# (placement, ttl, global_index, resource_group...) change no row or key and stay comments.
EXECUTED_FEATURES = frozenset({"clustered_index", "auto_rand", "auto_rand_base", "auto_id_cache", "force_inc"})
_EXECUTABLE = re.compile(r"/\*(?:T!\[([a-z_]+)\]|!(?:\d{5,6})?)(.*?)\*/", re.DOTALL)


class PartitionByHash(exp.Expression):
    """`PARTITION BY [LINEAR] HASH(expr)` / `KEY(cols)` with `PARTITIONS n` or named definitions."""

    arg_types = {"expressions": True, "key": False, "linear": False, "partitions": False, "names": False}


class PartitionByColumns(exp.Expression):
    """`PARTITION BY RANGE|LIST COLUMNS(c, ...)`: `this` is the RANGE/LIST property it wraps."""

    arg_types = {"this": True}


class PartitionNames(exp.Expression):
    """Partition names an ALTER TABLE action names (`DROP PARTITION p0, p1`)."""

    arg_types = {"expressions": True}


class AddPartitions(exp.Expression):
    """`ADD PARTITION (PARTITION ... VALUES ...)` or `ADD PARTITION PARTITIONS n`."""

    arg_types = {"expressions": False, "partitions": False}


class DropPartitions(exp.Expression):
    arg_types = {"expressions": True}


class TruncatePartitions(exp.Expression):
    arg_types = {"expressions": False, "all": False}


class ExchangePartition(exp.Expression):
    """`EXCHANGE PARTITION p WITH TABLE t [WITH|WITHOUT VALIDATION]`."""

    arg_types = {"this": True, "table": True, "validation": False}


class ReorganizePartition(exp.Expression):
    """`REORGANIZE PARTITION p0, p1 INTO (PARTITION ... , ...)`."""

    arg_types = {"expressions": True, "definitions": True}


class Repartition(exp.Expression):
    """`ALTER TABLE t PARTITION BY ...` (TiDB ActionAlterTablePartitioning)."""

    arg_types = {"this": True}


class RemovePartitioning(exp.Expression):
    arg_types: dict = {}


class Clustering(exp.Expression, exp.ColumnConstraintKind):
    """`[NON]CLUSTERED` after a column's PRIMARY KEY."""

    arg_types = {"this": True}


class AutoRandom(exp.Expression, exp.ColumnConstraintKind):
    """`AUTO_RANDOM[(shard_bits[, range_bits])]`."""

    arg_types = {"shard_bits": False, "range_bits": False}


class RenameTables(exp.Expression):
    """`RENAME TABLE a TO b, c TO d`: pairs of Table expressions, applied in order in one job."""

    arg_types = {"expressions": True}


class Savepoint(exp.Expression):
    """`SAVEPOINT name`, or `RELEASE SAVEPOINT name` (release). `ROLLBACK TO [SAVEPOINT] name` is
    sqlglot's own Rollback."""

    arg_types = {"this": True, "release": False}


class SplitTable(exp.Expression):
    """TiDB's `SPLIT TABLE t [INDEX i] BETWEEN (lo) AND (hi) REGIONS n` or `... BY (v), (v)...`."""

    arg_types = {"this": True, "index": False, "lower": False, "upper": False, "regions": False, "by": False}


class Do(exp.Expression):
    """`DO expr, ...`: evaluated, nothing returned (TiCDC's tests wait with `DO SLEEP(n)`)."""

    arg_types = {"expressions": True}


class Replace(exp.Expression):
    """`REPLACE [INTO] t ...`: the INSERT it is written like, with replace semantics."""

    arg_types = {"this": True}


def expand_executable_comments(sql: str, tokens: list[Token]) -> str:
    """`sql` with TiDB's executable comments replaced by their text. Comments only ever sit in the
    gaps between tokens, so only those gaps are searched: a string literal is never touched."""
    pieces, last = [], 0
    bounds = [(tok.start, tok.end + 1) for tok in tokens] + [(len(sql), len(sql))]
    for start, end in bounds:
        gap = sql[last:start]
        pieces.append(_EXECUTABLE.sub(_expand, gap) if "/*" in gap else gap)
        pieces.append(sql[start:end])
        last = end
    return "".join(pieces)


def _expand(match: re.Match) -> str:
    feature, text = match.group(1), match.group(2)
    if feature is not None and feature not in EXECUTED_FEATURES:
        return match.group(0)
    return " " + text + " "


class TiDBParser(MySQLParser):
    # TO_DAYS stays a function (sqlglot's MySQL rewrites it as a DATEDIFF from year 0, which
    # Python's calendar cannot hold); RANGE partitioning by TO_DAYS(d) is common
    FUNCTIONS = {**MySQLParser.FUNCTIONS, "TO_DAYS": lambda args: exp.Anonymous(this="TO_DAYS", expressions=args)}

    STATEMENT_PARSERS = {
        **MySQLParser.STATEMENT_PARSERS,
        TokenType.REPLACE: lambda self: self._parse_replace(),
        TokenType.RENAME: lambda self: self._parse_rename_tables(),
    }

    CONSTRAINT_PARSERS = {
        **MySQLParser.CONSTRAINT_PARSERS,
        "AUTO_RANDOM": lambda self: self._parse_auto_random(),
        "CLUSTERED": lambda self: self.expression(Clustering(this=exp.true())),
        "NONCLUSTERED": lambda self: self.expression(Clustering(this=exp.false())),
    }

    # TiDB's numeric table options (a generic key = value parse would swallow a following COLLATE)
    PROPERTY_PARSERS = {
        **MySQLParser.PROPERTY_PARSERS,
        **{name: (lambda self, name=name: self._parse_tidb_option(name))
           for name in ("SHARD_ROW_ID_BITS", "PRE_SPLIT_REGIONS", "AUTO_ID_CACHE", "AUTO_RANDOM_BASE")},
    }

    ALTER_PARSERS = {
        **MySQLParser.ALTER_PARSERS,
        "ADD": lambda self: self._parse_tidb_add(),
        "DROP": lambda self: self._parse_tidb_drop(),
        "TRUNCATE": lambda self: self._parse_truncate_partitions(),
        "EXCHANGE": lambda self: self._parse_exchange_partition(),
        "REORGANIZE": lambda self: self._parse_reorganize_partition(),
        "REMOVE": lambda self: self._parse_remove_partitioning(),
        "PARTITION BY": lambda self: self.expression(Repartition(this=self._parse_partition_property())),
    }

    # MySQL's FLOAT UNSIGNED (deprecated, still accepted by TiDB): sqlglot has no unsigned FLOAT type,
    # so it parses as UDOUBLE marked meta["float"] (tidelake/sim/sql/columns.py reads the mark)
    SIGNED_TO_UNSIGNED_TYPE_TOKEN = {**MySQLParser.SIGNED_TO_UNSIGNED_TYPE_TOKEN, TokenType.FLOAT: TokenType.UDOUBLE}

    def _parse_types(self, *args: Any, **kwargs: Any) -> exp.Expr | None:
        first = self._curr
        parsed = super()._parse_types(*args, **kwargs)
        if (isinstance(parsed, exp.DataType) and parsed.this == exp.DType.UDOUBLE and first is not None
                and first.token_type == TokenType.FLOAT):
            parsed.meta["float"] = True
        return parsed

    # ---- statements ----------------------------------------------------------------------------

    def _parse_statement(self) -> exp.Expr | None:
        word = self._curr.text.upper() if self._curr and self._curr.token_type == TokenType.VAR else ""
        after = self._next.text.upper() if self._next else ""
        if word == "SAVEPOINT" or (word == "RELEASE" and after == "SAVEPOINT"):
            self._advance(1 if word == "SAVEPOINT" else 2)
            return self.expression(Savepoint(this=self._parse_id_var(any_token=True), release=word == "RELEASE"))
        if word == "SPLIT" and self._next and self._next.token_type == TokenType.TABLE:
            self._advance(2)
            return self._parse_split_table()
        if word == "DO":
            self._advance()
            return self.expression(Do(expressions=self._parse_csv(self._parse_assignment)))
        return super()._parse_statement()

    def _parse_split_table(self) -> SplitTable:
        table = self._parse_table_parts()
        index = self._parse_id_var() if self._match(TokenType.INDEX) else None
        if self._match(TokenType.BETWEEN):
            lower = self._parse_wrapped_csv(self._parse_bitwise)
            self._match(TokenType.AND)
            upper = self._parse_wrapped_csv(self._parse_bitwise)
            if not self._match_text_seq("REGIONS"):
                self.raise_error("Expecting REGIONS")
            regions = self._parse_number()
            return self.expression(SplitTable(this=table, index=index, lower=lower, upper=upper, regions=regions))
        if not self._match_text_seq("BY"):
            self.raise_error("Expecting BETWEEN or BY")
        by = self._parse_csv(lambda: self.expression(exp.Tuple(expressions=self._parse_wrapped_csv(
            self._parse_bitwise))))
        return self.expression(SplitTable(this=table, index=index, by=by))

    def _parse_replace(self) -> Replace:
        insert = self._parse_insert()
        return self.expression(Replace(this=insert))

    def _parse_rename_tables(self) -> RenameTables:
        self._match(TokenType.TABLE)

        def pair() -> exp.Tuple:
            old = self._parse_table_parts()
            if not self._match_text_seq("TO"):
                self.raise_error("Expecting TO")
            return self.expression(exp.Tuple(expressions=[old, self._parse_table_parts()]))

        return self.expression(RenameTables(expressions=self._parse_csv(pair)))

    # ---- column and key options ----------------------------------------------------------------

    def _parse_tidb_option(self, name: str) -> exp.Property:
        self._match(TokenType.EQ)
        return self.expression(exp.Property(this=exp.Literal.string(name), value=self._parse_number()))

    def _parse_auto_random(self) -> AutoRandom:
        args = self._parse_wrapped_csv(self._parse_number) if self._match(TokenType.L_PAREN, advance=False) else []
        return self.expression(AutoRandom(shard_bits=args[0] if args else None,
                                          range_bits=args[1] if len(args) > 1 else None))

    def _parse_primary_key(self, wrapped_optional: bool = False, in_props: bool = False,
                           named_primary_key: bool = False) -> exp.PrimaryKeyColumnConstraint | exp.PrimaryKey:
        key = super()._parse_primary_key(wrapped_optional=wrapped_optional, in_props=in_props,
                                         named_primary_key=named_primary_key)
        if isinstance(key, exp.PrimaryKey):
            if self._match_text_seq("CLUSTERED"):
                key.set("clustered", exp.true())
            elif self._match_text_seq("NONCLUSTERED"):
                key.set("clustered", exp.false())
        return key

    # ---- partitioning --------------------------------------------------------------------------

    def _parse_partition_property(self) -> exp.Expr | None | list[exp.Expr]:
        linear = self._match_text_seq("LINEAR")
        if self._match_texts(("HASH", "KEY")):
            key = self._prev.text.upper() == "KEY"
            columns = self._parse_wrapped_csv(self._parse_assignment, optional=key)
            partitions = self._parse_number() if self._match_text_seq("PARTITIONS") else None
            names = None
            if self._match(TokenType.L_PAREN, advance=False):
                names = self._parse_wrapped_csv(self._parse_hash_partition_name)
            return self.expression(PartitionByHash(expressions=columns, key=key, linear=linear,
                                                   partitions=partitions, names=names))
        index = self._index
        if self._match_texts(("RANGE", "LIST")):
            kind = self._prev.text.upper()
            if self._match_text_seq("COLUMNS"):
                return self.expression(PartitionByColumns(this=self._parse_columns_partitioning(kind)))
        self._retreat(index)
        return super()._parse_partition_property()

    def _parse_columns_partitioning(self, kind: str) -> exp.Expr:
        """RANGE/LIST COLUMNS: the definitions of the plain form over a column list."""
        if kind == "RANGE":
            cls, value_parser = exp.PartitionByRangeProperty, self._parse_partition_range_value
        else:
            cls, value_parser = exp.PartitionByListProperty, self._parse_partition_list_value
        columns = self._parse_wrapped_csv(self._parse_assignment)
        definitions = self._parse_wrapped_csv(value_parser)
        return self.expression(cls(partition_expressions=columns, create_expressions=definitions))

    def _parse_partition_range_value(self) -> exp.Expr | None:
        index = self._index
        self._match_text_seq("PARTITION")
        name = self._parse_id_var()
        if self._match_text_seq("VALUES", "LESS", "THAN", "MAXVALUE"):
            part_range = self.expression(exp.PartitionRange(this=name, expressions=[exp.var("MAXVALUE")]))
            return self.expression(exp.Partition(expressions=[part_range]))
        self._retreat(index)
        return super()._parse_partition_range_value()

    def _parse_hash_partition_name(self) -> exp.Expr | None:
        self._match_text_seq("PARTITION")
        return self._parse_id_var()

    def _parse_partition_definitions(self) -> list[exp.Expr]:
        """`(PARTITION p VALUES LESS THAN (..) | VALUES IN (..), ...)`, as REORGANIZE and ADD name them."""

        def definition() -> exp.Expr | None:
            index = self._index
            self._match_text_seq("PARTITION")
            self._parse_id_var()
            if self._match_text_seq("VALUES", "IN"):
                self._retreat(index)
                return self._parse_partition_list_value()
            self._retreat(index)
            return self._parse_partition_range_value()

        return self._parse_wrapped_csv(definition)

    # ---- ALTER TABLE actions -------------------------------------------------------------------

    def _parse_tidb_add(self) -> list[exp.Expr]:
        if self._match_pair(TokenType.COLUMN, TokenType.L_PAREN, advance=False):  # ADD COLUMN (a INT, b INT)
            self._advance()
            return self._parse_wrapped_csv(self._parse_field_def)
        if not self._match(TokenType.PARTITION):
            return self._parse_alter_table_add()
        if self._match_text_seq("PARTITIONS"):
            return [self.expression(AddPartitions(partitions=self._parse_number()))]
        return [self.expression(AddPartitions(expressions=self._parse_partition_definitions()))]

    def _parse_tidb_drop(self) -> list[exp.Expr]:
        if self._match(TokenType.PARTITION):
            self._parse_exists()
            return [self.expression(DropPartitions(expressions=self._parse_csv(self._parse_id_var)))]
        return self._parse_alter_table_drop()

    def _parse_truncate_partitions(self) -> exp.Expr:
        if not self._match(TokenType.PARTITION):
            self.raise_error("Expecting PARTITION")
        if self._match(TokenType.ALL):
            return self.expression(TruncatePartitions(all=exp.true()))
        return self.expression(TruncatePartitions(expressions=self._parse_csv(self._parse_id_var)))

    def _parse_exchange_partition(self) -> exp.Expr:
        if not self._match(TokenType.PARTITION):
            self.raise_error("Expecting PARTITION")
        name = self._parse_id_var()
        if not (self._match(TokenType.WITH) and self._match(TokenType.TABLE)):
            self.raise_error("Expecting WITH TABLE")
        table = self._parse_table_parts()
        validation = None
        if self._match_text_seq("WITH", "VALIDATION"):
            validation = exp.true()
        elif self._match_text_seq("WITHOUT", "VALIDATION"):
            validation = exp.false()
        return self.expression(ExchangePartition(this=name, table=table, validation=validation))

    def _parse_reorganize_partition(self) -> exp.Expr:
        if not self._match(TokenType.PARTITION):
            self.raise_error("Expecting PARTITION")
        names = self._parse_csv(self._parse_id_var)
        if not self._match_text_seq("INTO"):
            self.raise_error("Expecting INTO")
        return self.expression(ReorganizePartition(expressions=names,
                                                   definitions=self._parse_partition_definitions()))

    def _parse_remove_partitioning(self) -> exp.Expr:
        if not self._match_text_seq("PARTITIONING"):
            self.raise_error("Expecting PARTITIONING")
        return self.expression(RemovePartitioning())

    # ---- stale reads ---------------------------------------------------------------------------

    def _parse_version(self) -> exp.Version | None:
        if self._match_text_seq("AS", "OF", "TIMESTAMP"):
            return self.expression(exp.Version(this="TIMESTAMP", kind="AS OF", expression=self._parse_bitwise()))
        return super()._parse_version()


class TiDB(MySQL):
    """sqlglot's MySQL dialect with TiDB's additions (see the module docstring)."""

    ALIAS_POST_VERSION = True

    class Tokenizer(MySQL.Tokenizer):
        # MySQL's tokenizer keeps REPLACE and RENAME statements as one opaque string
        COMMANDS = MySQL.Tokenizer.COMMANDS - {TokenType.REPLACE, TokenType.RENAME}

    Parser = TiDBParser
