"""Human baselines per game and level (spec/scoring.md §C), and comparison with published baselines.

The evidence is one first-run play per player, as per-level costs (out_arc3__baseline_costs):

- recordings: eligible participants are first contact (baselines.first_run_only), not excluded as low
  effort (baselines.exclude_low_effort), optionally only valid attempts (baselines.require_valid_attempt).
  Per participant the recording's first play is used (later plays start after a full reset: no longer first
  contact). A participant completed level `l` when that play has an `l`-th level pair; the level's cost is
  the difference of cumulative pairs (by position, §B.2). With `count_source = "card-when-present"` the
  pairs come from the recording's own card slot when it has one (human cards are authoritative for human
  baselines, §B.5), else from the lines. A recording whose lines are truncated still has its card joined to
  its play: it counts here, once.
- human scorecard summaries with no recording of the play (`summary_players`): card slots in
  core_arc3__card_plays of a file that holds no frame line (a stand-alone card or summary file). Each card
  is assumed to be a human's (the released human dataset's summary lines). Evidence `card-summary`.
- a per-player counts CSV (`arcstudy baselines --from-counts`, pipeline/ingest/baseline_counts.py).

The rules themselves are `pipeline.scoring.baselines`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.core.config import BuildConfig
from pipeline.scoring.baselines import apply_rule, baselines_from_level_costs
from schemas.arc3 import GAME_ID
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


def _cost_rows(game_id: str, player: str, pairs: list[list[int]] | None, evidence: str) -> list[dict]:
    return [{"game_id": game_id, "baseline_player_id": player, "level_index": i, "level_cost": cost,
             "evidence": evidence, "is_summary_sourced": evidence == "card-summary"}
            for i, cost in enumerate(_diff(pairs or []), start=1)]


def level_costs(eligible: pl.DataFrame, plays: pl.DataFrame, card_checks: pl.DataFrame,
                config: BuildConfig) -> pl.DataFrame:
    """out_arc3__baseline_costs rows for every level an eligible participant recording completed."""
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
        rows += _cost_rows(r["game_id"], r["guid"], pairs, "recording-card" if from_card else "recording-lines")
    return conform("out_arc3__baseline_costs", rows)


NAME_GUID = r"^([0-9a-fA-F-]{36})\.recording\.jsonl$"  # human-dataset file names (spec/formats.md §A.3)


def summary_players(card_plays: pl.DataFrame, plays: pl.DataFrame, config: BuildConfig,
                    files: pl.DataFrame | None = None) -> pl.DataFrame:
    """Human scorecard summaries as first-run players: (game_id, baseline_player_id, card_actions,
    card_actions_by_level) for each player whose play no ingested recording holds.

    A card slot counts when its file has no play in `plays` (a stand-alone card, or a recording whose frame
    lines are all missing: a recording with lines counts through its own play, and its card's other slots are
    the same participant's abandoned sessions), its guid is not a recorded play's (never twice), it has
    actions (zero-action stub slots are no plays), and it is a 2026 card (2025 preview cards have `scores`,
    no per-level actions). In the summary line of a recording without frame lines only the file's own slot
    counts: the one whose guid is the file name's (`files`: raw_ingest__files), else the single slot with
    actions (§A.3 slot rule). A guid's first slot is its first run (later slots follow a full reset); the
    same guid in several files counts once. Slots without a guid: when the card has exactly one such slot it
    is a player (`<file_id>#<slot_index>`), otherwise replays cannot be told from players and none counts.

    Eligibility, as far as a card allows: first run by construction; `baselines.require_valid_attempt` keeps
    cards with more than attempts.actions_more_than actions, and only when attempts.unknown_duration is
    "include" (a card has no timestamps, so the time rule cannot be checked); the low-effort detector needs
    durations and a session, so it cannot exclude a summary player.
    """
    schema = {"game_id": pl.String, "baseline_player_id": pl.String, "card_actions": pl.Int64,
              "card_actions_by_level": pl.List(pl.List(pl.Int64))}
    names = (files if files is not None else pl.DataFrame(schema={"file_id": pl.String, "file_name": pl.String}))
    names = names.select("file_id", pl.col("file_name").str.extract(NAME_GUID, 1).alias("_name_guid"))
    card = ["file_id", "game_id"]
    cand = (card_plays.join(plays.select("file_id").unique(), on="file_id", how="anti")
            .join(names, on="file_id", how="left")
            .with_columns((pl.col("guid") == pl.col("_name_guid")).fill_null(False).alias("_own"))
            .with_columns(pl.col("_own").any().over(card).alias("_card_has_own"))
            .filter(pl.col("card_score").is_null() & (pl.col("card_actions") > 0)
                    & ~pl.col("guid").is_in(plays["guid"].unique().to_list()).fill_null(False))
            .filter(pl.col("line_number").is_null() | pl.col("_own")
                    | (~pl.col("_card_has_own") & (pl.len().over(card) == 1)))
            .drop("_name_guid", "_own", "_card_has_own"))
    with_guid = cand.filter(pl.col("guid").is_not_null() & (pl.col("guid") != ""))
    without = cand.filter(pl.col("guid").is_null() | (pl.col("guid") == ""))
    lone = (without.group_by(card).agg(pl.all().first(), pl.len().alias("_n"))
            .filter(pl.col("_n") == 1).drop("_n")
            .with_columns((pl.col("file_id") + "#" + pl.col("slot_index").cast(pl.String)).alias("guid")))
    players = (pl.concat([with_guid.select(lone.columns), lone], how="vertical_relaxed")
               .sort("game_id", "guid", "file_id", "slot_index")
               .group_by("game_id", "guid", maintain_order=True).first())
    if config.baselines.require_valid_attempt:
        a = config.attempts
        players = players.filter((pl.col("card_actions") > a.actions_more_than)
                                 & pl.lit(a.unknown_duration == "include"))
    return players.select(pl.col("game_id"), pl.col("guid").alias("baseline_player_id"), "card_actions",
                          "card_actions_by_level").cast(schema).sort("game_id", "baseline_player_id")


def summary_costs(players: pl.DataFrame) -> pl.DataFrame:
    """out_arc3__baseline_costs rows of summary players (evidence card-summary)."""
    rows = []
    for g, p, pairs in players.select("game_id", "baseline_player_id", "card_actions_by_level").iter_rows():
        rows += _cost_rows(g, p, pairs, "card-summary")
    return conform("out_arc3__baseline_costs", rows)


def baseline_players(eligible: pl.DataFrame, summary: pl.DataFrame) -> pl.DataFrame:
    """(game_id, baseline_player_id) of every player the baselines count, completers or not."""
    return pl.concat([eligible.select("game_id", pl.col("guid").alias("baseline_player_id")),
                      summary.select("game_id", "baseline_player_id")]).unique(maintain_order=True)


def level_baselines(costs: pl.DataFrame, players: pl.DataFrame, n_levels: dict[str, int | None],
                    config: BuildConfig) -> pl.DataFrame:
    """out_arc3__level_baselines: every rule for every level 1..n_levels of every game with players.
    `costs`: out_arc3__baseline_costs rows; `players`: (game_id, baseline_player_id); `n_levels`: game_id ->
    level count when known (pairs beyond it are ignored), else the most levels anyone completed."""
    counts = players.group_by("game_id").agg(pl.len().cast(pl.Int64).alias("n_players"))
    by_game: dict[str, dict[int, list[tuple[int, str]]]] = {}
    for g, _p, lvl, cost, evidence in costs.sort("game_id", "baseline_player_id", "level_index").select(
            "game_id", "baseline_player_id", "level_index", "level_cost", "evidence").iter_rows():
        by_game.setdefault(g, {}).setdefault(lvl, []).append((cost, evidence))
    rows = []
    for g, n_players in counts.sort("game_id").iter_rows():
        levels = by_game.get(g, {})
        known = n_levels.get(g)
        n = known if known is not None else max(levels, default=0)
        per_level = [[c for c, _ in levels.get(i, [])] for i in range(1, n + 1)]
        for rule in BASELINE_RULES:
            for lb in baselines_from_level_costs(per_level, rule, config.baselines.min_completers):
                evidence = [e for _, e in levels.get(lb.level, [])]
                rows.append({
                    "game_id": g, "level_index": lb.level, "baseline_rule": rule,
                    "baseline_value": None if lb.value is None else float(lb.value),
                    "n_completers": lb.n_completers, "min_completers": lb.min_completers,
                    "is_too_few_completers": lb.too_few, "n_players": n_players,
                    "n_card_costs": evidence.count("recording-card"),
                    "n_summary_costs": evidence.count("card-summary"),
                    "is_default_rule": rule == config.baselines.rule,
                })
    return conform("out_arc3__level_baselines", rows)


def study_level_baselines(attempts: pl.DataFrame, plays: pl.DataFrame, card_checks: pl.DataFrame,
                          card_plays: pl.DataFrame, environments: pl.DataFrame, config: BuildConfig,
                          files: pl.DataFrame | None = None, known_levels: Mapping[str, int] | None = None
                          ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(out_arc3__baseline_costs, out_arc3__level_baselines) of a study: its eligible participant recordings
    and the human scorecard summaries that no recording holds. A game's level count comes from its recordings,
    else its ingested metadata, else `known_levels` (the shipped and published games:
    `baseline_sources.known_level_counts`), else its human cards (`card_levels`), else the most levels anyone
    completed."""
    eligible = eligible_recordings(attempts, config)
    summary = summary_players(card_plays, plays, config, files)
    costs = pl.concat([level_costs(eligible, plays, card_checks, config), summary_costs(summary)])
    n_levels = with_known_levels(with_known_levels(_metadata_levels(environments), known_levels),
                                 card_levels(card_plays))
    n_levels.update({g: n for g, n in plays.group_by("game_id").agg(pl.col("n_levels").max()).iter_rows()
                     if n is not None or g not in n_levels})
    return costs, level_baselines(costs, baseline_players(eligible, summary), n_levels, config)


def card_levels(card_plays: pl.DataFrame) -> dict[str, int]:
    """What human cards say of a game's level count: the levels of a won play (a WIN completes every level);
    where nobody won, at least one more level than anyone completed (the game went on after the most levels
    completed), so that level has no completers and no baseline, never a shorter game."""
    slots = card_plays.filter(pl.col("levels_completed").is_not_null())
    if slots.height == 0:
        return {}
    per_game = slots.group_by("game_id").agg(
        pl.col("levels_completed").filter(pl.col("card_state") == "WIN").max().alias("won"),
        pl.col("levels_completed").max().alias("most"))
    return {g: int(won) if won is not None else int(most) + 1 for g, won, most in per_game.iter_rows()}


def with_known_levels(n_levels: Mapping[str, int | None], known_levels: Mapping[str, int] | None
                      ) -> dict[str, int | None]:
    """`n_levels` with the level count of `known_levels` for each game it does not know (or knows as None)."""
    out = dict(n_levels)
    for g, n in (known_levels or {}).items():
        if out.get(g) is None:
            out[g] = n
    return out


def _metadata_levels(environments: pl.DataFrame) -> dict[str, int | None]:
    """Level counts from ingested metadata (the latest snapshot's baseline_actions length), for games known
    only from summaries."""
    latest = (environments.sort("game_id", "date_downloaded", "file_id", nulls_last=False)
              .group_by("game_id", maintain_order=True).last())
    return {g: len(v) if v else None for g, v in latest.select("game_id", "baseline_actions").iter_rows()}


def rules_reproducing(costs: list[int | float], value: float) -> list[str]:
    """The baseline rules whose pick among `costs` equals `value` (for explaining a published baseline)."""
    out = []
    for rule in BASELINE_RULES:
        try:
            if apply_rule(costs, rule) == value:
                out.append(rule)
        except ValueError:
            pass
    return out


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
    """`<dir>/<code>/<version>/metadata.json`, the official environment_files layout. ValueError for a game id
    that is not `<code>[-<version>]` (e.g. `../x` from a counts file): it would name a path outside `out_dir`."""
    if not re.fullmatch(GAME_ID, game_id):
        raise ValueError(f"{game_id!r} is not a game id (<code>-<8 or 12 hex>)")
    code, _, version = game_id.partition("-")
    return out_dir / code / version / "metadata.json" if version else out_dir / code / "metadata.json"


def compare_baselines(ours: list[GameBaseline], published: pl.DataFrame,
                      costs: pl.DataFrame | None = None) -> pl.DataFrame:
    """Level-by-level diff: game_id, level_index, ours, published, delta, status
    (equal / differs / no_baseline (ours null) / only_ours / only_published / not_published), published_rule,
    and with `costs` (out_arc3__baseline_costs rows) `reproduced_by`: the rules whose pick among the level's
    completer costs equals the published value (empty: no rule does)."""
    pub = {g: (rule, vals) for g, rule, vals in published.iter_rows()}
    per_level: dict[tuple[str, int], list[int]] = {}
    if costs is not None:
        for g, lvl, c in costs.select("game_id", "level_index", "level_cost").iter_rows():
            per_level.setdefault((g, lvl), []).append(c)
    rows = []
    for gb in ours:
        rule, vals = pub.get(gb.game_id, (None, None))
        if vals is None:
            for i, v in enumerate(gb.values, start=1):
                rows.append((gb.game_id, i, v, None, None, "not_published", None, None))
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
            reproduced = None
            if costs is not None and p is not None:
                reproduced = rules_reproducing(per_level.get((gb.game_id, i), []), p)
            rows.append((gb.game_id, i, o, p, delta, status, rule, reproduced))
    df = pl.DataFrame(rows, schema={"game_id": pl.String, "level_index": pl.Int64, "ours": pl.Float64,
                                    "published": pl.Int64, "delta": pl.Float64, "status": pl.String,
                                    "published_rule": pl.String, "reproduced_by": pl.List(pl.String)},
                      orient="row")
    return df if costs is not None else df.drop("reproduced_by")
