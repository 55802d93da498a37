"""The index page of a reports folder (`index.html`, written by `arcstudy report` and `arcstudy demo`).

Grouped by who reads what: analysts (calibration of the games on people), organizers (agent scores and the
baselines they are scored against) and researchers (H-ARC and its traces). Each report comes with the question it
answers and its headline numbers, which every report writes into its run manifest (`notes.headline`), so the index
shows the numbers of the reports as written, without reading the database again. The other files of the folder
(figures, tables, scorecards, manifests) are listed, folded, under the audience they belong to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

__all__ = ["AUDIENCES", "QUESTIONS", "Audience", "audience_of", "index_links", "write_index"]

TITLES = {"calibration": "Calibration report", "scores": "Scores report", "harc": "H-ARC report",
          "static/calibration": "Static tasks: calibration report"}
QUESTIONS = {
    "calibration": "Does each game pass the human inclusion bar, where do people drop off, and which sessions "
                   "were excluded as low effort?",
    "scores": "How well did each agent score under each scoring policy, and did every run replay through the "
              "engine?",
    "harc": "Do the H-ARC traces reproduce the paper's accuracy, descriptives, errors and timing?",
    "static/calibration": "Which generated task families fail their witnesses, split people or are much harder than "
                          "their source task, and does the ARC-AGI-2 log reproduce the published calibration?",
}


@dataclass(frozen=True)
class Audience:
    heading: str
    note: str
    reports: tuple[str, ...]
    files: tuple[str, ...]  # glob patterns, relative to the folder, of the files that belong to this audience


AUDIENCES = (
    Audience("Analysts: human calibration", "Whether each game is calibrated on people, level by level.",
             ("calibration",), ("calibration*", "figures/calibration/*", "*.build/*")),
    Audience("Organizers: scores and baselines", "What each agent scored, against which baselines, and whether "
             "its runs verified.", ("scores",), ("scores*", "scores/*", "figures/scores/*", "baselines*")),
    Audience("Researchers: H-ARC and traces", "The H-ARC paper's numbers regenerated from the action traces.",
             ("harc",), ("harc*", "harc/*", "*.harc/*", "figures/harc/*")),
    Audience("Generator maintainers: static tasks", "ARC-TGI task families audited by people, and ARC-AGI-2 "
             "calibration (a report of its own database under static/).", ("static/calibration",), ("static/*",)),
)
OTHER = "Run records"
FILE_PATTERNS = ("*.png", "*.csv", "*.parquet", "*.json")


def audience_of(relative: str) -> str:
    """The heading of the group a file (a path relative to the folder, with /) belongs to."""
    for audience in AUDIENCES:
        if any(fnmatch(relative, pattern) for pattern in audience.files):
            return audience.heading
    return OTHER


def _headline(out_dir: Path, report: str) -> list[tuple[str, Any]]:
    path = out_dir / f"{report}.manifest.json"
    try:
        notes = json.loads(path.read_text()).get("notes") or {}
    except (OSError, json.JSONDecodeError):
        return []
    return list((notes.get("headline") or {}).items())


def index_links(out_dir: Path) -> list:
    """The index entries of `out_dir`: per audience, its reports present (with question and headline numbers),
    then its files; files of no audience go to a last group, run records."""
    from pipeline.report.html import Link

    files = sorted({p for pattern in FILE_PATTERNS for p in out_dir.rglob(pattern)
                    if p.is_file() and "screenshots" not in p.relative_to(out_dir).parts})
    by_group: dict[str, list[Path]] = {}
    for path in files:
        by_group.setdefault(audience_of(path.relative_to(out_dir).as_posix()), []).append(path)
    links = []
    for audience in AUDIENCES:
        for report in audience.reports:
            html = out_dir / f"{report}.html"
            if html.is_file():
                links.append(Link(TITLES[report], html, QUESTIONS[report], audience.heading,
                                  facts=_headline(out_dir, report)))
        links += [Link(p.relative_to(out_dir).as_posix(), p, group=audience.heading, folded=True)
                  for p in by_group.get(audience.heading, [])]
    links += [Link(p.relative_to(out_dir).as_posix(), p, group=OTHER, folded=True) for p in by_group.get(OTHER, [])]
    return links


def write_index(out_dir: Path, *, title: str = "arcstudy reports", intro: str = "", manifest: Any = None) -> Path:
    """Write `<out_dir>/index.html` (see the module docstring) and return its path."""
    from pipeline.report.html import render_index

    notes = {a.heading: a.note for a in AUDIENCES} | {OTHER: "Manifests of the commands that wrote the database."}
    return render_index(title, index_links(out_dir), manifest, out_dir / "index.html", intro=intro,
                        group_notes=notes)
