"""`arcstudy view FILE` and `arcstudy score FILE` report the same plays and counts for every recording variant.

Both commands run in-process through the CLI. The view's numbers are read from the JSON embedded in its page
(its plays with their card counts and RHAE run, its replay status and baseline, and the per-step columns the
page counts its per-level table from); the score's from the out tables it writes. Both are also held against the toolkit card of the sample the file comes
from (its expected.json, written by the official toolkit), so a viewer or scorer that counts differently fails
even when the other one makes the same mistake.

Variants: toolkit recordings with enum-name action ids (as recorded) and with integer ids (the same file, ids
rewritten); the official human dataset; the agents/benchmarking recorder (the real sample, whose action ids
were lost, and a toolkit recording rewritten to that recorder's shape: no opening RESET, integer ids, LLM usage
lines); the 2025 preview (`score`/`win_score` instead of `levels_completed`/`win_levels`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from pipeline.cli import app

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO.parent / "shared" / "samples" / "arc-agi-3"
GAMES = REPO.parent / "shared" / "conformance" / "environment_files"
ACTIONS = ("RESET", "ACTION1", "ACTION2", "ACTION3", "ACTION4", "ACTION5", "ACTION6", "ACTION7")
CARD_FIELDS = ("actions", "resets", "levels_completed", "state", "actions_by_level")


def arcstudy(*args: str):
    result = CliRunner().invoke(app, ["--plain", *args])
    return result


# ---------------------------------------------------------------------------------------------------- files
def _lines(path: Path) -> list[dict]:
    return [json.loads(text) for text in path.read_text().splitlines() if text.strip()]


def _write(path: Path, objects: list[dict]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    return path


def _integer_ids(objects: list[dict]) -> list[dict]:
    for o in objects:
        action = o["data"].get("action_input")
        if action is not None and isinstance(action["id"], str):
            action["id"] = ACTIONS.index(action["id"])
    return objects


def as_recorded(source: Path, tmp: Path) -> Path:
    return source


def integer_ids(source: Path, tmp: Path) -> Path:
    return _write(tmp / source.name.replace(".jsonl", ".int-ids.jsonl"), _integer_ids(_lines(source)))


def benchmarking_shape(source: Path, tmp: Path) -> Path:
    """The agents recorder's shape: the opening RESET not recorded, integer ids, a usage line after each step."""
    frames = _integer_ids(_lines(source))
    assert frames[0]["data"]["action_input"]["id"] == 0
    out = []
    for number, line in enumerate(frames[1:], start=1):
        out.append(line)
        out.append({"timestamp": line["timestamp"], "data": {"tokens": 10 * number, "total_tokens": 100 * number,
                                                             "assistant": f"step {number}"}})
    return _write(tmp / source.name.replace(".jsonl", ".benchmarking.jsonl"), out)


def preview_2025(source: Path, tmp: Path) -> Path:
    """The 2025 preview's field names, `score` and `win_score`, and its integer action ids (formats.md §A.4;
    enum-name ids are the toolkit recorder's, which the variant rule checks first)."""
    objects = _integer_ids(_lines(source))
    for o in objects:
        data = o["data"]
        data["score"] = data.pop("levels_completed")
        data["win_score"] = data.pop("win_levels")
    return _write(tmp / source.name.replace(".jsonl", ".preview.jsonl"), objects)


BENCHMARKING = next((SAMPLES / "benchmarking").glob("*.recording.jsonl"))
CASES = {
    # id: (sample, rewrite, the variant ingest and score read it as)
    "toolkit-enum-ids": (SAMPLES / "toolkit" / "bt11_two_plays_fullreset.noframes.jsonl", as_recorded, "toolkit"),
    "toolkit-enum-ids-replayed": (SAMPLES / "fixtures" / "cm86_scripted-lose.noframes.jsonl", as_recorded,
                                  "toolkit"),
    "toolkit-integer-ids": (SAMPLES / "toolkit" / "bt11_two_plays_fullreset.noframes.jsonl", integer_ids, None),
    "human-dataset": (SAMPLES / "human" / "cd82" / "92a1d4d1-9b0c-4d2a-bdcd-02c51c743ead.recording.jsonl",
                      as_recorded, "human-dataset"),
    "human-dataset-2": (SAMPLES / "human" / "vc33" / "82f713eb-a8b5-43fe-a7e2-ca6a5e9451c7.recording.jsonl",
                        as_recorded, "human-dataset"),
    "benchmarking-ids-lost": (BENCHMARKING, as_recorded, "benchmarking"),
    "benchmarking-shape": (SAMPLES / "fixtures" / "ck17_scripted-lose.frames.jsonl", benchmarking_shape,
                           "benchmarking"),
    "preview-2025": (SAMPLES / "fixtures" / "tf62_scripted-lose.noframes.jsonl", preview_2025, "preview-2025"),
}


def later_snapshot_baselines(tmp: Path) -> Path:
    """formats.md A.4: a 2025 preview play is scored "only under `arc-agi-3/2025-preview` unless a baseline for the
    same `game_id` exists in a later snapshot"; view and score use the default policy (2026-04), so the preview case
    gives its game's baseline (the conformance metadata's) as one from a later snapshot."""
    meta = json.loads((GAMES / "tf62" / "28e6852d" / "metadata.json").read_text())
    path = tmp / "later_snapshot.csv"
    path.write_text(f'game_id,baseline_actions,snapshot\n{meta["game_id"]},"{meta["baseline_actions"]}",current\n')
    return path


# ---------------------------------------------------------------------------------------------------- reading
def view_data(html: Path) -> dict:
    match = re.search(r'<script type="application/json" id="viewer-data">(.*?)</script>', html.read_text(), re.S)
    assert match, "the page embeds no viewer data"
    return json.loads(match.group(1))


def score_rows(db: Path, guid: str, game_id: str) -> tuple[dict[str, dict], dict[str, str], list]:
    """What the score wrote for the recording `guid` (default policy): counts and run score per play_id
    (out_arc3__run_scores), replay status per play_id, and the baselines of its game it scored against."""
    with duckdb.connect(str(db), read_only=True) as con:
        assert len(con.execute("SELECT DISTINCT policy_id FROM out_arc3__run_scores").fetchall()) <= 1
        rows = con.execute("SELECT play_id, actions, resets, levels_completed, state, card_actions_by_level, "
                           "score, message FROM out_arc3__run_scores WHERE guid = ?", [guid]).fetchall()
        checks = dict(con.execute("SELECT play_id, verification_status FROM out_arc3__replay_checks "
                                  "WHERE guid = ?", [guid]).fetchall())
        baselines = [b for (b,) in con.execute("SELECT baseline_actions FROM out_arc3__game_scores "
                                               "WHERE game_id = ?", [game_id]).fetchall()]
    counts = {pid: {"actions": a, "resets": r, "levels_completed": lc, "state": s,
                    "actions_by_level": [list(p) for p in abl], "score": score, "message": message}
              for pid, a, r, lc, s, abl, score, message in rows}
    return counts, checks, baselines


def toolkit_card(sample: Path, guid: str) -> list[dict]:
    """The plays of the sample's toolkit card that belong to the recording's guid (a human card can hold a
    stub play of another session)."""
    card = json.loads(sample.with_name(sample.name.replace(".jsonl", ".expected.json")).read_text())["card"]
    guids = card["guids"] or [guid] * card["total_plays"]
    return [{"actions": card["actions"][i], "resets": card["resets"][i],
             "levels_completed": card["levels_completed"][i], "state": card["states"][i],
             "actions_by_level": [list(p) for p in card["actions_by_level"][i]]}
            for i in range(card["total_plays"]) if guids[i] == guid]


def page_level_counts(data: dict) -> list[Counter]:
    """Per play, the actions the page charges to each level (what its per-level table counts)."""
    counts = [Counter() for _ in range(data["n_plays"])]
    for play, level in zip(data["steps"]["play"], data["steps"]["charged"], strict=True):
        if level:
            counts[play][level] += 1
    return counts


def level_actions(card: dict) -> list[int]:
    """Actions per level of a card play by the toolkit's rule: differences of the cumulative pairs, then the
    actions after the last completed level (dropped when there are none)."""
    out, previous = [], 0
    for _, cumulative in card["actions_by_level"]:
        out.append(cumulative - previous)
        previous = cumulative
    if card["actions"] > previous:
        out.append(card["actions"] - previous)
    return out


# ---------------------------------------------------------------------------------------------------- checks
def assert_view_matches_score(data: dict, db: Path) -> None:
    """The page shows the score's plays, counts, run scores, replay status and baseline."""
    counts, checks, baselines = score_rows(db, data["guid"], data["game_id"])
    view_plays = {p["play_id"]: p for p in data["plays"]}
    assert checks and set(view_plays) == set(checks)
    assert {pid: {**{k: p["card"][k] for k in CARD_FIELDS}, "score": p["run"]["score"],
                  "message": p["run"].get("message")} for pid, p in view_plays.items() if p["card"]} == counts
    assert baselines == ([data["baseline"]] if counts else [])  # the baseline the score used, if it scored
    statuses = set(checks.values())
    assert data["verification"]["status"] in statuses
    if statuses == {"verified"}:
        assert data["verification"]["status"] == "verified"


def assert_toolkit_card(case: str, data: dict, path: Path) -> None:
    """The page's plays are the toolkit card of the sample the file comes from, and its per-step columns
    charge every level the card's number of actions (for the file whose ids were lost: nothing is counted)."""
    sample = CASES[case][0]
    if case == "benchmarking-ids-lost":
        assert {line["data"]["action_input"]["id"] for line in _lines(path) if "action_input" in line["data"]} == {0}
        assert data["is_action_ids_lost"] and all(p["card"] is None and p["run"] is None for p in data["plays"])
        assert set(data["steps"]["charged"]) == {0}
        return
    expected = toolkit_card(sample, data["guid"])
    plays = sorted(data["plays"], key=lambda p: int(p["play_id"].rsplit("/", 1)[1]))
    assert [{k: p["card"][k] for k in CARD_FIELDS} for p in plays] == expected
    for card, charged in zip(expected, page_level_counts(data), strict=True):
        assert [charged[level] for level in range(1, len(level_actions(card)) + 1)] == level_actions(card)
        assert sum(charged.values()) == card["actions"]


# ---------------------------------------------------------------------------------------------------- the tests
@pytest.mark.parametrize("case", list(CASES))
def test_view_and_score_report_the_same_counts(case: str, tmp_path: Path):
    sample, rewrite, variant = CASES[case]
    path = rewrite(sample, tmp_path)
    page, db = tmp_path / "view.html", tmp_path / "score.duckdb"
    # --include-unknown-games: bt11 has no game files here and no baseline, which the score leaves out by
    # default (and the viewer then exits 3, as the score does); the counts are what is compared
    later = ["--baselines", str(later_snapshot_baselines(tmp_path))] if variant == "preview-2025" else []
    res = arcstudy("view", str(path), "--games", str(GAMES), "--out", str(page), "--include-unknown-games", *later)
    assert res.exit_code == 0, res.output
    res = arcstudy("score", str(path), "--games", str(GAMES), "--db", str(db), "--out", str(tmp_path / "score"),
                   "--no-figures", "--trust-recordings", "--include-unknown-games", *later)
    assert res.exit_code in (0, 3), res.output
    data = view_data(page)
    if variant is not None:
        assert data["variant"] == variant
    assert_view_matches_score(data, db)
    assert_toolkit_card(case, data, path)


# one recording per session guid (a database play is looked up by it)
DATABASE_CASES = [case for case in CASES if case != "toolkit-enum-ids"]


def test_view_and_score_agree_on_database_plays(tmp_path: Path):
    """The same from the database: every recording ingested, scored from core_arc3__steps/plays, and each
    viewed by its guid."""
    paths = {case: CASES[case][1](CASES[case][0], tmp_path) for case in DATABASE_CASES}
    db = tmp_path / "study.duckdb"
    res = arcstudy("ingest", *map(str, paths.values()), "--db", str(db))
    assert res.exit_code in (0, 3), res.output
    later = ["--baselines", str(later_snapshot_baselines(tmp_path))]  # knows the preview case's game only
    res = arcstudy("score", "--games", str(GAMES), "--db", str(db), "--out", str(tmp_path / "score"),
                   "--no-figures", "--trust-recordings", "--include-unknown-games", *later)
    assert res.exit_code in (0, 3), res.output
    failures = []
    for case, path in paths.items():
        guid = next(line["data"]["guid"] for line in _lines(path) if line["data"].get("guid"))
        page = tmp_path / f"{case}.html"
        res = arcstudy("view", guid, "--db", str(db), "--games", str(GAMES), "--out", str(page),
                       "--include-unknown-games", *later)
        assert res.exit_code == 0, res.output
        data = view_data(page)
        assert data["kind"] == "database" and data["guid"] == guid
        assert_view_matches_score(data, db)
        try:
            assert_toolkit_card(case, data, path)
        except AssertionError as err:  # collected so that one case does not hide the others
            failures.append(f"{case}: {err}")
    assert failures == []
