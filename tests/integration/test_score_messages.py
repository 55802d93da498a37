"""What `arcstudy score` says must match what it did: baselines given that miss the scored game versions, a card
run replaced by its recording, each policy's message in its own column, and a card's own baselines made under
another rule than the policy's (with --no-card-baselines to score it against the policy's sources)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.scoring import baseline_sources as bs

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SAMPLES = SHARED / "samples" / "arc-agi-3"
GAMES = SHARED / "conformance" / "environment_files"
TU93 = SAMPLES / "toolkit" / "tu93_explore_reset_solve_5levels.noframes.jsonl"  # tu93-0768757b: public, no game files
AN53 = SAMPLES / "fixtures" / "an53_scripted-win.frames.jsonl"  # its game is in the conformance games
SLUG = "scorecard__arc-agi-3_{}.json"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--plain", "score", *args], catch_exceptions=False)
    return result.exit_code, result.output


def _lines(output: str, *needles: str) -> list[str]:
    return [line for line in output.splitlines() if all(n in line for n in needles)]


def _card_of(recording: Path, to: Path) -> Path:
    """The toolkit's card of a sample recording (its expected sidecar), as a bare card file."""
    doc = json.loads(recording.with_name(recording.name.replace(".jsonl", ".expected.json")).read_text())
    to.write_text(json.dumps(doc["card"]))
    return to


def _bare_card(to: Path, game_id: str, guid: str, pairs: list[list[int]]) -> Path:
    actions = pairs[-1][1] + 10
    to.write_text(json.dumps({"game_id": game_id, "total_plays": 1, "guids": [guid], "levels_completed": [len(pairs)],
                              "states": ["NOT_FINISHED"], "actions": [actions], "actions_by_level": [pairs],
                              "resets": [0], "total_actions": actions}))
    return to


def _metadata(root: Path, game_id: str, baselines: list[int]) -> None:
    code, version = game_id.split("-")
    (root / code / version).mkdir(parents=True)
    (root / code / version / "metadata.json").write_text(json.dumps({"game_id": game_id,
                                                                       "baseline_actions": baselines}))


# ------------------------------------------------------------------------------------------------------
# 1. --baselines that holds none of a scored game's version
# ------------------------------------------------------------------------------------------------------
def test_baselines_folder_of_another_version_is_said_per_game_and_as_a_whole(tmp_path):
    card = _card_of(TU93, tmp_path / "tu93.card.json")
    bl = tmp_path / "bl"
    _metadata(bl, "tu93-deadbeef", [20] * 9)
    code, output = run(str(card), "--baselines", str(bl), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 0, output  # the documented fallback, not a rejection
    used = json.loads((tmp_path / "o" / SLUG.format("2026-04")).read_text())
    source = used["verification"]["baseline_sources"]["tu93-0768757b"]["source"]
    assert source != "baselines-dir"
    game_line = _lines(output, f"--baselines {bl}: no baseline for tu93-0768757b (it has tu93-deadbeef)")
    assert len(game_line) == 1 and f"scored against {source}" in game_line[0], output
    assert len(_lines(output, f"--baselines {bl}: no baseline for the game scored", "tu93-deadbeef")) == 1, output


def test_baselines_covering_some_games_names_only_the_others(tmp_path):
    tu93 = _card_of(TU93, tmp_path / "tu93.card.json")
    ls20 = _bare_card(tmp_path / "ls20.card.json", "ls20-9607627b", "cccccccc-0000-0000-0000-000000000001",
                      [[1, 25], [2, 150]])
    bl = tmp_path / "bl"
    _metadata(bl, "ls20-9607627b", [30, 130, 40])
    code, output = run(str(tu93), str(ls20), "--baselines", str(bl), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 0, output
    assert len(_lines(output, f"--baselines {bl}: no baseline for tu93-0768757b (nor any other tu93 version)",
                      "scored against reference-csv")) == 1, output
    assert not _lines(output, "no baseline for ls20"), output
    assert not _lines(output, "for the game scored") and not _lines(output, "for any of"), output


def test_not_covered_names_the_other_versions_of_a_code(tmp_path):
    _metadata(tmp_path, "tu93-deadbeef", [5])
    _metadata(tmp_path, "ls20-9607627b", [5])
    source = bs.source_from_path(tmp_path)
    assert bs.not_covered(source, ["tu93-0768757b", "ls20-9607627b", "zz99-00000000"], "upper-median") == {
        "tu93-0768757b": ["tu93-deadbeef"], "zz99-00000000": []}


# ------------------------------------------------------------------------------------------------------
# 2. a card run scored from its recording: what became of the recording's play
# ------------------------------------------------------------------------------------------------------
def test_card_run_replaced_by_an_unverifiable_recording_says_unverified(tmp_path):
    card = _card_of(TU93, tmp_path / "tu93.card.json")
    code, output = run(str(TU93), str(card), "--games", str(GAMES), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 3, output  # nothing could be verified
    said = _lines(output, "tu93.card.json: card run tu93-0768757b", TU93.name)
    assert len(said) == 1, output
    assert "unverified" in said[0] and "game not loadable" in said[0] and "replay-verified" not in said[0], output


def test_card_runs_replaced_by_a_verified_recording_say_replay_verified(tmp_path):
    card = _card_of(AN53, tmp_path / "an53.card.json")
    code, output = run(str(AN53), str(card), "--games", str(GAMES), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 0, output
    checks = json.loads((tmp_path / "o" / SLUG.format("2026-04")).read_text())["verification"]["replay_checks"]
    assert {c["status"] for c in checks} == {"verified"}
    said = _lines(output, "an53.card.json: card run an53-6f5f2264", AN53.name)
    assert len(said) == 1 and said[0].endswith(f"(so are {len(checks) - 1} more card runs): replay-verified"), output


def test_card_runs_replaced_by_a_divergent_recording_say_left_out_or_trusted(tmp_path):
    card = _card_of(AN53, tmp_path / "an53.card.json")
    lines = AN53.read_text().splitlines()
    frames = [i for i, line in enumerate(lines) if '"levels_completed"' in line]
    doc = json.loads(lines[frames[len(frames) // 2]])  # a level count the engine will not reproduce
    data = doc.get("data", doc)
    data["levels_completed"] += 3
    lines[frames[len(frames) // 2]] = json.dumps(doc)
    bad = tmp_path / "an53_altered.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    code, output = run(str(bad), str(card), "--games", str(GAMES), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 3, output
    said = _lines(output, "an53.card.json: card run an53-6f5f2264", bad.name)
    assert len(said) == 1 and said[0].endswith(": left out of the score: replay diverged (pass --trust-recordings "
                                               "to score it anyway)"), output
    code, output = run(str(bad), str(card), "--games", str(GAMES), "--trust-recordings", "--out",
                       str(tmp_path / "t"), "--no-figures")
    said = _lines(output, "an53.card.json: card run an53-6f5f2264", bad.name)
    assert len(said) == 1 and said[0].endswith(": its replay diverged, scored anyway (--trust-recordings)"), output


# ------------------------------------------------------------------------------------------------------
# 3. several policies: each one's message in its own column
# ------------------------------------------------------------------------------------------------------
def _table_row(output: str, first_cell: str) -> list[str]:
    """The cells of the table row that starts with ``first_cell``, each joined over its wrapped lines."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("│") and line.split("│")[1].strip() == first_cell)
    cells = [[c.strip()] for c in lines[start].split("│")[1:-1]]
    for line in lines[start + 1:]:
        parts = line.split("│")[1:-1]
        if not line.startswith("│") or parts[0].strip():
            break
        for cell, part in zip(cells, parts, strict=True):
            cell.append(part.strip())
    return [" ".join(p for p in cell if p) for cell in cells]


def test_each_policy_column_shows_only_its_own_message(tmp_path):
    game = "zz41-a6ea70d5"
    bl = tmp_path / "baselines.csv"
    with bl.open("w", newline="") as f:  # second-best: too few completers; upper-median: values
        w = csv.writer(f)
        w.writerow(["game_id", "level_index", "baseline_value", "baseline_rule"])
        for level, value in ((1, 10), (2, 50), (3, 70)):
            w.writerow([game, level, "", "second-best"])
            w.writerow([game, level, value, "upper-median"])
    card = _bare_card(tmp_path / "agent.card.json", game, "bbbbbbbb-0000-0000-0000-000000000001",
                      [[1, 10], [2, 50], [3, 70]])
    policies = ["arc-agi-3/2025-preview", "arc-agi-3/2026-04"]
    code, output = run(str(card), "--baselines", str(bl), "--policy", ",".join(policies), "--out",
                       str(tmp_path / "o"), "--no-figures")
    assert code == 0, output
    messages = {}
    for pid in policies:
        doc = json.loads((tmp_path / "o" / SLUG.format(pid.split("/")[1])).read_text())
        messages[pid] = {r.get("message") for e in doc["environments"] for r in e["runs"]}
    preview_message, = messages[policies[0]]
    assert preview_message and messages[policies[1]] == {None}
    cells = _table_row(output, game)
    assert len(cells) == 2 + 2 * len(policies), cells  # a baseline source column per policy
    preview_source, current_source = cells[-2:]
    assert preview_message in preview_source and preview_message not in current_source, cells
    assert "[baseline_too_few_completers]" in preview_source and "\\[" not in preview_source, cells  # as written


# ------------------------------------------------------------------------------------------------------
# 4. re-scoring a card whose own baselines were made under another rule
# ------------------------------------------------------------------------------------------------------
def test_rescoring_a_card_of_another_rule_says_so_and_no_card_baselines_uses_the_policys(tmp_path):
    card = _bare_card(tmp_path / "ls20.card.json", "ls20-9607627b", "cccccccc-0000-0000-0000-000000000001",
                      [[1, 25], [2, 150], [3, 190]])
    assert run(str(card), "--policy", "arc-agi-3/2026-03", "--out", str(tmp_path / "s03"), "--no-figures")[0] == 0
    assert run(str(card), "--policy", "arc-agi-3/2026-04", "--out", str(tmp_path / "s04"), "--no-figures")[0] == 0
    direct = json.loads((tmp_path / "s04" / SLUG.format("2026-04")).read_text())
    old = tmp_path / "s03" / SLUG.format("2026-03")

    code, output = run(str(old), "--policy", "arc-agi-3/2026-04", "--out", str(tmp_path / "kept"), "--no-figures")
    assert code == 0, output
    kept = json.loads((tmp_path / "kept" / SLUG.format("2026-04")).read_text())
    assert kept["verification"]["baseline_sources"]["ls20-9607627b"]["source"] == "scorecard"  # precedence kept
    assert kept["score"] != direct["score"]
    said = _lines(output, "arc-agi-3/2026-04: ls20-9607627b", old.name, "arc-agi-3/2026-03",
                  "second-best, not upper-median", "--no-card-baselines")
    assert len(said) == 1, output

    code, output = run(str(old), "--policy", "arc-agi-3/2026-04", "--no-card-baselines", "--out",
                       str(tmp_path / "own"), "--no-figures")
    assert code == 0, output
    own = json.loads((tmp_path / "own" / SLUG.format("2026-04")).read_text())
    assert own["score"] == direct["score"]
    assert own["verification"]["baseline_sources"] == direct["verification"]["baseline_sources"]
    assert not _lines(output, "--no-card-baselines"), output

    # Under a policy of the card's own rule, nothing to say.
    code, output = run(str(old), "--policy", "arc-agi-3/2025-preview", "--out", str(tmp_path / "same"),
                       "--no-figures")
    assert code == 0 and not _lines(output, "--no-card-baselines"), output


def test_a_policy_named_twice_is_scored_once(tmp_path):
    """`--policy P,P` scored P twice: the score tables refused their repeated rows after all the work, exit 1."""
    recording = SAMPLES / "fixtures" / "an53_scripted-win.frames.jsonl"
    code, output = run(str(recording), "--games", str(GAMES), "--policy", "arc-agi-3/2026-04, arc-agi-3/2026-04",
                       "--out", str(tmp_path / "o"), "--db", str(tmp_path / "s.duckdb"), "--no-figures")
    assert code == 0, output
    assert [p.name for p in (tmp_path / "o").glob("scorecard__*.json")] == [SLUG.format("2026-04")]
    assert not (tmp_path / "o" / "policy_sensitivity.csv").exists()  # one policy
