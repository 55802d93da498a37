"""Solvability (players, full solvers, inclusion bar, Wilson intervals, drop-off), the duration summaries
and the reference points with the optimal hook, on a four-player fixture with hand-derived numbers."""

from __future__ import annotations

import re

import polars as pl
import pytest

from pipeline.core.config import load_config, resolve
from pipeline.transforms.build import run_in_memory
from pipeline.transforms.reference_points import fill_optimal, load_optimal_source
from pipeline.transforms.synthetic import SyntheticStudy

GAME = "so01-000000f1"


def study() -> SyntheticStudy:
    """Four analysis attempts on a 3-level game (40 actions each): A solves it (600 s), B completes 2 levels
    (300 s), C 1 level (900 s), D 1 level (1500 s, past the soft limit); E has 20 actions (not an attempt)."""
    st = SyntheticStudy()
    l10 = "a" * 9 + "L"
    st.add_recording(GAME, "R" + l10 + l10 + "a" * 19 + "L", n_levels=3, duration_s=600)
    st.add_recording(GAME, "R" + l10 + l10 + "a" * 20, n_levels=3, duration_s=300)
    st.add_recording(GAME, "R" + l10 + "a" * 30, n_levels=3, duration_s=900)
    st.add_recording(GAME, "R" + l10 + "a" * 30, n_levels=3, duration_s=1500)
    st.add_recording(GAME, "R" + "a" * 20, n_levels=3, duration_s=60)
    return st


@pytest.fixture(scope="module")
def out() -> dict[str, pl.DataFrame]:
    return run_in_memory(study().tables(), load_config())


def test_level_completion_with_wilson_intervals(out):
    lc = out["out_arc3__level_completion"].sort("level_index")
    assert lc["n_players"].to_list() == [4, 4, 4]
    assert lc["n_completers"].to_list() == [4, 2, 1]
    assert lc["completion_rate"].to_list() == [1.0, 0.5, 0.25]
    assert lc["conditional_completion_rate"].to_list() == [1.0, 0.5, 0.5]
    assert lc["completion_drop"].to_list() == [0.0, 0.5, 0.25]
    assert lc["is_drop_off_level"].to_list() == [False, True, False]
    # Wilson 95 %: 4/4 -> [0.5101, 1]; 2/4 -> [0.1500, 0.8500]; 1/4 -> [0.0456, 0.6994]
    assert lc["completion_ci_low"].to_list() == pytest.approx([0.5101, 0.1500, 0.0456], abs=1e-4)
    assert lc["completion_ci_high"].to_list() == pytest.approx([1.0, 0.8500, 0.6994], abs=1e-4)
    assert lc["confidence_level"].unique().to_list() == [0.95]


def test_game_solvability_and_inclusion_bar(out):
    g = out["out_arc3__game_solvability"].row(0, named=True)
    assert (g["n_levels"], g["n_players"], g["n_full_solvers"], g["full_solve_rate"]) == (3, 4, 1, 0.25)
    assert (g["min_full_solvers"], g["is_included"]) == (2, False)
    assert (g["drop_off_level"], g["max_completion_drop"]) == (2, 0.5)
    one = run_in_memory(study().tables(), resolve({"solvability": {"min_full_solvers": 1}}))
    assert one["out_arc3__game_solvability"]["is_included"].to_list() == [True]


def test_duration_summaries(out):
    d = out["out_arc3__durations_summary"]
    assert d["scope_id"].unique(maintain_order=True).to_list() == ["all", GAME]
    rows = {r["outcome_group"]: r for r in d.filter(pl.col("scope_id") == "all").iter_rows(named=True)}
    assert (rows["all"]["n_attempts"], rows["all"]["median_duration_s"], rows["all"]["mean_duration_s"]) == \
        (4, 750.0, 825.0)
    assert (rows["all"]["p25_duration_s"], rows["all"]["p75_duration_s"]) == (525.0, 1050.0)
    assert (rows["successful"]["n_attempts"], rows["successful"]["median_duration_s"]) == (1, 600.0)
    assert (rows["unsuccessful"]["n_attempts"], rows["unsuccessful"]["median_duration_s"]) == (3, 900.0)
    assert (rows["unsuccessful_under_soft_limit"]["n_attempts"],
            rows["unsuccessful_under_soft_limit"]["median_duration_s"]) == (2, 600.0)
    per_game = d.filter(pl.col("scope_id") == GAME).drop("scope_id")
    assert per_game.equals(d.filter(pl.col("scope_id") == "all").drop("scope_id"))


def test_reference_points_and_the_optimal_hook(out):
    rp = out["out_arc3__level_reference_points"].sort("level_index")
    # completers' costs: level 1 all 10; level 2: 10, 10; level 3: 20 (A only)
    assert rp["best_first_run_actions"].to_list() == [10, 10, 20]
    assert rp["baseline_value"].to_list() == [10.0, 10.0, 20.0]
    assert rp["optimal_actions"].to_list() == [None, None, None]

    def explorer(game_id: str, level: int) -> int | None:
        return {1: 6, 2: 9}.get(level)

    filled = fill_optimal(rp, explorer, "explorer")
    assert filled["optimal_actions"].to_list() == [6, 9, None]
    assert filled["best_minus_optimal"].to_list() == [4, 1, None]
    assert filled["optimal_source"].to_list() == ["explorer", "explorer", None]
    table = pl.DataFrame({"game_id": [GAME], "level_index": [3], "optimal_actions": [15]})
    via_build = run_in_memory(study().tables(), load_config(), optimal_source=table)
    assert via_build["out_arc3__level_reference_points"].sort("level_index")["best_minus_optimal"].to_list() == \
        [None, None, 5]


def test_optimal_provider_and_table_loading(tmp_path):
    src, name = load_optimal_source(provider="tests.unit.test_transforms_solvability:constant_optimal")
    assert src(GAME, 1) == 3 and name == "tests.unit.test_transforms_solvability:constant_optimal"
    csv = tmp_path / "opt.csv"
    pl.DataFrame({"game_id": [GAME], "level_index": [1], "optimal_actions": [4]}).write_csv(csv)
    table, name = load_optimal_source(table=csv)
    assert table["optimal_actions"].to_list() == [4] and name == str(csv)
    with pytest.raises(ValueError, match="module:function"):
        load_optimal_source(provider="no_colon_here")


HEADER = "game_id,level_index,optimal_actions\n"


@pytest.mark.parametrize(("text", "message"), [
    ("a,b\n1,2\n", "lacks columns"),
    (HEADER + "g,one,3\n", "row 2: level_index 'one' is not a level"),
    (HEADER + "g,1,4.7\n", "row 2: optimal_actions 4.7: not a whole number of actions"),  # was taken as 4
    (HEADER + "g,1,4\ng,1,5\n", "row 3: g level 1 is given twice, as 4 and 5"),  # the first was kept
    (HEADER + "g,0,4\n", "row 2: level_index 0 is not a level"),  # was dropped
    (HEADER + "g,1,-4\n", "an optimal count is from 1 to 1,000,000,000 actions"),
    (HEADER + "g,1,\n", "not a whole number of actions"),
])
def test_a_bad_optimal_table_is_refused_when_loaded(tmp_path, text: str, message: str):
    """Its columns were once checked only mid-build: `build --optimal bad.csv` ended in a ValueError traceback;
    then a fraction was cut to a whole number, a level given twice kept its first value and a level 0 went
    unsaid."""
    csv = tmp_path / "opt.csv"
    csv.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_optimal_source(table=csv)


@pytest.mark.parametrize(("returns", "message"), [
    (float("nan"), "returned nan for g level 1: not a whole number"), ("abc", "returned 'abc'"),
    (2.5, "returned 2.5"), (10**30, "from 1 to 1,000,000,000"), (True, "returned True"),
    (KeyError("x"), "raised KeyError for g level 1"),
])
def test_an_optimal_providers_bad_value_is_said_with_its_level(returns, message):
    """A provider returning NaN or text raised from int() mid-build (a traceback); 2.5 was cut to 2; one that
    raised was a traceback."""
    from pipeline.transforms.build import BuildError

    def provider(game_id: str, level: int):
        if isinstance(returns, Exception):
            raise returns
        return returns

    points = pl.DataFrame({"game_id": ["g"], "level_index": [1], "best_first_run_actions": [5],
                           "optimal_actions": [None], "optimal_source": [None]},
                          schema_overrides={"optimal_actions": pl.Int64, "optimal_source": pl.String})
    with pytest.raises(ValueError, match=re.escape(message)):
        fill_optimal(points, provider, "prov:f")
    with pytest.raises(BuildError, match="cannot use the optimal source: optimal provider"):
        run_in_memory(study().tables(), load_config(), optimal_source=lambda game_id, level: provider("g", 1))
    assert fill_optimal(points, lambda game_id, level: 7.0, "p")["optimal_actions"].to_list() == [7]


def constant_optimal(game_id: str, level_index: int) -> int:
    return 3


def test_two_equal_drops_go_to_the_earlier_level():
    """10 players, completers 10, 7, 7, 4 on a 4-level game: levels 2 and 4 each lose 3 players. As a difference
    of rates, 1.0 - 0.7 and 0.7 - 0.4 are two floats (0.29999999999999993, 0.30000000000000004) and the later
    level was named the drop-off; the drops are the players lost over the players, equal, and ties go to the
    earliest level."""
    st = SyntheticStudy()
    game = "dr04-000000d4"
    level = "a" * 9 + "L"
    for completed, n in ((1, 3), (3, 3), (4, 4)):
        for _ in range(n):
            st.add_recording(game, "R" + level * completed + "a" * max(0, 31 - 10 * completed), n_levels=4,
                             duration_s=600)
    lc = run_in_memory(st.tables(), load_config())["out_arc3__level_completion"].sort("level_index")
    assert lc["n_completers"].to_list() == [10, 7, 7, 4]
    drops = lc["completion_drop"].to_list()
    assert drops == pytest.approx([0.0, 0.3, 0.0, 0.3]) and drops[1] == drops[3]  # equal, to the last bit
    assert lc["is_drop_off_level"].to_list() == [False, True, False, False]
