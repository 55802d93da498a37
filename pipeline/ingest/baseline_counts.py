"""Per-player level counts CSV for `arcstudy baselines --from-counts` (README, "Human baselines").

One row per game, player and level:

    game_id,level_index,player_id,actions,completed          per-level cost
    game_id,level_index,player_id,cumulative_actions,completed   cumulative, as a card's actions_by_level

- `level_index` is 1-based; `completed` is true/false (also 1/0, yes/no, t/f; any case);
- a completed level needs its count (a whole number >= 0) and costs at least one action (the one rule for baseline
  values, `baseline_rule`: a 0 cost picked by a rule would be a 0 baseline); an incomplete level's count is ignored and may be
  empty (a card's `actions_by_level` is null there);
- levels are completed in order: a completed level whose previous level is not completed (or absent) is
  rejected; with `cumulative_actions` the cost is the difference to the previous level's value, so a value
  below it is rejected, and so is every later level of that player once one of its levels was rejected;
- every player in the file is a first-run player who counts for the game (the file is the selection);
  players who completed nothing still count in `n_players`.

Rows that break a rule are rejected with the file and line (quarantine-style `Reject`s); the good rows are
used. A header without the needed columns is an error for the whole file (`CountsFileError`).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.special_files import not_regular_file
from pipeline.core.textfiles import not_utf8_reason
from pipeline.ingest.base import Reject, clip
from pipeline.ingest.baseline_rule import ZERO_BASELINE_WHY, baseline_value_problem
from pipeline.recordings.cards import MAX_LEVELS
from schemas.arc3 import MAX_BASELINE_ACTIONS
from schemas.validate import conform

REQUIRED = ("game_id", "level_index", "player_id", "completed")
COUNT_COLUMNS = ("actions", "cumulative_actions")
TRUE, FALSE = {"true", "1", "yes", "t", "y"}, {"false", "0", "no", "f", "n"}
EVIDENCE = "counts-file"
MAX_LEVEL_INDEX = MAX_LEVELS  # a game has at most 254 levels; a larger index is a typo (and would size the table)


class CountsFileError(ValueError):
    """A counts file that cannot be read at all (the message is for a person)."""


@dataclass
class Counts:
    costs: pl.DataFrame  # out_arc3__baseline_costs rows (evidence counts-file)
    players: pl.DataFrame  # game_id, baseline_player_id
    n_levels: dict[str, int]  # game_id -> highest level_index in the file
    is_cumulative: bool
    n_rows: int
    rejects: list[Reject] = field(default_factory=list)


@dataclass
class _Row:
    line: int
    game_id: str
    player_id: str
    level: int
    completed: bool
    count: int | None
    raw: str


def _int(text: str) -> int | None:
    """A whole number, written as one ("12", read exactly) or as a whole float ("12.0"); else None (also for
    1e999 and nan). The callers bound it (a level index, a count: far inside 64 bits)."""
    try:
        value = int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            return None
        if not math.isfinite(f) or f != int(f):
            return None
        value = int(f)
    return value


def _first_line_not_utf8(path: Path) -> tuple[int, UnicodeDecodeError | None]:
    """(1-based line, the error) of the first line that is not UTF-8 (decoding a text stream fails by chunk)."""
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as err:
                return number, err
    return 1, None


def read_counts(path: Path) -> Counts:
    path = Path(path)
    if not_regular_file(path) is not None:
        raise CountsFileError(f"{path}: not a regular file: only regular files are read")
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as err:
        raise CountsFileError(f"{path}: cannot open: {err}") from None
    rejects: list[Reject] = []

    def reject(line: int, check: str, reason: str, raw: str, column: str | None = None,
               value: str | None = None) -> None:
        rejects.append(Reject(f"line {line}", check, f"{path}:{line}: {reason}", clip(raw),
                              "out_arc3__baseline_costs", column, value))

    try:
        with handle:
            return _read_rows(path, csv.reader(handle), reject, rejects)
    except UnicodeDecodeError:
        line, err = _first_line_not_utf8(path)
        raise CountsFileError(f"{path}:{line}: {not_utf8_reason(err)}") from None
    except OSError as err:  # opened, then failed to read (EIO)
        raise CountsFileError(f"{path}: cannot read: {err.strerror or err}") from None


def _read_rows(path: Path, reader: Any, reject: Callable[..., None], rejects: list[Reject]) -> Counts:
    header = [h.strip() for h in next(reader, [])]
    missing = [c for c in REQUIRED if c not in header]
    counts = [c for c in COUNT_COLUMNS if c in header]
    problems = [f"column {c} is missing" for c in missing]
    if not counts:
        problems.append("needs a count column: actions (per level) or cumulative_actions")
    elif len(counts) > 1:
        problems.append("has both actions and cumulative_actions: keep one")
    if problems:
        raise CountsFileError(f"{path}:1: {'; '.join(problems)} (header: {', '.join(header) or 'empty'})")
    count_col = counts[0]
    idx = {c: header.index(c) for c in (*REQUIRED, count_col)}
    rows: list[_Row] = []
    players: dict[tuple[str, str], None] = {}
    seen: dict[tuple[str, str, int], int] = {}
    n_rows = 0
    line = reader.line_num
    while True:
        try:
            record = next(reader, None)
        except csv.Error as err:  # a field over the csv module's limit, ...: this record only
            line, start = reader.line_num, line + 1
            n_rows += 1
            reject(start, "unreadable_record", f"the record cannot be read as CSV ({err}); fix or remove it", "")
            continue
        if record is None:
            break
        line, start = reader.line_num, line + 1
        if not any(v.strip() for v in record):
            continue
        n_rows += 1
        raw = ",".join(record)
        if any("\n" in v or "\r" in v for v in record):  # no field of this format holds a line break
            reject(start, "unclosed_quote", f"lines {start}-{line} were read as one record: a field holds a line "
                   "break, so a quote (\") opened in it is not closed where the line ends; fix the quoting (the "
                   "rows of those lines are not used)", raw)
            continue
        if len(record) != len(header):
            reject(start, "wrong_field_count", f"{len(record)} fields, the header has {len(header)}", raw)
            continue
        v = {c: record[i].strip() for c, i in idx.items()}
        if not v["game_id"] or not v["player_id"]:
            col = "game_id" if not v["game_id"] else "player_id"
            reject(start, "missing_value", f"{col} is empty", raw, col, "")
            continue
        players[(v["game_id"], v["player_id"])] = None
        level = _int(v["level_index"])
        if level is None or not 1 <= level <= MAX_LEVEL_INDEX:
            reject(start, "bad_level_index", f"level_index {v['level_index']!r} is not a whole number from 1 to "
                   f"{MAX_LEVEL_INDEX}", raw, "level_index", v["level_index"])
            continue
        done = v["completed"].lower()
        if done not in TRUE | FALSE:
            reject(start, "bad_completed", f"completed {v['completed']!r} is not true or false", raw,
                   "completed", v["completed"])
            continue
        completed, count = done in TRUE, None
        if completed:
            count = _int(v[count_col]) if v[count_col] else None
            if count is None or count < 0:
                reject(start, "bad_count", f"{count_col} {v[count_col]!r} of a completed level is not a whole "
                       "number >= 0", raw, count_col, v[count_col])
                continue
            if count > MAX_BASELINE_ACTIONS:  # its cost would be a baseline no metadata.json may hold
                reject(start, "bad_count", f"{count_col} {v[count_col]} of a completed level is above "
                       f"{MAX_BASELINE_ACTIONS:,} actions, the largest baseline accepted (as for a metadata.json "
                       "at ingest): a typo?", raw, count_col, v[count_col])
                continue
        key = (v["game_id"], v["player_id"], level)
        if key in seen:
            reject(start, "duplicate_level", f"player {key[1]} level {level} of {key[0]} already given on "
                   f"line {seen[key]}", raw)
            continue
        seen[key] = start
        rows.append(_Row(start, v["game_id"], v["player_id"], level, completed, count, raw))

    cumulative = count_col == "cumulative_actions"
    cost_rows: list[dict] = []
    n_levels: dict[str, int] = {}
    by_player: dict[tuple[str, str], dict[int, _Row]] = {}
    for r in rows:
        by_player.setdefault((r.game_id, r.player_id), {})[r.level] = r
        n_levels[r.game_id] = max(n_levels.get(r.game_id, 0), r.level)
    for (game_id, player), levels in sorted(by_player.items()):
        prev_count, broken = 0, None  # broken: why this player's later levels cannot be used
        for level in sorted(levels):
            r = levels[level]
            if not r.completed:
                broken = broken or f"level {level} is not completed (line {r.line})"
                continue
            if broken is None and level > 1 and (level - 1) not in levels:
                broken = f"level {level - 1} is not in the file"
            if broken is not None:
                reject(r.line, "level_order", f"player {player} completed level {level} of {game_id}, but "
                       f"{broken}: levels are completed in order", r.raw)
                broken = f"level {level} was rejected (line {r.line})"
                continue
            assert r.count is not None
            cost = r.count - prev_count if cumulative else r.count
            if cost < 0:
                reject(r.line, "cumulative_decreasing", f"cumulative_actions {r.count} of player {player} level "
                       f"{level} is below the previous level's {prev_count}", r.raw, "cumulative_actions",
                       str(r.count))
                broken = f"level {level} was rejected (line {r.line})"
                continue
            if baseline_value_problem(cost) is not None:  # the one rule: a rule may pick this cost
                column = "cumulative_actions" if cumulative else "actions"
                reject(r.line, "zero_cost", f"player {player} completed level {level} of {game_id} in {cost} "
                       f"actions: a level's cost is at least 1 action, and a rule picking this one would make a "
                       f"0 baseline ({ZERO_BASELINE_WHY})", r.raw, column, str(r.count))
                broken = f"level {level} was rejected (line {r.line})"
                continue
            prev_count = r.count
            cost_rows.append({"game_id": game_id, "baseline_player_id": player, "level_index": level,
                              "level_cost": cost, "evidence": EVIDENCE, "is_summary_sourced": False})
    rejects.sort(key=lambda rj: int(rj.location.split()[1]))
    player_frame = pl.DataFrame(list(players), schema={"game_id": pl.String, "baseline_player_id": pl.String},
                                orient="row")
    return Counts(conform("out_arc3__baseline_costs", cost_rows), player_frame, n_levels, cumulative, n_rows,
                  rejects)
