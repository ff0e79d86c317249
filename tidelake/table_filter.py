"""TiDB/TiCDC table-filter rules (`[filter] rules`), docs/metadata.md#table-filter-rules.

The syntax and evaluation follow TiDB's `pkg/util/table-filter` so a rule list copied from a
TiCDC changefeed selects exactly the same tables here: last matching rule wins, unmatched tables
are rejected, and TiCDC's default (since v7.5.0) is case-insensitive matching. System schemas
(docs/metadata.md#system-schemas-that-are-never-replicated) are never replicated, whatever the rules say.
Owner: the config (`[filter] rules`); the schema tracker, the snapshot and bootstrap apply it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tidelake.errors import InputError

# docs/metadata.md#system-schemas-that-are-never-replicated: TiDB IsSystemSchema plus TiCDC's own additions (compared lower-cased).
SYSTEM_SCHEMAS = frozenset(
    {
        "mysql",
        "sys",
        "information_schema",
        "performance_schema",
        "metrics_schema",
        "inspection_schema",
        "dm_heartbeat",
        "tidb_cdc",
        "lightning_task_info",
        "workload_schema",
    }
)

DEFAULT_RULES = ("*.*",)

_REGEXP = re.compile(r"/(?:\\.|[^/])+/")
_DOUBLE_QUOTED = re.compile(r'"(?:""|[^"])+"')
_BACKQUOTED = re.compile(r"`(?:``|[^`])+`")
_WILDCARD_RANGE = re.compile(r"\[!?(?:\\[^0-9a-zA-Z]|[^\\\]])+\]")
_MATCH_ALL = "(?s)^.*$"


def is_system_schema(schema: str) -> bool:
    return schema.lower() in SYSTEM_SCHEMAS


class _Matcher(Protocol):
    matches_all: bool

    def match(self, name: str) -> bool: ...

    def lowered(self) -> "_Matcher": ...


@dataclass(frozen=True)
class _Literal:
    name: str
    matches_all: bool = False

    def match(self, name: str) -> bool:
        return name == self.name

    def lowered(self) -> "_Literal":
        return _Literal(self.name.lower())


@dataclass(frozen=True)
class _Everything:
    matches_all: bool = True

    def match(self, name: str) -> bool:
        return True

    def lowered(self) -> "_Everything":
        return self


@dataclass(frozen=True)
class _Regexp:
    """Go `regexp.MatchString` semantics: a search, anchored only if the pattern anchors itself."""

    pattern: re.Pattern
    matches_all: bool = False

    def match(self, name: str) -> bool:
        return self.pattern.search(name) is not None

    def lowered(self) -> "_Regexp":
        return _Regexp(re.compile("(?i)" + self.pattern.pattern))


@dataclass(frozen=True)
class _Rule:
    schema: _Matcher
    table: _Matcher
    positive: bool


class TableFilter:
    """A parsed rule list. Build it with `TableFilter.parse`."""

    def __init__(self, rules: list[_Rule], case_sensitive: bool, source: tuple[str, ...]) -> None:
        self._rules = rules  # already reversed: the first match here is the last rule written
        self.case_sensitive = case_sensitive
        self.source = source

    @classmethod
    def parse(cls, rules: list[str] | tuple[str, ...], case_sensitive: bool = False) -> "TableFilter":
        """Parse rules as TiDB `filter.Parse` (+ `CaseInsensitive` unless case_sensitive).

        An empty list means `*.*`, as in TiCDC's `[filter] rules` default."""
        source = tuple(rules) or DEFAULT_RULES
        parser = _Parser()
        for rule in source:
            parser.parse_line(rule, "<rules>", 1, can_import=True)
        parsed = list(reversed(parser.rules))
        if not case_sensitive:
            parsed = [_Rule(r.schema.lowered(), r.table.lowered(), r.positive) for r in parsed]
        return cls(parsed, case_sensitive, source)

    def _fold(self, name: str) -> str:
        return name if self.case_sensitive else name.lower()

    def match_table(self, schema: str, table: str) -> bool:
        """The rules' verdict alone (TiDB `MatchTable`), system schemas included."""
        schema, table = self._fold(schema), self._fold(table)
        for rule in self._rules:
            if rule.schema.match(schema) and rule.table.match(table):
                return rule.positive
        return False

    def match_schema(self, schema: str) -> bool:
        """Whether any table of `schema` may match: `!db.t1` does not exclude schema `db`."""
        schema = self._fold(schema)
        for rule in self._rules:
            if rule.schema.match(schema) and (rule.positive or rule.table.matches_all):
                return rule.positive
        return False

    def should_replicate_schema(self, schema: str) -> bool:
        """TiCDC `ShouldIgnoreSchema` negated: never a system schema (docs/metadata.md#system-schemas-that-are-never-replicated)."""
        return not is_system_schema(schema) and self.match_schema(schema)

    def should_replicate_table(self, schema: str, table: str) -> bool:
        """TiCDC `ShouldIgnoreTable` negated: never a table of a system schema (docs/metadata.md#system-schemas-that-are-never-replicated)."""
        return not is_system_schema(schema) and self.match_table(schema, table)


class _Parser:
    """TiDB `tableRulesParser`: one rule per line, `@file` imports one level deep."""

    def __init__(self) -> None:
        self.rules: list[_Rule] = []

    def parse_line(self, line: str, where: str, line_no: int, can_import: bool) -> None:
        text = line.strip(" \t")
        if not text or text[0] == "#":
            return
        ctx = _Context(where, line_no, line)
        positive = True
        if text[0] == "!":
            positive = False
            text = text[1:]
        elif text[0] == "@":
            if not can_import:
                raise ctx.error("importing filter files recursively is not allowed")
            self._import(text[1:], ctx)
            return
        schema, text = _parse_pattern(text, ctx)
        if not text:
            raise ctx.error("wrong table pattern (expected 'schema.table')")
        if text[0] != ".":
            raise ctx.error("syntax error: missing '.' between schema and table patterns")
        table, text = _parse_pattern(text[1:], ctx)
        if text:
            raise ctx.error(f"syntax error: stray characters {text!r} after table pattern")
        self.rules.append(_Rule(schema, table, positive))

    def _import(self, file_name: str, ctx: "_Context") -> None:
        path = Path(file_name)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ctx.error(f"cannot open filter file {file_name!r}: {exc.strerror}") from None
        for number, text in enumerate(lines, start=1):
            self.parse_line(text, file_name, number, can_import=False)


@dataclass(frozen=True)
class _Context:
    where: str
    line_no: int
    rule: str

    def error(self, message: str) -> InputError:
        return InputError(f"table filter rule {self.rule!r} (at {self.where}:{self.line_no}): {message}")


def _parse_pattern(text: str, ctx: _Context) -> tuple[_Matcher, str]:
    if not text:
        raise ctx.error("syntax error: missing pattern")
    first = text[0]
    if first == "/":
        found = _REGEXP.match(text)
        if found is None:
            raise ctx.error("syntax error: incomplete regexp")
        return _compile(text[1 : found.end() - 1], ctx), text[found.end() :]
    if first in "\"`":
        found = (_DOUBLE_QUOTED if first == '"' else _BACKQUOTED).match(text)
        if found is None:
            raise ctx.error("syntax error: incomplete quoted identifier")
        name = text[1 : found.end() - 1].replace(first * 2, first)
        return _Literal(name), text[found.end() :]
    return _parse_wildcard(text, ctx)


def _is_ascii_alnum(c: str) -> bool:
    return c.isascii() and c.isalnum()


def _parse_wildcard(text: str, ctx: _Context) -> tuple[_Matcher, str]:
    literal: list[str] = []
    pattern = ["(?s)^"]
    is_literal = True
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i == len(text) - 1:
                raise ctx.error("syntax error: cannot place \\ at end of line")
            esc = text[i + 1]
            if _is_ascii_alnum(esc):
                raise ctx.error(f"cannot escape a letter or number (\\{esc}), it is reserved for future extension")
            literal.append(esc)
            pattern.append(re.escape(esc))
            i += 2
        elif c == ".":
            break
        elif c == "*":
            is_literal = False
            pattern.append(".*")
            i += 1
        elif c == "?":
            is_literal = False
            pattern.append(".")
            i += 1
        elif c == "[":
            is_literal = False
            found = _WILDCARD_RANGE.match(text, i)
            if found is None:
                raise ctx.error("syntax error: failed to parse character class")
            body = text[i + 1 : found.end()]
            if body[0] == "!":
                pattern.append("[^" + body[1:])
            elif body[0] == "^":  # `[^` is not special in a glob: escape it
                pattern.append("[\\^" + body[1:])
            else:
                pattern.append("[" + body)
            i = found.end()
        elif c in "$_" or _is_ascii_alnum(c) or not c.isascii():
            literal.append(c)
            pattern.append(re.escape(c))
            i += 1
        else:
            raise ctx.error(f"unexpected special character {c!r}")
    rest = text[i:]
    if is_literal:
        return _Literal("".join(literal)), rest
    pattern.append("$")
    return _compile("".join(pattern), ctx), rest


def _compile(pattern: str, ctx: _Context) -> _Matcher:
    if pattern == _MATCH_ALL:
        return _Everything()
    try:
        return _Regexp(re.compile(pattern))
    except re.error as exc:
        raise ctx.error(f"invalid pattern: {exc}") from None
