"""2025 preview plays are scored under the preview policy only (formats.md A.4).

formats.md A.4: "per-level costs must be derived from `score` transitions because the card has no
`actions_by_level`; score such plays only under `arc-agi-3/2025-preview` unless a baseline for the same
`game_id` exists in a later snapshot". Before, a preview recording was scored under 2026-03 and 2026-04 too, with
the preview baseline and at most a `baseline_rule_differs_from_policy` flag.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pipeline.cli import app

runner = CliRunner()
GAME = "vc33-051d064efa38"  # a preview game id (12-hex version); the reference CSV has its preview-2025 baseline
GUID = "5a5a5a5a-0000-4000-8000-00000000aaaa"
# (action id, score after the action): RESET, 2 clicks (level 1 done on the 2nd), 3 clicks (level 2 done on the
# 3rd), 1 click on level 3 (unfinished)
SEQUENCE = [(0, 0), (6, 0), (6, 1), (6, 1), (6, 1), (6, 2), (6, 2)]


def _preview_recording(folder: Path) -> Path:
    """A.4's line shape: `score` instead of `levels_completed`, no `win_score`, integer ids, data {game_id, x, y}."""
    lines = []
    for k, (aid, score) in enumerate(SEQUENCE):
        data = {"game_id": GAME, **({"x": 10 + k, "y": 20} if aid == 6 else {})}
        grid = [[0] * 64 for _ in range(64)]
        grid[1][1] = k
        lines.append({"timestamp": f"2025-07-01T10:00:{k:02d}.000000+00:00",
                      "data": {"game_id": GAME, "frame": [grid], "state": "NOT_FINISHED", "score": score,
                               "action_input": {"id": aid, "data": data, "reasoning": "r"}, "guid": GUID,
                               "full_reset": False}})
    path = folder / f"{GAME}.randomagent.80.{GUID}.recording.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _score(tmp_path: Path, *extra: str):
    out = tmp_path / "out"
    result = runner.invoke(app, ["--plain", "score", str(_preview_recording(tmp_path)), "--policy", "all",
                                 "--games", str(tmp_path / "no-games"), "--out", str(out), *extra])
    cards = {p.name: json.loads(p.read_text()) for p in sorted(out.glob("scorecard__*.json"))}
    return result, cards


def _game_scores(card: dict) -> dict[str, float]:
    return {e["id"]: e["score"] for e in card["environments"]}


def test_preview_play_is_left_out_of_later_policies_without_a_later_snapshot_baseline(tmp_path):
    (tmp_path / "no-games").mkdir()
    result, cards = _score(tmp_path)
    # By hand: level costs [2, 3]; the preview baseline [2, 2, 5, 7, 7, 38, 24, 19, 51] (reference CSV, snapshot
    # preview-2025); 2025-preview: level scores 100*min(1, 2/2) = 100 and 100*min(1, 2/3) = 66.67, plain mean over
    # the 9 levels: (100 + 200/3) / 9 = 18.519.
    preview = cards["scorecard__arc-agi-3_2025-preview.json"]
    assert abs(_game_scores(preview)[GAME] - (100 + 200 / 3) / 9) < 1e-9
    # Later policies: the only baseline for this id is the preview snapshot's, so the play is not scored there.
    for name in ("scorecard__arc-agi-3_2026-03.json", "scorecard__arc-agi-3_2026-04.json"):
        assert GAME not in _game_scores(cards[name]), name
        (check,) = cards[name]["verification"]["replay_checks"]
        assert check["excluded"] is True
        assert "2025 preview recording" in check["exclusion_reason"]
        assert "later snapshot" in check["exclusion_reason"]
    assert result.exit_code == 3  # left-out plays are said with exit code 3, like every other left-out play
    assert "left out of the score under arc-agi-3/2026-03: 1 play" in result.output
    assert "left out of the score under arc-agi-3/2026-04: 1 play" in result.output


def test_preview_play_is_scored_under_a_later_policy_with_a_later_snapshot_baseline(tmp_path):
    (tmp_path / "no-games").mkdir()
    csv = tmp_path / "later.csv"
    csv.write_text('game_id,baseline_actions,baseline_rule,snapshot\n'
                   f'{GAME},"[2, 3]",second-best,pre-2026-04-14\n')
    result, cards = _score(tmp_path, "--baselines", str(csv))
    # 2026-03 with baseline [2, 3] from a later snapshot: level scores 100*(2/2)^2 = 100 and 100*(3/3)^2 = 100,
    # level-index weights (1*100 + 2*100) / (1 + 2) = 100.
    assert _game_scores(cards["scorecard__arc-agi-3_2026-03.json"])[GAME] == 100.0
    assert "left out of the score under" not in result.output


def test_the_viewer_says_what_the_score_does_for_a_preview_play(tmp_path):
    from pipeline.report.viewer import data as viewer

    # the default policy (2026-04) and only the preview snapshot's baseline: left out, with the score's reason
    assert "scored only under arc-agi-3/2025-preview" in viewer.preview_reason(GAME, "preview-2025")
    assert viewer.preview_reason(GAME, "benchmarking") is None  # not a preview recording: nothing to say
    csv = tmp_path / "later.csv"
    csv.write_text(f'game_id,baseline_actions,baseline_rule,snapshot\n{GAME},"[2, 3]",upper-median,current\n')
    assert viewer.preview_reason(GAME, "preview-2025", explicit=str(csv)) is None
