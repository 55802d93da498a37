"""Every recording in shared/samples/arc-agi-3 reproduces its sidecar ``*.expected.json`` from its lines alone.

Per sample: the card (actions, actions_by_level, resets, levels_completed, states, guids) rebuilt with the §B
counting rules, then, under arc-agi-3/2026-04 with the sidecar's ``baseline_actions``, every run's
level_actions / level_scores / score and the game score.

Human-dataset files (formats.md A.3): a file records one session, but its card can hold other slots (a stub
from an abandoned session, cd82). Rule: rebuild the file's own play, select the card slot by the filename
guid, compare that slot, and score the card with the rebuilt play substituted in its slot (the other slots
are not reconstructable from the file and are taken from the card as they are).

Benchmarking file: every action id is 0 (``action_ids_lost``). It is detected; counted literally it does not
reproduce the card; with the actions recovered (ACTION1 x3, as the sidecar records) it does.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.recordings.reader import read_recording_file
from pipeline.scoring import (
    Card,
    CountingOptions,
    StepEffect,
    build_scorecard,
    classify_steps,
    counting_options_for_variant,
    detect_action_ids_lost,
    detect_variant,
    environment_to_dict,
    rebuild_card,
    recover_action_ids,
    score_game,
)
from tests.sidecars import assert_close

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SAMPLES = SHARED / "samples" / "arc-agi-3"
SIDECARS = sorted(SAMPLES.rglob("*.expected.json"))
POLICY = "arc-agi-3/2026-04"
FORMAT_TO_VARIANT = {"toolkit-jsonl": "toolkit", "human-dataset-jsonl": "human-dataset",
                     "benchmarking-jsonl": "benchmarking"}




def load(sidecar: Path):
    recording = sidecar.with_name(sidecar.name.replace(".expected.json", ".jsonl"))
    expected = json.loads(sidecar.read_text())
    lines = [json.loads(text) for text in recording.read_text().splitlines() if text.strip()]
    return recording, expected, lines


def file_steps(recording: Path, *, with_frame_digest: bool = True):
    """The steps of a sample as the one recording reader reads them."""
    steps = [line.step_record() for line in read_recording_file(recording).steps]
    return steps if with_frame_digest else [replace(s, frame_digest=None) for s in steps]


def sample_id(sidecar: Path) -> str:
    return str(sidecar.relative_to(SAMPLES)).replace(".expected.json", "")


def game_id_of(lines) -> str:
    for line in lines:
        data = line.get("data", line)
        if "game_id" in data and "action_input" in data:
            return data["game_id"]
    raise AssertionError("no frame line")


def rebuilt(sidecar: Path):
    """(expected sidecar, rebuilt card, expected card, variant, steps) for a sample, from its lines."""
    recording, expected, lines = load(sidecar)
    assert len(lines) == expected["line_count"]
    variant, _ = detect_variant(lines, recording)
    steps = file_steps(recording)
    if variant == "benchmarking":
        steps = recover_action_ids(steps, expected["reconstructed_actions"])
    card = rebuild_card(steps, counting_options_for_variant(variant), game_id=game_id_of(lines))
    return expected, card, Card.from_dict(expected["card"]), variant, steps, recording


def test_all_sample_sidecars_found():
    manifest = json.loads((SAMPLES / "manifest.json").read_text())
    listed = {SHARED / "samples" / s["expected"] for s in manifest["samples"]}
    assert listed <= set(SIDECARS)  # the manifest indexes toolkit/, human/, benchmarking/; fixtures/ come extra
    assert {p.parent.name for p in SIDECARS} >= {"toolkit", "fixtures", "benchmarking"}
    for sidecar in SIDECARS:
        assert sidecar.with_name(sidecar.name.replace(".expected.json", ".jsonl")).is_file()


@pytest.mark.parametrize("sidecar", SIDECARS, ids=sample_id)
def test_sample_card_and_scores(sidecar):
    expected, card, exp_card, variant, steps, recording = rebuilt(sidecar)
    assert variant == FORMAT_TO_VARIANT[expected["format"]]
    assert card.game_id == expected["game_id"]

    if variant == "human-dataset":
        guid = recording.name.split(".")[0]
        assert guid == expected["guid"]
        assert card.total_plays == 1, "a human-dataset file records one session (level-only resets)"
        own = card.plays[0]
        assert own.guid == guid
        slot = exp_card.guids.index(guid)
        assert own == exp_card.play_for_guid(guid)
        card_to_score = replace(exp_card, plays=exp_card.plays[:slot] + (own,) + exp_card.plays[slot + 1:])
    else:
        assert card == exp_card
        assert card.to_dict() == expected["card"]
        card_to_score = card

    game = score_game(card.game_id, card_to_score.plays, expected["baseline_actions"], POLICY)
    scored = expected["scored"]
    assert_close(environment_to_dict(game), scored["environment"])
    assert game.best_play_index == scored["best_run_index"]
    assert_close(game.score, scored["game_score"])

    sc = build_scorecard("sample", [card_to_score], {card.game_id: expected["baseline_actions"]}, POLICY)
    assert_close(sc.score, scored["scorecard_score"])


@pytest.mark.parametrize("sidecar", [s for s in SIDECARS if "/human/" in str(s)], ids=sample_id)
def test_human_file_trailing_card_matches_sidecar(sidecar):
    recording, expected, _ = load(sidecar)
    summary = read_recording_file(recording).summary
    assert summary is not None
    assert summary.data["cards"][expected["game_id"]] == expected["card"]


@pytest.mark.parametrize("sidecar", SIDECARS, ids=sample_id)
def test_action_ids_lost_detection(sidecar):
    recording, expected, lines = load(sidecar)
    steps = file_steps(recording)
    lost = expected["format"] == "benchmarking-jsonl"
    assert detect_action_ids_lost(steps) is lost
    # Without frames the detector falls back on the full_reset evidence; it must agree.
    frameless = [replace(s, frame_digest=None) for s in steps]
    assert detect_action_ids_lost(frameless) is lost
    if lost:
        literal = rebuild_card(steps, counting_options_for_variant("benchmarking"), game_id=expected["game_id"])
        assert literal != Card.from_dict(expected["card"]), "counted literally, the defect must not reproduce"
        recovered = recover_action_ids(steps, expected["reconstructed_actions"])
        assert not detect_action_ids_lost(recovered)


@pytest.mark.parametrize("sidecar", [s for s in SIDECARS if "/human/" not in str(s)
                                     and "/benchmarking/" not in str(s)], ids=sample_id)
def test_engine_rule_infers_recorded_full_resets(sidecar):
    """The 'engine' full-reset inference (for lines without a usable flag) agrees with every recorded flag."""
    recording, _, _ = load(sidecar)
    steps = file_steps(recording, with_frame_digest=False)
    recorded = classify_steps(steps, CountingOptions(full_reset_rule="recorded"))
    inferred = classify_steps(steps, CountingOptions(full_reset_rule="engine"))
    assert inferred == recorded
    unflagged = [replace(s, full_reset=None) for s in steps]
    assert classify_steps(unflagged, CountingOptions(full_reset_rule="recorded")) == recorded


@pytest.mark.parametrize("sidecar", SIDECARS, ids=sample_id)
def test_echo_detection_does_not_depend_on_frames(sidecar):
    recording, _, lines = load(sidecar)
    steps = file_steps(recording, with_frame_digest=False)
    opts = counting_options_for_variant(detect_variant(lines, recording)[0])
    with_frames = classify_steps(steps, opts)
    without = classify_steps([replace(s, frame_count=None) for s in steps], opts)
    assert with_frames == without


def test_undo_counting_option_on_su15():
    sidecar = SAMPLES / "toolkit" / "su15_random_clicks_undo.noframes.expected.json"
    expected, card, _, _, steps, _ = rebuilt(sidecar)
    effects = classify_steps(steps, CountingOptions.toolkit())
    undos = sum(1 for s, e in zip(steps, effects, strict=True) if e is StepEffect.ACTION and s.action_id == 7)
    assert undos > 0
    human_like = rebuild_card(steps, CountingOptions(leading_reset="present", count_undo=False))
    assert human_like.total_actions == card.total_actions - undos


# --------------------------------------------------------------------------------------------------
# Playback files (formats.md A.7): actions only; replayed the playback agent's way on the conformance games,
# they give the sidecar's card and scores (the replay's session guid is ours, the toolkit's was random).
# --------------------------------------------------------------------------------------------------
PLAYBACK_SIDECARS = sorted((SHARED / "samples" / "playback-arc-agi-3").glob("*.expected.json"))
GAMES = SHARED / "conformance" / "environment_files"


@pytest.mark.parametrize("sidecar", PLAYBACK_SIDECARS, ids=lambda p: p.name.replace(".expected.json", ""))
def test_playback_sample_card_and_scores(sidecar):
    from pipeline.recordings.counting import card_from_effects
    from pipeline.recordings.playback import read_playback_file, replayed_recording, resolve_script_game

    script_path = sidecar.with_name(sidecar.name.replace(".expected.json", ".jsonl"))
    expected = json.loads(sidecar.read_text())
    lines = [json.loads(text) for text in script_path.read_text().splitlines() if text.strip()]
    assert len(lines) == expected["line_count"]
    assert detect_variant(lines, script_path)[0] == "playback"

    script = read_playback_file(script_path)
    info = resolve_script_game(script.game_id, [GAMES])
    assert info.game_id == expected["game_id"]
    parsed = replayed_recording(script.actions, info, file_id=script.file_sha256, path=script_path)
    assert parsed.variant == "toolkit" and parsed.has_leading_reset
    steps = [ln.step_record() for ln in parsed.steps]
    card = card_from_effects(steps, parsed.effects, game_id=parsed.game_id)
    assert card == rebuild_card(steps, counting_options_for_variant("playback"), game_id=parsed.game_id)
    exp_card = expected["card"]
    assert list(card.guids) == [parsed.guid] * exp_card["total_plays"]
    assert {k: v for k, v in card.to_dict().items() if k != "guids"} == {k: v for k, v in exp_card.items()
                                                                        if k != "guids"}

    game = score_game(card.game_id, card.plays, expected["baseline_actions"], POLICY)
    scored = expected["scored"]
    env = environment_to_dict(game)
    strip = lambda e: {**e, "runs": [{k: v for k, v in r.items() if k != "guid"} for r in e["runs"]]}  # noqa: E731
    assert_close(strip(env), strip(scored["environment"]))
    assert game.best_play_index == scored["best_run_index"]
    assert_close(game.score, scored["game_score"])
    sc = build_scorecard("sample", [card], {card.game_id: expected["baseline_actions"]}, POLICY)
    assert_close(sc.score, scored["scorecard_score"])
