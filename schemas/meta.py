"""Fields and tables that describe the pipeline itself: provenance, quarantine, run manifests."""

from __future__ import annotations

import polars as pl

from schemas.model import Field

UTC = pl.Datetime("us", "UTC")
SHA256 = r"^[0-9a-f]{64}$"

FIELDS: list[Field] = [
    # --- provenance -------------------------------------------------------------------------------
    Field("file_id", pl.String, "sha256 of the ingested file's bytes; identifies a file version", regex=SHA256),
    Field("file_path", pl.String, "path of the file as given to the command (absolute)"),
    Field("file_name", pl.String, "base name of the file"),
    Field("n_bytes", pl.Int64, "size of the file in bytes", ge=0),
    Field("source_format", pl.String, "detected (or forced) input format of the file"),
    Field("detection_evidence", pl.String, "why the format detector chose source_format", nullable=True),
    Field("line_number", pl.Int64, "1-based line number in the source file (JSONL)", ge=1),
    Field("row_number", pl.Int64, "1-based data row number in the source file (CSV, header excluded)", ge=1),
    Field("source_location", pl.String, "where in the file: 'line 12', 'row 7', or 'file'"),
    Field("raw_text", pl.String, "the offending text exactly as read (truncated to 4 KiB)", nullable=True),
    Field("content_sha256", pl.String, "sha256 of the raw line or row text", regex=SHA256),
    Field("ingested_at", UTC, "when the file was ingested"),
    Field("run_id", pl.String, "id of the arcstudy run that wrote the row"),
    Field("n_records_loaded", pl.Int64, "records that landed in core tables", ge=0),
    Field("n_records_quarantined", pl.Int64, "records sent to quarantine", ge=0),
    Field("flags", pl.List(pl.String), "quality flags raised for this record (see the data dictionary)"),
    # --- quarantine -------------------------------------------------------------------------------
    Field("quarantine_id", pl.String, "stable id of a quarantined record: sha256(file_id, location, reason)"),
    Field("target_table", pl.String, "the table the record was meant for", nullable=True),
    Field("column_name", pl.String, "the column at fault, when one is", nullable=True),
    Field("check_name", pl.String, "the rule that failed (pandera check or ingest rule id)"),
    Field("failing_value", pl.String, "the failing value as text", nullable=True),
    Field("reason", pl.String, "what is wrong, in words a person can act on"),
    Field("n_raw_bytes", pl.Int64, "length in UTF-8 bytes of the offending text in full (raw_text keeps at most "
          "4 KiB of it)", ge=0, nullable=True),
    Field("raw_sha256", pl.String, "sha256 of the offending text in full (UTF-8), to find it again beyond the "
          "4 KiB raw_text keeps", regex=SHA256, nullable=True),
    # --- runs (manifests) -------------------------------------------------------------------------
    Field("command", pl.String, "the arcstudy command line that ran"),
    Field("started_at", UTC, "when the run started"),
    Field("finished_at", UTC, "when the run finished", nullable=True),
    Field("arcstudy_version", pl.String, "version of arcstudy that ran"),
    Field("git_commit", pl.String, "git commit of the arcstudy checkout, when known", nullable=True),
    Field("is_git_dirty", pl.Boolean, "the checkout had uncommitted changes", nullable=True),
    Field("exit_code", pl.Int64, "0 ok, 1 error, 2 usage, 3 completed with rejected input", nullable=True),
    Field("manifest_json", pl.String, "the full run manifest as JSON"),
    # --- schema version ---------------------------------------------------------------------------
    Field("schema_version", pl.Int64, "declared schema version (schemas/version.py SCHEMA_VERSION)", ge=1),
    Field("schema_sha256", pl.String, "sha256 of every table's columns, types, nullability and key", regex=SHA256),
    Field("migrated_at", UTC, "when the database was created with, or upgraded in place to, this schema"),
    Field("migration_note", pl.String, "what the upgrade changed (new tables, new columns, tables rebuilt)",
          nullable=True),
]
