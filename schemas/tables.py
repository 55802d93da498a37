"""Every table: its layer, its columns (names from `schemas.fields`), its primary key, what a row is.

Layers (CONVENTIONS.md): `raw_*` keeps what the file said plus provenance, `core_*` is validated and
typed with one fact per row, `out_*` is derived for people; `meta` tables (`runs`, `quarantine`) describe
the pipeline itself.
"""

from __future__ import annotations

from schemas.model import Table

_TABLES: list[Table] = [
    Table(
        name="runs",
        layer="meta",
        description="One row per arcstudy command that wrote to the database, with its run manifest.",
        columns=(
            "run_id", "command", "started_at", "finished_at", "arcstudy_version", "git_commit",
            "is_git_dirty", "exit_code", "manifest_json",
        ),
        primary_key=("run_id",),
    ),
    Table(
        name="quarantine",
        layer="meta",
        description=(
            "Rejected input: one row per malformed line, row, play or unreadable file, with the file, "
            "the location, the raw text and the reason. Nothing rejected disappears."
        ),
        columns=(
            "quarantine_id", "run_id", "file_id", "file_path", "source_format", "source_location",
            "target_table", "column_name", "check_name", "failing_value", "reason", "raw_text",
        ),
        primary_key=("quarantine_id",),
        nullable_here=("file_id", "source_format"),
    ),
    Table(
        name="raw_ingest__files",
        layer="raw",
        description="One row per ingested file version (by content hash), with its detected format.",
        columns=(
            "file_id", "file_path", "file_name", "n_bytes", "source_format", "detection_evidence",
            "ingested_at", "run_id", "n_records_loaded", "n_records_quarantined", "flags",
        ),
        primary_key=("file_id",),
    ),
]

TABLES: dict[str, Table] = {}


def register(*tables: Table) -> None:
    """Add tables (each source module registers its own); names must be unique."""
    for t in tables:
        if t.name in TABLES:
            raise ValueError(f"table {t.name} defined twice")
        TABLES[t.name] = t


register(*_TABLES)
