"""`arcstudy query` refuses SET (its connection is read-only, its settings locked), so where DuckDB's error advises
a SET the message advises what a query can do instead: a too deeply nested expression once said `Use "SET
max_expression_depth TO x"`, and running that was refused."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from pipeline.cli import app


@pytest.fixture
def db(empty_db: Path) -> Path:
    return empty_db


def query(db: Path, sql: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["--plain", "query", sql, "--db", str(db), "--format", "csv"])
    return res.exit_code, " ".join(res.output.split())


def test_a_too_deep_expression_gets_advice_the_command_accepts(db: Path):
    code, text = query(db, "SELECT " + " + ".join(["1"] * 3000) + " AS n")
    assert code == 1 and "Max expression depth limit" in text, text
    assert "SET" not in text and "`arcstudy query` cannot change settings: nest less" in text, text
    assert "list_sum([...])" in text
    code, text = query(db, "SELECT list_sum([" + ", ".join(["1"] * 3000) + "]) AS n")  # the advice, taken
    assert (code, text) == (0, "n 3000"), text
    code, text = query(db, "SET max_expression_depth TO 5000")  # what DuckDB advised: refused
    assert code == 2 and "refused: SET statement" in text, text


def test_out_of_memory_advice_names_what_a_query_can_do():
    from pipeline.commands.query import advice_it_accepts

    con = duckdb.connect(config={"memory_limit": "20MB", "threads": 1})
    with pytest.raises(duckdb.OutOfMemoryException) as err:
        con.execute("SELECT string_agg(repeat('x', 1000) || i::VARCHAR, ',') FROM range(2000000) t(i)").fetchall()
    assert "SET memory_limit" in str(err.value)  # DuckDB's own advice
    text = advice_it_accepts(str(err.value))
    assert text.startswith("Out of Memory Error: failed to allocate") and "SET" not in text, text
    assert text.endswith("`arcstudy query` cannot change settings (threads, memory_limit): read less at once "
                         "(fewer columns, a WHERE filter, aggregate before joining, LIMIT)."), text
