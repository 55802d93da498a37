"""Generated artefacts: pandera (polars) schemas, DuckDB DDL and the Markdown data dictionary."""

from __future__ import annotations

from functools import cache

from schemas.fields import FIELDS
from schemas.model import Table, duckdb_type, polars_dtype
from schemas.tables import TABLES


def get_table(name: str) -> Table:
    try:
        return TABLES[name]
    except KeyError:
        known = ", ".join(sorted(TABLES))
        raise KeyError(f"unknown table {name!r}; known tables: {known}") from None


def is_nullable(table: Table, column: str) -> bool:
    return FIELDS[column].nullable or column in table.nullable_here


def _checks(column: str) -> list:
    import pandera.polars as pa

    f = FIELDS[column]
    checks = []
    if f.ge is not None:
        checks.append(pa.Check.ge(f.ge))
    if f.le is not None:
        checks.append(pa.Check.le(f.le))
    if f.isin is not None:
        checks.append(pa.Check.isin(list(f.isin)))
    if f.regex is not None:
        checks.append(pa.Check.str_matches(f.regex))
    if f.max_bytes is not None:
        checks.append(_max_bytes_check(f.max_bytes))
    return checks


def _max_bytes_check(limit: int):
    import pandera.polars as pa
    import polars as pl

    return pa.Check(lambda data: data.lazyframe.select(pl.col(data.key).str.len_bytes() <= limit),
                    name="max_bytes", error=f"longer than {limit} bytes")


@cache
def pandera_schema(table_name: str):
    """The pandera schema of a table: exact columns (strict, ordered), dtypes, nullability, checks.

    pandera is imported here, not at module level: it pulls in pandas (~1 s), which commands that never
    validate (`--version`, `schema`, `query`) should not pay for."""
    import pandera.polars as pa

    table = get_table(table_name)
    columns = {
        c: pa.Column(polars_dtype(FIELDS[c].dtype), checks=_checks(c), nullable=is_nullable(table, c),
                     description=FIELDS[c].description)
        for c in table.columns
    }
    return pa.DataFrameSchema(columns, strict=True, name=table.name, description=table.description)


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def create_table_sql(table_name: str) -> list[str]:
    """CREATE TABLE plus COMMENT statements. The primary key is documented and checked on load by
    `schemas.validate.check_primary_key` rather than declared, because DuckDB's index-backed keys
    reject a delete-then-insert of the same key inside one transaction (our idempotent re-ingest)."""
    table = get_table(table_name)
    cols = []
    for c in table.columns:
        null = "" if is_nullable(table, c) else " NOT NULL"
        compression = f" USING COMPRESSION {FIELDS[c].compression}" if FIELDS[c].compression else ""
        cols.append(f"    {c} {duckdb_type(FIELDS[c].dtype)}{null}{compression}")
    stmts = [f"CREATE TABLE IF NOT EXISTS {table.name} (\n" + ",\n".join(cols) + "\n)"]
    stmts.append(f"COMMENT ON TABLE {table.name} IS {_sql_str(table.description)}")
    for c in table.columns:
        stmts.append(f"COMMENT ON COLUMN {table.name}.{c} IS {_sql_str(FIELDS[c].description)}")
    return stmts


def data_dictionary(table_names: list[str] | None = None) -> str:
    """The data dictionary as Markdown: every table, its key and every column with type and meaning."""
    names = table_names or sorted(TABLES, key=lambda n: (("meta", "raw", "core", "out").index(TABLES[n].layer), n))
    out = ["# arcstudy data dictionary", ""]
    for name in names:
        t = get_table(name)
        out += [f"## `{t.name}` ({t.layer})", "", t.description, "",
                f"Primary key: `({', '.join(t.primary_key)})`", "",
                *([f"Same record across files when equal in: `({', '.join(t.content_key)})` (a later file's copy is "
                   "quarantined as `duplicate_across_files`)", ""] if t.content_key else []),
                "| column | type | constraints | description |", "|---|---|---|---|"]
        for c in t.columns:
            f = FIELDS[c]
            cons = f.constraint_text()
            if c in t.nullable_here:
                cons = cons.replace("not null", "nullable here").strip("; ") or "nullable here"
            desc = f.description.replace("|", "\\|")
            out.append(f"| `{c}` | `{duckdb_type(f.dtype)}` | {cons} | {desc} |")
        out.append("")
    return "\n".join(out)
