"""The building blocks of the schema registry: a field is defined once, a table lists field names.

Everything else (pandera schemas, DuckDB DDL, the data dictionary) is generated from these objects in
`schemas.generate`, so a column's name, type and meaning live in exactly one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

LAYERS = ("raw", "core", "out", "meta")


@dataclass(frozen=True)
class Field:
    """One column, identical in every table that uses it."""

    name: str
    dtype: Any  # a polars data type (class or instance)
    description: str
    nullable: bool = False
    ge: float | int | None = None
    le: float | int | None = None
    isin: tuple[Any, ...] | None = None
    regex: str | None = None
    unit: str | None = None
    # Size bound of a text value in UTF-8 bytes (the toolkit's where it has one). Readers quarantine a value
    # over it with a reason naming the field, its size and this bound; the schema check backs them up.
    max_bytes: int | None = None
    # DuckDB storage compression forced for the column (`USING COMPRESSION`), for long text that rarely
    # repeats: zstd there costs a third of the CPU of DuckDB's own choice when written, and far less disk.
    compression: str | None = None

    def constraint_text(self) -> str:
        """Human-readable constraints for the data dictionary."""
        parts = []
        if not self.nullable:
            parts.append("not null")
        if self.ge is not None:
            parts.append(f">= {self.ge}")
        if self.le is not None:
            parts.append(f"<= {self.le}")
        if self.isin is not None:
            parts.append("one of " + ", ".join(f"`{v}`" for v in self.isin))
        if self.regex is not None:
            parts.append(f"matches `{self.regex}`")
        if self.max_bytes is not None:
            parts.append(f"at most {self.max_bytes} bytes")
        return "; ".join(parts)


@dataclass(frozen=True)
class Table:
    """A table: ordered field names, the primary key, the layer and what one row means."""

    name: str
    layer: str
    description: str
    columns: tuple[str, ...]
    primary_key: tuple[str, ...]
    # Columns that may be null in this table although the shared field is not (e.g. a key that only
    # some sources carry). Kept explicit so the exception is visible in the dictionary.
    nullable_here: tuple[str, ...] = field(default_factory=tuple)
    # Columns that say what a row is, where the primary key names the file it came from (`file_id`, row): a
    # row of another file equal in all of them (empty equal to empty) is the same record again, quarantined as
    # `duplicate_across_files` (pipeline/ingest/commit.py); empty: the primary key decides.
    content_key: tuple[str, ...] = field(default_factory=tuple)

    @property
    def across_files_key(self) -> tuple[str, ...]:
        """The columns that make two files' rows one record: `content_key`, else the primary key."""
        return self.content_key or self.primary_key

    def __post_init__(self) -> None:
        if self.layer not in LAYERS:
            raise ValueError(f"table {self.name}: unknown layer {self.layer!r} (expected one of {LAYERS})")
        if self.layer != "meta" and not self.name.startswith(self.layer + "_"):
            raise ValueError(f"table {self.name}: name must start with its layer '{self.layer}_'")
        missing = [c for c in self.primary_key if c not in self.columns]
        if missing:
            raise ValueError(f"table {self.name}: primary key columns {missing} are not columns")
        missing = [c for c in self.content_key if c not in self.columns]
        if missing:
            raise ValueError(f"table {self.name}: content key columns {missing} are not columns")
        if len(set(self.columns)) != len(self.columns):
            raise ValueError(f"table {self.name}: duplicate columns")


def polars_dtype(dtype: Any) -> pl.DataType:
    """Normalise a dtype given as a class (pl.Int64) or instance (pl.Datetime('us'))."""
    return dtype() if isinstance(dtype, type) else dtype


def duckdb_type(dtype: Any) -> str:
    """The DuckDB column type for a polars dtype."""
    dt = polars_dtype(dtype)
    simple = {
        pl.Int8: "TINYINT",
        pl.Int16: "SMALLINT",
        pl.Int32: "INTEGER",
        pl.Int64: "BIGINT",
        pl.UInt8: "UTINYINT",
        pl.UInt16: "USMALLINT",
        pl.UInt32: "UINTEGER",
        pl.UInt64: "UBIGINT",
        pl.Float32: "FLOAT",
        pl.Float64: "DOUBLE",
        pl.String: "VARCHAR",
        pl.Boolean: "BOOLEAN",
        pl.Date: "DATE",
        pl.Binary: "BLOB",
    }
    for pl_type, sql in simple.items():
        if dt == pl_type:
            return sql
    if isinstance(dt, pl.Datetime):
        return "TIMESTAMPTZ" if dt.time_zone else "TIMESTAMP"
    if isinstance(dt, pl.List):
        return duckdb_type(dt.inner) + "[]"
    raise TypeError(f"no DuckDB type for polars dtype {dt!r}")
