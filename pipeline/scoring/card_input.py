"""Scorecards as scoring input: the runs of official or arcstudy scorecards, scored from their per-level actions.

A scorecard holds no steps, so its runs cannot be replay-verified: each is scored from what the card says and
marked ``summary only: not replay-verified`` (replay status ``summary_only``). Every shape that ``arcstudy
ingest`` recognises is accepted, read by the one scorecard reader (``pipeline.ingest.arc3_json``) into the
``core_arc3__scorecard_runs`` / ``core_arc3__card_plays`` rows ingest stores; ``score --db`` reads the same
rows back, so a card scored from its file and from the database gives the same runs:

- scored summary (``environments[].runs[]``): a run's ``level_actions`` and ``levels_completed`` rebuild its
  cumulative pairs (level ``i <= levels_completed`` completed, the next one holding the remainder); its
  ``level_baseline_actions`` (unless -1) are the card's own baselines, and its ``score`` / ``level_scores`` are
  the values the card states, compared with the recomputed ones (`stated_differences`);
- card wrapper (``{won, played, cards}``) and bare ``Card``: each slot is a play with its cumulative pairs.

Malformed runs and card slots (missing ``level_actions``, negative or non-integer counts, more completed levels
than the run's own levels, ...) are refused by the reader, by the one rule of `pipeline.recordings.cards` that
ingest quarantines them by, with the same reason; the other runs of the card still score.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.manifest import sha256_file
from pipeline.core.textfiles import (
    NUMBER_TOO_LONG,
    document_too_large,
    is_number_too_long,
    json_message,
    not_utf8_reason,
)
from pipeline.ingest.arc3_json import read_scorecard, sniff_scorecard
from pipeline.ingest.base import FileContext, FileRejected
from pipeline.ingest.formats import read_head
from pipeline.recordings.cards import PREVIEW_CARD_REASON, game_id_problem, run_problem, slot_problem
from pipeline.recordings.counting import WIN, Card, CardPlay

from .baseline_sources import BaselineSource
from .plays import STEP_COLUMNS, RecordingInput
from .verify import PlayCheck

__all__ = [
    "SUMMARY_ONLY",
    "CardInputs",
    "CardRun",
    "StatedRun",
    "card_baseline_source",
    "card_checks",
    "card_recordings",
    "environment_difference",
    "integer_typing",
    "is_scorecard_file",
    "read_card_files",
    "read_db_cards",
    "runs_from_tables",
    "stated_differences",
]

SUMMARY_ONLY = "summary only: not replay-verified"
CARD_VARIANT = "scorecard"
# What the current toolkit (0.9.7+) scores with: a toolkit card names no policy.
TOOLKIT_POLICY_ID = "arc-agi-3/2026-04"
TWO_LEVELS_NOTE = ("toolkit edge case: an action completed two levels at once, so the card pairs levels by "
                   "position and leaves the last one marked not completed")


@dataclass(frozen=True)
class StatedRun:
    """What a scored summary says about one of its runs (None fields: not stated)."""

    policy_id: str | None
    score: float | None
    level_scores: tuple[float, ...] | None
    level_actions: tuple[int, ...]
    level_baseline_actions: tuple[int, ...] | None  # None when the card could not score it (-1 values)
    message: str | None
    card_score: float | None  # the whole card's stated total
    competition_mode: bool | None
    policy_assumed: bool = False  # the card names no policy: the current toolkit's is assumed
    environment_score: float | None = None  # the card's `environments[].score` of the run's game (C.2)


@dataclass(frozen=True)
class CardRun:
    """One run (play slot) of a scorecard, as a card play."""

    file_id: str
    file_name: str
    path: Path | None
    shape: str  # "scored-summary" or "card"
    game_id: str
    run_index: int
    play: CardPlay
    stated: StatedRun | None = None
    notes: tuple[str, ...] = ()

    @property
    def play_id(self) -> str:
        return f"card:{self.file_id[:16]}:{self.game_id}/{self.run_index}"

    @property
    def stated_level_count(self) -> int | None:
        """The number of levels a scored summary states for the run's game (its per-level values, as its
        `environments[].level_count`), when the card could score it: with -1 baselines the per-level actions are
        the play's pairs, not the game's levels. None for a card slot, which states no level count."""
        stated = self.stated
        if stated is None or stated.level_baseline_actions is None or not stated.level_actions:
            return None
        return len(stated.level_actions)


@dataclass
class CardInputs:
    runs: list[CardRun] = field(default_factory=list)
    problems: list[tuple[Path, str]] = field(default_factory=list)  # quarantined files and runs, with reasons
    files: dict[str, tuple[str, Path | None]] = field(default_factory=dict)  # file_id -> (name, path)


def is_scorecard_file(path: Path) -> bool:
    """Whether ``path`` is to be read as a scorecard: one that ingest recognises as such, or a `.json` file that
    is not a recording (refused as a card, with the reason, rather than as a recording)."""
    from pipeline.recordings.lines import sniff_first_line

    try:
        head = read_head(path)
    except OSError:
        return path.suffix.lower() == ".json"
    try:
        if sniff_scorecard(head) is not None:
            return True
    except RecursionError:
        return path.suffix.lower() == ".json"
    return path.suffix.lower() == ".json" and sniff_first_line(head.first_line) is None


def read_card_files(paths: Sequence[Path]) -> CardInputs:
    """Read scorecard files with ingest's reader (nothing is stored): their runs, and every file or run
    refused with its reason."""
    found = CardInputs()
    now = datetime.now(UTC)
    for path in paths:
        try:
            file_id = sha256_file(path)
            too_large = document_too_large(path, "a scorecard")
        except OSError as err:
            found.problems.append((path, f"cannot read the file: {err.strerror or err}"))
            continue
        if file_id in found.files:
            found.problems.append((path, f"same content as {found.files[file_id][0]} (given twice: read once)"))
            continue
        if too_large is not None:
            found.problems.append((path, f"scorecard rejected: {too_large}"))
            continue
        try:
            if sniff_scorecard(read_head(path)) is None:
                try:
                    json.loads(path.read_text(encoding="utf-8-sig"))
                except UnicodeDecodeError as err:
                    found.problems.append((path, f"scorecard rejected: {not_utf8_reason(err)}"))
                    continue
                except json.JSONDecodeError as err:
                    found.problems.append((path, f"scorecard rejected: not valid JSON ({json_message(err)} at line "
                                                 f"{err.lineno} column {err.colno})"))
                    continue
                except ValueError as err:
                    if not is_number_too_long(err):
                        raise
                    found.problems.append((path, f"scorecard rejected: not valid JSON for arcstudy: {NUMBER_TOO_LONG}"))
                    continue
                found.problems.append((path, "not a scorecard: a JSON scorecard needs `environments[].runs[]` (scored "
                                             "summary), `cards` (card wrapper) or a bare card (game_id, total_plays, "
                                             "actions, states)"))
                continue
            output = read_scorecard(FileContext(path, file_id, "score", now))
        except FileRejected as err:
            found.problems.append((path, f"scorecard rejected: {err.reason}"))
            continue
        except RecursionError:
            found.problems.append((path, "scorecard rejected: JSON nested too deeply"))
            continue
        found.files[file_id] = (path.name, path)
        # The reader applies the one rule for scorecard values (pipeline.recordings.cards): what it refuses is
        # what ingest quarantines, with the same reason.
        for reject in output.rejects:
            what = "card" if reject.target_table == "core_arc3__card_plays" else "card run"
            found.problems.append((path, f"{what} quarantined ({reject.location}): {reject.reason}"))
        tables = output.tables
        runs, problems = runs_from_tables(
            tables.get("core_arc3__scorecard_runs"), tables.get("core_arc3__scorecards"),
            tables.get("core_arc3__card_plays"), {file_id: (path.name, path)})
        found.runs += runs
        found.problems += problems
        if not runs and not any(p == path for p, _ in found.problems):  # said, not silently nothing
            found.problems.append((path, "no run to score: the scorecard's environments hold no runs"))
    return found


def read_db_cards(ws) -> CardInputs:
    """The card runs stored by ingest: scored summaries, and card files (not the trailing card line of a
    recording, whose plays are scored from their steps)."""
    found = CardInputs()

    def table(name: str, sql: str) -> pl.DataFrame | None:
        return ws.read(sql) if ws.has_table(name) and ws.row_count(name) else None

    runs = table("core_arc3__scorecard_runs", "SELECT * FROM core_arc3__scorecard_runs")
    cards = table("core_arc3__scorecards", "SELECT * FROM core_arc3__scorecards")
    slots = table("core_arc3__card_plays", "SELECT * FROM core_arc3__card_plays WHERE line_number IS NULL")
    if runs is None and slots is None:
        return found
    ids = sorted({*(runs["file_id"].to_list() if runs is not None else []),
                  *(slots["file_id"].to_list() if slots is not None else [])})
    names: dict[str, tuple[str, Path | None]] = {fid: (fid[:12], None) for fid in ids}
    if ws.has_table("raw_ingest__files"):
        rows = ws.read("SELECT file_id, file_name, file_path FROM raw_ingest__files")
        for fid, name, fpath in rows.iter_rows():
            if fid in names:
                names[fid] = (name or fid[:12], Path(fpath) if fpath else None)
    found.files = names
    found.runs, found.problems = runs_from_tables(runs, cards, slots, names)
    return found


# Stored columns under the JSON names the rules speak of (pipeline.recordings.cards).
RUN_KEYS = ("guid", "actions", "resets", "levels_completed", "level_actions", "level_baseline_actions",
            "level_scores", "state")
SLOT_COLUMNS = {"actions": "card_actions", "resets": "card_resets", "levels_completed": "levels_completed",
                "states": "card_state", "guids": "guid"}


def _f(v: Any) -> float | None:
    return None if v is None else float(v)


def _environment_score(doc: Mapping[str, Any], game_id: str) -> float | None:
    """The stated `environments[].score` of ``game_id`` (formats.md C.2: the best run's score), when the card
    has one environment of that id with a number there."""
    found = [e.get("score") for e in doc.get("environments") or () if isinstance(e, dict) and e.get("id") == game_id]
    if len(found) != 1 or isinstance(found[0], bool) or not isinstance(found[0], int | float):
        return None
    return float(found[0])


def runs_from_tables(runs: pl.DataFrame | None, cards: pl.DataFrame | None, slots: pl.DataFrame | None,
                     files: Mapping[str, tuple[str, Path | None]]) -> tuple[list[CardRun], list[tuple[Path, str]]]:
    """Card runs from ``core_arc3__scorecard_runs`` (with their ``core_arc3__scorecards`` documents) and
    ``core_arc3__card_plays`` rows, and the runs refused with their reason. The reader refuses what the rules
    of `pipeline.recordings.cards` refuse before anything is stored; they are applied again here, with the same
    reasons, to rows a database may hold from before them."""
    out: list[CardRun] = []
    problems: list[tuple[Path, str]] = []

    def where(fid: str) -> Path:
        name, path = files.get(fid, (fid[:12], None))
        return path or Path(name)

    docs: dict[str, dict] = {}
    for row in (cards.iter_rows(named=True) if cards is not None else ()):
        try:
            docs[row["file_id"]] = json.loads(row["scorecard_json"])
        except (TypeError, ValueError):
            docs[row["file_id"]] = {}
    for row in (runs.sort("file_id", "game_id", "run_index").iter_rows(named=True) if runs is not None else ()):
        fid, game_id, r_i = row["file_id"], row["game_id"], row["run_index"]
        bad = game_id_problem(game_id)
        if bad is not None:
            bad = f"environment: {bad}"
        elif (problem := run_problem({k: row[k] for k in RUN_KEYS})) is not None:
            bad = f"run of {game_id}: {problem[2]}"
        if bad is not None:
            problems.append((where(fid), f"card run quarantined (environments {game_id} run {r_i}): {bad}"))
            continue
        la, k, base = row["level_actions"], row["levels_completed"], row["level_baseline_actions"]
        doc = docs.get(fid, {})
        cumulative, total = [], 0
        for i in range(k):
            total += la[i]
            cumulative.append((i + 1, total))
        actions = row["actions"] if row["actions"] is not None else sum(la)
        state = row["state"] or (WIN if row["is_completed"] else "NOT_FINISHED")
        play = CardPlay(guid=row["guid"], actions=int(actions), resets=int(row["resets"] or 0), state=state,
                        levels_completed=k, actions_by_level=tuple(cumulative))
        notes = []
        if state == WIN and k < len(la):
            notes.append(TWO_LEVELS_NOTE)
        if row["actions"] is not None and sum(la) != row["actions"]:
            notes.append(f"level_actions add up to {sum(la)}, the run states {row['actions']} actions")
        stated = StatedRun(
            policy_id=row["policy_id"] or TOOLKIT_POLICY_ID, score=_f(row["score"]),
            level_scores=None if row["level_scores"] is None else tuple(float(s) for s in row["level_scores"]),
            level_actions=tuple(la),
            level_baseline_actions=None if base is None or -1 in base else tuple(int(b) for b in base),
            message=row["message"], card_score=_f(doc.get("score")),
            competition_mode=doc.get("competition_mode") if isinstance(doc.get("competition_mode"), bool) else None,
            policy_assumed=row["policy_id"] is None, environment_score=_environment_score(doc, game_id))
        name, path = files.get(fid, (fid[:12], None))
        out.append(CardRun(fid, name, path, "scored-summary", game_id, r_i, play, stated, tuple(notes)))
    for row in (slots.sort("file_id", "game_id", "slot_index").iter_rows(named=True) if slots is not None else ()):
        fid, game_id, s_i = row["file_id"], row["game_id"], row["slot_index"]
        bad = game_id_problem(game_id)
        if bad is None:
            values = {name: row[column] for name, column in SLOT_COLUMNS.items()
                      if row[column] is not None or name not in ("levels_completed", "resets")}  # null: unstated
            values["actions_by_level"] = [list(p) for p in row["card_actions_by_level"] or []]
            if (problem := slot_problem(values, s_i)) is not None:
                bad = f"card slot {s_i} of {game_id}: {problem[2]}"
            elif row.get("card_score") is not None:  # only a preview card states `scores` (cards.card_rows)
                problems.append((where(fid), f"card run left out (slot {s_i} of {game_id}): {PREVIEW_CARD_REASON}"))
                continue
        if bad is not None:
            problems.append((where(fid), f"card quarantined (slot {s_i}): {bad}"))
            continue
        pairs = [tuple(p) for p in row["card_actions_by_level"] or []]
        play = CardPlay(guid=row["guid"], actions=int(row["card_actions"]), resets=int(row["card_resets"] or 0),
                        state=row["card_state"], levels_completed=int(row["levels_completed"] or len(pairs)),
                        actions_by_level=tuple((int(a), int(b)) for a, b in pairs))
        notes = ()
        levels = [lv for lv, _ in pairs]
        if any(b - a > 1 for a, b in zip([0, *levels], levels, strict=False)):
            notes = (TWO_LEVELS_NOTE,)
        name, path = files.get(fid, (fid[:12], None))
        out.append(CardRun(fid, name, path, "card", game_id, s_i, play, None, notes))
    return out, problems


# ------------------------------------------------------------------------------------------------------
# into the scorer: recordings without steps, checks that say "summary only", the card's own baselines
# ------------------------------------------------------------------------------------------------------
def card_recordings(runs: Sequence[CardRun]) -> list[RecordingInput]:
    """One stepless `RecordingInput` per (file, game) holding the card's runs as its plays (variant
    ``scorecard``: never replayed)."""
    from schemas import empty_frame

    empty = empty_frame("core_arc3__steps").select(STEP_COLUMNS)
    groups: dict[tuple[str, str], list[CardRun]] = {}
    for run in runs:
        groups.setdefault((run.file_id, run.game_id), []).append(run)
    out = []
    for (fid, game_id), members in groups.items():
        first = members[0]
        out.append(RecordingInput(
            file_id=fid, file_name=first.file_name, path=first.path, game_id=game_id,
            guid=first.play.guid or first.play_id, variant=CARD_VARIANT, is_only_reset_levels=False,
            is_action_ids_lost=False, steps=empty, records=[],
            card=Card(game_id=game_id, plays=tuple(r.play for r in members)),
            play_ids=[r.play_id for r in members]))
    return out


def card_checks(runs: Sequence[CardRun]) -> list[PlayCheck]:
    return [PlayCheck(play_id=r.play_id, file_id=r.file_id, game_id=r.game_id, guid=r.play.guid or "",
                      status="summary_only", replay_input="card", is_only_reset_levels=False,
                      detail=SUMMARY_ONLY + ("; " + "; ".join(r.notes) if r.notes else ""))
            for r in runs]


def card_baseline_source(runs: Sequence[CardRun]) -> BaselineSource | None:
    """The cards' own ``level_baseline_actions`` (scored summaries that could score the game), first card wins
    a game several cards state (a different statement is flagged on the game). A game whose every stated run
    the card could not score although the toolkit knew the environment (its baseline missing or shorter than
    the levels played) is known without a usable baseline: unscorable, as the card says."""
    from .rhae import no_metadata_message

    games: dict[str, tuple] = {}
    unusable: dict[str, bool] = {}
    where: list[str] = []
    for run in runs:
        stated = run.stated
        if stated is None:
            continue
        if stated.level_baseline_actions is None:
            knew = bool(stated.message) and stated.message != no_metadata_message(run.game_id)
            unusable[run.game_id] = unusable.get(run.game_id, True) and knew
            continue
        if run.file_name not in where:
            where.append(run.file_name)
        if run.game_id not in games:
            games[run.game_id] = (stated.level_baseline_actions, None, ())
        elif games[run.game_id][0] != stated.level_baseline_actions and \
                "card_baselines_differ" not in games[run.game_id][2]:
            games[run.game_id] = (games[run.game_id][0], None, ("card_baselines_differ",))
    for game_id, knew in unusable.items():
        if knew and game_id not in games:
            games[game_id] = (None, None, ("card_states_unscorable",))
    if not games:
        return None
    return BaselineSource("scorecard", ", ".join(where) or "scorecards", None, lambda _rule: games)


# ------------------------------------------------------------------------------------------------------
# stated against recomputed
# ------------------------------------------------------------------------------------------------------
def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


OTHER_SCORER = "edited by hand, or written by another scorer"


def integer_typing(stated: float, recomputed: float) -> str | None:
    """Why a stated whole number differs from the recomputed score when it is that score as an integer: the hosted
    API types the scores as integers (formats.md C.2); None otherwise."""
    if stated != int(stated) or _close(stated, recomputed):
        return None
    how = ("rounded" if stated == round(recomputed) else "truncated" if stated == math.trunc(recomputed)
           else None)
    if how is None:
        return None
    return (f"integer typing: the stated value is the recomputed {recomputed:.3f} {how} to an integer, as the hosted "
            "API types the scores (formats.md C.2)")


def _levels(first: int, last: int) -> str:
    return f"level {first}" if first == last else f"levels {first}-{last}"


def level_count_cause(run: CardRun, scored, baseline_source: str) -> str | None:
    """Why a recomputed run score differs when the baseline in use has another number of levels than the card
    states for the game (formats.md B: flagged `baseline_length_differs_from_levels`, scored by the toolkit rule):
    the levels it lacks drop out of the level weights and of the game cap (a shorter baseline), or the levels the
    card does not have count as not completed (a longer one). None when the lengths agree or either is unknown."""
    n = run.stated_level_count
    baseline = scored.level_baseline_actions
    if n is None or scored.message or not baseline or len(baseline) == n:
        return None
    m = len(baseline)
    if m < n:
        return (f"baselines: {baseline_source} has baselines for {m} of the card's {n} levels, so "
                f"{_levels(m + 1, n)} drop out of the weights and the game cap (the toolkit rule for a short baseline; "
                f"flagged baseline_length_differs_from_levels: give a baseline of all {n} levels)")
    return (f"baselines: {baseline_source} has baselines for {m} levels, the card's game {n}: "
            f"{_levels(n + 1, m)}, which the card does not have, count as not completed (flagged "
            "baseline_length_differs_from_levels)")


def stated_differences(run: CardRun, scored, policy_id: str, baseline_source: str) -> list[dict[str, Any]]:
    """Where the run's recomputed score (``scored``: its `PlayScore` under ``policy_id``) differs from what the
    card states, per level, each with its cause; empty when they agree or the card states nothing."""
    stated = run.stated
    if stated is None or stated.score is None:
        return []
    out: list[dict[str, Any]] = []
    policy_differs = stated.policy_id != policy_id
    causes_run = []
    if policy_differs:
        named = (f"the card names no policy: the toolkit's current {stated.policy_id} assumed" if stated.policy_assumed
                 else f"the card was scored under {stated.policy_id}")
        causes_run.append(f"policy: {named}, this under {policy_id}")
    if (levels := level_count_cause(run, scored, baseline_source)) is not None:
        causes_run.append(levels)
    if stated.message and not scored.message:
        causes_run.append(f"baselines: the card could not score it ({stated.message}); scored here against "
                          f"{baseline_source} baselines")
    elif scored.message and not stated.message:
        causes_run.append(f"baselines: not scorable here ({scored.message}); the card scored it")
    for i, (s_old, s_new) in enumerate(zip(stated.level_scores or (), scored.level_scores, strict=False)):
        if _close(s_old, s_new):
            continue
        b_old = stated.level_baseline_actions[i] if stated.level_baseline_actions and i < len(
            stated.level_baseline_actions) else None
        b_new = scored.level_baseline_actions[i] if i < len(scored.level_baseline_actions) else None
        if b_old is not None and b_new is not None and b_old != b_new:
            cause = f"baselines: the card's baseline for level {i + 1} is {b_old}, {baseline_source} says {b_new}"
        elif policy_differs:
            cause = causes_run[0]
        elif stated.message or scored.message:
            cause = causes_run[0] if causes_run else "baselines"
        elif run.notes and TWO_LEVELS_NOTE in run.notes and i == len(scored.level_scores) - 1:
            cause = TWO_LEVELS_NOTE
        else:
            cause = integer_typing(s_old, s_new) or (
                f"the stated score does not follow from the card's own level actions and baselines ({OTHER_SCORER})")
        out.append({"level_index": i + 1, "stated": s_old, "recomputed": s_new, "cause": cause})
    if not _close(stated.score, scored.score):
        typed = None if causes_run else integer_typing(stated.score, scored.score)
        first = next((d["cause"] for d in out if not d["cause"].startswith("integer typing")), None)
        if levels is not None and first is not None and first != levels:  # both change the run's score
            first = f"{levels}; and {first.removeprefix('baselines: ')}"
        cause = (first if first else causes_run[0] if causes_run else typed if typed else
                 f"the stated run score does not follow from its own level scores ({OTHER_SCORER})")
        out.append({"level_index": None, "stated": stated.score, "recomputed": scored.score, "cause": cause})
    return out


def environment_difference(runs: Sequence[tuple[CardRun, float, list[dict[str, Any]]]]) -> dict[str, Any] | None:
    """The stated `environments[].score` of one card's game against the best of its runs' recomputed scores
    (formats.md C.2: the environment's score is its best run's), with the cause: the runs' own differences when
    they have any, else integer typing, else a value that does not follow from the card's runs. ``runs``: (card
    run, recomputed score, its differences) of every run of that environment in that card."""
    stated = runs[0][0].stated if runs else None
    if stated is None or stated.environment_score is None:
        return None
    recomputed = max(score for _, score, _ in runs)
    if _close(stated.environment_score, recomputed):
        return None
    # a run score's cause first: it says what changed the score (a level's cause may be one part of it)
    run_causes = [d["cause"] for _, _, diffs in runs for d in sorted(diffs, key=lambda d: d["level_index"] is not None)
                  if not d["cause"].startswith("integer typing")]
    cause = run_causes[0] if run_causes else integer_typing(stated.environment_score, recomputed) or (
        "the stated environment score is not the best of its runs' scores, which are right (formats.md C.2; "
        f"{OTHER_SCORER})")
    return {"level_index": None, "scope": "environment", "stated": stated.environment_score,
            "recomputed": recomputed, "cause": cause}
