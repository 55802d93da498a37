"""Where a game's baseline comes from, for ``arcstudy score`` (resolution order, first source that knows the game):

1. ``--baselines DIR`` (every ``metadata.json`` below it, found like the engine finds games) or
   ``--baselines CSV``: either the wide shape of ``reference/arc-agi-3-public-games.csv`` (``game_id``,
   ``baseline_actions`` as a JSON list, optional ``baseline_rule`` / ``snapshot``) or the long shape that
   ``arcstudy baselines --out`` writes (``game_id``, ``level_index``, ``baseline_value``, optional
   ``baseline_rule``);
2. the database: ``out_arc3__level_baselines`` (baselines recomputed from the loaded study by
   ``arcstudy build``) under the policy's baseline rule, when that table has rows; else the latest
   ``core_arc3__environments`` metadata of the game;
3. the game metadata of ``--games`` folders;
4. the published reference baselines shipped as package data in
   ``pipeline/scoring/reference/arc-agi-3-public-games.csv`` (public game ids only).

A source "knows" a game when it lists its id, even without a usable baseline: the game is then unscorable
with the toolkit's message (missing baseline, or a level with too few completers), never filled in from a
later source. A game no source knows gets "No Matching EnvironmentInfo found". Where a source says which
rule produced its values (CSV ``baseline_rule``, recomputed tables), rows with the policy's rule are
preferred, and a different rule is flagged on the game, not corrected.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import polars as pl

from engine.loader import (
    default_environments_dir,
    find_games,
    metadata_files,
    metadata_problem,
    skipped_metadata,
)
from pipeline.core.manifest import sha256_file
from pipeline.core.textfiles import (
    DuplicateKeyError,
    json_message,
    not_utf8_reason,
    read_text_document,
    unique_json,
)
from pipeline.ingest.baseline_rule import baseline_actions_problem, baseline_count
from pipeline.recordings.cards import MAX_LEVELS

from .policies import ScoringPolicy

__all__ = [
    "REFERENCE_CSV",
    "BaselineSource",
    "BaselineSourceError",
    "ResolvedBaseline",
    "baseline_values",
    "not_covered",
    "resolve_baselines",
    "source_from_db",
    "source_from_games_dirs",
    "source_from_path",
    "read_published",
    "reference_source",
    "known_level_counts",
]

# Package data, so that an installed wheel has it too (a plain file on disk: wheels install unzipped).
REFERENCE_CSV = Path(str(resources.files("pipeline.scoring.reference") / "arc-agi-3-public-games.csv"))


class BaselineSourceError(ValueError):
    """A baselines file or folder that cannot be used (the message is for a person)."""


def read_published(path: Path, rule: str, with_snapshot: bool = False) -> pl.DataFrame:
    """Published baselines as (game_id, published_rule, baseline_actions: list[int]) (plus ``snapshot``, the
    chosen row's snapshot or null, when ``with_snapshot``).

    A CSV (like reference/arc-agi-3-public-games.csv) with game_id and baseline_actions (JSON list) columns:
    when it has a baseline_rule column, rows with `rule` are preferred, and among several rows for one game
    the `current` snapshot. A directory: every metadata.json below it."""
    rows = []
    if path.is_dir():
        for f in metadata_files(path):
            problem = metadata_problem(f)
            if problem is not None:
                raise BaselineSourceError(f"{f}: {problem}")
            try:
                doc = unique_json(read_text_document(f)[0])  # a BOM is not content
            except UnicodeDecodeError as err:
                raise BaselineSourceError(f"{f}: {not_utf8_reason(err)}") from None
            except json.JSONDecodeError as err:
                raise BaselineSourceError(f"{f}: not valid JSON ({json_message(err)} at line {err.lineno} column "
                                          f"{err.colno})") from None
            except (DuplicateKeyError, RecursionError) as err:
                raise BaselineSourceError(f"{f}: {err or 'JSON nested too deeply'}") from None
            if isinstance(doc, dict) and doc.get("game_id") and doc.get("baseline_actions"):
                rows.append({"game_id": doc["game_id"], "published_rule": None, "snapshot": None,
                             "baseline_actions": list(baseline_values(doc["baseline_actions"], str(f),
                                                                      json_integer=True))})
    else:
        df = pl.read_csv(path, infer_schema=False)
        if not {"game_id", "baseline_actions"} <= set(df.columns):
            raise ValueError(f"{path}: needs columns game_id and baseline_actions, has {df.columns}")
        for number, r in enumerate(df.iter_rows(named=True), 2):  # as a spreadsheet counts: the header is row 1
            rows.append({"game_id": r["game_id"], "published_rule": r.get("baseline_rule"),
                         "snapshot": r.get("snapshot"),
                         "baseline_actions": list(baseline_values(json.loads(r["baseline_actions"] or "[]"),
                                                                  f"row {number} ({r['game_id']})"))})
    schema = {"game_id": pl.String, "published_rule": pl.String, "snapshot": pl.String,
              "baseline_actions": pl.List(pl.Int64)}
    pub = pl.DataFrame(rows, schema=schema)
    pub = pub.with_columns(
        (pl.col("published_rule") == rule).fill_null(False).alias("_rule_match"),
        (pl.col("snapshot") == "current").fill_null(False).alias("_current"),
    ).sort("game_id", "_rule_match", "_current", descending=[False, True, True])
    pub = pub.group_by("game_id", maintain_order=True).first().drop("_rule_match", "_current")
    return pub if with_snapshot else pub.drop("snapshot")


Values = tuple[int, ...] | None


@dataclass(frozen=True)
class ResolvedBaseline:
    game_id: str
    baseline_actions: Values  # None: the source knows the game but has no usable baseline
    has_metadata: bool
    source: str  # a BASELINE_SOURCES kind (schemas.outputs_scoring), "none" when nothing knows the game
    rule: str | None  # the rule that produced the values, when the source says
    sha256: str | None  # content digest of the source file/folder (None for database tables)
    location: str | None  # path or table, for the manifest
    flags: tuple[str, ...] = ()
    snapshot: str | None = None  # the snapshot the values belong to, when the source says (published CSVs)


# (values or None, rule or None, flags[, snapshot]): the snapshot (formats.md A.4: `preview-2025`, `pre-2026-04-14`,
# `current`) only where the source names it (a published-shape CSV's `snapshot` column)
Entry = tuple[Values, str | None, tuple[str, ...]] | tuple[Values, str | None, tuple[str, ...], str | None]


@dataclass
class BaselineSource:
    """One source: ``games(rule)`` maps game_id -> entry for a policy's baseline rule (loaded once per rule)."""

    kind: str
    location: str
    sha256: str | None
    load: Callable[[str], Mapping[str, Entry]]
    _cache: dict[str, Mapping[str, Entry]] = field(default_factory=dict, repr=False)

    def games(self, rule: str) -> Mapping[str, Entry]:
        if rule not in self._cache:
            self._cache[rule] = self.load(rule)
        return self._cache[rule]


def baseline_values(values: Iterable, where: str, rows: Sequence[str] | None = None,
                    json_integer: bool = False) -> tuple[int, ...]:
    """Per-level action counts exactly as written (no float rounding), at most MAX_LEVELS of them, each passing
    the one rule for baseline values (`pipeline.ingest.baseline_rule`: a whole number from 1 to
    `MAX_BASELINE_ACTIONS`, a JSON integer when ``json_integer``, as ingest requires of a metadata.json);
    anything else names ``where`` (and ``rows[i]``, the row of value i, when the values come from several rows)."""
    if not isinstance(values, list | tuple) or len(values) > MAX_LEVELS:
        raise BaselineSourceError(f"{where}: {baseline_actions_problem(values)}")
    out = []
    for i, v in enumerate(values):
        n, why = baseline_count(v, json_integer)
        if why is not None:
            raise BaselineSourceError(f"{f'{where}: {rows[i]}' if rows is not None else where}: {why}")
        out.append(n)
    return tuple(out)


def _folder_digest(root: Path, files: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for f in sorted(files):
        content = metadata_problem(f) or sha256_file(f)  # never read a FIFO or a huge file: name it instead
        digest.update(f"{f.relative_to(root).as_posix()}\0{content}\n".encode())
    return digest.hexdigest()


def _metadata_games(dirs: Sequence[Path]) -> dict[str, Entry]:
    games = {}
    for info in find_games(list(dirs)):
        values = info.baseline_actions
        games[info.game_id] = (baseline_values(values, str(info.directory / "metadata.json"), json_integer=True)
                               if values else None, None, ())
    return games


def source_from_games_dirs(dirs: Sequence[Path], kind: str = "games-dir") -> BaselineSource | None:
    """The ``metadata.json`` files below ``dirs`` (the first folder wins a game listed twice, as in the engine)."""
    dirs = [Path(d) for d in dirs if Path(d).is_dir()]
    if not dirs:
        return None
    games = _metadata_games(dirs)
    digest = hashlib.sha256("".join(_folder_digest(d, metadata_files(d)) for d in dirs).encode())
    return BaselineSource(kind, ", ".join(str(d) for d in dirs), digest.hexdigest(), lambda _rule: games)


def _long_csv(df: pl.DataFrame, path: Path, rule: str) -> dict[str, Entry]:
    df = df.with_row_index("_row", offset=2)  # as a spreadsheet counts: the header is row 1
    if "baseline_rule" in df.columns:
        rules = set(df["baseline_rule"].drop_nulls().unique().to_list())
        chosen = rule if rule in rules else (next(iter(rules)) if len(rules) == 1 else None)
        if chosen is None:
            raise BaselineSourceError(f"{path}: holds rules {sorted(rules)} but not {rule!r}")
        df = df.filter(pl.col("baseline_rule") == chosen)
    else:
        chosen = None
    games = {}
    for (game_id,), sub in df.sort("game_id", "level_index").group_by("game_id", maintain_order=True):
        levels = sub["level_index"].cast(pl.Int64).to_list()
        if levels != list(range(1, len(levels) + 1)):
            raise BaselineSourceError(f"{path}: {game_id} levels {levels} are not 1..n")
        values = sub["baseline_value"].to_list()
        if any(v is None or v == "" for v in values):
            games[game_id] = (None, chosen, ("baseline_too_few_completers",))
        else:
            rows = [f"row {n} ({game_id} level {level})" for n, level in zip(sub["_row"], levels, strict=True)]
            games[game_id] = (baseline_values(values, str(path), rows), chosen, ())
    return games


def source_from_path(path: Path) -> BaselineSource:
    """``--baselines DIR`` or ``--baselines CSV`` (module docstring)."""
    path = Path(path)
    if path.is_dir():
        source = source_from_games_dirs([path], kind="baselines-dir")
        if source is None or not source.games("upper-median"):
            skipped = skipped_metadata(path)  # each with its reason: a FIFO, bad JSON, a repeated key, ...
            said = f" ({len(skipped)} skipped: {'; '.join(skipped[:3])}{'; ...' if len(skipped) > 3 else ''})"
            raise BaselineSourceError(f"{path}: no metadata.json with a game_id below this folder"
                                      f"{said if skipped else ''}")
        return source
    if not path.is_file():
        raise BaselineSourceError(f"{path}: no such file or folder")
    try:
        df = pl.read_csv(path, infer_schema=False)
    except (OSError, pl.exceptions.PolarsError) as err:
        raise BaselineSourceError(f"{path}: cannot read as CSV: {err}") from None
    digest = sha256_file(path)
    if {"game_id", "baseline_actions"} <= set(df.columns):
        def wide(rule: str) -> dict:
            try:
                pub = read_published(path, rule, with_snapshot=True)
            except (ValueError, json.JSONDecodeError) as err:
                raise BaselineSourceError(f"{path}: {err}") from None
            return {g: (tuple(v) if v else None, r, (), snap) for g, r, v, snap in
                    pub.select("game_id", "published_rule", "baseline_actions", "snapshot").iter_rows()}
        return BaselineSource("baselines-csv", str(path), digest, wide)
    if {"game_id", "level_index", "baseline_value"} <= set(df.columns):
        return BaselineSource("baselines-csv", str(path), digest, lambda rule: _long_csv(df, path, rule))
    raise BaselineSourceError(f"{path}: needs columns game_id and baseline_actions (published shape) or game_id, "
                              f"level_index and baseline_value (`arcstudy baselines --out`); has {df.columns}")


def known_level_counts() -> dict[str, int]:
    """game_id -> its level count, for every game version arcstudy knows without a database: the games it ships
    (their metadata's baseline_actions) and the published reference's (reference/arc-agi-3-public-games.csv's
    ``level_count``). How many levels a baseline of that game must cover where no ingested metadata or recording
    says: a baseline built from cards on which nobody reached the last levels is not a shorter game."""
    df = pl.read_csv(REFERENCE_CSV, infer_schema=False, columns=["game_id", "level_count"])
    counts = {g: int(n) for g, n in df.iter_rows() if g and n and n.isdigit() and int(n) > 0}
    for info in find_games([default_environments_dir()]):
        if info.baseline_actions:
            counts.setdefault(info.game_id, len(info.baseline_actions))
    return counts


def reference_source() -> BaselineSource:
    source = source_from_path(REFERENCE_CSV)
    source.kind = "reference-csv"
    return source


def source_from_db(ws) -> list[BaselineSource]:
    """The database sources, in resolution order (module docstring)."""
    out = []
    if ws.has_table("out_arc3__level_baselines") and ws.row_count("out_arc3__level_baselines") > 0:
        levels = ws.read("SELECT game_id, level_index, baseline_rule, baseline_value "
                         "FROM out_arc3__level_baselines")

        def recomputed(rule: str) -> dict:
            return _long_csv(levels.filter(pl.col("baseline_rule") == rule), Path("out_arc3__level_baselines"),
                             rule) if rule in levels["baseline_rule"].to_list() else {}
        out.append(BaselineSource("db-level-baselines", "out_arc3__level_baselines", None, recomputed))
    if ws.has_table("core_arc3__environments") and ws.row_count("core_arc3__environments") > 0:
        envs = ws.read("SELECT game_id, baseline_actions FROM core_arc3__environments "
                       "ORDER BY game_id, date_downloaded NULLS FIRST, file_id")
        latest = envs.group_by("game_id", maintain_order=True).last()
        games = {g: (tuple(v) if v else None, None, ()) for g, v in latest.iter_rows()}
        out.append(BaselineSource("db-environments", "core_arc3__environments", None, lambda _rule: games))
    return out


def resolve_baselines(game_ids: Iterable[str], policy: ScoringPolicy, sources: Sequence[BaselineSource],
                      n_levels: Mapping[str, int] | None = None) -> dict[str, ResolvedBaseline]:
    """The baseline of every game under ``policy``: the first source that knows it (module docstring).

    ``n_levels`` (the engine's win_levels seen in the recordings) only adds a flag when the baseline has a
    different length; scoring itself follows the toolkit (pairs matched by position)."""
    n_levels = n_levels or {}
    out = {}
    for game_id in sorted(set(game_ids)):
        resolved = ResolvedBaseline(game_id, None, False, "none", None, None, None)
        for source in sources:
            games = source.games(policy.baseline_rule)
            if game_id not in games:
                continue
            values, rule, flags, *snapshot = games[game_id]
            flags = list(flags)
            if values is None and not flags:
                flags.append("baseline_missing")
            if rule is not None and rule != policy.baseline_rule:
                flags.append("baseline_rule_differs_from_policy")
            n = n_levels.get(game_id)
            if values is not None and n is not None and n != len(values):
                flags.append("baseline_length_differs_from_levels")
            resolved = ResolvedBaseline(game_id, values, True, source.kind, rule, source.sha256, source.location,
                                        tuple(flags), snapshot[0] if snapshot else None)
            break
        out[game_id] = resolved
    return out


def not_covered(source: BaselineSource, game_ids: Iterable[str], rule: str) -> dict[str, list[str]]:
    """The games of ``game_ids`` that ``source`` does not list under ``rule`` (so a later source, or none, gave
    their baseline), each with the ids ``source`` lists for the same game code: other versions of it, or none."""
    listed = source.games(rule)
    by_code: dict[str, list[str]] = {}
    for g in sorted(listed):
        by_code.setdefault(g.split("-", 1)[0], []).append(g)
    return {g: by_code.get(g.split("-", 1)[0], []) for g in sorted(set(game_ids)) if g not in listed}
