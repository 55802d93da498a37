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

Malformed runs (missing ``level_actions``, negative or non-integer counts, more completed levels than the run's
own levels) are quarantined with a reason; the other runs of the card still score.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.manifest import sha256_file
from pipeline.core.textfiles import not_utf8_reason
from pipeline.ingest.arc3_json import MAX_BASELINE_ACTIONS, read_scorecard, sniff_scorecard
from pipeline.ingest.base import FileContext, FileRejected
from pipeline.ingest.formats import read_head
from pipeline.recordings.counting import WIN, Card, CardPlay
from pipeline.recordings.lines import GAME_ID_RE
from schemas.vocabulary import GAME_STATES

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


def _count(value: Any) -> int | None:
    """A whole non-negative count, else None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _bad_count(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{value!r} is not a number of actions"
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        return f"{value!r} is not a whole number of actions"
    if value < 0:
        return f"{value!r} is negative"
    return None


def _raw_card_problems(doc: Any) -> dict[str, str]:
    """Per game of a card wrapper or bare card: why its counts are not whole non-negative numbers (the reader
    casts `1.5` to 1; a count must be stated exactly)."""
    if not isinstance(doc, dict) or isinstance(doc.get("environments"), list):
        return {}
    cards = doc["cards"] if isinstance(doc.get("cards"), dict) else {doc.get("game_id"): doc}
    out = {}
    for game_id, card in cards.items():
        if not isinstance(card, dict):
            continue
        for key in ("actions", "resets", "levels_completed"):
            for i, v in enumerate(card.get(key) or []):
                if (why := _bad_count(v)) is not None:
                    out.setdefault(str(game_id), f"{key}[{i}] = {why}")
        for i, pairs in enumerate(card.get("actions_by_level") or []):
            for pair in pairs or []:
                for v in pair if isinstance(pair, list) else [pair]:
                    if (why := _bad_count(v)) is not None:
                        out.setdefault(str(game_id), f"actions_by_level[{i}] value {why}")
    return out


def _summary_problems(doc: Any) -> dict[tuple[str, int], str]:
    """Per (game, run index) of a scored summary: counts that are not whole non-negative numbers."""
    out: dict[tuple[str, int], str] = {}
    if not isinstance(doc, dict) or not isinstance(doc.get("environments"), list):
        return out
    for env in doc["environments"]:
        if not isinstance(env, dict) or not isinstance(env.get("id"), str):
            continue
        for r_i, run in enumerate(env.get("runs") or []):
            if not isinstance(run, dict):
                continue
            for key in ("actions", "resets", "levels_completed"):
                if key in run and (why := _bad_count(run[key])) is not None:
                    out.setdefault((env["id"], r_i), f"{key} = {why}")
            la, base = run.get("level_actions"), run.get("level_baseline_actions")
            for i, v in enumerate(la if isinstance(la, list) else []):
                if (why := _bad_count(v)) is not None:
                    out.setdefault((env["id"], r_i), f"level_actions[{i}] = {why}")
            if isinstance(la, list) and isinstance(base, list) and len(la) > len(base):
                out.setdefault((env["id"], r_i), f"more levels ({len(la)} level_actions) than baselines "
                                                 f"({len(base)} level_baseline_actions)")
    return out


def read_card_files(paths: Sequence[Path]) -> CardInputs:
    """Read scorecard files with ingest's reader (nothing is stored): their runs, and every file or run
    refused with its reason."""
    found = CardInputs()
    now = datetime.now(UTC)
    for path in paths:
        try:
            file_id = sha256_file(path)
        except OSError as err:
            found.problems.append((path, f"cannot read the file: {err.strerror or err}"))
            continue
        if file_id in found.files:
            found.problems.append((path, f"same content as {found.files[file_id][0]} (given twice: read once)"))
            continue
        try:
            if sniff_scorecard(read_head(path)) is None:
                try:
                    json.loads(path.read_text(encoding="utf-8-sig"))
                except UnicodeDecodeError as err:
                    found.problems.append((path, f"scorecard rejected: {not_utf8_reason(err)}"))
                    continue
                except json.JSONDecodeError as err:
                    found.problems.append((path, f"scorecard rejected: not valid JSON ({err.msg} at line "
                                                 f"{err.lineno} column {err.colno})"))
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
        try:
            doc = json.loads(path.read_text(encoding="utf-8-sig"))
        except (ValueError, OSError, RecursionError):
            doc = None
        summary_problems = _summary_problems(doc)
        card_problems = _raw_card_problems(doc)
        envs = doc.get("environments") if isinstance(doc, dict) else None
        for game_id, why in sorted(card_problems.items()):
            found.problems.append((path, f"card quarantined ({game_id}): {why}"))
        for reject in output.rejects:
            if any(f" {g}" in reject.reason for g in card_problems):
                continue  # said above, more precisely
            reason = reject.reason
            m = re.fullmatch(r"environments\[(\d+)\]\.runs\[(\d+)\]", reject.location)
            if m and isinstance(envs, list) and isinstance(envs[int(m[1])], dict):
                reason = summary_problems.get((envs[int(m[1])].get("id"), int(m[2])), reason)
            found.problems.append((path, f"card run quarantined ({reject.location}): {reason}"))
        tables = output.tables
        slots = tables.get("core_arc3__card_plays")
        if slots is not None and card_problems:
            slots = slots.filter(~pl.col("game_id").is_in(list(card_problems)))
        runs, problems = runs_from_tables(
            tables.get("core_arc3__scorecard_runs"), tables.get("core_arc3__scorecards"), slots,
            {file_id: (path.name, path)}, raw_problems={file_id: ({}, summary_problems)})
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


def _bad_game_id(game_id: str) -> str:
    """Why a card's game id is refused: no table holds it (ingest quarantines it), and a run of it would stop
    the scorer's writing of every run."""
    return f"game id {game_id!r} is not of the form <code>-<version> (4 lowercase letters or digits, then - and 8 " \
           "or 12 lowercase hex digits; the version may be left out)"


def _f(v: Any) -> float | None:
    return None if v is None else float(v)


def runs_from_tables(runs: pl.DataFrame | None, cards: pl.DataFrame | None, slots: pl.DataFrame | None,
                     files: Mapping[str, tuple[str, Path | None]],
                     raw_problems: Mapping[str, tuple[dict, dict]] | None = None
                     ) -> tuple[list[CardRun], list[tuple[Path, str]]]:
    """Card runs from ``core_arc3__scorecard_runs`` (with their ``core_arc3__scorecards`` documents) and
    ``core_arc3__card_plays`` rows, and the runs refused with their reason."""
    out: list[CardRun] = []
    problems: list[tuple[Path, str]] = []
    raw_problems = raw_problems or {}

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
        label = f"environments {game_id} run {r_i}"
        bad = raw_problems.get(fid, ({}, {}))[1].get((game_id, r_i))
        la = row["level_actions"]
        if bad is None and not GAME_ID_RE.match(game_id):
            bad = _bad_game_id(game_id)
        if bad is None and la is None:
            bad = "missing level_actions: a run cannot be scored without its per-level actions"
        if bad is None and any(_count(a) is None for a in la):
            bad = f"level_actions {la} hold a negative count"
        for key in ("actions", "resets", "levels_completed"):
            if bad is None and row[key] is not None and _count(row[key]) is None:
                bad = f"{key} = {row[key]!r} is negative"
        k = row["levels_completed"]
        if bad is None and k is None:
            bad = "missing levels_completed: which levels were completed is unknown"
        if bad is None and k > len(la):
            bad = f"levels_completed {k} is more than its {len(la)} levels (level_actions)"
        base = row["level_baseline_actions"]
        if bad is None and base is not None and -1 not in base and len(base) < k:
            bad = f"more completed levels ({k}) than baselines ({len(base)})"
        if bad is None and base is not None and -1 not in base and any(b < 0 for b in base):
            bad = f"level_baseline_actions {base} hold a negative value"
        if bad is None and base is not None and any(b > MAX_BASELINE_ACTIONS for b in base):
            bad = (f"level_baseline_actions {base} hold a value above {MAX_BASELINE_ACTIONS:,}, the largest baseline "
                   "accepted (as for a metadata.json at ingest)")
        if bad is None and row["state"] is not None and row["state"] not in GAME_STATES:
            bad = f"state {row['state']!r} is not one of {', '.join(GAME_STATES)}"
        if bad is not None:
            problems.append((where(fid), f"card run quarantined ({label}): {bad}"))
            continue
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
            policy_assumed=row["policy_id"] is None)
        name, path = files.get(fid, (fid[:12], None))
        out.append(CardRun(fid, name, path, "scored-summary", game_id, r_i, play, stated, tuple(notes)))
    for row in (slots.sort("file_id", "game_id", "slot_index").iter_rows(named=True) if slots is not None else ()):
        fid, game_id, s_i = row["file_id"], row["game_id"], row["slot_index"]
        if not game_id or game_id in ("None", "null"):
            problems.append((where(fid), "card quarantined: it names no game_id, so its game cannot be scored"))
            continue
        bad = raw_problems.get(fid, ({}, {}))[0].get(game_id)
        if bad is None and not GAME_ID_RE.match(game_id):
            bad = _bad_game_id(game_id)
        pairs = [tuple(p) for p in row["card_actions_by_level"] or []]
        if bad is None:
            for key in ("card_actions", "card_resets", "levels_completed"):
                if row[key] is not None and _count(row[key]) is None:
                    bad = f"{key.removeprefix('card_')} = {row[key]!r} is negative"
                    break
        if bad is None and any(_count(v) is None for p in pairs for v in p):
            bad = f"actions_by_level {pairs} hold a negative value"
        if bad is None and row["card_state"] not in GAME_STATES:
            bad = f"state {row['card_state']!r} is not one of {', '.join(GAME_STATES)}"
        if bad is not None:
            problems.append((where(fid), f"card quarantined ({game_id}): {bad}"))
            continue
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
            cause = ("the stated score does not follow from the card's own level actions and baselines (edited by "
                     "hand, or written by another scorer)")
        out.append({"level_index": i + 1, "stated": s_old, "recomputed": s_new, "cause": cause})
    if not _close(stated.score, scored.score):
        cause = (out[0]["cause"] if out else causes_run[0] if causes_run else
                 "the stated run score does not follow from its own level scores (edited by hand, or written by "
                 "another scorer)")
        out.append({"level_index": None, "stated": stated.score, "recomputed": scored.score, "cause": cause})
    return out
