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

How: numpy over the Arrow buffers of the list columns; nothing runs in Python per play or per level. Scorable
plays are taken in blocks of plays with the same number of baseline levels ``n`` (at most ``BLOCK_PLAYS``),
as ``plays x n`` matrices filled level by level, so memory stays flat in the number of plays and every
running quantity (the cumulative count, the cutoff, the weighted sum) is one vector per level. The
``levels`` table is built from the same blocks on first access.
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
BLOCK_PLAYS = 1 << 14  # plays per block: level vectors of 128 KiB, which stay in cache


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
    game_ids = plays["game_id"].unique().sort()
    code = plays["game_id"].replace_strict(game_ids, np.arange(game_ids.len()), return_dtype=pl.Int64
                                           ).to_numpy().astype(np.int64, copy=False)  # (empty: not int)
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
    cum_values = np.append(cum_values, 0)  # padding read (and discarded) for plays without a given entry
    n = game_n[code]
    game_ok = np.array([m is None for m in game_message], dtype=bool)[code] if n_games else np.zeros(0, bool)
    scorable = game_ok & (k <= n)
    messages = pl.Series("message", [*game_message, MSG_BASELINE_SIZE_MISMATCH, None], dtype=pl.String)
    message_index = np.where(~game_ok, code, np.where(scorable, n_games + 1, n_games))

    layout = _Layout(pol, np.flatnonzero(scorable), n, k, cum_start, cum_values, plays["actions"].to_numpy(),
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
        "score": score, "levels_completed": plays["cumulative"].list.len().cast(pl.Int64),
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
    """Exact, but first on 64-bit hashes (about 3x cheaper than hashing the strings into a set): distinct
    hashes prove distinct values; only a hash collision needs the exact count."""
    return values.hash().n_unique() != values.len() and values.n_unique() != values.len()


def _list_layout(values: pl.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lengths (null lists: 0), start offsets and flat values of a list column (Arrow buffers, no Python)."""
    arrow = values.rechunk().to_arrow()
    lengths = arrow.value_lengths().fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    starts = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    flat = arrow.flatten().to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return lengths, starts, flat


@dataclass
class _Layout:
    """The level rows of the scorable plays. Computed in blocks of plays that have the same number of baseline
    levels ``n``, as ``plays x n`` matrices filled one level (column) at a time: level ``j`` of every play of
    the block is one vector operation, and the weighted sums add the columns left to right."""

    pol: ScoringPolicy
    plays: np.ndarray  # indices of the scorable plays, in input order
    n: np.ndarray  # baseline levels per play (all plays)
    k: np.ndarray  # cumulative entries per play
    cum_start: np.ndarray
    cum_values: np.ndarray
    actions: np.ndarray
    base_start: np.ndarray  # start of the play's baseline in base_values
    base_values: np.ndarray

    def __post_init__(self) -> None:
        m = self.pol.action_cutoff_multiplier  # budgets ceil(m * b), once per baseline value
        self.base_budget = None if m is None else np.ceil(self.base_values * float(m)).astype(np.int64)

    def blocks(self):
        """(plays, n) for blocks of at most BLOCK_PLAYS scorable plays with ``n`` levels each."""
        n = self.n[self.plays]
        for size in np.flatnonzero(np.bincount(n)).tolist():  # the level counts present (a few), no sort
            group = np.flatnonzero(n == size)
            for lo in range(0, group.size, BLOCK_PLAYS):
                yield self.plays[group[lo:lo + BLOCK_PLAYS]], size

    def block(self, plays: np.ndarray, n: int, keep_levels: bool = False) -> dict[str, np.ndarray | None]:
        """The block's play scores (rhae.game_score_from_levels: the weighted sum adds the levels left to right,
        as Python's ``sum``) and cutoff levels (0 = none); with ``keep_levels`` also the ``plays x n`` matrices
        of level actions, baselines, completion, budgets and scores."""
        pol = self.pol
        k, start, total, base = self.k[plays], self.cum_start[plays], self.actions[plays], self.base_start[plays]
        size = plays.size
        kept = {name: np.empty((size, n), dtype=dt) for name, dt in
                (("a", np.int64), ("b", np.int64), ("completed", bool), ("budget", np.int64), ("score", np.float64))
                } if keep_levels else {}
        cutoff = np.zeros(size, dtype=np.int64)
        cut = np.zeros(size, dtype=bool)
        zero_action = 0.0 if pol.completed_zero_action_level_scores_zero else float(pol.level_cap)
        padding = self.cum_values.size - 1  # the zero appended to cum_values, read for plays without entry j
        prev = np.zeros(size, dtype=np.int64)
        weighted_sum = np.zeros(size)
        positive = np.zeros(size, dtype=np.int64)
        for j in range(n):
            done = j < k
            # counting.per_level_actions: c_j - c_{j-1} while completed; after the last entry the running value
            # becomes the play's total, so level k+1 gets the remainder and later levels 0.
            cum = np.where(done, self.cum_values[np.where(done, start + j, padding)], total)
            aj = cum - prev
            prev = cum
            bj = self.base_values[base + j]
            live = done & (bj > 0)
            acted = aj > 0
            scored = live & acted
            sj = np.zeros(size)
            sj[scored] = np.minimum(float(pol.level_cap),
                                    100.0 * _python_pow(bj[scored] / aj[scored], pol.efficiency_exponent))
            if zero_action:  # a completed level without actions (toolkit guard: 0 under 2026-04)
                sj[live & ~acted] = zero_action
            if self.base_budget is not None:
                budget = self.base_budget[base + j]
                over = done & (aj > budget)
                cutoff[over & ~cut] = j + 1
                cut |= over
                sj[cut] = 0.0
                if keep_levels:
                    kept["budget"][:, j] = budget
            w = pol.level_weight(j + 1)
            weighted_sum += w * sj
            positive += w * (sj > 0)
            if keep_levels:
                kept["a"][:, j], kept["b"][:, j], kept["completed"][:, j], kept["score"][:, j] = aj, bj, done, sj
        total_weight = sum(pol.level_weight(j + 1) for j in range(n))
        play = weighted_sum / total_weight
        if pol.game_cap == "positive-level-weight-share":
            play = np.minimum(play, 100.0 * positive / total_weight)
        return {"play": play, "cutoff": cutoff, **kept}

    def play_scores(self, n_plays: int) -> tuple[np.ndarray, np.ndarray]:
        """Play scores (0 for unscorable plays) and cutoff levels (0 = none) of every play."""
        scores = np.zeros(n_plays)
        cutoffs = np.zeros(n_plays, dtype=np.int64)
        for plays, n in self.blocks():
            blk = self.block(plays, n)
            scores[plays] = blk["play"]
            cutoffs[plays] = blk["cutoff"]
        return scores, cutoffs

    def levels_frame(self, runs: pl.DataFrame) -> pl.DataFrame:
        """One row per scorable play and level, plays in input order (blocks scattered back into place)."""
        n = self.n[self.plays]
        first = np.zeros(self.n.size, dtype=np.int64)
        first[self.plays] = np.cumsum(n) - n
        size = int(n.sum())
        out = {"level_index": np.empty(size, np.int64), "level_actions": np.empty(size, np.int64),
               "level_baseline": np.empty(size, np.int64), "is_level_completed": np.empty(size, bool),
               "level_budget": np.empty(size, np.int64), "level_score": np.empty(size)}
        for plays, m in self.blocks():
            blk = self.block(plays, m, keep_levels=True)
            at = (first[plays][:, None] + np.arange(m)).ravel()
            out["level_index"][at] = np.tile(np.arange(1, m + 1), plays.size)
            for name, key in (("level_actions", "a"), ("level_baseline", "b"), ("is_level_completed", "completed"),
                              ("level_budget", "budget"), ("level_score", "score")):
                if key in blk:
                    out[name][at] = blk[key].ravel()  # type: ignore[union-attr]
        rows = pl.Series(np.repeat(self.plays, n))
        frame = pl.DataFrame({"play_id": runs["play_id"].gather(rows), "game_id": runs["game_id"].gather(rows),
                              **out})
        if self.pol.action_cutoff_multiplier is None:
            frame = frame.with_columns(pl.lit(None, pl.Int64).alias("level_budget"))
        return frame.cast(LEVELS_SCHEMA)  # type: ignore[arg-type]


def _python_pow(ratios: np.ndarray, exponent: int) -> np.ndarray:
    """``r ** exponent`` exactly as Python's float power (C ``pow``) computes it, without a call per value.

    ``r * r`` is the correctly rounded square; C ``pow(r, 2.0)`` (glibc: under 0.52 ULP) can only round the
    other way when the exact square lies within a few hundredths of an ULP of a rounding midpoint (about 1
    square in 1000 here). The exact rounding error of ``r * r`` (Dekker's product) finds those squares, and
    only they go through Python's operator, once per distinct value. ``_square_is_safe`` checks the premise
    on this machine's ``pow`` once; if it fails (or for other exponents) every distinct value goes through
    Python."""
    if exponent == 1:
        return ratios.astype(np.float64, copy=True)
    if exponent == 2 and _square_is_safe():
        square = ratios * ratios
        hard = _near_midpoint(ratios, square)
        square[hard] = _pow_distinct(ratios[hard], 2)
        return square
    return _pow_distinct(ratios, exponent)


def _pow_distinct(ratios: np.ndarray, exponent: int) -> np.ndarray:
    distinct, inverse = np.unique(ratios, return_inverse=True)
    return np.array([r ** exponent for r in distinct.tolist()], dtype=np.float64)[inverse]


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
