"""Human baselines under each rule, from a fixture study with known per-level costs: ties, one and two
completers, a participant who reset mid-level, human cards authoritative, eligibility, metadata and
comparison with published baselines."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.config import load_config, resolve
from pipeline.scoring.baseline_sources import read_published
from pipeline.transforms import baselines as bl
from pipeline.transforms.build import run_in_memory
from pipeline.transforms.synthetic import SyntheticStudy
from tests.fixtures.transforms.studies import BASELINE_GAME, TIE_GAME, baseline_study


def _baselines(st: SyntheticStudy, config=None) -> pl.DataFrame:
    return run_in_memory(st.tables(), config or load_config(),
                         steps=["plays_levels", "attempts", "baselines"])["out_arc3__level_baselines"]


def _values(df: pl.DataFrame, game: str, rule: str) -> list:
    return df.filter((pl.col("game_id") == game) & (pl.col("baseline_rule") == rule)).sort("level_index")[
        "baseline_value"].to_list()


@pytest.fixture(scope="module")
def base() -> pl.DataFrame:
    return _baselines(baseline_study())


def test_rules_on_known_costs(base):
    # level 1 (card costs: P1 40, P2 11 (its undo not counted by the human card), P3 25 incl. the reset, P4 18)
    #   sorted 11, 18, 25, 40: upper median = 3rd = 25; second best 18; median (18+25)/2; best 11
    # level 2: P1 10, P2 30 (two completers): upper median = 2nd = 30; second best 30; median 20; best 10
    # level 3: P1 7 only: second best undefined (too few)
    assert _values(base, BASELINE_GAME, "upper-median") == [25.0, 30.0, 7.0]
    assert _values(base, BASELINE_GAME, "second-best") == [18.0, 30.0, None]
    assert _values(base, BASELINE_GAME, "median") == [21.5, 20.0, 7.0]
    assert _values(base, BASELINE_GAME, "best") == [11.0, 10.0, 7.0]
    um = base.filter((pl.col("game_id") == BASELINE_GAME) & (pl.col("baseline_rule") == "upper-median"))
    assert um.sort("level_index")["n_completers"].to_list() == [4, 2, 1]
    assert um["n_players"].unique().to_list() == [4] and um["n_card_costs"].to_list() == [4, 2, 1]
    assert um["is_default_rule"].all()
    sb = base.filter((pl.col("game_id") == BASELINE_GAME) & (pl.col("baseline_rule") == "second-best"))
    assert sb.sort("level_index")["is_too_few_completers"].to_list() == [False, False, True]
    assert sb["min_completers"].unique().to_list() == [2]


def test_ties(base):
    # level 1 costs 7, 7, 9; nobody completed level 2
    for rule, value in (("upper-median", 7.0), ("second-best", 7.0), ("median", 7.0), ("best", 7.0)):
        assert _values(base, TIE_GAME, rule) == [value, None]


def test_lines_instead_of_cards_count_the_undo():
    lines = _baselines(baseline_study(), resolve({"baselines": {"count_source": "lines"}}))
    assert _values(lines, BASELINE_GAME, "best") == [12.0, 10.0, 7.0]  # P2's undo counted: 12
    assert lines["n_card_costs"].sum() == 0


def test_a_reset_mid_level_is_charged_to_the_level():
    out = run_in_memory(baseline_study().tables(), load_config(), steps=["plays_levels"])
    lv = out["out_arc3__levels"].filter(pl.col("guid") == "00000000-0000-4000-b000-000000000003")
    assert lv.sort("level_index").select("level_index", "n_actions", "n_resets", "is_level_completed").rows() == [
        (1, 25, 1, True), (2, 5, 0, False)]


def test_min_completers_and_eligibility():
    st = baseline_study()
    # a replay (not a first run) that would be the new best on level 1 must not count
    st.add_session("s-replay", "p-replay")
    st.add_recording(BASELINE_GAME, "R" + "aL" + "a" * 30, n_levels=3, session_id="s-replay", is_first_run=False)
    out = _baselines(st, resolve({"baselines": {"min_completers": 2}}))
    assert _values(out, BASELINE_GAME, "best") == [11.0, 10.0, None]
    assert _values(out, BASELINE_GAME, "upper-median") == [25.0, 30.0, None]
    everyone = _baselines(st, resolve({"baselines": {"first_run_only": False}}))
    assert _values(everyone, BASELINE_GAME, "best")[0] == 2.0


def test_metadata_values_and_paths(tmp_path: Path):
    gb = bl.GameBaseline("ls20-9607627b", [21.5, 123.0])
    assert gb.is_complete and gb.metadata_values() == ([22, 123], [1])
    assert not bl.GameBaseline("ls20-9607627b", [3.0, None]).is_complete
    assert bl.metadata_path(tmp_path, "ls20-9607627b") == tmp_path / "ls20" / "9607627b" / "metadata.json"
    assert bl.metadata_path(tmp_path, "ls20") == tmp_path / "ls20" / "metadata.json"
    for not_an_id in ("../x", "ls20-9607627b/../..", "/etc", "", "ls20-96076\x00"):
        with pytest.raises(ValueError, match="is not a game id"):
            bl.metadata_path(tmp_path, not_an_id)
    doc = bl.metadata_document("ls20-9607627b", [1, 2], json.dumps({"game_id": "ls20-9607627b", "title": "LS20",
                                                                     "baseline_actions": [9, 9]}))
    assert doc == {"game_id": "ls20-9607627b", "title": "LS20", "baseline_actions": [1, 2]}


def test_compare_with_the_published_csv(shared_dir: Path):
    csv = shared_dir / "reference" / "arc-agi-3-public-games.csv"
    ours = [bl.GameBaseline("ls20-9607627b", [22.0, 100.0, 73.0, 84.0, 96.0, 192.0, None]),
            bl.GameBaseline("zz99-00000000", [5.0])]
    # upper-median picks the `current` snapshot: [22, 123, 73, 84, 96, 192, 186]
    diff = bl.compare_baselines(ours, read_published(csv, "upper-median"))
    ls20 = diff.filter(pl.col("game_id") == "ls20-9607627b")
    assert ls20["status"].to_list() == ["equal", "differs", "equal", "equal", "equal", "equal", "no_baseline"]
    assert ls20["delta"].to_list()[:2] == [0.0, -23.0]
    assert ls20["published_rule"].unique().to_list() == ["upper-median"]
    assert diff.filter(pl.col("game_id") == "zz99-00000000")["status"].to_list() == ["not_published"]
    # second-best picks the pre-2026-04-14 snapshot of the same version: [21, 123, 39, 92, 54, 108, 109]
    old = read_published(csv, "second-best").filter(pl.col("game_id") == "ls20-9607627b").row(0, named=True)
    assert old["baseline_actions"] == [21, 123, 39, 92, 54, 108, 109] and old["published_rule"] == "second-best"


def test_compare_with_a_metadata_folder(tmp_path: Path):
    path = bl.metadata_path(tmp_path, "ab12-0000abcd")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"game_id": "ab12-0000abcd", "baseline_actions": [4, 8]}))
    diff = bl.compare_baselines([bl.GameBaseline("ab12-0000abcd", [4.0])], read_published(tmp_path, "best"))
    assert diff["status"].to_list() == ["equal", "only_published"]
