"""Plays and levels under the official counting rules, and the card cross-check (spec/scoring.md §B).

Every step's effect on the card is the `step_effect` column ingest stored (`pipeline.recordings` classified
it once, with the counting options implied by the recording variant, and cut the plays and marked the
post-terminal echoes with it). The per-play and per-level aggregation is vectorised (polars):

- counted steps (`is_counted`): ACTION1-7 and level RESETs (1 each); the opening RESET, full resets and
  echoes are free;
- a play's level pairs are appended where ingest marked `is_level_change` (cumulative counts, §B.2), and a
  step is charged to level `1 + (pairs appended before it)`, i.e. levels are matched by position, exactly
  like the toolkit's `actions_by_level`;
- the play state is sticky (the last WIN/GAME_OVER seen), as on the card.

Recordings whose action ids were lost (benchmarking defect) are counted the way ingest stored them: every
line one action, flagged. When a recording carries its own card slot (human-dataset files), the card's
counts are compared with the rebuilt ones and disagreements are explained, never silently resolved.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from pipeline.recordings.counting import StepEffect

STEP_COLUMNS = ("file_id", "line_number", "play_id", "game_id", "guid", "recorded_at", "action_id", "state",
                "levels_completed", "win_levels", "is_full_reset", "n_frames", "is_post_terminal")
# What `build_plays_levels` reads of the steps. They may come narrow (`scoring.storage.read_narrow_steps`: texts
# as categories, small integer types); every text is made a string again once aggregated (a play, level or game
# each), before it meets the plays.
READ_STEP_COLUMNS = (*STEP_COLUMNS, "step_effect", "is_counted", "is_level_change")
UNDO = 7


@dataclass(frozen=True)
class PlaysLevels:
    plays: pl.DataFrame  # out_arc3__plays
    levels: pl.DataFrame  # out_arc3__levels
    card_checks: pl.DataFrame  # out_arc3__card_checks
    games: pl.DataFrame  # game_id, n_levels (helper, not a table)


# --------------------------------------------------------------------------------------------------
# step effects
# --------------------------------------------------------------------------------------------------
def step_effects(steps: pl.DataFrame, plays: pl.DataFrame) -> pl.DataFrame:
    """`steps` sorted by file and line, with an `effect` column: the `step_effect` ingest stored."""
    del plays  # the effects were decided per recording (variant, lost ids) when the file was read
    return (steps.select(*STEP_COLUMNS, pl.col("step_effect").alias("effect"), "is_counted", "is_level_change")
            .sort("file_id", "line_number"))


# --------------------------------------------------------------------------------------------------
# games
# --------------------------------------------------------------------------------------------------
def game_levels(steps: pl.DataFrame, environments: pl.DataFrame) -> pl.DataFrame:
    """game_id -> n_levels: the engine's win_levels seen in recordings, else the latest metadata's
    baseline length, else null."""
    from_steps = (steps.filter(pl.col("win_levels") > 0).group_by("game_id")
                  .agg(pl.col("win_levels").max().alias("n_levels_steps")).with_columns(pl.col("game_id").cast(pl.String)))
    from_meta = (environments.sort("date_downloaded", nulls_last=False)
                 .group_by("game_id").agg(pl.col("baseline_actions").last())
                 .with_columns(pl.col("baseline_actions").list.len().cast(pl.Int64).alias("n_levels_meta"))
                 .filter(pl.col("n_levels_meta") > 0).select("game_id", "n_levels_meta"))
    games = pl.concat([steps.select("game_id").unique().cast(pl.String), environments.select("game_id")]).unique()
    return (games.join(from_steps, on="game_id", how="left").join(from_meta, on="game_id", how="left")
            .select("game_id", pl.coalesce("n_levels_steps", "n_levels_meta").cast(pl.Int64).alias("n_levels"))
            .sort("game_id"))


# --------------------------------------------------------------------------------------------------
# plays and levels
# --------------------------------------------------------------------------------------------------
def _annotated(effects: pl.DataFrame) -> pl.DataFrame:
    echo = pl.col("effect") == StepEffect.ECHO.value
    counted = pl.col("is_counted")
    s = effects.with_columns(
        is_echo=echo,
        is_counted=counted,
        is_reset_counted=pl.col("effect") == StepEffect.LEVEL_RESET.value,
        is_undo_counted=counted & (pl.col("action_id") == UNDO),
        lv=pl.when(~echo).then(pl.col("levels_completed")),
        terminal=pl.when(~echo & pl.col("state").is_in(["WIN", "GAME_OVER"])).then(pl.col("state")),
    )
    s = s.with_columns(lv_ff=pl.col("lv").forward_fill().over("play_id").fill_null(0),
                       is_change=pl.col("is_level_change"))
    return s.with_columns(
        level_index=(1 + pl.col("is_change").cast(pl.Int64).cum_sum().over("play_id")
                     - pl.col("is_change").cast(pl.Int64)),
        cum_actions=pl.col("is_counted").cast(pl.Int64).cum_sum().over("play_id"),
        cum_actions_no_undo=(pl.col("is_counted") & ~pl.col("is_undo_counted")).cast(pl.Int64)
        .cum_sum().over("play_id"),
    )


def build_plays_levels(steps: pl.DataFrame, plays: pl.DataFrame, card_plays: pl.DataFrame,
                       environments: pl.DataFrame) -> PlaysLevels:
    games = game_levels(steps, environments)
    s = _annotated(step_effects(steps, plays))

    # FULL_RESET effects must open the plays ingest cut; anything else means the stored split is stale.
    first_in_play = pl.col("line_number") == pl.col("line_number").min().over("play_id")
    mismatch = (s.filter((pl.col("effect") == StepEffect.FULL_RESET.value) & ~first_in_play)
                .select(pl.col("play_id").cast(pl.String)).unique())

    agg = s.group_by("play_id").agg(
        pl.col("is_counted").sum().cast(pl.Int64).alias("n_actions"),
        pl.col("is_reset_counted").sum().cast(pl.Int64).alias("n_resets"),
        pl.col("is_undo_counted").sum().cast(pl.Int64).alias("n_undo"),
        pl.col("is_echo").sum().cast(pl.Int64).alias("n_post_terminal"),
        pl.col("lv_ff").last().alias("lv_last"),
        pl.col("is_change").sum().cast(pl.Int64).alias("n_pairs"),
        pl.col("terminal").drop_nulls().last().alias("terminal"),
        pl.concat_list("lv_ff", "cum_actions").filter(pl.col("is_change")).alias("rebuilt_actions_by_level"),
        pl.concat_list("lv_ff", "cum_actions_no_undo").filter(pl.col("is_change")).alias("pairs_no_undo"),
        pl.col("recorded_at").is_null().all().alias("no_times"),
    ).with_columns(pl.col("play_id", "terminal").cast(pl.String))
    checks = card_checks(card_plays, plays, agg)
    out = (plays.join(agg, on="play_id", how="left")
           .join(games, on="game_id", how="left")
           .join(checks.select("play_id", "is_card_agreeing"), on="play_id", how="left")
           .with_columns(
               pl.col("n_actions", "n_resets", "n_undo", "n_post_terminal", "lv_last").fill_null(0),
               pl.col("rebuilt_actions_by_level").fill_null(pl.lit([], pl.List(pl.List(pl.Int64)))),
               pl.col("terminal").fill_null("NOT_FINISHED").alias("play_state"),
               pl.col("play_id").is_in(checks["play_id"].implode()).alias("has_card"),
               ((pl.col("ended_at") - pl.col("started_at")).dt.total_microseconds() / 1e6).alias("duration_s"),
           ))
    out = out.with_columns(
        pl.col("lv_last").alias("levels_completed"),
        ((pl.col("play_state") == "WIN") | (pl.col("n_levels").is_not_null()
                                            & (pl.col("lv_last") >= pl.col("n_levels")))).alias("is_fully_solved"),
        pl.col("flags").fill_null(pl.lit([], pl.List(pl.String)))
        .list.concat(pl.concat_list(
            pl.when(pl.col("is_card_agreeing") == False).then(pl.lit("card_disagrees")),  # noqa: E712
            pl.when(pl.col("play_id").is_in(mismatch["play_id"].implode())).then(pl.lit("play_split_mismatch")),
            pl.when(pl.col("started_at").is_null()).then(pl.lit("no_timestamps")),
        ).list.drop_nulls()).list.unique(maintain_order=True).alias("flags"),
    )

    levels = _levels(s, out)
    return PlaysLevels(plays=out, levels=levels, card_checks=checks, games=games)


def _levels(s: pl.DataFrame, plays: pl.DataFrame) -> pl.DataFrame:
    per = (s.group_by("play_id", "level_index").agg(
        pl.col("guid").first(), pl.col("game_id").first(),
        pl.col("is_counted").sum().cast(pl.Int64).alias("n_actions"),
        pl.col("is_reset_counted").sum().cast(pl.Int64).alias("n_resets"),
        pl.col("is_undo_counted").sum().cast(pl.Int64).alias("n_undo"),
        pl.col("recorded_at").min().alias("t_min"),
        pl.col("recorded_at").max().alias("t_max"),
    ).with_columns(pl.col("play_id", "guid", "game_id").cast(pl.String)))
    info = plays.select("play_id", "n_pairs", "is_fully_solved")
    # The level a play ended on when it stopped right after completing a level: charged nothing so far.
    tail = (info.filter(~pl.col("is_fully_solved") & pl.col("n_pairs").is_not_null())
            .with_columns((pl.col("n_pairs") + 1).alias("level_index"))
            .join(per.select("play_id", "level_index"), on=["play_id", "level_index"], how="anti")
            .join(plays.select("play_id", "guid", "game_id"), on="play_id")
            .select("play_id", "level_index", "guid", "game_id",
                    *[pl.lit(0, pl.Int64).alias(c) for c in ("n_actions", "n_resets", "n_undo")],
                    pl.lit(None, pl.Datetime("us", "UTC")).alias("t_min"),
                    pl.lit(None, pl.Datetime("us", "UTC")).alias("t_max")))
    lv = pl.concat([per, tail.select(per.columns).cast(dict(per.schema))]).join(info, on="play_id").sort("play_id", "level_index")
    # Only levels 1..n_pairs+1 exist; a solved play has no level after its last pair.
    lv = lv.filter((pl.col("level_index") <= pl.col("n_pairs"))
                   | ((pl.col("level_index") == pl.col("n_pairs") + 1) & ~pl.col("is_fully_solved"))
                   | (pl.col("n_actions") > 0))
    prev_end = pl.col("t_max").shift(1).over("play_id")
    lv = lv.with_columns(
        (pl.col("level_index") <= pl.col("n_pairs")).alias("is_level_completed"),
        pl.when(pl.col("level_index") == 1).then(pl.col("t_min")).otherwise(prev_end).alias("level_started_at"),
    ).with_columns(
        pl.coalesce("t_max", "level_started_at").alias("level_ended_at"),
    ).with_columns(
        ((pl.col("level_ended_at") - pl.col("level_started_at")).dt.total_microseconds() / 1e6)
        .alias("level_duration_s"),
    )
    return lv


# --------------------------------------------------------------------------------------------------
# card cross-check
# --------------------------------------------------------------------------------------------------
def _costs(pairs: list[list[int]] | None) -> list[int]:
    out, prev = [], 0
    for _, cum in pairs or []:
        out.append(cum - prev)
        prev = cum
    return out


def explain_card(row: dict) -> tuple[list[str], str | None]:
    """Reason codes and a sentence for a card slot that disagrees with the rebuilt counts."""
    codes: list[str] = []
    words: list[str] = []
    n, card = row["n_actions"], row["card_actions"]
    lines_pairs = [list(p) for p in row["rebuilt_actions_by_level"] or []]
    no_undo_pairs = [list(p) for p in row["pairs_no_undo"] or []]
    card_pairs = [list(p) for p in row["card_actions_by_level"] or []]
    explained_pairs = [lines_pairs]
    if row["card_levels_completed"] != row["levels_completed"]:
        codes.append("levels_differ")
        words.append(f"the card says {row['card_levels_completed']} levels completed, the lines "
                     f"{row['levels_completed']}")
    if card != n:
        if row["n_undo"] and card == row["n_actions_no_undo"]:
            codes.append("undo_not_counted_by_card")
            words.append(f"the card counts {card} actions, the lines {n}: the card did not count the "
                         f"{row['n_undo']} undo (ACTION7) actions")
            explained_pairs.append(no_undo_pairs)
        elif not row["has_leading_reset"] and abs(card - n) == 1:
            codes.append("missing_leading_reset")
            words.append(f"the card counts {card} actions, the lines {n}: the file has no leading RESET line, "
                         "so its first line is counted as an action (or its missing first action is not seen)")
            shift = card - n
            explained_pairs.append([[lvl, cum + shift] for lvl, cum in lines_pairs])
        else:
            codes.append("actions_differ")
            words.append(f"the card counts {card} actions, the lines {n} ({row['n_undo']} undo among them), "
                         "with no known explanation")
    if row["card_resets"] is not None and row["card_resets"] != row["n_resets"]:
        codes.append("resets_differ")
        words.append(f"the card counts {row['card_resets']} level resets, the lines {row['n_resets']}")
    if card_pairs not in explained_pairs and "levels_differ" not in codes:
        codes.append("level_costs_differ")
        words.append(f"per-level actions differ: card {_costs(card_pairs)}, lines {_costs(lines_pairs)}")
    return codes, ("; ".join(words) if words else None)


def card_checks(card_plays: pl.DataFrame, plays: pl.DataFrame, agg: pl.DataFrame) -> pl.DataFrame:
    """out_arc3__card_checks: every play whose recording carries its own card slot."""
    own = (card_plays.filter(pl.col("is_file_play") & pl.col("play_id").is_not_null())
           .sort("file_id", "slot_index").unique("play_id", keep="first", maintain_order=True)
           .select("play_id", "card_actions", "card_resets", pl.col("levels_completed").alias("card_levels_completed"),
                   "card_actions_by_level"))
    df = (own.join(plays.select("play_id", "file_id", "game_id", "guid", "has_leading_reset"), on="play_id")
          .join(agg.select("play_id", "n_actions", "n_resets", "n_undo", "lv_last", "rebuilt_actions_by_level",
                           "pairs_no_undo"), on="play_id", how="left")
          .with_columns(pl.col("n_actions", "n_resets", "n_undo", "lv_last").fill_null(0),
                        pl.col("card_levels_completed").fill_null(pl.col("card_actions_by_level").list.len()))
          .with_columns(pl.col("lv_last").alias("levels_completed"),
                        (pl.col("n_actions") - pl.col("n_undo")).alias("n_actions_no_undo")))
    codes, reasons = [], []
    for row in df.iter_rows(named=True):
        c, r = explain_card(row)
        codes.append(c)
        reasons.append(r)
    return df.with_columns(
        pl.Series("reason_codes", codes, dtype=pl.List(pl.String)),
        pl.Series("reason", reasons, dtype=pl.String),
    ).with_columns((pl.col("reason_codes").list.len() == 0).alias("is_card_agreeing")).sort("play_id")
