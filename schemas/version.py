"""The schema's version, derived from the table declarations so that it cannot be forgotten.

A database records the version of the schema that made it (table `schema_version`, one row per upgrade). The
version has two parts:
- `SCHEMA_VERSION`, an integer declared here and raised by hand for a change that old databases cannot take
  in place (a column removed, renamed or retyped in a raw or core table): it tells an older arcstudy that a
  database is newer than it;
- `schema_sha256()`, a hash of every table's columns, types, nullability and key as generated from
  `schemas/tables.toml` and the field modules: it changes with any change to them, declared or not.
A database whose hash differs is compared column by column with the schema (`schema_changes`): additive
changes (a new table, a new nullable column, a changed `out_*` table, which `build` derives again) are made
in place; anything else is named, with what to do.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from schemas.fields import FIELDS
from schemas.generate import is_nullable
from schemas.model import duckdb_type
from schemas.tables import TABLES

SCHEMA_VERSION = 3  # 1: the databases made before the schema was recorded; 3: the lean H-ARC raw layer
# (raw_harc__csv_rows: each CSV field in its own column instead of row_json + content_sha256)
VERSION_TABLE = "schema_version"


@cache
def schema_sha256() -> str:
    """sha256 over every table's name, layer, columns (DuckDB type, nullability) and primary key."""
    spec = [[name, t.layer, [[c, duckdb_type(FIELDS[c].dtype), is_nullable(t, c)] for c in t.columns],
             list(t.primary_key)] for name, t in sorted(TABLES.items())]
    return hashlib.sha256(json.dumps(spec, separators=(",", ":")).encode()).hexdigest()


def schema_label(version: int | None = None, digest: str | None = None) -> str:
    """How a schema version is written for people: `v2 (3f1c9a0b27d4)`."""
    return f"v{SCHEMA_VERSION if version is None else version} ({(digest or schema_sha256())[:12]})"


@dataclass
class SchemaChanges:
    """What separates a database's tables from the schema."""

    new_tables: list[str] = field(default_factory=list)
    new_columns: list[tuple[str, str]] = field(default_factory=list)  # (table, column): nullable, added in place
    derived_tables: list[str] = field(default_factory=list)  # out_* tables whose layout changed: made again
    breaking: list[str] = field(default_factory=list)  # changes that cannot be made in place, in words
    foreign_tables: list[str] = field(default_factory=list)  # arcstudy names, none of the columns: not ours

    @property
    def additive(self) -> bool:
        return not self.breaking

    @property
    def any(self) -> bool:
        return bool(self.new_tables or self.new_columns or self.derived_tables or self.breaking
                    or self.foreign_tables)


def schema_changes(db_columns: dict[str, dict[str, tuple[str, bool]]],
                   type_name: Callable[[str], str] = str) -> SchemaChanges:
    """Compare a database's columns ({table: {column: (DuckDB type, nullable)}}, its arcstudy tables only or
    all) with the schema. Tables of the database that the schema does not know are the user's: ignored.
    `type_name`: a DDL type as the database names it (TIMESTAMPTZ is TIMESTAMP WITH TIME ZONE there)."""
    changes = SchemaChanges()
    for name, table in TABLES.items():
        have = db_columns.get(name)
        if have is None:
            changes.new_tables.append(name)
            continue
        want = {c: (type_name(duckdb_type(FIELDS[c].dtype)), is_nullable(table, c)) for c in table.columns}
        if not set(want) & set(have):
            changes.foreign_tables.append(name)
            continue
        problems = []
        for c, (typ, nullable) in want.items():
            if c not in have:
                if nullable:
                    changes.new_columns.append((name, c))
                else:
                    problems.append(f"{name}.{c} is new and required")
            elif have[c][0] != typ:
                problems.append(f"{name}.{c} is {have[c][0]} in the database, {typ} now")
        problems += [f"{name}.{c} is no longer a column" for c in have if c not in want]
        if problems:
            if table.layer == "out" or name == "build_state":  # derived: `build` makes it again
                changes.derived_tables.append(name)
                changes.new_columns = [(t, c) for t, c in changes.new_columns if t != name]
            else:
                changes.breaking += problems
    return changes
