"""One rule for baseline values (pipeline/ingest/baseline_rule.py), asked by every reader of them.

formats.md B (metadata validator): "reject: `baseline_actions` present but not a list of positive integers (0 or
negatives produce silent zero level scores in the toolkit)". Before, ingest refused a metadata.json holding a 0
while `score --baselines DIR` (and `--games`, and a baselines CSV) scored with it: the level's score was 0
without a word (spec/scoring.md: s_l = 100 * min(1, b_l / a_l), so b_l = 0 gives 0 for any play).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.ingest.baseline_counts import read_counts
from pipeline.ingest.runner import prepare_file
from pipeline.scoring.baseline_sources import (
    BaselineSourceError,
    resolve_baselines,
    source_from_games_dirs,
    source_from_path,
)
from pipeline.scoring.policies import get_policy

runner = CliRunner()
GAME = "zb01-00000001"
P2604 = get_policy("arc-agi-3/2026-04")


def _metadata(root: Path, baseline) -> Path:
    folder = root / "zb01" / "00000001"
    folder.mkdir(parents=True)
    (folder / "metadata.json").write_text(json.dumps({"game_id": GAME, "baseline_actions": baseline}))
    return root


@pytest.mark.parametrize(("baseline", "words"), [
    ([10, 0, 10], "0 or negatives produce silent zero level scores"),
    ([10, -2, 10], "0 or negatives produce silent zero level scores"),
    # ingest always wanted JSON integers in a metadata.json; --baselines DIR read 10.0 as 10
    ([10, 10.0, 10], "is not an integer"),
])
def test_ingest_and_every_score_source_refuse_the_same_metadata_baseline(tmp_path, baseline, words):
    meta = _metadata(tmp_path / "meta", baseline)
    path = meta / "zb01" / "00000001" / "metadata.json"
    prepared = prepare_file(path, run_id="test")  # ingest's reader
    assert prepared.failure is not None and words in prepared.failure[2], prepared.failure
    with pytest.raises(BaselineSourceError, match=f"{path}: .*{words}"):  # score --baselines DIR
        source_from_path(meta)
    with pytest.raises(BaselineSourceError, match=f"{path}: .*{words}"):
        games = source_from_games_dirs([meta])  # score --games DIR (metadata baselines)
        assert games is not None
        resolve_baselines([GAME], P2604, [games])


def test_a_positive_metadata_baseline_is_accepted_by_both(tmp_path):
    meta = _metadata(tmp_path / "meta", [10, 1, 10])
    assert prepare_file(meta / "zb01" / "00000001" / "metadata.json", run_id="test").failure is None
    got = resolve_baselines([GAME], P2604, [source_from_path(meta)])[GAME]
    assert got.baseline_actions == (10, 1, 10)


@pytest.mark.parametrize("text", [
    f'game_id,baseline_actions\n{GAME},"[10, 0, 10]"\n',  # the published (wide) shape
    f"game_id,level_index,baseline_value\n{GAME},1,10.0\n{GAME},2,0.0\n{GAME},3,10.0\n",  # `baselines --out`
])
def test_a_baselines_csv_with_a_zero_is_refused_naming_its_row(tmp_path, text):
    csv = tmp_path / "b.csv"
    csv.write_text(text)
    with pytest.raises(BaselineSourceError, match=r"(row 2 \(zb01-00000001\)|row 3 \(zb01-00000001 level 2\)): "
                                                  r"baseline value '?0(\.0)?'? .*0 or negatives"):
        resolve_baselines([GAME], P2604, [source_from_path(csv)])


def test_score_with_a_zero_baseline_folder_says_why_and_with_a_positive_one_scores(tmp_path):
    """The sweep's card: one run completing 3 levels in 10 actions each (cumulative 10, 20, 30)."""
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"won": 1, "played": 1, "total_actions": 30, "levels_completed": 3, "cards": {GAME: {
        "game_id": GAME, "total_plays": 1, "guids": ["abababab-0000-4000-8000-000000000001"],
        "levels_completed": [3], "states": ["WIN"], "actions": [30], "resets": [0], "total_actions": 30,
        "actions_by_level": [[[1, 10], [2, 20], [3, 30]]]}}}))
    zero = _metadata(tmp_path / "zero", [10, 0, 10])
    result = runner.invoke(app, ["--plain", "score", str(card), "--baselines", str(zero), "--games", str(tmp_path),
                                 "--out", str(tmp_path / "out0")])
    assert result.exit_code == 2, result.output  # the baselines given cannot be used: nothing scored with them
    assert "0 or negatives produce silent zero level scores" in result.output
    assert not (tmp_path / "out0").exists()

    good = _metadata(tmp_path / "good", [10, 5, 10])
    result = runner.invoke(app, ["--plain", "score", str(card), "--baselines", str(good), "--games", str(tmp_path),
                                 "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "out" / "scorecard__arc-agi-3_2026-04.json").read_text())
    # By hand under 2026-04: level scores min(1.15, (b/a)^2): (10/10)^2 = 1, (5/10)^2 = 0.25, (10/10)^2 = 1 (x100);
    # level-index weights (1*100 + 2*25 + 3*100) / 6 = 75; every level completed, so the game cap is 100 %.
    (env,) = doc["environments"]
    assert abs(env["score"] - 75.0) < 1e-9


@pytest.mark.parametrize("cumulative", [False, True])
def test_a_counts_file_level_costing_zero_actions_is_rejected_by_the_same_rule(tmp_path, cumulative):
    col = "cumulative_actions" if cumulative else "actions"
    # ann: levels cost 5 and 7; bob: level 1 costs 4, level 2 costs 0 (cumulative 4 then 4)
    bob2 = 4 if cumulative else 0
    ann2 = 12 if cumulative else 7
    csv = tmp_path / "counts.csv"
    csv.write_text(f"game_id,level_index,player_id,{col},completed\n"
                   f"g1,1,ann,5,true\ng1,2,ann,{ann2},true\ng1,1,bob,4,true\ng1,2,bob,{bob2},true\n")
    counts = read_counts(csv)
    costs = sorted(counts.costs.select("baseline_player_id", "level_index", "level_cost").iter_rows())
    assert costs == [("ann", 1, 5), ("ann", 2, 7), ("bob", 1, 4)]  # bob's 0 is no cost a rule may pick
    (reject,) = counts.rejects
    assert reject.location == "line 5" and "0 or negatives produce silent zero level scores" in reject.reason


def test_the_viewer_baselines_option_asks_the_same_rule(tmp_path):
    from pipeline.report.viewer import data as viewer

    with pytest.raises(viewer.ViewerUsageError, match="0 or negatives produce silent zero level scores"):
        viewer.find_baseline("x", explicit="10,0,10")
    meta = _metadata(tmp_path / "meta", [10, 10.0])  # a metadata.json holds JSON integers, as ingest requires
    with pytest.raises(viewer.ViewerUsageError, match="is not an integer"):
        viewer.find_baseline(GAME, explicit=str(meta / "zb01" / "00000001" / "metadata.json"))
    assert viewer.find_baseline("x", explicit="10,1,10").actions == [10, 1, 10]


def test_an_empty_item_in_the_viewer_baselines_is_refused_not_dropped():
    """`--baselines 1,,2` was read as [1, 2]: level 3's baseline became level 2's, said as `baseline [1, 2]`."""
    from pipeline.report.viewer import data as viewer

    for bad in ("1,,2", ",1,2", "1, ,2"):
        with pytest.raises(viewer.ViewerUsageError, match="give comma-separated integers"):
            viewer.find_baseline("x", explicit=bad)
    assert viewer.find_baseline("x", explicit="10,1,10,").actions == [10, 1, 10]  # a trailing comma names no level
