"""`forget`: remove everything one input file, or every file of one ingest run, brought into the database.

What a file brought is every row that carries its content hash (`file_id`: raw, core and the out tables
derived from it), its registry row in `raw_ingest__files` and its quarantine rows (a refused file has only
those, found by its path); and what other commands made from it that `build` does not remake: every score run
that counted one of its plays (`score`'s tables, by `card_id`) and, for H-ARC files, the trace checks and
analyses (`replay-harc`, `harc-analyses`). All of it goes in one transaction; the frame Parquet files that its steps
reference (`--keep-frames`) are removed once that transaction has committed. `build` then rebuilds what
changed, as after any change to the core tables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.core.workspace import Workspace

FILE_ID = re.compile(r"[0-9a-f]{64}")


class NothingToForget(LookupError):
    """The target names no file and no run the database knows."""


@dataclass
class Forgotten:
    target: str
    kind: str  # "file", "folder", "run"
    files: dict[str, str] = field(default_factory=dict)  # file_id -> path
    refused_paths: list[str] = field(default_factory=list)  # files that left only quarantine rows
    rows: dict[str, int] = field(default_factory=dict)  # rows removed per table
    frames_files: list[str] = field(default_factory=list)
    scorecards: list[str] = field(default_factory=list)  # score runs (card_id) that counted the files' plays
    harc_analyses: bool = False  # the H-ARC trace checks and analyses, made with the files' rows

    @property
    def n_rows(self) -> int:
        return sum(self.rows.values())


def resolve_target(ws: Workspace, target: str) -> Forgotten:
    """Which files `target` names: a run id (of `runs` or the registry), a content hash, a file path, or a folder
    (every file ingested from below it). Raises NothingToForget when none matches."""
    files = ws.read("SELECT file_id, file_path, run_id FROM raw_ingest__files")
    quarantined = ws.read("SELECT DISTINCT file_path, run_id, file_id FROM quarantine")
    runs = set(ws.read("SELECT run_id FROM runs")["run_id"].to_list()) if ws.has_table("runs") else set()
    by_run = files.filter(files["run_id"] == target)
    if target in runs or by_run.height or (quarantined["run_id"] == target).any():
        found = Forgotten(target, "run", dict(zip(by_run["file_id"], by_run["file_path"], strict=True)))
        q = quarantined.filter((quarantined["run_id"] == target) & quarantined["file_id"].is_null())
        found.refused_paths = sorted(set(q["file_path"].to_list()))
        if not found.files and not found.refused_paths and not (quarantined["run_id"] == target).any():
            raise NothingToForget(f"run {target} brought nothing that is still in the database")
        return found
    if FILE_ID.fullmatch(target):
        hit = files.filter(files["file_id"] == target)
        if hit.height:
            return Forgotten(target, "file", dict(zip(hit["file_id"], hit["file_path"], strict=True)))
    path = str(Path(target).expanduser().resolve())
    hit = files.filter(files["file_path"] == path)
    q_hit = sorted(set(quarantined.filter(quarantined["file_path"] == path)["file_path"].to_list()))
    kind = "file"
    if not hit.height and not q_hit:
        prefix = path.rstrip("/") + "/"
        hit = files.filter(files["file_path"].str.starts_with(prefix))
        q_hit = sorted(set(quarantined.filter(quarantined["file_path"].str.starts_with(prefix))["file_path"]
                           .to_list()))
        kind = "folder"
    if not hit.height and not q_hit:
        raise NothingToForget(f"{target}: no file of that path (or below that folder), content hash or ingest run "
                              "is in the database; `arcstudy query \"SELECT file_path, run_id FROM "
                              "raw_ingest__files\"` lists what is")
    found = Forgotten(target, kind, dict(zip(hit["file_id"], hit["file_path"], strict=True)))
    found.refused_paths = [p for p in q_hit if p not in found.files.values()]
    return found


def forget(ws: Workspace, found: Forgotten, *, dry_run: bool = False) -> Forgotten:
    """Remove what `found` names, in one transaction (or, with `dry_run`, only count it)."""
    from schemas import TABLES

    ids = list(found.files)
    paths = [*found.files.values(), *found.refused_paths]
    if ws.has_table("core_arc3__steps") and ids:
        frames = ws.read("SELECT DISTINCT frames_file FROM core_arc3__steps WHERE file_id IN (SELECT unnest(?)) "
                         "AND frames_file IS NOT NULL", [ids])
        found.frames_files = frames["frames_file"].to_list()
    with ws.transaction() as con:
        # Results other commands made from the files (`build` remakes the rest): a scorecard that counted one of
        # their plays goes whole (its totals counted them), as do the H-ARC checks and analyses when the files
        # brought H-ARC rows; forgotten data must not stay in what the reports show.
        found.scorecards = _scorecards_of(ws, con, ids)
        found.harc_analyses = bool(ids) and any(
            con.execute(f"SELECT count(*) FROM {name} WHERE file_id IN (SELECT unnest(?))", [ids]).fetchall()[0][0]
            for name, table in TABLES.items()
            if name.startswith(("raw_harc__", "core_harc__")) and "file_id" in table.columns
            and ws.has_table(name, con))
        for name, table in TABLES.items():
            if not ws.has_table(name, con):
                continue
            if name.startswith("out_harc__") and found.harc_analyses:
                where, params = "true", []
            elif "card_id" in table.columns and found.scorecards:
                where, params = "card_id IN (SELECT unnest(?))", [found.scorecards]
                if "file_id" in table.columns and ids:
                    where, params = f"{where} OR file_id IN (SELECT unnest(?))", [found.scorecards, ids]
            elif name == "quarantine":
                where, params = "file_id IN (SELECT unnest(?)) OR file_path IN (SELECT unnest(?))", [ids, paths]
                if found.kind == "run":
                    where += " OR run_id = ?"
                    params.append(found.target)
            elif "file_id" in table.columns and ids:
                where, params = "file_id IN (SELECT unnest(?))", [ids]
            else:
                continue
            n = con.execute(f"SELECT count(*) FROM {name} WHERE {where}", params).fetchall()[0][0]
            if n:
                found.rows[name] = n
                if not dry_run:
                    con.execute(f"DELETE FROM {name} WHERE {where}", params)
    if not dry_run:
        for f in found.frames_files:
            Path(f).unlink(missing_ok=True)
    return found


def _scorecards_of(ws: Workspace, con: object, ids: list[str]) -> list[str]:
    """The score runs (card_id) that counted a play of the files `ids`: their replay checks name the file, their
    run scores the play."""
    if not ids:
        return []
    cards: set[str] = set()
    if ws.has_table("out_arc3__replay_checks", con):
        cards |= {r[0] for r in con.execute("SELECT DISTINCT card_id FROM out_arc3__replay_checks WHERE file_id IN "
                                            "(SELECT unnest(?))", [ids]).fetchall()}
    if ws.has_table("out_arc3__run_scores", con) and ws.has_table("core_arc3__plays", con):
        cards |= {r[0] for r in con.execute("SELECT DISTINCT card_id FROM out_arc3__run_scores WHERE play_id IN "
                                            "(SELECT play_id FROM core_arc3__plays WHERE file_id IN "
                                            "(SELECT unnest(?)))", [ids]).fetchall()}
    return sorted(c for c in cards if c is not None)
