"""Set-based RHAE scoring: the rules of ``pipeline.scoring.rhae`` over whole tables of plays, in numpy.

Same rules, same arithmetic, same order of floating-point operations as the pure functions, so the numbers are
the same (tests/unit/test_scoring_vectorized.py compares both on thousands of random plays):

- levels are paired with cumulative entries by position; level ``i <= k`` costs ``c_i - c_{i-1}``, level
  ``k+1`` the remainder ``actions - c_k`` (dropped when ``k == n``), later levels 0 (``counting.per_level_actions``);
- unscorable plays (no metadata, empty baseline, more entries than baseline values) score 0 with the toolkit's
  message (``rhae.unscorable_reason``);
- level score ``min(cap, 100 * (b/a) ** k)`` when completed with ``a > 0`` and ``b > 0``; the policy's action
  cutoff zeroes the first completed level over ``ceil(m * b)`` and every later one;
- play score: weighted mean, summed level by level in level order (a sequential sum, as Python's ``sum``),
  capped by the weighted share of positive levels when the policy says so;
- game score: the best play (first one on ties, in ``run_order``); total: mean over games in game-id order.

Input frames:

``plays``: ``play_id`` (str, unique), ``game_id`` (str), ``run_order`` (int, order of the play in its game's card,
unique within a game),
``actions`` (int), ``cumulative`` (list[int]: the cumulative action counts of the play's
``actions_by_level`` pairs).

``games``: ``game_id``, ``baseline_actions`` (list[int], null or empty = metadata without a baseline). A game
absent from ``games`` has no metadata.

How: numpy over the Arrow buffers of the list columns; nothing runs in Python per play or per level. Only
completed levels (the cumulative entries) can score, so the work is on the entries as flat arrays, in play
order, ``CHUNK_PLAYS`` consecutive plays at a time (memory stays flat in the number of plays): level scores
from a small table over (baseline value, level actions), play sums with ``np.bincount`` (which adds in input
order: level order within a play). Game ids become integer codes once. The ``levels`` table is built from
the same chunks on first access.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from .policies import ScoringPolicy, get_policy
from .rhae import MSG_BASELINE_MISSING, MSG_BASELINE_SIZE_MISMATCH, no_metadata_message

__all__ = ["VectorizedScores", "score_plays_frame"]

PLAYS_SCHEMA = {"play_id": pl.String, "game_id": pl.String, "run_order": pl.Int64, "actions": pl.Int64,
                "cumulative": pl.List(pl.Int64)}
GAMES_SCHEMA = {"game_id": pl.String, "baseline_actions": pl.List(pl.Int64)}
LEVELS_SCHEMA = {"play_id": pl.String, "game_id": pl.String, "level_index": pl.Int64, "level_actions": pl.Int64,
                 "level_baseline": pl.Int64, "is_level_completed": pl.Boolean, "level_budget": pl.Int64,
                 "level_score": pl.Float64}
CHUNK_PLAYS = 1 << 15  # consecutive plays per chunk: their entries' arrays stay in cache
TABLE_CELLS = 1 << 18  # level-score table: 2 MiB at most


@dataclass(frozen=True)
class VectorizedScores:
    """``runs``: one row per play in input order (play_id, game_id, run_order, score, levels_completed, message,
    cutoff_level, n_levels, is_best). ``levels``: one row per scorable play and baseline level (play_id, game_id, level_index,
    level_actions, level_baseline, is_level_completed, level_budget, level_score), built on first access. ``games``:
    one row per game with plays (game_id, score, best_play_id, n_runs). ``total``: mean of the game scores."""

    policy_id: str
    runs: pl.DataFrame
    games: pl.DataFrame
    total: float
    _layout: _Layout | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def levels(self) -> pl.DataFrame:
        if self._layout is None:
            return pl.DataFrame(schema=LEVELS_SCHEMA)
        return self._layout.levels_frame(self.runs)


def score_plays_frame(plays: pl.DataFrame, games: pl.DataFrame, policy: ScoringPolicy | str | None = None
                      ) -> VectorizedScores:
    """Score every play of ``plays`` against the baselines of ``games`` under ``policy`` (module docstring)."""
    pol = get_policy(policy)
    plays = plays.select(list(PLAYS_SCHEMA)).cast(PLAYS_SCHEMA)  # type: ignore[arg-type]
    games = games.select(list(GAMES_SCHEMA)).cast(GAMES_SCHEMA)  # type: ignore[arg-type]
    if games["game_id"].is_duplicated().any():
        raise ValueError("games: one row per game_id expected")
    if _has_duplicates(plays["play_id"]):
        raise ValueError("plays: play_id must be unique")

    # Games of the plays, as codes into their sorted distinct ids (game-id order is the output order).
    game_ids, code = _sorted_codes(plays["game_id"])
    n_games = game_ids.len()
    base_n, base_start, base_values = _list_layout(games["baseline_actions"])
    row_of = {g: i for i, g in enumerate(games["game_id"].to_list())}
    rows = [row_of.get(g, -1) for g in game_ids.to_list()]  # one entry per game, not per play
    game_n = np.array([base_n[r] if r >= 0 else 0 for r in rows], dtype=np.int64)
    game_start = np.array([base_start[r] if r >= 0 else 0 for r in rows], dtype=np.int64)
    # rhae.unscorable_reason, in its order: no metadata, then no baseline, then too many entries (per play).
    game_message = [no_metadata_message(g) if r < 0 else MSG_BASELINE_MISSING if base_n[r] == 0 else None
                    for g, r in zip(game_ids.to_list(), rows, strict=True)]

    k, cum_start, cum_values = _list_layout(plays["cumulative"])
    n = game_n[code]
    game_ok = np.array([m is None for m in game_message], dtype=bool)[code] if n_games else np.zeros(0, bool)
    scorable = game_ok & (k <= n)
    messages = pl.Series("message", [*game_message, MSG_BASELINE_SIZE_MISMATCH, None], dtype=pl.String)
    message_index = np.where(~game_ok, code, np.where(scorable, n_games + 1, n_games))

    layout = _Layout(pol, scorable, n, k, cum_start, cum_values, plays["actions"].to_numpy(),
                     game_start[code], base_values)
    score, cutoff = layout.play_scores(plays.height)

    # Best play per game: the highest score, the first in run order on ties (rhae.best_play_index).
    run_order = plays["run_order"].to_numpy()
    best_score = np.full(n_games, -np.inf)
    np.maximum.at(best_score, code, score)
    first_order = np.full(n_games, np.iinfo(np.int64).max)
    tied = score == best_score[code]
    np.minimum.at(first_order, code[tied], run_order[tied])
    candidates = np.flatnonzero(tied & (run_order == first_order[code]))
    _, first = np.unique(code[candidates], return_index=True)  # one per game even if run_order repeats
    best_rows = candidates[first]  # in game-id order
    is_best = np.zeros(plays.height, dtype=bool)
    is_best[best_rows] = True

    runs = pl.DataFrame({
        "play_id": plays["play_id"], "game_id": plays["game_id"], "run_order": plays["run_order"],
        "score": score, "levels_completed": k,
        "message": messages.gather(message_index), "cutoff_level": cutoff, "n_levels": n, "is_best": is_best,
    }).with_columns(pl.when(pl.col("cutoff_level") > 0).then(pl.col("cutoff_level")).alias("cutoff_level"),
                    pl.when(pl.col("message").is_null()).then(pl.col("n_levels")).alias("n_levels"))
    games_out = pl.DataFrame({
        "game_id": game_ids, "score": best_score if n_games else np.zeros(0),
        "best_play_id": plays["play_id"].gather(best_rows),
        "n_runs": np.bincount(code, minlength=n_games).astype(np.int64),
    })
    # Sequential sum in game-id order, then one division (rhae.mean_game_score).
    total = sum(games_out["score"].to_list()) / n_games if n_games else 0.0
    return VectorizedScores(policy_id=pol.policy_id, runs=runs, games=games_out, total=total,
                            _layout=layout if layout.plays.size else None)


def _has_duplicates(values: pl.Series) -> bool:
    """Exact, but first on 64-bit hashes, sorted (cheaper than hashing the strings into a set): distinct
    hashes prove distinct values; only a hash collision needs the exact count."""
    hashes = np.sort(values.hash().to_numpy())
    return bool((hashes[1:] == hashes[:-1]).any()) and values.n_unique() != values.len()


def _sorted_codes(values: pl.Series) -> tuple[pl.Series, np.ndarray]:
    """The distinct values, sorted (nulls first), and each value's index into them: a dense rank (the sort of
    the distinct values done once, in polars; no Arrow compute kernel, whose first use costs ~0.15 s)."""
    distinct = values.unique().sort(nulls_last=False)
    has_null = values.null_count() > 0
    rank = values.rank("dense").fill_null(0).to_numpy().astype(np.int64, copy=False)
    return distinct, rank if has_null else rank - 1


def _list_layout(values: pl.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lengths (null lists: 0), start offsets and flat values of a list column (polars, no Python loop).
    Not through Arrow: its `fill_null` and `flatten` are compute kernels, whose first use imported
    pyarrow.compute and pandas (0.27 s of every `score`)."""
    lengths_series = values.list.len().fill_null(0)
    lengths = lengths_series.to_numpy().astype(np.int64, copy=False)
    starts = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    # The entries of the non-empty lists, in order (exploding an empty or null list would yield a null).
    flat = values.filter(lengths_series > 0).explode().to_numpy().astype(np.int64, copy=False)
    return lengths, starts, flat


@dataclass
class _Layout:
    """The completed levels (cumulative entries) of the plays as flat arrays, one element per entry, in play
    order and level order within a play, taken ``CHUNK_PLAYS`` consecutive plays at a time (their entries
    are one contiguous run of the Arrow buffer, and the chunk's arrays stay in cache). Only completed levels
    can score, so a play's score is the weighted sum of its entries' scores: the levels after them add 0.0,
    which changes no sum. Level scores come from a table over (baseline value, level actions) filled by
    ``level_scores`` (the arithmetic once per pair, not once per level); actions beyond the table are scored
    directly. Plays that are not scorable are computed along (reads clipped to the arrays) and zeroed."""

    pol: ScoringPolicy
    scorable: np.ndarray  # per play: scored against a baseline (else score 0, no level rows)
    n: np.ndarray  # baseline levels per play
    k: np.ndarray  # cumulative entries per play
    cum_start: np.ndarray
    cum_values: np.ndarray
    actions: np.ndarray
    base_start: np.ndarray  # start of the play's baseline in base_values
    base_values: np.ndarray

    def __post_init__(self) -> None:
        pol = self.pol
        self.plays = np.flatnonzero(self.scorable)
        self.power = _PythonPower(pol.efficiency_exponent)
        if not self.base_values.size:
            self.base_values = np.zeros(1, np.int64)  # something to read (and discard) for unscorable plays
        m = pol.action_cutoff_multiplier  # budgets ceil(m * b), once per baseline value
        self.base_budget = None if m is None else np.ceil(self.base_values * float(m)).astype(np.int64)
        levels = max(int(self.n.max(initial=0)), int(self.k.max(initial=0)), 1)
        # Small integers, exact as floats (Python multiplies and divides by them as floats too).
        self.weights = np.array([pol.level_weight(j + 1) for j in range(levels)], dtype=np.float64)
        self.total_weight = np.cumsum(self.weights)  # sum(w_1..w_n) at n - 1
        # The table: one row per distinct baseline value, one column per action count 0..table_actions, at most
        # a quarter as many cells as there are entries, and no column past the largest count (level actions
        # are differences of counts that do not decrease; any larger ones are scored directly).
        distinct, code = np.unique(self.base_values, return_inverse=True)
        most = max(int(self.cum_values.max(initial=0)), int(self.actions.max(initial=0)))
        cells = min(TABLE_CELLS, max(1024, self.cum_values.size // 4))
        self.table_actions = max(0, min(most, cells // distinct.size - 1))
        width = self.table_actions + 1
        self.table_row = code.astype(np.int64) * width  # per baseline entry: where its row starts
        self.table = self.level_scores(np.repeat(distinct, width), np.tile(np.arange(width), distinct.size))

    def level_scores(self, b: np.ndarray, a: np.ndarray) -> np.ndarray:
        """rhae.level_score of completed levels with baselines ``b`` and actions ``a``."""
        pol = self.pol
        live = b > 0
        acted = a > 0
        scored = live & acted
        s = np.zeros(a.shape)
        s[scored] = np.minimum(float(pol.level_cap), 100.0 * self.power(b[scored] / a[scored]))
        if not pol.completed_zero_action_level_scores_zero:  # a completed level without actions (toolkit guard)
            s[live & ~acted] = float(pol.level_cap)
        return s

    def completed(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """The entries of plays ``lo..hi-1``: ``play`` (minus lo), ``level`` (0-based), ``actions``
        (counting.per_level_actions: ``c_i - c_{i-1}``), ``score`` (after the cutoff) and, per play, ``cutoff``
        (the cutoff level, 0 = none)."""
        k = self.k[lo:hi]
        first = self.cum_start[lo:hi] - self.cum_start[lo]
        c = self.cum_values[self.cum_start[lo]:self.cum_start[lo] + int(k.sum())]
        play = np.repeat(np.arange(hi - lo), k)
        level = np.arange(c.size) - first.take(play)
        a = np.empty_like(c)
        np.subtract(c[1:], c[:-1], out=a[1:])
        starts = first[k > 0]
        a[starts] = c[starts]
        base = self.base_start[lo:hi].take(play)
        base += level
        cell = self.table_row.take(base, mode="clip")
        cell += a.clip(0, self.table_actions)  # actions <= 0 share the column of 0 (the same rule)
        s = self.table.take(cell)
        beyond = a > self.table_actions
        if beyond.any():
            s[beyond] = self.level_scores(self.base_values.take(base[beyond], mode="clip"), a[beyond])
        cutoff = np.zeros(hi - lo, dtype=np.int64)
        if self.base_budget is not None:
            over = np.flatnonzero(a > self.base_budget.take(base, mode="clip"))
            over_play = play[over]  # ascending: the first of each play is its first level over budget
            first_over = over[np.flatnonzero(np.diff(over_play, prepend=-1))]
            cutoff[play[first_over]] = level[first_over] + 1
            cut = cutoff.take(play)
            s[(cut > 0) & (level + 1 >= cut)] = 0.0  # that level and every later one
        return {"play": play, "level": level, "actions": a, "score": s, "cutoff": cutoff}

    def play_scores(self, n_plays: int) -> tuple[np.ndarray, np.ndarray]:
        """Play scores (0 for unscorable plays) and cutoff levels (0 = none) of every play
        (rhae.game_score_from_levels: the weighted sum adds the levels in level order, from 0, as Python's
        ``sum``; ``np.bincount`` adds its weights one by one in input order, and a play's entries are in
        level order)."""
        scores = np.zeros(n_plays)
        cutoffs = np.zeros(n_plays, dtype=np.int64)
        for lo in range(0, n_plays, CHUNK_PLAYS):
            hi = min(lo + CHUNK_PLAYS, n_plays)
            lv = self.completed(lo, hi)
            w = self.weights.take(lv["level"])
            weighted_sum = np.bincount(lv["play"], weights=w * lv["score"], minlength=hi - lo)
            total_weight = self.total_weight.take(self.n[lo:hi] - 1, mode="clip")
            play = weighted_sum / total_weight
            if self.pol.game_cap == "positive-level-weight-share":
                positive = np.bincount(lv["play"], weights=w * (lv["score"] > 0), minlength=hi - lo)  # exact
                play = np.minimum(play, 100.0 * positive / total_weight)
            ok = self.scorable[lo:hi]
            scores[lo:hi] = np.where(ok, play, 0.0)
            if self.base_budget is not None:
                cutoffs[lo:hi] = np.where(ok, lv["cutoff"], 0)
        return scores, cutoffs

    def levels_frame(self, runs: pl.DataFrame) -> pl.DataFrame:
        """One row per scorable play and baseline level, plays in input order (chunk by chunk)."""
        frames = [self.level_rows(lo, min(lo + CHUNK_PLAYS, self.n.size), runs)
                  for lo in range(0, self.n.size, CHUNK_PLAYS)]
        return pl.concat(frames, rechunk=False) if frames else pl.DataFrame(schema=LEVELS_SCHEMA)

    def level_rows(self, lo: int, hi: int, runs: pl.DataFrame) -> pl.DataFrame:
        """The rows of the scorable plays among plays ``lo..hi-1`` (indices below are minus lo)."""
        lv = self.completed(lo, hi)
        plays = np.flatnonzero(self.scorable[lo:hi])
        n = self.n[lo:hi].take(plays)
        first_row = np.zeros(hi - lo, dtype=np.int64)
        first_row[plays] = np.cumsum(n) - n
        play = np.repeat(plays, n)
        level = np.arange(play.size) - first_row.take(play)
        k = self.k[lo:hi].take(play)
        base = self.base_start[lo:hi].take(play)
        base += level
        actions = np.zeros(play.size, np.int64)
        score = np.zeros(play.size)
        # Completed levels: the entries' actions and scores.
        keep = np.flatnonzero(self.scorable[lo:hi].take(lv["play"]))
        at = first_row.take(lv["play"][keep]) + lv["level"][keep]
        actions[at] = lv["actions"][keep]
        score[at] = lv["score"][keep]
        # Level k+1 (when there is one) gets the remainder: the play's actions after its last entry.
        after = np.flatnonzero(level == k)
        entries = k.take(after)
        last = np.zeros(after.size, np.int64)
        has = np.flatnonzero(entries)
        last[has] = self.cum_values[self.cum_start[lo:hi].take(play.take(after[has])) + entries[has] - 1]
        actions[after] = self.actions[lo:hi].take(play.take(after)) - last
        columns = {"play_id": runs["play_id"][lo:hi].gather(play), "game_id": runs["game_id"][lo:hi].gather(play),
                   "level_index": level + 1, "level_actions": actions, "level_baseline": self.base_values.take(base),
                   "is_level_completed": level < k,
                   "level_budget": (pl.repeat(None, play.size, dtype=pl.Int64, eager=True)
                                    if self.base_budget is None else self.base_budget.take(base)),
                   "level_score": score}
        return pl.DataFrame(columns, schema=LEVELS_SCHEMA)


class _PythonPower:
    """``r ** exponent`` exactly as Python's float power (C ``pow``) computes it, without a call per value.

    ``r * r`` is the correctly rounded square; C ``pow(r, 2.0)`` (glibc: under 0.52 ULP) can only round the
    other way when the exact square lies within a few hundredths of an ULP of a rounding midpoint (about 1
    square in 1000 here). The exact rounding error of ``r * r`` (Dekker's product) finds those squares, and
    only they go through Python's operator, once per distinct value: the results are remembered (sorted), as
    the ratios of small integers recur from chunk to chunk. ``_square_is_safe`` checks the premise on this
    machine's ``pow`` once; if it fails (or for other exponents) every distinct value goes through Python."""

    def __init__(self, exponent: int) -> None:
        self.exponent = exponent
        self.known = np.empty(0)  # sorted values already raised in Python
        self.powers = np.empty(0)  # their powers

    def __call__(self, ratios: np.ndarray) -> np.ndarray:
        if self.exponent == 1:
            return ratios.astype(np.float64, copy=True)
        if self.exponent == 2 and _square_is_safe():
            square = ratios * ratios
            hard = _near_midpoint(ratios, square)
            square[hard] = self.python(ratios[hard])
            return square
        return self.python(ratios)

    def python(self, ratios: np.ndarray) -> np.ndarray:
        """Python's powers of ``ratios``, one call per value never seen before."""
        distinct, inverse = np.unique(ratios, return_inverse=True)
        at = np.searchsorted(self.known, distinct)
        seen = at < self.known.size
        seen[seen] = self.known[at[seen]] == distinct[seen]
        if not seen.all():
            new = distinct[~seen]
            where = at[~seen]
            self.known = np.insert(self.known, where, new)
            self.powers = np.insert(self.powers, where, [r ** self.exponent for r in new.tolist()])
            at = np.searchsorted(self.known, distinct)
        return self.powers[at][inverse]


HARD_MARGIN = 0.47  # rounding errors above this many ULPs (of 0.5 at most) are re-done with Python's pow


def _near_midpoint(r: np.ndarray, square: np.ndarray) -> np.ndarray:
    """Where the exact ``r * r`` lies within ``0.5 - HARD_MARGIN`` ULPs of a rounding midpoint (finite ``r``)."""
    hi = r * 134217729.0  # Dekker: r = hi + lo, each half of the mantissa
    hi -= hi - r
    lo = r - hi
    error = hi * hi
    error -= square
    error += (2.0 * hi) * lo
    error += lo * lo  # exact: r * r = square + error
    # The spacing below a power of two is half the one above: the smaller of the two is the unit.
    ulp = np.spacing(square * (1.0 - 2.0 ** -53))
    return np.abs(error, out=error) > HARD_MARGIN * ulp


@functools.cache
def _square_is_safe() -> bool:
    """This machine's ``pow(r, 2.0)`` agrees with ``r * r`` wherever ``_near_midpoint`` says it must (checked
    on 20,000 ratios of small integers, the kind of values scoring squares)."""
    rng = np.random.default_rng(0)
    r = rng.integers(1, 1000, 20_000) / rng.integers(1, 5000, 20_000)
    easy = ~_near_midpoint(r, r * r)
    python = np.array([x ** 2 for x in r[easy].tolist()])
    return bool(np.array_equal(python, r[easy] * r[easy]))
