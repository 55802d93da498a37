"""The schema machinery: one record per problem, with the right row and column."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from schemas import FIELDS, TABLES, conform, create_table_sql, data_dictionary, validate_frame
from schemas.model import Table, duckdb_type
from schemas.validate import check_primary_key


def good_files_frame(n: int = 3) -> pl.DataFrame:
    now = datetime(2026, 11, 1, tzinfo=UTC)
    rows = [
        dict(file_id=f"{i:064x}", file_path=f"/data/f{i}.jsonl", file_name=f"f{i}.jsonl", n_bytes=100 + i,
             source_format="toolkit-jsonl", detection_evidence="ids are enum names", ingested_at=now,
             run_id="r1", n_records_loaded=10, n_records_quarantined=0, flags=[])
        for i in range(n)
    ]
    return conform("raw_ingest__files", rows)


def test_valid_frame_passes():
    result = validate_frame("raw_ingest__files", good_files_frame())
    assert result.ok
    assert result.valid.height == 3


def test_wrong_dtype_is_one_record_for_the_column():
    df = good_files_frame().with_columns(pl.col("n_bytes").cast(pl.String))
    result = validate_frame("raw_ingest__files", df)
    assert len(result.failures) == 1
    (f,) = result.failures
    assert (f.table, f.column, f.row) == ("raw_ingest__files", "n_bytes", None)
    assert f.check.startswith("dtype(")
    assert "expected Int64" in f.reason and "String" in f.reason
    assert result.valid.height == 0  # a column-level failure taints every row


def test_missing_column_is_one_record():
    df = good_files_frame().drop("source_format")
    result = validate_frame("raw_ingest__files", df)
    assert len(result.failures) == 1
    (f,) = result.failures
    assert f.check == "column_in_dataframe"
    assert f.value == "source_format"
    assert "missing" in f.reason


def test_out_of_range_value_names_row_and_column():
    df = good_files_frame().with_columns(
        pl.when(pl.int_range(pl.len()) == 1).then(-5).otherwise(pl.col("n_bytes")).alias("n_bytes")
    )
    result = validate_frame("raw_ingest__files", df)
    assert len(result.failures) == 1
    (f,) = result.failures
    assert (f.row, f.column, f.value) == (1, "n_bytes", "-5")
    assert "greater_than_or_equal_to(0)" in f.check
    assert result.valid.height == 2  # the other rows still pass


def test_duplicate_primary_key_is_reported_per_offending_row():
    df = good_files_frame()
    df = pl.concat([df, df.slice(2, 1)])  # row 3 duplicates row 2's file_id
    result = validate_frame("raw_ingest__files", df)
    pk = [f for f in result.failures if f.check == "primary_key"]
    assert {f.row for f in pk} == {2, 3}
    assert all(f.column == "file_id" for f in pk)
    assert len(result.failures) == len(pk)


def test_regex_and_null_checks():
    df = good_files_frame().with_columns(
        pl.when(pl.int_range(pl.len()) == 0).then(pl.lit("not-a-hash")).otherwise(pl.col("file_id")).alias("file_id"),
        pl.when(pl.int_range(pl.len()) == 2).then(None).otherwise(pl.col("run_id")).alias("run_id"),
    )
    result = validate_frame("raw_ingest__files", df)
    got = {(f.row, f.column, f.check.split("(")[0]) for f in result.failures}
    assert (0, "file_id", "str_matches") in got
    assert (2, "run_id", "not_nullable") in got


def test_primary_key_check_scales_and_finds_the_only_duplicate():
    n = 2_000_000
    df = pl.DataFrame({"a": pl.int_range(n, eager=True) // 2, "b": pl.int_range(n, eager=True) % 2})
    df = df.with_columns(pl.when(pl.int_range(pl.len()) == n - 1).then(0).otherwise(pl.col("b")).alias("b"))
    dups = check_primary_key(df, ("a", "b"))
    assert sorted(dups["__row_index"].to_list()) == [n - 2, n - 1]


def test_every_table_is_generated_consistently():
    for name, table in TABLES.items():
        assert set(table.columns) <= set(FIELDS), name
        ddl = create_table_sql(name)[0]
        for col in table.columns:
            assert f"    {col} " in ddl
    text = data_dictionary()
    for name in TABLES:
        assert f"## `{name}`" in text


def test_table_definition_errors():
    with pytest.raises(ValueError, match="layer"):
        Table("bad", "nope", "x", ("run_id",), ("run_id",))
    with pytest.raises(ValueError, match="must start"):
        Table("bad", "raw", "x", ("run_id",), ("run_id",))
    with pytest.raises(ValueError, match="primary key"):
        Table("raw_x__y", "raw", "x", ("run_id",), ("file_id",))


def test_duckdb_types():
    assert duckdb_type(pl.Int64) == "BIGINT"
    assert duckdb_type(pl.Datetime("us", "UTC")) == "TIMESTAMPTZ"
    assert duckdb_type(pl.List(pl.String)) == "VARCHAR[]"
    with pytest.raises(TypeError):
        duckdb_type(pl.Object)


TABLE_NAME = re.compile(r"\b(?:raw|core|out)_[a-z0-9]+__[a-z0-9_]+\b")
PIPELINE = Path(__file__).resolve().parents[2] / "pipeline"


def test_every_table_the_pipeline_names_is_declared_in_schemas():
    # Tables are created from schemas/ only (Workspace.ensure_tables); a name in the code that is not
    # declared would be a table written or read around the registry.
    named = {name: str(path.relative_to(PIPELINE.parent)) for path in sorted(PIPELINE.rglob("*.py"))
             for name in TABLE_NAME.findall(path.read_text())}
    assert {"out_arc3__level_baselines", "out_harc__statistical_tests", "raw_harc__csv_rows"} <= set(named)
    undeclared = {name: where for name, where in named.items() if name not in TABLES}
    assert undeclared == {}


def test_no_hand_written_ddl_in_the_pipeline():
    ddl = [str(p.relative_to(PIPELINE.parent)) for p in sorted(PIPELINE.rglob("*.py"))
           if re.search(r"\bCREATE\s+(OR\s+REPLACE\s+)?(TEMP\w*\s+)?TABLE\b", p.read_text())]
    assert ddl == []


def test_the_data_dictionary_lists_every_table():
    text = data_dictionary()
    assert [t for t in TABLES if f"## `{t}`" not in text] == []


@pytest.mark.parametrize(("row", "words"), [
    ({"baseline_actions": ["a"]}, "baseline_actions must be a list of integers of 64 bits, got ['a']"),
    ({"baseline_actions": [2**70]}, f"baseline_actions must be a list of integers of 64 bits, got [{2**70}]"),
    ({"flags": [1]}, "flags must be a list of strings, got [1]"),
    ({"game_id": 5}, "game_id must be a string, got 5"),
])
def test_a_value_a_column_cannot_hold_is_described_in_plain_words(row: dict, words: str):
    """A list of 64-bit integers was once described as "a list of integer of 64 bitss"."""
    from schemas.validate import type_problem

    assert type_problem("core_arc3__environments", row) == (next(iter(row)), words)


def test_conform_builds_a_table_from_a_generator_of_rows_as_the_row_constructor_did():
    """`conform` (and `rows_frame`) take the rows as they come, a column at a time: `score` passes its replay
    checks as a generator, so a flood of plays' rows is never a list of dicts (copied into a second one for
    polars' row constructor before). Missing keys are null; the types are the table's."""
    from schemas.validate import _columns, conform

    rows = [{"card_id": "c", "play_id": f"g/{i}", "n_steps_replayed": i, "is_score_excluded": i % 2 == 0,
             "divergence_expected": None if i else "x"} for i in range(5)]
    rows.append({"play_id": "h/0", "unknown_key": 1})
    schema = _columns("out_arc3__replay_checks", ())
    by_rows = pl.DataFrame([{c: r.get(c) for c in schema} for r in rows], schema=schema, orient="row")
    made: list[int] = []

    def one_at_a_time():
        for i, row in enumerate(rows):
            made.append(i)
            yield row

    got = conform("out_arc3__replay_checks", one_at_a_time())
    assert got.equals(by_rows) and got.schema == by_rows.schema and made == list(range(6))
    assert got["n_steps_replayed"].to_list() == [0, 1, 2, 3, 4, None]
    assert conform("out_arc3__replay_checks", iter(())).schema == by_rows.schema


def test_conform_casts_a_value_of_another_type_as_the_row_constructor_did():
    """A float in an integer column is cast (as polars' row constructor did; the strict column constructor
    refuses it), a text that is no number is still refused, never made null."""
    from schemas.validate import conform

    got = conform("out_arc3__replay_checks", iter([{"play_id": "g/0", "n_steps_replayed": 3.0}]))
    assert got["n_steps_replayed"].to_list() == [3]
    with pytest.raises(pl.exceptions.ComputeError):
        conform("out_arc3__replay_checks", iter([{"play_id": "g/0", "n_steps_replayed": "three"}]))
