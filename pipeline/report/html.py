"""Self-contained HTML reports: one file per report, built from typed sections (jinja2, autoescape on).

    from pipeline.report.html import Callout, Facts, Figure, Prose, Table, render_report
    paths = save_figure(chart, out_dir / "figures", "completion")
    render_report("Calibration", [
        Prose("What this shows", "Who solved what...\\n\\nA second paragraph."),
        Figure("Completion by level", paths, caption="..."),
        Table("Per-level baselines", df, name="level_baselines"),
        Facts("Key numbers", {"players": 41, "games": 25}),
        Callout("Caveats", ["3 sessions lack a scorecard line"], kind="warning"),
    ], manifest, out_dir / "calibration.html")

What "self-contained" means here: the HTML needs nothing else to display: CSS is inline, figures are embedded
(SVG and/or PNG as data: URIs), tables are HTML. Files written beside it are extras, linked relatively: each
table's CSV and Parquet export (`write_table_exports`), and each figure's Vega-Lite spec/PNG/SVG as saved by
`pipeline.core.figures.save_figure`. No script, font or style is fetched from the network.

Text is always escaped: prose is plain text (blank lines separate paragraphs; no HTML or Markdown is
interpreted), table cells and fact values are formatted and escaped. Table headers are labels for people
(`column_label`: `median_duration_min` -> "median duration (min)", or a report's own `labels`), with the
column's description from schemas/ as a tooltip; the exports keep the column names. The run manifest (inputs with sha256,
policy ids, versions, configuration) closes every report and index page.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import jinja2
import polars as pl

from pipeline.core.outputs import csv_text, write_bytes, write_text, write_with

__all__ = [
    "Prose",
    "Figure",
    "Table",
    "Facts",
    "Callout",
    "Link",
    "Section",
    "render_report",
    "render_index",
    "write_table_exports",
    "template_environment",
    "slugify",
    "column_label",
    "format_value",
    "manifest_context",
]

FigureEmbed = Literal["svg", "png", "both"]
CalloutKind = Literal["note", "warning", "error"]


@dataclass(frozen=True)
class Prose:
    """A heading and plain-text paragraphs (separated by blank lines)."""

    title: str
    text: str = ""

    @property
    def paragraphs(self) -> list[str]:
        return [p.strip() for p in re.split(r"\n\s*\n", self.text) if p.strip()]


@dataclass(frozen=True)
class Figure:
    """A figure saved by `save_figure` (the dict it returns, or the same keys given by hand).

    `embed`: "png" (the default when a PNG exists), "svg" or "both". The PNG is the default because it is the
    figure as drawn: vl-convert measures titles and legends with its own fonts and draws the PNG with them, while
    a browser draws an SVG's text in whatever sans-serif it has (often wider), so titles and legend labels ran past
    the SVG's frame and were cut. The PNG (saved at `PNG_SCALE` x) is shown at its drawn size (width and height
    attributes), so it is as sharp as the scale allows. Images are embedded as <img> data URIs, so nothing in them
    can run. Links to the Vega-Lite spec and image files are added when those files exist.
    """

    title: str
    paths: Mapping[str, Path | str]
    caption: str = ""
    alt: str = ""
    embed: FigureEmbed | None = None


@dataclass(frozen=True, eq=False)  # eq/hash would compare DataFrames
class Table:
    """A polars DataFrame shown as an HTML table (first `max_rows` rows) and, with `export`, written beside the
    report as `<name>.csv` and `<name>.parquet` (every row) and linked. Floats show `float_digits` significant
    digits; the exports keep full precision. Headers show `labels[column]` when given, else `column_label`.

    Reading a wide table: the page shows its key columns first (`keys`: default, the leading identifier columns,
    `is_key_column`), then its key numbers (`lead`: default, the columns `is_key_number` names: scores, baselines,
    medians, test statistics and p values), then the rest in the frame's order; the exports keep the frame's order.
    Up to `MAX_STICKY` key columns stay in place while the table scrolls sideways (CSS `position: sticky`), and a
    table too wide for the page says so above it."""

    title: str
    df: pl.DataFrame
    name: str | None = None
    caption: str = ""
    export: bool = True
    max_rows: int = 200
    float_digits: int = 4
    labels: Mapping[str, str] | None = None
    keys: Sequence[str] | None = None
    lead: Sequence[str] | None = None


@dataclass(frozen=True)
class Facts:
    """Key-value facts (a mapping or (key, value) pairs)."""

    title: str
    items: Mapping[str, Any] | Sequence[tuple[str, Any]]

    @property
    def pairs(self) -> list[tuple[str, Any]]:
        return list(self.items.items()) if isinstance(self.items, Mapping) else [tuple(p) for p in self.items]


@dataclass(frozen=True)
class Callout:
    """A boxed list of notes, warnings or errors."""

    title: str
    items: Sequence[str]
    kind: CalloutKind = "note"


Section = Prose | Figure | Table | Facts | Callout


@dataclass(frozen=True)
class Link:
    """One entry of an index page: a report (with the question it answers as `description` and its headline
    numbers as `facts`), or, with `folded`, one of the group's files, listed in a folded list under it."""

    title: str
    href: Path | str
    description: str = ""
    group: str = ""
    facts: Sequence[tuple[str, Any]] = ()
    folded: bool = False


# --------------------------------------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def template_environment() -> jinja2.Environment:
    """The package's jinja2 environment: templates from pipeline/report/templates, autoescape always on."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pipeline.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["fmt"] = format_value
    return env


MAX_SLUG = 80  # slugs name files too (a figure per scorecard): a label of many recordings' names made a file
# name over the file system's 255 bytes, and the whole report failed


def slugify(text: str) -> str:
    """Lowercase letters, digits and `-`; a long one cut to MAX_SLUG characters, ending in a hash of the whole
    text (two long labels that share their start stay apart)."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if len(slug) > MAX_SLUG:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        slug = f"{slug[:MAX_SLUG - 9].rstrip('-')}-{digest}"
    return slug or "section"


def _unique(slug: str, used: set[str]) -> str:
    candidate, n = slug, 2
    while candidate in used:
        candidate, n = f"{slug}-{n}", n + 1
    used.add(candidate)
    return candidate


# Words of column names written differently in a header, and name endings that are units.
_HEADER_WORDS = {"id": "ID", "ci": "CI", "sd": "SD", "llm": "LLM", "gee": "GEE", "sha256": "SHA-256",
                 "p025": "2.5th percentile", "p975": "97.5th percentile", "p25": "25th percentile",
                 "p75": "75th percentile"}
_UNIT_SUFFIXES = (("_min", "min"), ("_ms", "ms"), ("_s", "s"), ("_pct", "%"), ("_percent", "%"))


def column_label(name: str) -> tuple[str, str]:
    """A header for a column name, as (label, unit): underscores become spaces, a leading `n_` (a count) and
    `is_` (a flag) are dropped, a unit ending becomes the unit (`_s` seconds, `_min` minutes, `_pct` percent)
    and rates, shares and accuracies are marked as fractions (0-1). The unit is "" when there is none."""
    stem, unit = name, ""
    for suffix, suffix_unit in _UNIT_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            stem, unit = name[: -len(suffix)], suffix_unit
            break
    words = [w for w in stem.split("_") if w]
    if len(words) > 1 and (words[0] == "is" or (words[0] == "n" and not words[1].isdigit())):
        words = words[1:]
    if not unit and any(w in ("rate", "share", "accuracy") for w in words):
        unit = "0–1"
    return " ".join(_HEADER_WORDS.get(w, w) for w in words) or name, unit


def _column_description(name: str) -> str:
    from schemas import FIELDS  # the one place column meanings are written down

    field = FIELDS.get(name)
    return field.description if field is not None else ""


def format_value(value: Any, float_digits: int = 4) -> str:
    """A readable cell: ints with thousands separators, floats to `float_digits` significant digits, lists
    and dicts as compact JSON, None as an empty string (shown as a dash by the CSS)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "∞" if value > 0 else "-∞"
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.{float_digits}g}" if abs(value) < 1e6 else f"{value:.{float_digits}g}"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _relative(target: Path | str, base_dir: Path) -> str:
    """The href of a local file, relative to the page: percent-encoded, so that a file name never reads as
    something else (`javascript:alert(1).json` as a URL scheme, `#` or `?` as a fragment or a query)."""
    target = Path(target)
    try:
        rel = os.path.relpath(target.resolve(), base_dir.resolve())
    except ValueError:  # another drive (Windows)
        rel = str(target.resolve())
    return quote(Path(rel).as_posix(), safe="/")


def _write_atomic(path: Path, data: bytes) -> None:
    write_bytes(path, data)  # whole, never through a symlink, OutputError on failure (pipeline.core.outputs)


# --------------------------------------------------------------------------------------------------------
# Table exports
# --------------------------------------------------------------------------------------------------------


def write_table_exports(df: pl.DataFrame, out_dir: Path | str, name: str) -> dict[str, Path]:
    """Write `<out_dir>/<name>.csv` (nested values as JSON text, formula-like text neutralised unless --raw-csv:
    pipeline.core.outputs.csv_text) and `<name>.parquet` (exact types, raw), each whole; returns {"csv": path,
    "parquet": path}."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"table export name {name!r} must be a plain file stem")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / f"{name}.csv", "parquet": out / f"{name}.parquet"}
    write_text(paths["csv"], csv_text(df))
    write_with(paths["parquet"], lambda tmp: df.write_parquet(tmp, compression="zstd"))
    return paths


# --------------------------------------------------------------------------------------------------------
# Section -> template context
# --------------------------------------------------------------------------------------------------------
def _data_uri(path: Path, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _png_size(path: Path) -> tuple[int, int] | None:
    """(width, height) in pixels from a PNG's header, or None for a file that is not a PNG."""
    with path.open("rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _figure_context(section: Figure, base_dir: Path) -> dict[str, Any]:
    paths = {key: Path(value) for key, value in section.paths.items()}
    for key, path in paths.items():
        if not path.is_file():
            raise FileNotFoundError(f"figure {section.title!r}: {key} file {path} does not exist")
    embed = section.embed or ("png" if "png" in paths else "svg")
    images = []
    for kind in (("svg", "png") if embed == "both" else (embed,)):
        if kind not in paths:
            raise ValueError(f"figure {section.title!r}: embed={embed!r} needs a {kind} file (have {sorted(paths)})")
        mime = "image/svg+xml" if kind == "svg" else "image/png"
        image = {"kind": kind, "src": _data_uri(paths[kind], mime), "width": "", "height": ""}
        if kind == "png":
            from pipeline.core.figures import PNG_SCALE  # here: that module imports altair

            size = _png_size(paths[kind])
            if size is not None:  # drawn at PNG_SCALE x: shown at the size the chart was laid out for
                image["width"], image["height"] = (str(round(v / PNG_SCALE)) for v in size)
        images.append(image)
    labels = {"json": "Vega-Lite spec", "png": "PNG", "svg": "SVG"}
    links = [{"label": labels.get(key, key), "href": _relative(path, base_dir)}
             for key, path in sorted(paths.items(), key=lambda kv: ("json", "png", "svg").index(kv[0])
                                     if kv[0] in labels else 9)]
    return {"images": images, "links": links, "caption": section.caption, "alt": section.alt or section.title}


# Reading wide tables (Table): which leading columns identify a row, and which numbers a reader looks for first.
_KEY_COLUMN_NAMES = frozenset({
    "scorecard", "metric", "measure", "column", "task_split", "level_index", "attempt_number", "outcome_group",
    "time_measure", "model_term", "bound_kind", "max_attempts", "from_policy_id", "to_policy_id"})
_KEY_NUMBER_NAMES = frozenset({
    "score", "total_score", "level_score", "baseline_value", "baseline_actions", "level_baseline", "recomputed",
    "published", "statistic", "t", "t_statistic", "degrees_of_freedom", "p", "p_value", "coefficient",
    "published_value", "observed_value", "is_match", "paper", "this_study", "is_within"})
MAX_STICKY = 3  # key columns kept in place at most: more would leave no room to scroll
MAX_STICKY_REM = 28.0  # nor more than about half the page's 62rem column
_CHAR_REM = 0.5  # a character of table text (.88rem, proportional) is about half a rem wide; digits a little less
_CELL_PAD_REM = 1.2  # a cell's left and right padding (the CSS's .6rem each)
_PAGE_WIDTH_REM = 59.5  # the page's 62rem column less its padding


def is_key_column(name: str) -> bool:
    """An identifier column (ends in `_id`, or a known grouping column such as `level_index` or `metric`)."""
    return name.endswith("_id") or name in _KEY_COLUMN_NAMES


def is_key_number(name: str) -> bool:
    """A number a reader looks for first: scores, baselines, medians, t and p (and their published values)."""
    return name in _KEY_NUMBER_NAMES or name.startswith("median")


def _column_order(section: Table) -> tuple[list[str], int]:
    """(the page's column order, how many leading key columns): keys (given, else the leading identifier columns,
    short before long), then the key numbers, then the rest in the frame's order."""
    columns = list(section.df.columns)
    if section.keys is not None:
        keys = [c for c in section.keys if c in columns]
    else:
        keys = []
        for c in columns:
            if not is_key_column(c):
                break
            keys.append(c)
        keys = keys or columns[:1]
        # short keys (names, game ids, levels) before long opaque ones (card hashes, play ids): the short ones fit
        # beside each other in the fixed part
        long_keys = {c for c in keys if section.df.schema[c] == pl.String and
                     (section.df[c].head(200).str.len_chars().max() or 0) > 20}
        keys = [c for c in keys if c not in long_keys] + [c for c in keys if c in long_keys]
    lead = [c for c in (section.lead if section.lead is not None else
                        [c for c in columns if is_key_number(c)]) if c in columns and c not in keys]
    return keys + lead + [c for c in columns if c not in keys and c not in lead], len(keys)


def _text_width_rem(texts: Iterable[str], cap: int) -> float:
    """Width in rem that holds the longest of `texts` (counted up to `cap` characters), with room for wide letters
    (a cell cut there ends in an ellipsis, its full text in its title)."""
    longest = max((len(t) for t in texts), default=1)
    return round(max(3.0, min(longest, cap) * _CHAR_REM * 1.12 + 0.3), 1)


def _table_context(section: Table, base_dir: Path, manifest: Any, export_names: set[str]) -> dict[str, Any]:
    df = section.df
    order, n_keys = _column_order(section)
    shown = df.head(section.max_rows).select(order)
    numeric = {name for name, dtype in df.schema.items() if dtype.is_numeric()}
    rows = [[format_value(v, section.float_digits) for v in row] for row in shown.iter_rows()]
    # long text (messages, details, paths) wraps in a bounded column instead of widening the table without end
    wrap = {name for i, name in enumerate(order) if any(len(row[i]) > 40 for row in rows)}
    links = []
    if section.export:
        name = section.name or slugify(section.title)
        if name in export_names:
            raise ValueError(f"two tables of the report export as {name!r}: give them distinct `name`s")
        export_names.add(name)
        exports = write_table_exports(df, base_dir, name)
        for kind, path in exports.items():
            links.append({"label": kind.upper(), "href": _relative(path, base_dir)})
            if manifest is not None and hasattr(manifest, "add_output"):
                manifest.add_output(path)
    labels = section.labels or {}
    columns = []
    left = 0.0  # rem from the table's left edge to the next sticky column
    width_total = 0.0
    sticking = True
    for i, name in enumerate(order):
        label, unit = (labels[name], "") if name in labels else column_label(name)
        description = _column_description(name)
        cells = [row[i] for row in rows]
        # a long key (a test id, a message) wraps inside its fixed width
        width = _text_width_rem(cells + label.split() + [f"({unit})"], 24 if name in wrap else 30)
        sticking = (sticking and i < min(n_keys, MAX_STICKY)
                    and (i == 0 or left + width + _CELL_PAD_REM <= MAX_STICKY_REM))
        columns.append({"name": name, "label": label, "unit": unit, "numeric": name in numeric,
                        "wrap": name in wrap, "title": f"{name}: {description}" if description else name,
                        "key": i < n_keys, "sticky": sticking, "width_rem": width if sticking else 0,
                        "left_rem": round(left, 1), "last_sticky": False})
        if sticking:
            left += width + _CELL_PAD_REM
        width_total += min(width, 16.0) + _CELL_PAD_REM
    sticky_columns = [c for c in columns if c["sticky"]]
    if sticky_columns:
        sticky_columns[-1]["last_sticky"] = True
    for c in columns:
        c["cls"] = " ".join(k for k, on in (("num", c["numeric"]), ("wrap", c["wrap"] and not c["numeric"]),
                                            ("key", c["key"]), ("sticky", c["sticky"]),
                                            ("last-sticky", c["last_sticky"])) if on)
        c["style"] = f"left: {c['left_rem']}rem" if c["sticky"] else ""
        c["fix"] = f"width: {c['width_rem']}rem" if c["sticky"] else ""
    is_wide = width_total > _PAGE_WIDTH_REM
    return {
        "columns": columns,
        "rows": rows,
        "n_rows": df.height,
        "n_shown": shown.height,
        "links": links,
        "caption": section.caption,
        "is_wide": is_wide,
        "n_sticky": len(sticky_columns),
    }


def _sections_context(sections: Iterable[Section], base_dir: Path, manifest: Any) -> list[dict[str, Any]]:
    used: set[str] = {"contents", "run-manifest"}
    export_names: set[str] = set()
    out = []
    for section in sections:
        item: dict[str, Any] = {"title": section.title, "id": _unique(slugify(section.title), used)}
        if isinstance(section, Prose):
            item.update(kind="prose", paragraphs=section.paragraphs)
        elif isinstance(section, Figure):
            item.update(kind="figure", **_figure_context(section, base_dir))
        elif isinstance(section, Table):
            item.update(kind="table", **_table_context(section, base_dir, manifest, export_names))
        elif isinstance(section, Facts):
            item.update(kind="facts", pairs=[(str(k), format_value(v)) for k, v in section.pairs])
        elif isinstance(section, Callout):
            if section.kind not in ("note", "warning", "error"):
                raise ValueError(f"callout kind must be note, warning or error, got {section.kind!r}")
            item.update(kind="callout", callout_kind=section.kind, items=[str(i) for i in section.items])
        else:
            raise TypeError(f"unknown report section {type(section).__name__}")
        out.append(item)
    return out


def manifest_context(manifest: Any) -> dict[str, Any] | None:
    """What the `_manifest.html.j2` section shows, from a RunManifest or its `to_dict()`."""
    if manifest is None:
        return None
    data = manifest.to_dict() if hasattr(manifest, "to_dict") else dict(manifest)
    return {
        "facts": [(key, format_value(data.get(key))) for key in (
            "run_id", "command", "arcstudy_version", "git_commit", "is_git_dirty", "started_at", "python_executable",
            "platform") if key in data],
        "policy_ids": list(data.get("policy_ids") or []),
        "seeds": dict(data.get("seeds") or {}),
        "packages": dict(data.get("packages") or {}),
        "inputs": dict(data.get("inputs") or {}),
        "outputs": dict(data.get("outputs") or {}),
        "config": json.dumps(data.get("config") or {}, indent=1, sort_keys=True, default=str),
        "notes": json.dumps(data.get("notes") or {}, indent=1, sort_keys=True, default=str),
    }


def _generated_at(manifest: Any) -> str:
    started = getattr(manifest, "started_at", None)
    if isinstance(started, dt.datetime):
        return started.isoformat(timespec="seconds")
    if isinstance(manifest, Mapping) and manifest.get("started_at"):
        return str(manifest["started_at"])
    return ""


def render_report(title: str, sections: Sequence[Section], manifest: Any, out_path: Path | str, *,
                  subtitle: str = "") -> Path:
    """Write one self-contained HTML report to `out_path` (atomically) and return its path.

    `manifest`: a pipeline.core.manifest.RunManifest (or its `to_dict()`), shown at the end; table exports written
    beside the report are added to its outputs (the caller adds the HTML itself and writes the manifest).
    """
    out = Path(out_path)
    base_dir = out.parent
    base_dir.mkdir(parents=True, exist_ok=True)
    context_sections = _sections_context(sections, base_dir, manifest)
    html = template_environment().get_template("report.html.j2").render(
        title=title, subtitle=subtitle, sections=context_sections, manifest=manifest_context(manifest),
        generated_at=_generated_at(manifest),
    )
    _write_atomic(out, html.encode("utf-8"))
    return out


def render_index(title: str, links: Sequence[Link | tuple], manifest: Any, out_path: Path | str, *,
                 intro: str = "", group_notes: Mapping[str, str] | None = None) -> Path:
    """Write an index page linking reports, tables and figures (`Link`s or (title, href[, description[, group]])
    tuples; hrefs are made relative to the page). Links are grouped by `group` in first-seen order; a group's
    `folded` links (its files) are listed in a folded list after its other entries. `group_notes`: a line under a
    group's heading (e.g. who it is for)."""
    out = Path(out_path)
    base_dir = out.parent
    base_dir.mkdir(parents=True, exist_ok=True)
    groups: dict[str, dict[str, Any]] = {}
    used: set[str] = {"run-manifest"}
    for entry in links:
        link = entry if isinstance(entry, Link) else Link(*entry)
        href = str(link.href)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", href):  # a local file: relative to the index page
            href = _relative(link.href, base_dir)
        group = groups.get(link.group)
        if group is None:
            group = groups[link.group] = {
                "title": link.group, "id": _unique(slugify(link.group), used) if link.group else "",
                "note": (group_notes or {}).get(link.group, ""), "entries": [], "files": []}
        group["files" if link.folded else "entries"].append({
            "title": link.title, "href": href, "description": link.description,
            "facts": [(str(k), format_value(v)) for k, v in link.facts]})
    html = template_environment().get_template("index.html.j2").render(
        title=title, intro=Prose("", intro).paragraphs, groups=list(groups.values()),
        n_links=sum(len(g["entries"]) + len(g["files"]) for g in groups.values()),
        manifest=manifest_context(manifest), generated_at=_generated_at(manifest),
    )
    _write_atomic(out, html.encode("utf-8"))
    return out

