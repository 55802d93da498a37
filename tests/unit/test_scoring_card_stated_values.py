"""Stated values of a scored summary against the recomputed ones: integer typing and `environments[].score`.

formats.md C.2: the hosted API "types the scores as integers", and an environment's `score` is its best run's.
Before, an integer-typed card was explained as "edited by hand, or written by another scorer", and a wrong
`environments[].score` was never compared when the runs and the total were right.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pipeline.cli import app

runner = CliRunner()
GAME = "cc02-00000002"


def _card(path: Path, level_scores, run_score, env_score, total, level_actions=(30, 3)) -> Path:
    run = {"guid": "c2c2c2c2-0000-4000-8000-000000000002", "score": run_score, "levels_completed": 1,
           "actions": sum(level_actions), "resets": 0, "state": "NOT_FINISHED", "completed": False,
           "level_scores": level_scores, "level_actions": list(level_actions), "level_baseline_actions": [10, 10]}
    path.write_text(json.dumps({
        "card_id": "e0e0e0e0-0000-4000-8000-000000000000", "score": total,
        "environments": [{"id": GAME, "score": env_score, "actions": sum(level_actions), "resets": 0,
                          "levels_completed": 1, "completed": False, "level_count": 2, "runs": [run]}],
        "tags_scores": [], "total_environments_completed": 0, "total_environments": 1, "total_levels_completed": 1,
        "total_levels": 2, "total_actions": sum(level_actions)}))
    return path


def _differences(tmp_path: Path, card: Path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["--plain", "score", str(card), "--games", str(tmp_path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    inputs = json.loads((out / "scorecard__arc-agi-3_2026-04.json").read_text())["card_inputs"]
    (run,) = inputs["runs"]
    return run.get("differences") or [], inputs.get("environments") or [], result.output


# By hand under 2026-04 (the card names no policy: the toolkit's current one), baselines [10, 10], one level of two
# completed in 30 actions: level 1 scores 100 * (10/30)^2 = 11.111, level 2 0; the run (1 * 11.111 + 2 * 0) / 3
# = 3.7037 (below the game cap of 1/3); the environment the best run's, 3.7037; the total the mean, 3.7037.
LEVEL_1 = 100 * (10 / 30) ** 2
RUN = LEVEL_1 / 3


def test_integer_typed_scores_are_named_as_such(tmp_path):
    # the hosted API's integers: 11 (11.111 rounded), run 4 (3.7037 rounded), environment 3 (truncated), total 4
    card = _card(tmp_path / "hosted.json", [11, 0], 4, 3, 4)
    diffs, envs, output = _differences(tmp_path, card)
    causes = {d["level_index"]: d["cause"] for d in diffs}
    assert set(causes) == {1, None}  # level 2 (0) agrees
    assert causes[1].startswith("integer typing: the stated value is the recomputed 11.111 rounded to an integer")
    assert causes[None].startswith("integer typing: the stated value is the recomputed 3.704 rounded")
    (env,) = envs
    assert abs(env["recomputed"] - RUN) < 1e-9 and env["stated"] == 3
    assert env["cause"].startswith("integer typing: the stated value is the recomputed 3.704 truncated")
    assert "edited by hand" not in output
    assert "states a total of 4.000; recomputed 3.704 (integer typing" in output


def test_a_whole_number_that_is_not_the_recomputed_one_as_an_integer_is_still_unexplained(tmp_path):
    card = _card(tmp_path / "edited.json", [12, 0], 4, 4, 4)  # 12 is neither 11.111 rounded nor truncated
    diffs, _, _ = _differences(tmp_path, card)
    level = next(d for d in diffs if d["level_index"] == 1)
    assert "edited by hand, or written by another scorer" in level["cause"]


def test_a_wrong_stated_environment_score_is_compared_when_runs_and_total_are_right(tmp_path):
    card = _card(tmp_path / "s.json", [LEVEL_1, 0.0], RUN, 50.0, RUN)  # everything right but the environment's
    diffs, envs, output = _differences(tmp_path, card)
    assert diffs == []
    (env,) = envs
    assert env["stated"] == 50.0 and abs(env["recomputed"] - RUN) < 1e-9
    assert "not the best of its runs' scores" in env["cause"]
    assert f"card s.json {GAME} environment score (arc-agi-3/2026-04): stated 50.000, recomputed 3.704" in output


def test_a_right_stated_environment_score_says_nothing(tmp_path):
    card = _card(tmp_path / "ok.json", [LEVEL_1, 0.0], RUN, RUN, RUN)
    diffs, envs, output = _differences(tmp_path, card)
    assert diffs == [] and envs == [] and "environment score" not in output
