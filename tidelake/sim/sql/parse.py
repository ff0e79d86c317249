"""A COM_QUERY's text as statements: split at top-level `;`, executable comments expanded, parsed.

Each statement keeps its own text: TiDB stores that text as a DDL job's `query`. Syntax errors are
TiDB's 1064 with its message shape ("... near \"<rest>\""); a form sqlglot only keeps as an opaque
command (its fallback for syntax it does not model) is refused by name, since nothing of it could
be executed faithfully.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.dialect import TiDB, expand_executable_comments

_DIALECT = TiDB()


@dataclass(frozen=True)
class Statement:
    text: str
    tree: exp.Expr


def syntax_error(sql: str, line: int = 1, column: int = 0, near: str = "") -> er.SqlError:
    return er.sql_error(er.PARSE, "You have an error in your SQL syntax; check the manual that corresponds to "
                                  f"your TiDB version for the right syntax to use line {line} column {column} "
                                  f"near \"{near}\" ")


# Statements of TiDB's own grammar (pingcap/tidb pkg/parser/parser.y) that sqlglot's MySQL dialect
# does not parse; refused by name rather than as a syntax error.
_TIDB_ONLY = ("ADMIN", "SPLIT", "FLASHBACK", "RECOVER", "BATCH", "BACKUP", "RESTORE", "IMPORT INTO",
              "LOAD STATS", "PLAN REPLAYER", "QUERY WATCH", "CALIBRATE RESOURCE", "CANCEL", "TRAFFIC",
              "CREATE PLACEMENT POLICY", "ALTER PLACEMENT POLICY", "DROP PLACEMENT POLICY",
              "CREATE RESOURCE GROUP", "ALTER RESOURCE GROUP", "DROP RESOURCE GROUP", "CREATE SEQUENCE",
              "ALTER SEQUENCE", "DROP SEQUENCE", "CREATE BINDING", "DROP BINDING", "CHANGE")


def _tidb_only(text: str) -> str:
    words = " ".join(text.split()[:3]).upper()
    return next((head for head in _TIDB_ONLY if words == head or words.startswith(head + " ")), "")


def _tokens(sql: str) -> list:
    try:
        return _DIALECT.tokenize(sql)
    except TokenError as err:
        raise syntax_error(sql, near=str(err)[:80]) from None


def split(sql: str) -> list[str]:
    """The statements of `sql` as texts, split where the tokenizer sees a top-level `;`."""
    return [text for text, _ in _pieces(sql, _tokens(sql))]


def _pieces(sql: str, tokens: list) -> list[tuple[str, list | None]]:
    """(text, its tokens when they can be reused) per statement: a lone statement without comments
    (the common case: one statement per COM_QUERY) is parsed from the tokens already made."""
    pieces, start, last_end = [], 0, None
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if last_end is not None:
                pieces.append(sql[start:last_end].strip())
            start, last_end = token.end + 1, None
        else:
            last_end = token.end + 1
    if last_end is not None:
        pieces.append(sql[start:last_end].strip())
    if len(pieces) == 1 and "/*" not in sql and sql.strip().startswith(pieces[0]):
        return [(pieces[0], tokens)]
    return [(text, None) for text in pieces]


def parse(sql: str) -> list[Statement]:
    """Every statement of `sql`, parsed; the first syntax error stops all of them (none runs)."""
    out = []
    for text, tokens in _pieces(sql, _tokens(sql)):
        try:
            if tokens is not None:
                trees = [t for t in _DIALECT.parser().parse(tokens, sql) if t is not None]
            else:
                expanded = expand_executable_comments(text, _DIALECT.tokenize(text))
                trees = [t for t in _DIALECT.parse(expanded) if t is not None]
        except ParseError as err:
            head = _tidb_only(text)
            if head:
                raise er.not_supported(f"{head} statements (TiDB's own; the simulator's SQL front does not run them)") \
                    from None
            detail = err.errors[0] if err.errors else {}
            near = (detail.get("highlight") or "") + (detail.get("end_context") or "")
            raise syntax_error(text, detail.get("line", 1), detail.get("col", 0), near) from None
        except TokenError as err:
            raise syntax_error(text, near=str(err)[:80]) from None
        for tree in trees:
            if isinstance(tree, exp.Command):
                head = " ".join(text.split()[:4])
                raise er.not_supported(f"{head} (a statement form the simulator's SQL front does not run)")
            out.append(Statement(text, tree))
    return out
