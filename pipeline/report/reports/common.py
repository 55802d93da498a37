"""What the three reports share: reading the database read-only (tables may be missing or empty), the run
manifest every report carries, and small helpers for the sections.

A report never writes to the database. Its run manifest records, as inputs, the database file (sha256 of the
whole file), a content digest of every table it read (`db:<path>#<table>`), the other files it read (ground
truth, reference CSV, game files), and, as notes, the `runs` rows that produced those tables (build, score,
harc-analyses), so a number in a report can be traced to the commands and code that made it.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.manifest import RunManifest, manifest_beside, sha256_file
from pipeline.core.outputs import write_text
from pipeline.core.workspace import Workspace
from pipeline.report.html import render_report
from schemas import TABLES

__all__ = ["ReportContext", "ReportInputError", "clear_previous", "frame_digest", "minutes", "publish_report",
           "report_manifest", "upstream_runs", "with_labels", "write_manifest"]


class ReportInputError(ValueError):
    """An option or input file a report cannot use (a usage error: exit 2), with a message for a person."""


def frame_digest(df: pl.DataFrame) -> str:
    """sha256 of a frame's rows as JSON lines, sorted on its flat columns (nested values kept as JSON)."""
    flat = [c for c, t in df.schema.items() if not isinstance(t, (pl.List, pl.Array, pl.Struct))]
    ordered = df.sort(flat) if flat and df.height else df
    return hashlib.sha256(ordered.write_ndjson().encode()).hexdigest()


def minutes(column: str, alias: str | None = None) -> pl.Expr:
    return (pl.col(column) / 60).alias(alias or column.removesuffix("_s") + "_min")


@dataclass
class ReportContext:
    """A read-only view of the database for one report, remembering what it read (for the manifest)."""

    ws: Workspace
    read_tables: dict[str, str] = field(default_factory=dict)  # table -> content digest
    extra_inputs: dict[str, str] = field(default_factory=dict)  # path -> sha256

    @property
    def db_path(self) -> Path:
        return self.ws.path

    def has_rows(self, table: str) -> bool:
        return self.ws.has_table(table) and self.ws.row_count(table) > 0

    def table(self, table: str, where: str = "", params: Sequence[Any] | None = None,
              order_by: str | None = None) -> pl.DataFrame:
        """Every row of `table` (optionally filtered); an empty frame with the schema's columns when the table is
        missing. The content read is digested for the manifest."""
        if not self.ws.has_table(table):
            df = _empty(table)
        else:
            sql = f'SELECT * FROM "{table}"' + (f" WHERE {where}" if where else "")
            key = order_by or (", ".join(TABLES[table].primary_key) if table in TABLES else None)
            if key:
                sql += f" ORDER BY {key}"
            df = self.ws.read(sql, list(params) if params else None)
        name = table + (f" WHERE {where} {list(params or [])}" if where else "")
        self.read_tables[name] = frame_digest(df)
        return df

    def query(self, label: str, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        df = self.ws.read(sql, list(params) if params else None)
        self.read_tables[label] = frame_digest(df)
        return df

    def add_input(self, path: Path) -> None:
        self.extra_inputs[str(path)] = sha256_file(path)


def _empty(table: str) -> pl.DataFrame:
    if table not in TABLES:
        return pl.DataFrame()
    from schemas.validate import empty_frame

    return empty_frame(table)


def upstream_runs(ctx: ReportContext) -> list[dict[str, Any]]:
    """The latest run of each command that wrote what the reports read (ingest, build, score, harc-analyses),
    from the `runs` table: run id, command, when, git commit."""
    if not ctx.ws.has_table("runs"):
        return []
    runs = ctx.ws.read("SELECT run_id, command, started_at, git_commit, is_git_dirty, exit_code FROM runs "
                       "ORDER BY started_at, run_id")
    latest: dict[str, dict[str, Any]] = {}
    for row in runs.iter_rows(named=True):
        words = shlex.split(row["command"]) if row["command"] else []
        if words[:1] == ["arcstudy"]:
            verb = next((w for w in words[1:] if not w.startswith("-")), "?")
        else:
            verb = words[0] if words else "?"
        latest[verb] = {**row, "started_at": str(row["started_at"])}
    return [latest[k] for k in sorted(latest)]


def report_manifest(ctx: ReportContext, *, report: str, command: str, config: dict[str, Any],
                    policy_ids: Sequence[str] = (), headline: dict[str, Any] | None = None) -> RunManifest:
    """The run manifest of one report: inputs with their hashes (the database file, every table read, other
    files), policy ids, configuration; versions are added by RunManifest itself. `headline`: the report's few
    key numbers (label -> value), kept in the notes for index pages."""
    manifest = RunManifest(command=command, config={"report": report, "db": str(ctx.db_path), **config},
                           policy_ids=list(policy_ids))
    manifest.add_input(ctx.db_path)
    for table, digest in sorted(ctx.read_tables.items()):
        manifest.inputs[f"db:{ctx.db_path}#{table}"] = digest
    for path, digest in sorted(ctx.extra_inputs.items()):
        manifest.inputs[path] = digest
    manifest.notes["upstream_runs"] = upstream_runs(ctx)
    manifest.notes["headline"] = dict(headline or {})
    return manifest


def with_labels(sections: Sequence[Any], labels: Mapping[str, str]) -> list[Any]:
    """The sections with the report's column labels given to every table (a table's own labels win). Columns not
    in `labels` get pipeline.report.html.column_label's reading of their name."""
    from pipeline.report.html import Table

    return [replace(s, labels={**labels, **(s.labels or {})}) if isinstance(s, Table) else s for s in sections]


def clear_previous(out_dir: Path, report: str) -> None:
    """Remove what an earlier run of this report wrote (its table exports and figures folder), so nothing stale
    sits beside a new report. Only files named by this report's own pattern are touched."""
    for path in sorted(out_dir.glob(f"{report}__*")):
        if path.is_file() and path.suffix in (".csv", ".parquet"):
            path.unlink()
    figures = out_dir / "figures" / report
    if figures.is_dir():
        for path in sorted(figures.iterdir()):
            if path.is_file() and path.name.endswith((".png", ".svg", ".vl.json")):
                path.unlink()


def write_manifest(manifest: RunManifest, html: Path) -> Path:
    """`<report>.manifest.json` beside the HTML (a page cannot hold its own hash, the JSON can)."""
    manifest.add_output(html)
    manifest.finish(0)
    path = manifest_beside(html)
    write_text(path, json.dumps(manifest.to_dict(), indent=2, default=str) + "\n")
    return path


def publish_report(manifest: RunManifest, title: str, sections: Sequence[Any], labels: Mapping[str, str],
                   figures: Mapping[str, Mapping[str, Path]], html: Path, *, subtitle: str) -> Path:
    """Every report's last step: its figure files become outputs of its manifest, the page is rendered to
    `html` (the report's column labels given to its tables) and the manifest is written beside it."""
    for paths in figures.values():
        for path in paths.values():
            manifest.add_output(path)
    page = render_report(title, with_labels(sections, labels), manifest, html, subtitle=subtitle)
    write_manifest(manifest, page)
    return page
