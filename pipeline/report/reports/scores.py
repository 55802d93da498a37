"""The scores report: what `arcstudy score` wrote, for people.

Per scorecard (card_id) under the chosen policy: the total (mean of game scores, as the scorecard reports it)
and the per-game scores with the baseline each game was scored against and where it came from; the per-level
heatmap of each game's best run; how run scores move between policies (policy sensitivity); the replay
verification status of every run (a divergent or unreplayable run is left out of the score, and the report
says so); and, when runs carry cost metadata (LLM usage lines in core_arc3__usage), score against tokens.

Reads out_arc3__replay_checks, out_arc3__run_scores, out_arc3__level_scores, out_arc3__game_scores,
out_arc3__policy_sensitivity, core_arc3__plays and core_arc3__usage; any of them may be missing or empty (the
report then says which command fills it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.figures import alt, save_figure
from pipeline.report.html import Callout, Facts, Figure, Prose, Section, Table

from .common import (
    ReportContext,
    ReportInputError,
    clear_previous,
    publish_report,
    report_manifest,
)

__all__ = ["card_file_names", "card_labels", "choose_policy", "recording_stem", "run_costs", "write_scores_report"]


LABELS = {  # RHAE scores are percentages; changes between policies are percentage points
    "scorecard": "scorecard", "card_id": "scorecard ID", "policy_id": "policy", "score": "score (%)",
    "total_score": "total score (%)", "level_score": "level score (%)", "from_policy_id": "from policy",
    "to_policy_id": "to policy", "from_score": "score before (%)", "to_score": "score after (%)",
    "score_delta": "change (points)", "mean_delta": "mean change (points)", "min_delta": "smallest change (points)",
    "max_delta": "largest change (points)", "n_changed": "runs whose score changed", "actions": "actions",
    "baseline_actions": "baseline (actions)", "level_baseline": "level baseline (actions)",
    "level_budget": "level budget (actions)", "n_tokens": "LLM tokens",
}


def _policy_order() -> dict[str, int]:
    from pipeline.scoring.policies import POLICIES

    return {pid: i for i, pid in enumerate(POLICIES)}


def choose_policy(requested: str | None, scored: list[str]) -> str:
    """The requested policy (known, and scored in the database when anything is), else the default policy when
    it was scored, else the latest scored policy."""
    from pipeline.scoring.policies import DEFAULT_POLICY_ID, POLICIES

    if requested is not None:
        if requested not in POLICIES:
            raise ReportInputError(f"unknown scoring policy {requested!r}; known: {', '.join(POLICIES)}")
        if scored and requested not in scored:
            raise ReportInputError(f"policy {requested} was not scored in this database (scored: "
                                   f"{', '.join(scored)}); run arcstudy score --policy {requested} first")
        return requested
    if not scored or DEFAULT_POLICY_ID in scored:
        return DEFAULT_POLICY_ID
    order = _policy_order()
    return max(scored, key=lambda p: (order.get(p, -1), p))


def run_costs(ctx: ReportContext) -> pl.DataFrame:
    """LLM usage per play: each usage line is charged to the play of the same file that started last before it
    (an ASOF join on line numbers); lines before a file's first play (the call that chose its first action) go to
    that first play. n_tokens = the sum of per-call tokens, else the largest running total."""
    schema = {"play_id": pl.String, "n_llm_calls": pl.Int64, "n_tokens": pl.Int64}
    if not (ctx.has_rows("core_arc3__usage") and ctx.has_rows("core_arc3__plays")):
        return pl.DataFrame(schema=schema)
    df = ctx.query("core_arc3__usage per play (ASOF join on core_arc3__plays)", """
        WITH p AS (
            SELECT play_id, file_id, CASE WHEN first_line_number = min(first_line_number) OVER (PARTITION BY file_id)
                                          THEN 0 ELSE first_line_number END AS from_line
            FROM core_arc3__plays)
        SELECT p.play_id, count(*)::BIGINT AS n_llm_calls,
               coalesce(sum(u.n_tokens), max(u.n_total_tokens))::BIGINT AS n_tokens
        FROM core_arc3__usage u
        ASOF JOIN p ON u.file_id = p.file_id AND u.line_number >= p.from_line
        GROUP BY p.play_id ORDER BY p.play_id""")
    return df.cast(schema)  # type: ignore[arg-type]


def card_labels(ctx: ReportContext, cards: list[str]) -> dict[str, str]:
    """A readable name per scorecard, from the run manifest of the `arcstudy score` that wrote it: the recording
    files or folders it was given (e.g. an agent's folder), else `database plays` (with its --game filter)."""
    labels: dict[str, str] = {}
    if ctx.ws.has_table("runs"):
        rows = ctx.ws.read("SELECT manifest_json FROM runs WHERE manifest_json LIKE '%\"card_id\"%' "
                           "ORDER BY started_at, run_id")
        for text in rows["manifest_json"].to_list():
            data = json.loads(text)
            card = (data.get("notes") or {}).get("card_id")
            config = data.get("config") or {}
            if card in cards:
                given = [recording_stem(r) for r in config.get("recordings") or []]
                games = config.get("game") or []
                labels[card] = ", ".join(given) if given else "database plays" + (
                    f" ({', '.join(games)})" if games else "")
    out, seen = {}, {}
    for card in cards:
        label = labels.get(card, card)
        seen[label] = seen.get(label, 0) + 1
        out[card] = label if seen[label] == 1 else f"{label} ({card})"
    return out


RECORDING_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")


def recording_stem(path: str) -> str:
    """An agent's folder name, or a recording file's name without its extensions (`run1.noframes.jsonl` ->
    `run1`)."""
    name = Path(path).name
    if name.endswith(RECORDING_SUFFIXES):
        return name.split(".", 1)[0] or name
    return name


def card_file_names(labels: dict[str, str]) -> dict[str, str]:
    """A file-name-safe slug per scorecard, from its readable label (so figures are named after the agent or
    run, not the scorecard's hash); cards that share a label are told apart by -2, -3, ... in card order."""
    from pipeline.report.html import slugify

    names: dict[str, str] = {}
    used: set[str] = set()
    for card in sorted(labels):
        base = slugify(labels[card].removesuffix(f" ({card})")) if labels[card] != card else slugify(card)
        name, n = base, 2
        while name in used:
            name, n = f"{base}-{n}", n + 1
        used.add(name)
        names[card] = name
    return names


def cost_chart(df: pl.DataFrame, policy_id: str):
    data = df.filter(pl.col("n_tokens").is_not_null() & (pl.col("n_tokens") > 0))
    if data.height == 0:
        return None
    return alt.Chart(data).mark_circle(size=80, opacity=0.8).encode(
        x=alt.X("n_tokens:Q", title="LLM tokens used by the run (log scale)", scale=alt.Scale(type="log")),
        y=alt.Y("score:Q", title=f"run score (%, {policy_id})", scale=alt.Scale(domain=[0, 100])),
        color=alt.Color("scorecard:N", title="scorecard"), shape=alt.Shape("game_id:N", title="game"),
        tooltip=["scorecard:N", "play_id:N", "game_id:N", alt.Tooltip("score:Q", format=".2f"), "n_tokens:Q",
                 "n_llm_calls:Q"],
    ).properties(width=420, height=300, title="Score against cost")


def write_scores_report(ctx: ReportContext, out_dir: Path, *, policy: str | None = None,
                        command: str = "arcstudy report scores", competition_games: tuple[Path, ...] | None = None,
                        compare_with: tuple[str, dict] | None = None) -> Path:
    """Write <out_dir>/scores.html, its tables as <out_dir>/scores__<table>.csv and .parquet, its figures
    under <out_dir>/figures/scores/ and its run manifest <out_dir>/scores.manifest.json."""
    from pipeline.scoring.figures import heatmap_chart, sensitivity_chart
    from pipeline.scoring.run import policy_slug

    out_dir.mkdir(parents=True, exist_ok=True)
    clear_previous(out_dir, "scores")
    checks = ctx.table("out_arc3__replay_checks")
    runs = ctx.table("out_arc3__run_scores")
    levels = ctx.table("out_arc3__level_scores")
    games = ctx.table("out_arc3__game_scores")
    sens = ctx.table("out_arc3__policy_sensitivity")
    order = _policy_order()
    scored = sorted(set(games["policy_id"].to_list()) | set(runs["policy_id"].to_list()),
                    key=lambda p: (order.get(p, len(order)), p))
    chosen = choose_policy(policy, scored)
    if competition_games is not None:
        from pipeline.scoring.policies import get_policy

        if get_policy(chosen).unplayed_games != "excluded-except-competition-mode-zero":
            raise ReportInputError(f"--competition: policy {chosen} defines no competition mode (choose --policy "
                                   "arc-agi-3/2026-04)")
    cards = sorted(set(games["card_id"].to_list()) | set(checks["card_id"].to_list()))
    labels = card_labels(ctx, cards)
    file_names = card_file_names(labels)
    label = pl.col("card_id").replace_strict(labels, default=pl.col("card_id"), return_dtype=pl.String).alias(
        "scorecard")
    sections: list[Section] = [Prose("What this report shows", (
        f"Agent (and any other) runs scored with RHAE under versioned policies; the chosen policy is {chosen}"
        + (f" (also scored: {', '.join(p for p in scored if p != chosen)})" if len(scored) > 1 else "") + ". "
        "Every run is replayed through our engine before it is scored: a run whose replay diverges is reported "
        "and left out of its scorecard.\n\n"
        f"Read from the tables of arcstudy score in {ctx.db_path.name}: {len(cards)} scorecard(s)."))]
    figures: dict[str, dict[str, Path]] = {}
    fig_dir = out_dir / "figures" / "scores"
    if not cards:
        sections.append(Callout("No scores", [
            f"{ctx.db_path} has no scored runs (out_arc3__game_scores and out_arc3__replay_checks are empty or "
            "missing): run arcstudy score on agent recordings, or on the plays in the database."], kind="warning"))
        return _finish(ctx, out_dir, sections, figures, command, chosen, scored, {"agents scored": 0})

    g = games.filter(pl.col("policy_id") == chosen)
    totals = (games.group_by("card_id", "policy_id")
              .agg(pl.len().alias("n_games"), pl.col("score").mean().alias("total_score"),
                   pl.col("n_runs").sum().alias("n_runs"), pl.col("is_completed").sum().alias("n_games_completed"))
              .with_columns(pl.col("policy_id").replace_strict(order, default=len(order)).alias("_o"))
              .sort("card_id", "_o").drop("_o")
              .select(label, pl.all()))
    facts: dict[str, Any] = {"policy": chosen, "scorecards": len(cards), "games scored": g["game_id"].n_unique(),
                             "runs scored": runs.filter(pl.col("policy_id") == chosen).height}
    for r in totals.filter(pl.col("policy_id") == chosen).iter_rows(named=True):
        facts[f"total score, {r['scorecard']}"] = f"{r['total_score']:.2f} % over {r['n_games']} game(s)"
    status_counts = checks.group_by("verification_status").len().sort("verification_status")
    facts["replay verification"] = ", ".join(f"{n} {s}" for s, n in status_counts.iter_rows()) or "no checks"
    sections.append(Facts("Scores at a glance", facts))
    chosen_totals = totals.filter((pl.col("policy_id") == chosen) & pl.col("total_score").is_not_null())
    best = chosen_totals["total_score"].max() if chosen_totals.height else None
    leaders = chosen_totals.filter(pl.col("total_score") == best)["scorecard"].to_list() if best is not None else []
    n_verified = checks.filter(pl.col("verification_status") == "verified").height
    headline = {"agents scored": len(cards), "policy": chosen,
                "best score": f"{best:.1f} % ({', '.join(leaders)})" if best is not None else None,
                "runs verified": f"{n_verified} of {checks.height}"}

    excluded = checks.filter(pl.col("is_score_excluded"))
    problems = checks.filter(pl.col("verification_status") != "verified")
    if problems.height:
        sections.append(Callout("Runs that did not verify", [
            f"{r['game_id']} play {r['play_id']}: {r['verification_status']}"
            + (f", left out of the score ({r['exclusion_reason']})" if r["is_score_excluded"] else ", scored")
            + (f": {r['replay_detail']}" if r["replay_detail"] else "")
            for r in problems.head(20).iter_rows(named=True)]
            + ([f"... and {problems.height - 20} more (table below)"] if problems.height > 20 else []),
            kind="error" if excluded.height else "warning"))

    sections.append(Table("Total per scorecard and policy", totals, name="scores__totals",
                          caption="Total = mean of the game scores (each game's score is its best run's)."))
    sections.append(Table(f"Scores per game ({chosen})", g.select(
        label, "card_id", "game_id", "score", "n_runs", "best_play_id", "levels_completed", "level_count", "is_completed",
        "actions", "resets", "baseline_actions", "baseline_source", "baseline_rule", "message"),
        name="scores__game_scores", caption="The baseline each game was scored against, and which source gave it."))

    if competition_games is not None:
        sections += _competition_sections(g, labels, competition_games, chosen)
    if compare_with is not None:
        sections += _comparison_sections(ctx, compare_with, cards, labels, chosen)

    # -- heatmaps ------------------------------------------------------------------------------------
    for card in cards:
        chart = heatmap_chart(levels.filter(pl.col("card_id") == card), games.filter(pl.col("card_id") == card),
                              chosen)
        if chart is None:
            continue
        name = f"level_scores_heatmap__{policy_slug(chosen)}" + (f"__{file_names[card]}" if len(cards) > 1 else "")
        figures[name] = save_figure(chart, fig_dir, name)
        sections.append(Figure(f"Level scores: {labels[card]}" if len(cards) > 1 else "Level scores",
                               figures[name], caption="Each game's best run, one cell per level: level score in "
                                                      f"percent under {chosen}."))
    sections.append(Table(f"Level scores ({chosen})", levels.filter(pl.col("policy_id") == chosen),
                          name="scores__level_scores", max_rows=40))

    # -- policy sensitivity --------------------------------------------------------------------------
    if len(scored) > 1:
        for card in cards:
            chart = sensitivity_chart(runs.filter(pl.col("card_id") == card))
            if chart is None:
                continue
            name = "policy_sensitivity" + (f"__{file_names[card]}" if len(cards) > 1 else "")
            figures[name] = save_figure(chart, fig_dir, name)
            sections.append(Figure(f"Policy sensitivity: {labels[card]}" if len(cards) > 1 else "Policy sensitivity",
                                   figures[name], caption="Each run's score under every policy scored."))
        summary = (sens.group_by("card_id", "from_policy_id", "to_policy_id")
                   .agg(pl.len().alias("n_runs"), (pl.col("score_delta").abs() > 1e-9).sum().alias("n_changed"),
                        pl.col("score_delta").mean().alias("mean_delta"),
                        pl.col("score_delta").min().alias("min_delta"),
                        pl.col("score_delta").max().alias("max_delta"))
                   .sort("card_id", "from_policy_id", "to_policy_id").select(label, pl.all()))
        sections.append(Table("Policy sensitivity summary", summary, name="scores__policy_sensitivity_summary",
                              caption="How run scores move from one policy to another (percentage points)."))
        sections.append(Table("Policy sensitivity per run", sens, name="scores__policy_sensitivity", max_rows=50))
    else:
        sections.append(Prose("Policy sensitivity", f"Only {chosen} was scored: run arcstudy score --policy all "
                                                    "to see how the scores move between policies."))

    # -- baseline sensitivity ------------------------------------------------------------------------
    sections += _baseline_range_sections(levels, g, ctx.table("out_arc3__baseline_intervals"), chosen, label)

    # -- replay verification -------------------------------------------------------------------------
    sections.append(Table("Replay verification of every run", checks.select(
        label, "card_id", "game_id", "play_id", "verification_status", "is_score_excluded", "exclusion_reason",
        "replay_input", "n_steps_replayed", "divergence_step_index", "divergence_field", "replay_detail",
        "game_source_sha256"), name="scores__replay_checks",
        caption="verified: replayed through the engine and equal at every step; divergent: the first divergence "
                "is given; unverified: the game could not be loaded; not_replayable: the actions are unknown."))

    # -- cost ----------------------------------------------------------------------------------------
    costs = run_costs(ctx)
    scored_costs = (runs.filter(pl.col("policy_id") == chosen)
                    .select(label, "card_id", "play_id", "game_id", "score", "levels_completed", "actions", "state")
                    .join(costs, on="play_id", how="inner").sort("card_id", "game_id", "play_id"))
    if scored_costs.height:
        chart = cost_chart(scored_costs, chosen)
        if chart is not None:
            figures["score_vs_cost"] = save_figure(chart, fig_dir, "score_vs_cost")
            sections.append(Figure("Score against cost", figures["score_vs_cost"],
                                   caption="One point per run with LLM usage metadata (core_arc3__usage)."))
        sections.append(Table("Score and cost per run", scored_costs, name="scores__score_vs_cost"))
    else:
        sections.append(Prose("Score against cost", "No scored run carries cost metadata (no LLM usage lines in "
                                                    "core_arc3__usage for the scored plays), so there is no "
                                                    "score-versus-cost chart."))
    return _finish(ctx, out_dir, sections, figures, command, chosen, scored, headline)


def baseline_ranges(levels: pl.DataFrame, games: pl.DataFrame, intervals: pl.DataFrame, policy: str
                    ) -> pl.DataFrame:
    """Per scorecard and game (under `policy`): the game score, and the scores with every level baseline at the
    lower and at the upper end of its interval (out_arc3__baseline_intervals, under the rule the game was scored
    with). Only games scored against the study's own human baselines (baseline_source db-level-baselines) have
    intervals; the others keep their score at both ends."""
    from pipeline.scoring.baseline_intervals import score_range

    bounds: dict[tuple[str, str, int], tuple[float, float]] = {
        (g, r, lvl): (lo, hi) for g, r, lvl, lo, hi in intervals.select(
            "game_id", "baseline_rule", "level_index", "interval_lower", "interval_upper").iter_rows()}
    lv = levels.filter(pl.col("policy_id") == policy).sort("card_id", "play_id", "level_index")
    runs = {key: sub for key, sub in lv.group_by("card_id", "game_id", "play_id", maintain_order=True)}
    rows = []
    for r in games.iter_rows(named=True):
        own = r["baseline_source"] == "db-level-baselines" and r["baseline_rule"] is not None
        low = high = r["score"]
        n_levels = 0
        if own and r["score"] is not None:
            low_scores, high_scores = [], []
            for (card, game, _play), sub in runs.items():
                if card != r["card_id"] or game != r["game_id"]:
                    continue
                keys = [(game, r["baseline_rule"], lvl) for lvl in sub["level_index"].to_list()]
                lo = [bounds.get(k, (None, None))[0] for k in keys]
                hi = [bounds.get(k, (None, None))[1] for k in keys]
                n_levels = sum(x is not None for x in lo)
                a, b = score_range(sub["n_actions"].to_list(), int(sub["is_level_completed"].sum()),
                                   [float(x) for x in sub["level_baseline"].to_list()], lo, hi, policy)
                low_scores.append(a)
                high_scores.append(b)
            if low_scores:  # the game's score is its best run's, at each end too
                low, high = max(low_scores), max(high_scores)
        rows.append({"card_id": r["card_id"], "game_id": r["game_id"], "score": r["score"], "score_low": low,
                     "score_high": high, "baseline_source": r["baseline_source"],
                     "baseline_rule": r["baseline_rule"], "n_levels_with_interval": n_levels})
    return pl.DataFrame(rows, schema={"card_id": pl.String, "game_id": pl.String, "score": pl.Float64,
                                      "score_low": pl.Float64, "score_high": pl.Float64,
                                      "baseline_source": pl.String, "baseline_rule": pl.String,
                                      "n_levels_with_interval": pl.Int64})


def _baseline_range_sections(levels: pl.DataFrame, games: pl.DataFrame, intervals: pl.DataFrame, policy: str,
                             label: pl.Expr) -> list[Section]:
    title = "Baseline sensitivity: RHAE within the baseline intervals"
    if intervals.height == 0 or games.height == 0:
        return [Prose(title, "No baseline intervals in the database (out_arc3__baseline_intervals is empty): "
                             "run arcstudy build on a study with human evidence to see how far each agent's "
                             "RHAE depends on how sure the baselines are.")]
    per_game = baseline_ranges(levels, games, intervals, policy)
    totals = (per_game.group_by("card_id").agg(
        pl.len().alias("n_games"), pl.col("score").mean().alias("total_score"),
        pl.col("score_low").mean().alias("total_score_low"), pl.col("score_high").mean().alias("total_score_high"),
        (pl.col("n_levels_with_interval") > 0).sum().alias("n_games_with_intervals"))
        .sort("card_id").select(label, pl.all()))
    confidence = intervals["confidence_level"][0]
    return [
        Prose(title, "Each level baseline is an order statistic of a few testers' counts; its distribution-free "
                     f"{confidence:.0%} interval (out_arc3__baseline_intervals) gives a range of baselines. Each "
                     f"agent's RHAE under {policy}, rescored with every baseline at the lower end of its interval "
                     "and at the upper end, beside the policy sensitivity above: a wide range says the "
                     "baselines, not the agent, decide the score."),
        Table("RHAE range per agent", totals, name="scores__baseline_sensitivity_totals",
              caption="Total = mean of the game scores; low and high with every baseline at its interval's "
                      "lower or upper end."),
        Table("RHAE range per game", per_game.select(label, pl.all()), name="scores__baseline_sensitivity",
              caption="Only games scored against this study's own human baselines (db-level-baselines) have "
                      "intervals; the others keep their score at both ends."),
    ]


def _competition_sections(games: pl.DataFrame, labels: dict[str, str], dirs: tuple[Path, ...], chosen: str
                          ) -> list[Section]:
    """Each scorecard's total under the competition rule: every environment of the --games folders in the mean."""
    from engine.loader import find_games
    from pipeline.scoring.compare import competition_view

    env_set = sorted({info.game_id for info in find_games(list(dirs))})
    rows = []
    for card in sorted(set(games["card_id"].to_list())):
        view = competition_view(dict(games.filter(pl.col("card_id") == card).select("game_id", "score").iter_rows()),
                                env_set)
        rows.append({"scorecard": labels.get(card, card), "card_id": card, "n_environments": view["n_environments"],
                     "n_played": view["n_played"], "n_unplayed": len(view["unplayed"]),
                     "local_total": view["local_total"], "competition_total": view["competition_total"],
                     "played_outside_set": ", ".join(view["outside_set"])})
    table = pl.DataFrame(rows, schema={"scorecard": pl.String, "card_id": pl.String, "n_environments": pl.Int64,
                                       "n_played": pl.Int64, "n_unplayed": pl.Int64, "local_total": pl.Float64,
                                       "competition_total": pl.Float64, "played_outside_set": pl.String})
    return [Prose("Competition mode", (
        f"Competition mode ({chosen}) scores against every environment of the set ({len(env_set)} under "
        f"{', '.join(str(d) for d in dirs)}), an unplayed one scoring 0; a game played outside the set is not in "
        "the competition mean. The local total averages over the played games only. The competition's counting "
        "rules (game resets count as level resets, one make per environment) need the plays: "
        "`arcstudy score --competition --games ...` applies them.")),
        Table("Totals: local against competition mode", table, name="scores__competition",
              caption="competition_total = sum of the scores of the set's environments / environments in the set.")]


def _scorecard_from_tables(ctx: ReportContext, card: str, chosen: str) -> dict[str, Any]:
    """The scored summary of one stored scorecard under ``chosen``, rebuilt from the out tables (for the
    comparison: environments, best-run level scores, actions and baselines, and the plays left out)."""
    games = ctx.table("out_arc3__game_scores").filter((pl.col("card_id") == card) & (pl.col("policy_id") == chosen))
    runs = ctx.table("out_arc3__run_scores").filter((pl.col("card_id") == card) & (pl.col("policy_id") == chosen))
    levels = ctx.table("out_arc3__level_scores").filter((pl.col("card_id") == card)
                                                        & (pl.col("policy_id") == chosen))
    checks = ctx.table("out_arc3__replay_checks").filter(pl.col("card_id") == card)
    envs = []
    for gr in games.sort("game_id").iter_rows(named=True):
        env_runs = []
        for rr in runs.filter(pl.col("game_id") == gr["game_id"]).sort("run_index").iter_rows(named=True):
            lv = levels.filter(pl.col("play_id") == rr["play_id"]).sort("level_index")
            env_runs.append({"score": rr["score"], "actions": rr["actions"], "level_scores": lv["level_score"].to_list(),
                             "level_actions": lv["n_actions"].to_list(),
                             "level_baseline_actions": lv["level_baseline"].to_list()})
        envs.append({"id": gr["game_id"], "score": gr["score"], "runs": env_runs})
    score = sum(e["score"] for e in envs) / len(envs) if envs else 0.0
    return {"score": score, "environments": envs, "scoring_policy": chosen,
            "verification": {"replay_checks": [
                {"game_id": c["game_id"], "excluded": c["is_score_excluded"], "exclusion_reason": c["exclusion_reason"]}
                for c in checks.iter_rows(named=True)]}}


def _comparison_sections(ctx: ReportContext, compare_with: tuple[str, dict], cards: list[str],
                         labels: dict[str, str], chosen: str) -> list[Section]:
    """Per stored scorecard: why its total differs from the card given (pipeline.scoring.compare)."""
    from pipeline.scoring.compare import compare_scorecards

    name, other = compare_with
    sections: list[Section] = []
    for card in cards:
        cmp = compare_scorecards(other, _scorecard_from_tables(ctx, card, chosen), other_label=name)
        steps = pl.DataFrame([{"cause": s["cause"], "contribution_points": s["contribution"],
                               "n_environments": len(s["environments"]), "detail": s["detail"]} for s in cmp.steps],
                             schema={"cause": pl.String, "contribution_points": pl.Float64,
                                     "n_environments": pl.Int64, "detail": pl.String})
        rows = pl.DataFrame(cmp.rows, schema={"game_id": pl.String, "level_index": pl.Int64, "there": pl.Float64,
                                              "here": pl.Float64, "cause": pl.String})
        title = f"Why {labels.get(card, card)} differs from {name}"
        slug = f"__{card}" if len(cards) > 1 else ""
        sections += [Prose(title, cmp.verdict()),
                     Table(f"{title}: causes", steps, name=f"scores__compare_causes{slug}",
                           caption="The contributions add up to the difference of the totals (percentage points)."),
                     Table(f"{title}: per environment and level", rows, name=f"scores__compare_levels{slug}",
                           max_rows=60)]
    return sections


def _finish(ctx: ReportContext, out_dir: Path, sections: list[Section], figures: dict[str, dict[str, Path]],
            command: str, chosen: str, scored: list[str], headline: dict[str, Any]) -> Path:
    manifest = report_manifest(ctx, report="scores", command=command, headline=headline,
                               config={"out": str(out_dir), "policy": chosen, "policies_in_db": scored},
                               policy_ids=[chosen, *(p for p in scored if p != chosen)])
    return publish_report(manifest, "Scores report", sections, LABELS, figures, out_dir / "scores.html",
                          subtitle=f"RHAE scores under {chosen}, replay-verified")
