"""TiDB table-filter semantics (docs/metadata.md#table-filter-rules), examples from the TiDB docs."""

from __future__ import annotations

import pytest

from tidelake.errors import InputError
from tidelake.table_filter import TableFilter


def accepts(rules, schema, table, **kw) -> bool:
    return TableFilter.parse(rules, **kw).match_table(schema, table)


def test_plain_names_and_wildcards():
    assert accepts(["db.tbl"], "db", "tbl")
    assert not accepts(["db.tbl"], "db", "tbl2")
    assert accepts(["db.*"], "db", "anything")
    assert accepts(["db*.t?"], "db01", "t1")
    assert not accepts(["db*.t?"], "db01", "t10")
    assert accepts(["db.t[0-9]"], "db", "t7")
    assert not accepts(["db.t[0-9]"], "db", "tx")
    assert accepts(["db.t[!0-9]"], "db", "tx")
    assert not accepts(["db.t[!0-9]"], "db", "t7")
    assert accepts(["$db_1.é*"], "$db_1", "été")


def test_bracket_caret_is_literal_in_glob():
    assert accepts(["db.[^a]"], "db", "^")
    assert accepts(["db.[^a]"], "db", "a")
    assert not accepts(["db.[^a]"], "db", "b")


def test_escapes():
    assert accepts([r"db\.x.t"], "db.x", "t")
    assert not accepts([r"db\.x.t"], "dbax", "t")
    assert accepts([r"db.t\*"], "db", "t*")
    assert not accepts([r"db.t\*"], "db", "tx")
    with pytest.raises(InputError, match="cannot escape a letter or number"):
        TableFilter.parse([r"db.\a"])
    with pytest.raises(InputError, match=r"cannot place \\ at end"):
        TableFilter.parse(["db.t\\"])


def test_quoted_identifiers_are_literal():
    assert accepts(['"db.x"."t*"'], "db.x", "t*")
    assert not accepts(['"db.x"."t*"'], "db.x", "tt")
    assert accepts(['`a``b`.`c"d`'], "a`b", 'c"d')
    assert accepts(['"a""b".t'], 'a"b', "t")
    with pytest.raises(InputError, match="incomplete quoted identifier"):
        TableFilter.parse(['"db.t'])


def test_regexp_has_substring_semantics():
    assert accepts(["/b/.t"], "db01", "t")  # the docs: /b/ matches db01
    assert accepts([r"/^db\d+$/.t"], "db42", "t")
    assert not accepts([r"/^db\d+$/.t"], "xdb42", "t")
    with pytest.raises(InputError, match="incomplete regexp"):
        TableFilter.parse(["/abc.t"])
    with pytest.raises(InputError, match="invalid pattern"):
        TableFilter.parse(["/a(/.t"])


def test_syntax_errors_name_the_rule():
    with pytest.raises(InputError, match=r"'dbtbl'.*missing|'dbtbl'.*wrong table pattern"):
        TableFilter.parse(["dbtbl"])
    with pytest.raises(InputError, match="missing '.'"):
        TableFilter.parse(['"db"tbl'])
    with pytest.raises(InputError, match="stray characters"):
        TableFilter.parse(['db."t"x'])
    with pytest.raises(InputError, match="unexpected special character"):
        TableFilter.parse(["db.t-1"])


def test_last_matching_rule_wins_and_unmatched_is_rejected():
    rules = ["employees.*", "!*.dep*", "*.departments"]  # docs example
    assert not accepts(rules, "employees", "dept_emp")
    assert accepts(rules, "else", "departments")
    assert accepts(rules, "employees", "salaries")
    assert not accepts(rules, "else", "salaries")  # matches no rule
    assert not accepts(["!db.t"], "other", "t")  # a pure block list rejects everything


def test_block_list_needs_a_leading_catch_all():
    rules = ["*.*", "!test.*", "!prod.tmp_*"]
    assert accepts(rules, "prod", "orders")
    assert not accepts(rules, "test", "orders")
    assert not accepts(rules, "prod", "tmp_1")


def test_match_schema_ignores_table_specific_exclusions():
    f = TableFilter.parse(["*.*", "!db.t1"])
    assert f.match_schema("db")  # `!db.t1` never excludes the whole schema
    assert not f.match_table("db", "t1")
    g = TableFilter.parse(["*.*", "!db.*"])
    assert not g.match_schema("db")
    assert not TableFilter.parse(["a.t"]).match_schema("b")


def test_comments_blank_lines_and_imports(tmp_path):
    rules_file = tmp_path / "rules.txt"
    rules_file.write_text("# orders only\n\nshop.orders\n!shop.orders_tmp\n")
    f = TableFilter.parse([f"@{rules_file}", "  # a comment  ", ""])
    assert f.match_table("shop", "orders")
    assert not f.match_table("shop", "orders_tmp")
    assert not f.match_table("shop", "users")
    nested = tmp_path / "nested.txt"
    nested.write_text(f"@{rules_file}\n")
    with pytest.raises(InputError, match="recursively"):
        TableFilter.parse([f"@{nested}"])
    with pytest.raises(InputError, match="cannot open filter file"):
        TableFilter.parse([f"@{tmp_path / 'missing.txt'}"])


def test_case_insensitive_by_default_sensitive_on_request():
    assert accepts(["Shop.Orders"], "shop", "ORDERS")
    assert accepts(["/^SHOP$/.o*"], "shop", "Orders")
    assert not accepts(["Shop.Orders"], "shop", "orders", case_sensitive=True)
    assert accepts(["Shop.Orders"], "Shop", "Orders", case_sensitive=True)


def test_system_schemas_never_replicated():
    f = TableFilter.parse(["*.*"])
    assert f.match_table("mysql", "user")  # the rules alone would accept it
    for schema in ("mysql", "SYS", "information_schema", "tidb_cdc", "lightning_task_info"):
        assert not f.should_replicate_table(schema, "t")
        assert not f.should_replicate_schema(schema)
    assert not TableFilter.parse(["mysql.*"]).should_replicate_table("mysql", "tidb_ddl_job")
    assert f.should_replicate_table("shop", "orders")


def test_empty_rules_mean_everything():
    f = TableFilter.parse([])
    assert f.source == ("*.*",)
    assert f.should_replicate_table("any", "table")
