"""The single source of truth for every table's columns.

Fields are defined once, in one module per source (`schemas.fields` collects them); tables are declared
as data in `schemas/tables.toml` (loaded by `schemas.tables`), each listing field names. pandera schemas,
DuckDB DDL and the data dictionary are generated (`schemas.generate`); validation returns structured
failure records (`schemas.validate`).
"""

from schemas.fields import FIELDS
from schemas.generate import create_table_sql, data_dictionary, get_table, pandera_schema
from schemas.model import Field, Table
from schemas.tables import TABLES
from schemas.validate import (
    FailureRecord,
    ValidationResult,
    check_primary_key,
    conform,
    empty_frame,
    validate_frame,
)

__all__ = [
    "FIELDS", "TABLES", "Field", "Table", "FailureRecord", "ValidationResult", "check_primary_key",
    "conform", "create_table_sql", "data_dictionary", "empty_frame", "get_table", "pandera_schema",
    "validate_frame",
]
