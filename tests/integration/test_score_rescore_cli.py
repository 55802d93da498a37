"""`arcstudy score` on what organizers hold: scorecards among the inputs (files and database), competition mode,
`--compare-with`, and what the first hour showed (no database in the current folder, the checkout's games only
without --games, reasons on screen, file names beside guids, the baseline source per policy).

The Kaggle-shaped fixture (ARC-AGI-3-Agents #82: "Kaggle 0.19, local 0.96") is built here: 25 environments of
one level (baseline 10) in a folder of metadata.json files; the agent played 5 of them, each level in 102
actions, so a level scores 100 * (10/102)^2 = 0.961; the local card averages over the 5 played, the competition
card over all 25.
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.scoring.compare import compare_scorecards

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SAMPLES = SHARED / "samples" / "arc-agi-3"
FIXTURES = SAMPLES / "fixtures"
GAMES = SHARED / "conformance" / "environment_files"
SLUG = "scorecard__arc-agi-3_2026-04.json"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--plain", "score", *args], catch_exceptions=False)
    return result.exit_code, result.output


def _sidecar(name: str) -> dict:
    return json.loads((SAMPLES / "toolkit" / name).read_text())


def _summary_card(doc: dict) -> dict:
    return {"card_id": "official", "score": doc["scored"]["scorecard_score"],
            "environments": [doc["scored"]["environment"]], "competition_mode": False}


N_ENVS, N_PLAYED, ACTIONS, BASELINE = 25, 5, 102, 10
LEVEL = 100 * (BASELINE / ACTIONS) ** 2


def _env(game_id: str, played: bool) -> dict:
    a = ACTIONS if played else 0
    s = LEVEL if played else 0.0
    run = {"guid": f"guid-{game_id}", "score": s, "levels_completed": int(played), "actions": a, "resets": 0,
           "state": "WIN" if played else "NOT_FINISHED", "completed": played, "level_scores": [s],
           "level_actions": [a], "level_baseline_actions": [BASELINE]}
    return {"id": game_id, "runs": [run], "score": s, "actions": a, "levels_completed": int(played),
            "completed": played, "level_count": 1, "resets": 0}


@pytest.fixture(scope="module")
def kaggle(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("kaggle")
    ids = [f"k{i:03d}-0000000{i % 10}" for i in range(N_ENVS)]
    for g in ids:
        code, version = g.split("-")
        (root / "games" / code / version).mkdir(parents=True)
        (root / "games" / code / version / "metadata.json").write_text(
            json.dumps({"game_id": g, "baseline_actions": [BASELINE]}))
    played = ids[:N_PLAYED]
    local = {"card_id": "local", "environments": [_env(g, True) for g in played], "competition_mode": False,
             "score": LEVEL}
    comp = {"card_id": "kaggle", "environments": [_env(g, g in played) for g in ids], "competition_mode": True,
            "score": LEVEL * N_PLAYED / N_ENVS}
    (root / "local.json").write_text(json.dumps(local))
    (root / "kaggle.json").write_text(json.dumps(comp))
    return {"root": root, "games": root / "games", "local": root / "local.json", "kaggle": root / "kaggle.json"}


def test_compare_explains_kaggle_against_local(kaggle):
    local = json.loads(kaggle["local"].read_text())
    comp = json.loads(kaggle["kaggle"].read_text())
    cmp = compare_scorecards(comp, local, other_label="kaggle.json")
    assert round(cmp.other_total, 2) == 0.19 and round(cmp.this_total, 2) == 0.96
    causes = cmp.by_cause
    # The whole difference is the denominator: 20 unplayed environments scored 0 in Kaggle's mean.
    assert math.isclose(causes["denominator"], cmp.this_total - cmp.other_total, abs_tol=1e-12)
    assert all(abs(v) < 1e-12 for k, v in causes.items() if k != "denominator")
    assert math.isclose(cmp.this_on_other_set, cmp.other_total, abs_tol=1e-12)
    text = cmp.verdict()
    assert "20 unplayed" in cmp.steps[0]["detail"] and "competition-mode total (kaggle.json)" in text


def test_score_card_compare_with_and_competition(kaggle, tmp_path):
    out = tmp_path / "local"
    code, output = run(str(kaggle["local"]), "--compare-with", str(kaggle["kaggle"]), "--out", str(out),
                       "--no-figures")
    assert code == 0, output
    sc = json.loads((out / SLUG).read_text())
    assert math.isclose(sc["score"], LEVEL, abs_tol=1e-12) and sc["competition_mode"] is False
    assert {c["status"] for c in sc["verification"]["replay_checks"]} == {"summary_only"}
    assert sc["card_inputs"]["note"].startswith("summary only: not replay-verified")
    assert "summary only: not replay-verified" in output
    assert "denominator: +0.769" in output and "competition-mode total" in output
    md = (out / "compare.md").read_text()
    assert "| denominator |" in md
    rows = list(csv.DictReader((out / "compare.csv").open()))
    assert sum(1 for r in rows if r["cause"].startswith("denominator: unplayed there")) == N_ENVS - N_PLAYED
    # The same card in competition mode over the 25 environments gives Kaggle's number, and then they agree.
    code, output = run(str(kaggle["local"]), "--competition", "--games", str(kaggle["games"]), "--compare-with",
                       str(kaggle["kaggle"]), "--out", str(tmp_path / "comp"), "--no-figures")
    assert code == 0, output
    sc = json.loads((tmp_path / "comp" / SLUG).read_text())
    assert sc["competition_mode"] is True and sc["total_environments"] == N_ENVS
    assert math.isclose(sc["score"], json.loads(kaggle["kaggle"].read_text())["score"], abs_tol=1e-12)
    assert len(sc["competition"]["unplayed"]) == N_ENVS - N_PLAYED
    assert "They agree." in output


def test_competition_mode_unplayed_second_make_and_outside_set(tmp_path):
    win = FIXTURES / "an53_scripted-win.frames.jsonl"
    lose = FIXTURES / "an53_scripted-lose.noframes.jsonl"
    other = SAMPLES / "toolkit" / "ls20_random_gameover.noframes.jsonl"  # ls20: public (baselines known), not in the set
    code, output = run(str(win), str(lose), str(other), "--games", str(GAMES), "--competition",
                       "--out", str(tmp_path / "c"), "--no-figures")
    assert code == 3, output  # plays were left out, with their reasons
    sc = json.loads((tmp_path / "c" / SLUG).read_text())
    n_set = len([p for p in GAMES.iterdir() if (p).is_dir()])
    assert sc["competition_mode"] is True and sc["total_environments"] == n_set
    comp = sc["competition"]
    assert comp["played"] == ["an53-6f5f2264"] and len(comp["unplayed"]) == n_set - 1
    assert list(comp["outside_set"]) == ["ls20-9607627b"]
    excluded = {c["file_name"]: c.get("exclusion_reason") for c in sc["verification"]["replay_checks"]
                if c["excluded"]}
    # The first given of an environment is its one play; the later make is left out, and so is what follows
    # a game reset inside the first recording (the competition server never resets a game).
    assert "`make` is called once per environment" in excluded["an53_scripted-lose.noframes.jsonl"]
    assert "not in the environment set" in excluded[other.name]
    unplayed = [e for e in sc["environments"] if e["id"] in comp["unplayed"]]
    assert all(e["score"] == 0.0 and e["runs"][0]["actions"] == 0 for e in unplayed)
    an53 = next(e for e in sc["environments"] if e["id"] == "an53-6f5f2264")
    assert math.isclose(sc["score"], an53["score"] / n_set, abs_tol=1e-12)
    assert "competition mode: a second play of an environment" in output
    assert "played but not in the environment set: ls20-9607627b" in output
    # Only policies that define competition mode accept it.
    code, output = run(str(win), "--games", str(GAMES), "--competition", "--policy", "arc-agi-3/2026-03")
    assert code == 2 and "defines no competition mode" in output and len(output.strip().splitlines()) == 1


def test_cards_from_files_and_database_agree_and_bad_cards_are_quarantined(tmp_path):
    doc = _sidecar("bt11_win_gameover_levelreset.frames.expected.json")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_summary_card(doc)))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    neg = tmp_path / "neg.json"
    neg.write_text(json.dumps({**doc["card"], "game_id": "tu93-0768757b", "actions": [-3]}))
    code, output = run(str(good), str(bad), str(neg), "--out", str(tmp_path / "files"), "--no-figures")
    assert code == 3, output
    assert "bad.json: scorecard rejected: not valid JSON" in output
    # The reason is the reader's, as ingest quarantines it (the card's slot named, in the file and the card).
    assert "neg.json: card quarantined (file slot 0): card slot 0 of tu93-0768757b: actions[0] = -3 is negative" \
        in output
    sc = json.loads((tmp_path / "files" / SLUG).read_text())
    assert math.isclose(sc["score"], doc["scored"]["game_score"], abs_tol=1e-9)
    assert sc["verification"]["baseline_sources"]["bt11-fd9df0622a1a"] == {"source": "scorecard", "cards": "good.json"}
    db = tmp_path / "s.duckdb"
    with Workspace(db) as ws:
        ingest_paths(ws, [good], run_id="test")
    code, output = run("--db", str(db), "--out", str(tmp_path / "db"), "--no-figures")
    assert code == 0, output
    assert (tmp_path / "db" / SLUG).read_bytes() == (tmp_path / "files" / SLUG).read_bytes()


def test_card_of_an_unknown_game_is_left_out(tmp_path):
    doc = _sidecar("bt11_win_gameover_levelreset.frames.expected.json")
    card = tmp_path / "unknown.json"
    card.write_text(json.dumps(doc["card"]))  # a bare card states no baselines; nothing else knows bt11
    known = tmp_path / "known.json"
    known.write_text(json.dumps(_summary_card(_sidecar("vc33_two_levels_then_random.frames.expected.json"))))
    code, output = run(str(card), str(known), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 3, output
    assert "unknown game" in output and "unknown.json" in output


def test_score_files_writes_no_database_in_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ARCSTUDY_DB", raising=False)
    code, output = run(str(FIXTURES / "an53_scripted-win.frames.jsonl"), "--games", str(GAMES), "--no-figures")
    assert code == 0, output
    made = sorted(p.name for p in tmp_path.iterdir())
    assert made == ["arcstudy-score"], made
    (card_dir,) = (tmp_path / "arcstudy-score").iterdir()
    last = output.strip().splitlines()[-1]
    assert last.startswith(f"wrote arcstudy-score/{card_dir.name}/") and "no database kept" in last
    for name in os.listdir(card_dir):
        assert name in last
    rows = list(csv.DictReader((card_dir / "replay_checks.csv").open()))
    assert {r["file_name"] for r in rows} == {"an53_scripted-win.frames.jsonl"} and all(r["guid"] for r in rows)
    # the first line after the sandbox's notice (printed once per process: by an earlier test, or here)
    said = [line for line in output.splitlines() if not line.startswith("arcstudy runs the Python code in")]
    assert said[0].startswith(f"games: {GAMES}")


def test_the_checkout_games_are_searched_only_without_games(tmp_path):
    # The fixture games are not in the checkout: with a wrong --games nothing verifies, and that is said.
    empty = tmp_path / "nothing"
    empty.mkdir()
    rec = str(FIXTURES / "an53_scripted-win.frames.jsonl")
    code, output = run(rec, "--games", str(empty), "--out", str(tmp_path / "w"), "--no-figures")
    assert code == 3, output
    assert "nothing could be verified" in output and "unknown game" in output
    code, output = run(rec, "--out", str(tmp_path / "n"), "--no-figures")
    assert "games: none given (--games): the checkout's" in output


def test_baseline_source_is_reported_per_policy(tmp_path):
    # Two baseline rules in one CSV: each policy resolves its own rule, and the table shows both.
    path = tmp_path / "b.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["game_id", "level_index", "baseline_value", "baseline_rule"])
        for rule, values in (("second-best", [3, 5]), ("upper-median", [4, 6])):
            for i, v in enumerate(values, 1):
                w.writerow(["an53-6f5f2264", i, v, rule])
    code, output = run(str(FIXTURES / "an53_scripted-win.frames.jsonl"), "--games", str(GAMES), "--baselines",
                       str(path), "--policy", "all", "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 0, output
    assert "(second-best)" in output and "(upper-median)" in output  # one baseline-source column per policy
    assert output.count("baseline source") == 3


def test_report_scores_in_competition_mode_and_compared(kaggle, tmp_path):
    db = tmp_path / "r.duckdb"
    code, output = run(str(kaggle["local"]), "--db", str(db), "--out", str(tmp_path / "s"), "--no-figures")
    assert code == 0, output
    result = CliRunner().invoke(app, ["--plain", "report", "scores", "--db", str(db), "--out", str(tmp_path / "rep"),
                                      "--competition", "--games", str(kaggle["games"]), "--compare-with",
                                      str(kaggle["kaggle"])], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    comp = list(csv.DictReader((tmp_path / "rep" / "scores__competition.csv").open()))
    kaggle_total = json.loads(kaggle["kaggle"].read_text())["score"]
    assert len(comp) == 1 and int(comp[0]["n_unplayed"]) == N_ENVS - N_PLAYED
    assert math.isclose(float(comp[0]["competition_total"]), kaggle_total, abs_tol=1e-9)
    assert math.isclose(float(comp[0]["local_total"]), LEVEL, abs_tol=1e-9)
    causes = {r["cause"]: float(r["contribution_points"])
              for r in csv.DictReader((tmp_path / "rep" / "scores__compare_causes.csv").open())}
    assert math.isclose(causes["denominator"], LEVEL - kaggle_total, abs_tol=1e-9)
    html = (tmp_path / "rep" / "scores.html").read_text()
    assert "Competition mode" in html and "competition-mode total" in html
    # A wrong combination is refused in one line.
    result = CliRunner().invoke(app, ["--plain", "report", "scores", "--db", str(db), "--out", str(tmp_path / "x"),
                                      "--competition"], catch_exceptions=False)
    assert result.exit_code == 2 and "--competition needs --games" in result.output


def test_score_files_keeps_no_frame_pixels_once_replayed():
    # Issue 29's finding: every file's pixels were held to the end. Each file is read and replayed in turn and
    # only its tables (frame hashes, not pixels) are kept.
    from pipeline.scoring.parallel import read_and_verify

    paths = sorted(FIXTURES.glob("*.frames.jsonl"))[:4]
    steps, _plays, files, problems, checks = read_and_verify(paths, [GAMES], workers=1)
    assert problems == [] and checks is not None and len(files) == len(paths)
    assert all(getattr(ref, "parsed", None) is None for ref in files.values())
    assert "frames" not in steps.columns
    assert steps.estimated_size() * 20 < sum(p.stat().st_size for p in paths)


def test_a_card_of_a_recording_given_too_is_scored_from_the_recording(tmp_path):
    rec = FIXTURES / "an53_scripted-win.frames.jsonl"
    doc = json.loads((FIXTURES / "an53_scripted-win.frames.expected.json").read_text())
    card = tmp_path / "an53_card.json"
    card.write_text(json.dumps(_summary_card(doc)))
    code, output = run(str(rec), str(card), "--games", str(GAMES), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 0, output
    sc = json.loads((tmp_path / "o" / SLUG).read_text())
    assert {c["status"] for c in sc["verification"]["replay_checks"]} == {"verified"}
    assert len(sc["environments"][0]["runs"]) == len(doc["scored"]["environment"]["runs"])
    assert math.isclose(sc["score"], doc["scored"]["scorecard_score"], abs_tol=1e-9)
    said = [line for line in output.splitlines() if "which is used instead of the card" in line]
    assert len(said) == 1 and said[0].endswith(": replay-verified"), output


def test_baselines_given_replace_the_cards_own(tmp_path):
    doc = _sidecar("bt11_win_gameover_levelreset.frames.expected.json")
    card = tmp_path / "card.json"
    card.write_text(json.dumps(_summary_card(doc)))
    base = tmp_path / "b.csv"
    base.write_text('game_id,baseline_actions\nbt11-fd9df0622a1a,"[4, 17, 16, 20, 24]"\n')
    code, output = run(str(card), "--baselines", str(base), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 0, output
    sc = json.loads((tmp_path / "o" / SLUG).read_text())
    assert sc["verification"]["baseline_sources"]["bt11-fd9df0622a1a"]["source"] == "baselines-csv"
    assert sc["environments"][0]["runs"][0]["level_scores"][1] == 100.0
    assert "level 2 (arc-agi-3/2026-04): stated 22.145, recomputed 100.000: baselines: the card's baseline for " \
           "level 2 is 8, baselines-csv says 17" in output


def test_competition_counts_a_game_reset_as_a_level_reset(tmp_path):
    # ck17 lose: play 1 completes no level, a game reset (full reset) opens play 2, which completes 2 levels.
    rec = FIXTURES / "ck17_scripted-lose.frames.jsonl"
    card = json.loads((FIXTURES / "ck17_scripted-lose.frames.expected.json").read_text())["card"]
    assert card["total_plays"] == 2 and card["levels_completed"] == [0, 2]
    code, output = run(str(rec), "--games", str(GAMES), "--competition", "--out", str(tmp_path / "o"),
                       "--no-figures")
    assert code == 0, output
    sc = json.loads((tmp_path / "o" / SLUG).read_text())
    (env,) = [e for e in sc["environments"] if e["id"] == card["game_id"]]
    (run_,) = env["runs"]
    # One play: the game reset costs one action and one reset, as a level reset does; the levels carry on.
    assert run_["actions"] == sum(card["actions"]) + 1 and run_["resets"] == sum(card["resets"]) + 1
    assert run_["levels_completed"] == 2
    checks = [c for c in sc["verification"]["replay_checks"] if c["game_id"] == card["game_id"]]
    assert [(c["play_id"], c["status"]) for c in checks] == [(f"{card['guids'][0]}/0", "verified")]


def test_competition_charges_the_reset_that_opened_a_local_second_play(tmp_path):
    """A RESET sent at the start of level 2: locally a full reset (a second play from level 1), which the
    competition server never does. It does not execute it either, and charges it as one plain action (the response
    before it was not a RESET's) to the level the play was on (spec/scoring.md §B.1, D.5). It was dropped with the
    second play: the first play was one action short."""
    shipped = Path(__file__).resolve().parents[2] / "games"
    lines = [json.loads(line) for line in next(shipped.glob("rl36/*/solutions/win.jsonl")).open()]
    level_1 = next(i for i, line in enumerate(lines) if line["data"]["levels_completed"] == 1)  # its action's line

    def script(actions: list[dict]) -> Path:
        path = tmp_path / f"rl36_{len(actions)}.playback.jsonl"
        path.write_text("".join(json.dumps({"data": {"action_input": a}}) + "\n" for a in actions))
        return path

    game = {"game_id": lines[0]["data"]["game_id"]}  # a playback script names its game in every action's data
    actions = [{**line["data"]["action_input"], "data": {**line["data"]["action_input"]["data"], **game}}
               for line in lines[1:]]
    reset = {"id": "RESET", "data": game, "reasoning": None}
    path = script(actions[:level_1] + [reset] + actions[level_1:])
    code, output = run(str(path), "--games", str(shipped), "--competition", "--out", str(tmp_path / "o"),
                       "--no-figures")
    assert code == 3, output  # the local second play is left out, as before
    sc = json.loads((tmp_path / "o" / SLUG).read_text())
    (run_,) = [r for e in sc["environments"] if e["id"].startswith("rl36") for r in e["runs"]]
    assert (run_["actions"], run_["resets"], run_["levels_completed"]) == (level_1 + 1, 0, 1)
    assert run_["level_actions"][:2] == [level_1, 1]


@pytest.mark.parametrize("sidecar", sorted((SAMPLES / "toolkit").glob("*.expected.json")),
                         ids=lambda p: p.name.removesuffix(".expected.json"))
def test_each_official_card_alone_gives_the_official_numbers(sidecar, tmp_path):
    doc = json.loads(sidecar.read_text())
    card = tmp_path / "card.json"
    card.write_text(json.dumps(_summary_card(doc)))
    code, output = run(str(card), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 0, output
    sc = json.loads((tmp_path / "o" / SLUG).read_text())
    assert math.isclose(sc["score"], doc["scored"]["scorecard_score"], abs_tol=1e-9)
    (env,) = sc["environments"]
    expected = doc["scored"]["environment"]
    assert [r["score"] for r in env["runs"]] == pytest.approx([r["score"] for r in expected["runs"]], abs=1e-9)
    assert [r["level_actions"] for r in env["runs"]] == [r["level_actions"] for r in expected["runs"]]
    assert all("differences" not in r for r in sc["card_inputs"]["runs"])
    assert f"card.json states a total of {doc['scored']['scorecard_score']:.3f}; recomputed" in output
    assert "(the same)" in output


def test_compare_with_a_card_that_contradicts_itself_says_why(tmp_path):
    """A card wrapper refused by the card rule once got "not a scored summary", as if it were no scorecard."""
    doc = _sidecar("bt11_two_plays_fullreset.noframes.expected.json")
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps(_summary_card(doc)))
    other = tmp_path / "wrapper.json"
    other.write_text(json.dumps({"won": 0, "played": 1, "cards": {doc["game_id"]: {**doc["card"], "total_plays": 7}}}))
    code, output = run(str(mine), "--compare-with", str(other), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 2, output
    assert "total_plays is 7 but the card has" in " ".join(output.split()), output


def test_compare_with_a_card_without_scores_scores_it_first(tmp_path):
    # A card wrapper (no scores in it) holding only the first of the session's two plays: scored here under the
    # same policy and baselines, then compared; the difference is the run it lacks.
    doc = _sidecar("bt11_two_plays_fullreset.noframes.expected.json")
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps(_summary_card(doc)))
    card = dict(doc["card"])
    one = {k: [v[0]] for k, v in card.items() if isinstance(v, list)}
    wrapper = {"won": 0, "played": 1, "cards": {doc["game_id"]: {**card, **one, "total_plays": 1,
                                                    "total_actions": card["actions"][0]}}}
    other = tmp_path / "wrapper.json"
    other.write_text(json.dumps(wrapper))
    code, output = run(str(mine), "--compare-with", str(other), "--out", str(tmp_path / "o"), "--no-figures")
    assert code == 0, output
    assert "compared with wrapper.json (its cards scored here)" in output
    rows = list(csv.DictReader((tmp_path / "o" / "compare.csv").open()))
    game = [r for r in rows if r["level_index"] == ""]
    assert game and game[0]["cause"].startswith("counting: 1 run(s) there, 2 here")


def test_a_competition_card_says_what_it_is_and_its_idle_environments(kaggle, tmp_path):
    """The competition card (kaggle.json: the 20 environments no one played hold a zero-action run, as the
    toolkit's close adds them) rescored without --competition said nothing of the mode it states; with it, the
    idle environments were counted as played."""
    code, output = run(str(kaggle["kaggle"]), "--out", str(tmp_path / "plain"))
    assert code == 0, output
    assert "kaggle.json: competition mode, as the card says; rescored as given" in output
    assert "pass --competition --games DIR" in output
    code, output = run(str(kaggle["kaggle"]), "--competition", "--games", str(kaggle["games"]), "--out",
                       str(tmp_path / "comp"))
    assert code == 0, output
    assert (f"competition mode: {N_ENVS} environments in the set, {N_PLAYED} played, {N_ENVS - N_PLAYED} opened "
            "without an action (score 0), 0 unplayed (score 0)") in output
    assert "competition mode, as the card says" not in output


def test_a_card_play_with_a_pre_096_pair_is_scored_positionally_and_its_flag_kept(tmp_path):
    """formats.md C: "flag play: level numbers in the pairs not exactly `1..k` in order (... a `[0, n]` pair from
    builds before 0.9.6 ...). Score such plays with the toolkit's positional rule but keep the flag." The score
    kept no flag (ingest did)."""
    games = tmp_path / "games" / "aa04" / "00000004"
    games.mkdir(parents=True)
    (games / "metadata.json").write_text(json.dumps({"game_id": "aa04-00000004", "baseline_actions": [4, 8, 16]}))
    card = {"won": 1, "played": 1, "total_actions": 15, "levels_completed": 3, "cards": {
        "aa04-00000004": {"game_id": "aa04-00000004", "total_plays": 1,
                          "guids": ["44444444-0000-4000-8000-000000000001"], "levels_completed": [3],
                          "states": ["WIN"], "actions": [15], "actions_by_level": [[[1, 4], [2, 12], [0, 15]]],
                          "resets": [0], "total_actions": 15}}}  # a card wrapper, as the REST server answers
    path = tmp_path / "quirks.json"
    path.write_text(json.dumps(card))
    code, output = run(str(path), "--baselines", str(tmp_path / "games"), "--out", str(tmp_path / "out"))
    assert code == 0, output
    assert "card quirks.json aa04-00000004 run 0: flagged pair_levels_not_1_to_k" in output
    sc = json.loads(next((tmp_path / "out").glob("scorecard__*.json")).read_text())
    [entry] = sc["card_inputs"]["runs"]
    assert entry["flags"] == ["pair_levels_not_1_to_k"]
    # positional: the levels cost 4, 8 and 3 actions against baselines 4, 8, 16 (scored 100, 100, 100)
    assert math.isclose(sc["score"], 100.0)
