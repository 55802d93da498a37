"""The calibration report's explorer settles what `arcstudy explore` settles, and a level its budget leaves
undetermined is listed as such: never summarised as "none", always in the designer's list (issue 29: pv63 levels
2 and 4-6 read "undetermined within the budget" while `arcstudy explore pv63 --level 2` completes in 3 s)."""

from __future__ import annotations

import inspect
import json

import polars as pl

from games import GAMES_DIR
from pipeline.report.reports.calibration import (
    EXPLORE_MAX_NODES,
    UNDETERMINED,
    ExploreOptions,
    designer_list,
    explore_levels,
    random_win_facts,
)

PV63 = "pv63-003f92f7"


def test_the_report_s_node_budget_is_the_explorer_s():
    from pipeline.commands.explore import explore_command
    from pipeline.commands.report import report_command
    from pipeline.explore import DEFAULT_MAX_NODES

    explore_default = inspect.signature(explore_command).parameters["max_nodes"].default
    report_default = inspect.signature(report_command).parameters["explore_nodes"].default
    assert EXPLORE_MAX_NODES == DEFAULT_MAX_NODES == explore_default == report_default
    # every level of the shipped games fits in it (the publisher's explorer facts, solutions/levels.json)
    largest = max(level["nodes"] for f in GAMES_DIR.glob("*/*/solutions/levels.json")
                  for level in json.loads(f.read_text())["levels"])
    assert largest < EXPLORE_MAX_NODES


def test_pv63_level_2_is_settled_with_the_report_s_defaults():
    explored, notes = explore_levels({PV63: 2}, ExploreOptions(games_dirs=(GAMES_DIR,)))
    published = json.loads(next(GAMES_DIR.glob("pv63/*/solutions/levels.json")).read_text())["levels"][1]
    row = explored.filter(pl.col("level_index") == 2).row(0, named=True)
    assert row["is_complete"] and row["verdict"] == "passes", (row, notes)
    assert (row["n_nodes"], row["optimal_actions"]) == (published["nodes"], published["optimal_actions"])
    assert not [n for n in notes if "undetermined" in n]


def test_an_undetermined_level_is_listed_never_summarised_as_none():
    explored, notes = explore_levels({PV63: 2}, ExploreOptions(games_dirs=(GAMES_DIR,), max_nodes=50))
    assert explored.filter(pl.col("level_index") == 2)["verdict"][0] == UNDETERMINED
    assert any("pv63-003f92f7 level 2: undetermined" in n and "arcstudy explore pv63 --level 2" in n
               and "--explore-nodes" in n for n in notes), notes

    facts = random_win_facts(explored)
    assert facts["levels a random policy wins"] != "none"
    assert facts["levels undetermined within the explorer budget"] == "2"
    settled = explored.filter(pl.col("verdict") != UNDETERMINED)
    assert random_win_facts(settled) == {"levels a random policy wins": "none"}

    empty = pl.DataFrame(schema={"game_id": pl.String, "level_index": pl.Int64})
    points = pl.DataFrame(schema={"game_id": pl.String, "level_index": pl.Int64, "baseline_value": pl.Float64})
    comparison = pl.DataFrame(schema={"game_id": pl.String, "level_index": pl.Int64, "relative_change": pl.Float64})
    completion = empty.with_columns(pl.lit(0, pl.Int64).alias("n_players"),
                                    pl.lit(0.0).alias("conditional_completion_rate"))
    items = designer_list(completion, points, explored, comparison)
    assert [i for i in items if i.startswith("pv63-003f92f7 level 2: random-policy win probability undetermined")]
