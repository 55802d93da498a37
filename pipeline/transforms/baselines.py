"""Human baselines per game and level (spec/scoring.md §C), and comparison with published baselines.

Eligible participants: first contact (baselines.first_run_only), not excluded as low effort
(baselines.exclude_low_effort), optionally only valid attempts (baselines.require_valid_attempt). Per
participant the recording's first play is used (later plays start after a full reset: no longer first
contact). A participant completed level `l` when that play has an `l`-th level pair; the level's cost is
the difference of cumulative pairs (by position, §B.2). With `count_source = "card-when-present"` the
pairs come from the recording's own card slot when it has one (human cards are authoritative for human
baselines, §B.5), else from the lines. The rules themselves are `pipeline.scoring.baselines`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.core.config import BuildConfig
from pipeline.scoring.baselines import baselines_from_level_costs
from schemas.validate import conform
from schemas.vocabulary import BASELINE_RULES


def eligible_recordings(attempts: pl.DataFrame, config: BuildConfig) -> pl.DataFrame:
    b = config.baselines
    cond = pl.lit(True)
    if b.first_run_only:
        cond = cond & pl.col("is_first_contact")
    if b.exclude_low_effort:
        cond = cond & ~pl.col("is_low_effort_excluded")
    if b.require_valid_attempt:
        cond = cond & pl.col("is_attempt")
    return attempts.filter(cond)


def _diff(pairs: list[list[int]]) -> list[int]:
    out, prev = [], 0
    for _, cum in pairs:
        out.append(cum - prev)
        prev = cum
    return out


def level_costs(eligible: pl.DataFrame, plays: pl.DataFrame, card_checks: pl.DataFrame,
                config: BuildConfig) -> pl.DataFrame:
    """(game_id, guid, level_index, cost, is_from_card) for every level an eligible participant completed."""
    first = (plays.join(eligible.select("guid"), on="guid").sort("guid", "play_index")
             .group_by("guid", maintain_order=True).agg(pl.col("play_id").first(), pl.col("game_id").first(),
                                                        pl.col("rebuilt_actions_by_level").first()))
    use_card = config.baselines.count_source == "card-when-present"
    cards = card_checks.select("play_id", "card_actions_by_level") if use_card else \
        pl.DataFrame(schema={"play_id": pl.String, "card_actions_by_level": pl.List(pl.List(pl.Int64))})
    first = first.join(cards, on="play_id", how="left")
    rows = []
    for r in first.iter_rows(named=True):
        from_card = r["card_actions_by_level"] is not None
        pairs = r["card_actions_by_level"] if from_card else r["rebuilt_actions_by_level"]
        for i, cost in enumerate(_diff(pairs or []), start=1):
            rows.append((r["game_id"], r["guid"], i, cost, from_card))
    return pl.DataFrame(rows, schema={"game_id": pl.String, "guid": pl.String, "level_index": pl.Int64,
                                      "cost": pl.Int64, "is_from_card": pl.Boolean}, orient="row")


def level_baselines(costs: pl.DataFrame, eligible: pl.DataFrame, games: pl.DataFrame,
                    config: BuildConfig) -> pl.DataFrame:
    """out_arc3__level_baselines: every rule for every level 1..n_levels of every game with eligible players."""
    players = eligible.group_by("game_id").agg(pl.len().cast(pl.Int64).alias("n_players"))
    n_levels = dict(games.select("game_id", "n_levels").iter_rows())
    by_game: dict[str, dict[int, list[tuple[int, bool]]]] = {}
    for g, _guid, lvl, cost, card in costs.sort("game_id", "guid", "level_index").iter_rows():
        by_game.setdefault(g, {}).setdefault(lvl, []).append((cost, card))
    rows = []
    for g, n_players in players.sort("game_id").iter_rows():
        levels = by_game.get(g, {})
        known = n_levels.get(g)
        n = known if known is not None else max(levels, default=0)  # pairs beyond a known count: ignored
        per_level = [[c for c, _ in levels.get(i, [])] for i in range(1, n + 1)]
        for rule in BASELINE_RULES:
            for lb in baselines_from_level_costs(per_level, rule, config.baselines.min_completers):
                rows.append({
                    "game_id": g, "level_index": lb.level, "baseline_rule": rule,
                    "baseline_value": None if lb.value is None else float(lb.value),
                    "n_completers": lb.n_completers, "min_completers": lb.min_completers,
                    "is_too_few_completers": lb.too_few, "n_players": n_players,
                    "n_card_costs": sum(1 for _, card in levels.get(lb.level, []) if card),
                    "is_default_rule": rule == config.baselines.rule,
                })
    return conform("out_arc3__level_baselines", rows)


# --------------------------------------------------------------------------------------------------
# published baselines: metadata.json output and comparison
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GameBaseline:
    game_id: str
    values: list[float | None]

    @property
    def is_complete(self) -> bool:
        return bool(self.values) and all(v is not None for v in self.values)

    def metadata_values(self) -> tuple[list[int], list[int]]:
        """Integer `baseline_actions` and the 1-based levels whose value was rounded up (a median of an even
        number of completers can be a half; metadata holds integers)."""
        ints, rounded = [], []
        for i, v in enumerate(self.values, start=1):
            assert v is not None
            if v != int(v):
                rounded.append(i)
            ints.append(int(math.ceil(v)))
        return ints, rounded


def game_baselines(level_baselines_df: pl.DataFrame, rule: str) -> list[GameBaseline]:
    df = level_baselines_df.filter(pl.col("baseline_rule") == rule).sort("game_id", "level_index")
    return [GameBaseline(g, sub["baseline_value"].to_list())
            for (g,), sub in df.group_by("game_id", maintain_order=True)]


def metadata_document(game_id: str, values: list[int], existing_json: str | None) -> dict:
    """A metadata.json document: the existing one (when ingested) with `baseline_actions` replaced."""
    doc = json.loads(existing_json) if existing_json else {"game_id": game_id}
    doc["baseline_actions"] = values
    return doc


def metadata_path(out_dir: Path, game_id: str) -> Path:
    """`<dir>/<code>/<version>/metadata.json`, the official environment_files layout."""
    code, _, version = game_id.partition("-")
    return out_dir / code / version / "metadata.json" if version else out_dir / code / "metadata.json"


def compare_baselines(ours: list[GameBaseline], published: pl.DataFrame) -> pl.DataFrame:
    """Level-by-level diff: game_id, level_index, ours, published, delta, status
    (equal / differs / no_baseline (ours null) / only_ours / only_published)."""
    pub = {g: (rule, vals) for g, rule, vals in published.iter_rows()}
    rows = []
    for gb in ours:
        rule, vals = pub.get(gb.game_id, (None, None))
        if vals is None:
            for i, v in enumerate(gb.values, start=1):
                rows.append((gb.game_id, i, v, None, None, "not_published", None))
            continue
        for i in range(1, max(len(gb.values), len(vals)) + 1):
            o = gb.values[i - 1] if i <= len(gb.values) else None
            p = vals[i - 1] if i <= len(vals) else None
            if i > len(gb.values):
                status = "only_published"
            elif o is None:
                status = "no_baseline"
            elif p is None:
                status = "only_ours"
            else:
                status = "equal" if o == p else "differs"
            delta = None if (o is None or p is None) else o - p
            rows.append((gb.game_id, i, o, p, delta, status, rule))
    return pl.DataFrame(rows, schema={"game_id": pl.String, "level_index": pl.Int64, "ours": pl.Float64,
                                      "published": pl.Int64, "delta": pl.Float64, "status": pl.String,
                                      "published_rule": pl.String}, orient="row")
