"""`arcstudy ingest X && arcstudy score --db` and `arcstudy score X` apply one rule to a scorecard's values.

Card wrappers and bare cards were stored cast on ingest (1.5 as 1, "87" as 87) where `score FILE` refused them;
scored-summary runs were stored with a negative `level_actions` entry, `levels_completed` over their levels or
a megabyte guid. For each shape (spec/formats.md §C) and each bad value, ingest quarantines exactly what
`score FILE` refuses, with the same reason, and the good runs of the same file land and score the same in
both paths. The cards are the official bt11 card of the toolkit samples and copies of it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.scoring.card_input import read_card_files, read_db_cards, runs_from_tables
from schemas import conform

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"
SIDECAR = json.loads((SAMPLES / "toolkit" / "bt11_win_gameover_levelreset.frames.expected.json").read_text())
CARD = SIDECAR["card"]  # bt11-fd9df0622a1a: one play, 81 actions, 5 levels
RUN = SIDECAR["scored"]["environment"]["runs"][0]
OTHER = "tu93-0768757b"
BIG_GUID = "g" * 1_000_000
SLUG = "scorecard__arc-agi-3_2026-04.json"


def _bare(slot_key: str | None, value) -> dict:
    """A bare card of two plays (bt11's twice); play 1 holds `value` under `slot_key`."""
    card = {k: (v * 2 if isinstance(v, list) else v) for k, v in copy.deepcopy(CARD).items()}
    card["total_plays"] = 2
    card["guids"] = [CARD["guids"][0], "00000000-0000-4000-8000-000000000002"]
    if slot_key is not None:
        card[slot_key][1] = value
    return card


def _wrapper(slot_key: str | None, value, game_id: str = OTHER) -> dict:
    """A card wrapper: bt11's card and a second game's, whose slot 0 holds `value` under `slot_key`."""
    other = {**copy.deepcopy(CARD), "game_id": game_id}
    if slot_key is not None:
        other[slot_key][0] = value
    return {"won": 2, "played": 2, "total_actions": 162, "cards": {CARD["game_id"]: copy.deepcopy(CARD),
                                                                   game_id: other}}


def _summary(change: dict, game_id: str = OTHER, drop: str | None = None) -> dict:
    """A scored summary: bt11's official environment and a second game's run, changed by `change`."""
    run = {**copy.deepcopy(RUN), **change}
    if drop:
        del run[drop]
    env = {**copy.deepcopy(SIDECAR["scored"]["environment"]), "id": game_id, "runs": [run]}
    return {"card_id": "c", "score": SIDECAR["scored"]["scorecard_score"], "competition_mode": False,
            "environments": [copy.deepcopy(SIDECAR["scored"]["environment"]), env]}


def _with_level_actions(i: int, value) -> dict:
    la = list(RUN["level_actions"])
    la[i] = value
    return {"level_actions": la}


# (document, the reason's words). Each bad value leaves one good card slot or run beside it in the file.
CASES = {
    "bare: fraction": (_bare("actions", 81.5), "card slot 1 of bt11-fd9df0622a1a: actions[1] = 81.5 is not a whole "
                                               "number"),
    "bare: numeric string": (_bare("actions", "81"), "actions[1] = '81' is a string, not an integer"),
    "bare: whole float": (_bare("resets", 1.0), "resets[1] = 1.0 is not an integer (written with a decimal point)"),
    "bare: negative": (_bare("levels_completed", -1), "levels_completed[1] = -1 is negative"),
    "bare: beyond 64 bits": (_bare("actions", 2**70), f"actions[1] = {2**70} does not fit a 64-bit integer"),
    "bare: levels past the counter": (_bare("levels_completed", 300), "levels_completed[1] = 300 is over 254"),
    "bare: pair value": (_bare("actions_by_level", [[1, 4], [2, 21.5]]),
                         "actions_by_level[1] value 21.5 is not a whole number"),
    "bare: state": (_bare("states", "PLAYING"), "states[1]: state 'PLAYING' is not one of"),
    "bare: long guid": (_bare("guids", BIG_GUID), "guids[1]: guid is 1000000 bytes, over the 36-byte limit of guid"),
    "wrapper: fraction": (_wrapper("resets", 1.5), f"card slot 0 of {OTHER}: resets[0] = 1.5 is not a whole number"),
    "wrapper: numeric string": (_wrapper("actions", "87"), "actions[0] = '87' is a string, not an integer"),
    "wrapper: negative": (_wrapper("actions", -3), "actions[0] = -3 is negative"),
    "wrapper: long guid": (_wrapper("guids", BIG_GUID), "guids[0]: guid is 1000000 bytes"),
    "wrapper: game id": (_wrapper(None, None, "TU93-0768757b"), "game id 'TU93-0768757b' is not of the form "
                                                                "<code>-<version>"),
    "wrapper: total_plays contradicts the slots": (
        {**_wrapper(None, None), "cards": {**_wrapper(None, None)["cards"],
                                           OTHER: {**_wrapper(None, None)["cards"][OTHER], "total_plays": 3}}},
        "total_plays is 3 but the card has 1 slot(s)"),
    "wrapper: total_actions contradicts the actions": (
        {**_wrapper(None, None), "cards": {**_wrapper(None, None)["cards"],
                                           OTHER: {**_wrapper(None, None)["cards"][OTHER], "total_actions": 90}}},
        "total_actions is 90 but its actions add up to 81"),
    "summary: negative level_actions": (_summary(_with_level_actions(0, -1)),
                                        f"run of {OTHER}: level_actions[0] = -1 is negative"),
    "summary: fraction level_actions": (_summary(_with_level_actions(2, 16.5)), "level_actions[2] = 16.5 is not a "
                                                                               "whole number"),
    "summary: levels over the levels": (_summary({"levels_completed": 6}),
                                        "levels_completed 6 is more than its 5 levels (level_actions)"),
    "summary: long guid": (_summary({"guid": BIG_GUID}), "guid is 1000000 bytes, over the 36-byte limit of guid"),
    "summary: numeric string": (_summary({"actions": "81"}), "actions = '81' is a string, not an integer"),
    "summary: whole float": (_summary({"levels_completed": 5.0}), "levels_completed = 5.0 is not an integer"),
    "summary: negative baseline": (_summary({"level_baseline_actions": [4, -8, 16, 20, 24]}),
                                   "level_baseline_actions[1] = -8 is negative"),
    "summary: baseline past the bound": (_summary({"level_baseline_actions": [4, 2**62, 16, 20, 24]}),
                                         f"level_baseline_actions[1] = {2**62} is above 1,000,000,000 actions"),
    "summary: more values than levels": (_summary({"level_actions": [1] * 300, "level_scores": [0.0] * 300}),
                                         "level_actions has 300 values, one per level, and a game has at most 254"),
    "summary: negative score": (_summary({"score": -5.0}),
                                f"run of {OTHER}: column 'score': -5.0 is below the minimum 0"),
    "summary: missing level_actions": (_summary({}, drop="level_actions"), "missing level_actions"),
    "summary: game id": (_summary({}, "tu93-" + "0" * 5000), "(5005 bytes) is not of the form <code>-<version>"),
}


def _runs(runs) -> list[tuple]:
    return [(r.file_id, r.game_id, r.run_index, r.shape, r.play, r.stated, r.notes) for r in runs]


def _ingest(path: Path, db: Path):
    with Workspace(db) as ws:
        report = ingest_paths(ws, [path], run_id="t", workers=1)
        quarantine = ws.read("SELECT source_location, target_table, check_name, reason FROM quarantine").rows()
        stored = read_db_cards(ws)
    return report, quarantine, stored


@pytest.mark.parametrize("case", list(CASES))
def test_ingest_quarantines_what_score_refuses_with_the_same_reason(case, tmp_path):
    doc, words = CASES[case]
    path = tmp_path / "card.json"
    path.write_text(json.dumps(doc))
    from_file = read_card_files([path])
    report, quarantine, stored = _ingest(path, tmp_path / "s.duckdb")

    # score FILE refuses one thing, with the reason ingest quarantines it under, at the same place
    assert len(from_file.problems) == 1 and from_file.problems[0][0] == path, from_file.problems
    assert len(quarantine) == 1, quarantine
    location, table, _check, reason = quarantine[0]
    what = "card" if table == "core_arc3__card_plays" else "card run"
    assert from_file.problems[0][1] == f"{what} quarantined ({location}): {reason}"
    assert words in reason, reason
    assert len(reason) < 600  # a megabyte guid or game id is measured, not copied into the reason
    assert report.has_rejections and [f.status for f in report.files] == ["loaded"]

    # the good card slot or run beside it lands, and the stored one is the one score FILE reads
    assert stored.problems == []
    assert _runs(stored.runs) == _runs(from_file.runs)
    assert [(r.game_id, r.run_index) for r in stored.runs] == [(CARD["game_id"], 0)]
    assert stored.runs[0].play.actions == CARD["actions"][0] and stored.runs[0].play.resets == CARD["resets"][0]


@pytest.mark.parametrize("case", ["bare: numeric string", "wrapper: fraction", "summary: long guid"])
def test_score_from_the_file_and_from_the_database_agree(case, tmp_path):
    """The whole commands: `score FILE` says what it refused (exit 3) and scores the rest; `ingest` quarantines
    the same (exit 3); `score --db` then scores what was stored to the same scorecard."""
    doc, words = CASES[case]
    path = tmp_path / "card.json"
    path.write_text(json.dumps(doc))
    baselines = tmp_path / "games" / "bt11" / "fd9df0622a1a"  # a card states no baselines of its own
    baselines.mkdir(parents=True)
    (baselines / "metadata.json").write_text(json.dumps({"game_id": CARD["game_id"],
                                                         "baseline_actions": SIDECAR["baseline_actions"]}))
    given = ["--baselines", str(tmp_path / "games"), "--no-figures"]
    runner = CliRunner()
    scored = runner.invoke(app, ["--plain", "score", str(path), "--out", str(tmp_path / "file"), *given],
                           catch_exceptions=False)
    assert scored.exit_code == 3, scored.output
    assert words in " ".join(scored.output.split()), scored.output
    db = tmp_path / "s.duckdb"
    ingested = runner.invoke(app, ["--plain", "ingest", str(path), "--db", str(db)], catch_exceptions=False)
    assert ingested.exit_code == 3, ingested.output
    again = runner.invoke(app, ["--plain", "score", "--db", str(db), "--out", str(tmp_path / "db"), *given],
                          catch_exceptions=False)
    assert again.exit_code == 0, again.output
    a = json.loads((tmp_path / "file" / SLUG).read_text())
    b = json.loads((tmp_path / "db" / SLUG).read_text())
    assert [e["id"] for e in a["environments"]] == [CARD["game_id"]]
    assert a["environments"] == b["environments"] and a["score"] == b["score"]
    assert a["score"] == pytest.approx(SIDECAR["scored"]["game_score"], abs=1e-9)


def test_stored_rows_from_before_the_rule_are_refused_with_the_readers_reason(tmp_path):
    """A database ingested before the rule may hold a run the reader now refuses: `score --db` refuses it with
    the reason the reader gives (the rule is applied to stored rows too)."""
    bad = {**copy.deepcopy(RUN), "level_actions": [-1, *RUN["level_actions"][1:]]}
    path = tmp_path / "card.json"
    path.write_text(json.dumps(_summary({"level_actions": bad["level_actions"]})))
    reason = read_card_files([path]).problems[0][1].split("): ", 1)[1]
    row = {"file_id": "f" * 64, "card_id": "c", "policy_id": None, "game_id": OTHER, "run_index": 0,
           "guid": bad["guid"], "score": bad["score"], "levels_completed": bad["levels_completed"],
           "actions": bad["actions"], "resets": bad["resets"], "state": bad["state"], "is_completed": bad["completed"],
           "level_scores": bad["level_scores"], "level_actions": bad["level_actions"],
           "level_baseline_actions": bad["level_baseline_actions"], "message": None}
    runs, problems = runs_from_tables(conform("core_arc3__scorecard_runs", [row]), None, None, {})
    assert runs == [] and [p for _, p in problems] == [f"card run quarantined (environments {OTHER} run 0): {reason}"]
    slot = {"file_id": "f" * 64, "line_number": None, "game_id": OTHER, "slot_index": 0, "guid": None,
            "play_id": None, "is_file_play": False, "card_actions": -3, "card_resets": 0, "levels_completed": 0,
            "card_state": "NOT_FINISHED", "card_actions_by_level": [], "card_score": None, "flags": []}
    runs, problems = runs_from_tables(None, None, conform("core_arc3__card_plays", [slot]), {})
    assert runs == [] and [p for _, p in problems] == [f"card quarantined (slot 0): card slot 0 of {OTHER}: "
                                                       "actions[0] = -3 is negative"]


def test_a_recordings_trailing_card_follows_the_same_rule(tmp_path):
    """The human dataset's trailing scorecard line is read by the same card reader: a slot value of 1.5 was
    stored as 1; it is quarantined with the reason a card file gets, and the recording's steps still load."""
    human = SAMPLES / "human" / "vc33" / "82f713eb-a8b5-43fe-a7e2-ca6a5e9451c7.recording.jsonl"
    lines = human.read_text().splitlines()
    last = json.loads(lines[-1])
    (game_id, card), = last["data"]["cards"].items()
    card["actions"][0] += 0.5
    path = tmp_path / human.name
    path.write_text("\n".join([*lines[:-1], json.dumps(last)]) + "\n")
    report, quarantine, _ = _ingest(path, tmp_path / "s.duckdb")
    with Workspace(tmp_path / "s.duckdb") as ws:
        slots = ws.row_count("core_arc3__card_plays")
        steps = ws.row_count("core_arc3__steps")
    assert report.has_rejections and slots == 0 and steps == len(lines) - 1
    assert [(loc, reason) for loc, _, _, reason in quarantine] == [
        (f"line {len(lines)} slot 0", f"card slot 0 of {game_id}: actions[0] = {card['actions'][0]!r} is not a whole "
                                      "number")]
