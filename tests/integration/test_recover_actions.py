"""Recovering lost action ids from frames (`arcstudy recover-actions`, `score/view --recover-actions`).

Toolkit recordings of the conformance games (samples/arc-agi-3/fixtures, with frames) are rewritten the way the
agents repository's recorder writes them: every `action_input` the default RESET with empty data (#91), no line
for make()'s RESET (#92), an LLM usage line before each frame line, the agents naming. Recovered, they must score
exactly like the originals; clicks must come back with the regions that fit; recordings without frames and
hostile ones must be refused with the step and the reason, within the search bounds.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.explore.recover import RecoverJob, RecoverLimits, recover_file
from pipeline.scoring.plays import RecordingReadError, load_recovered_actions

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
FIXTURES = SHARED / "samples" / "arc-agi-3" / "fixtures"
GAMES = SHARED / "conformance" / "environment_files"
WITH_FRAMES = ["tf62_scripted-win.frames.jsonl", "ck17_scripted-lose.frames.jsonl", "pl39_scripted-lose.frames.jsonl",
               "ly28_scripted-lose.frames.jsonl"]
SLUG = "scorecard__arc-agi-3_2026-04.json"
T0 = datetime(2026, 4, 1, tzinfo=UTC)


def toolkit_lines(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines() if line.strip()]


def agents_recording(folder: Path, lines: list[dict], *, keep_frame_0: bool = False, tag: str = "scripted") -> Path:
    """``lines`` (toolkit lines) as the agents recorder writes them: ids lost, frame 0 dropped unless asked."""
    data = [dict(ln["data"]) for ln in (lines if keep_frame_0 else lines[1:])]
    game_id = data[0]["game_id"]
    name = f"{game_id}.{tag}.100.{uuid.uuid5(uuid.NAMESPACE_URL, tag + game_id + str(keep_frame_0))}.recording.jsonl"
    path = folder / name
    with open(path, "w", encoding="utf-8") as fh:
        for i, d in enumerate(data):
            stamp = (T0 + timedelta(seconds=i)).isoformat(timespec="microseconds")
            fh.write(json.dumps({"timestamp": stamp, "data": {"tokens": 100, "total_tokens": 100 * (i + 1),
                                                              "conversation_length": 2, "assistant": ""}}) + "\n")
            d["action_input"] = {"id": 0, "data": {}, "reasoning": None}
            fh.write(json.dumps({"timestamp": stamp, "data": d}) + "\n")
    return path


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--plain", *args], catch_exceptions=False)
    return result.exit_code, result.output


def recover(path: Path, limits: RecoverLimits = RecoverLimits()):
    return recover_file(RecoverJob(str(path), (str(GAMES),), limits))


def original_actions(name: str) -> list[tuple[str, int | None, int | None]]:
    """(action name, x, y) of the lines after frame 0 that are not post-terminal echoes."""
    out = []
    for ln in toolkit_lines(name)[1:]:
        d = ln["data"]
        if d.get("frame") == []:
            continue
        a = d["action_input"]
        out.append((a["id"], a["data"].get("x"), a["data"].get("y")))
    return out


@pytest.fixture(scope="module")
def blanked(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("lost")
    return {name: agents_recording(folder, toolkit_lines(name)) for name in WITH_FRAMES}


# --------------------------------------------------------------------------------------------------------
def test_blanked_toolkit_recordings_recover_and_score_exactly_like_the_originals(blanked, tmp_path):
    out_json = tmp_path / "recovered.json"
    code, output = cli("recover-actions", *map(str, blanked.values()), "--games", str(GAMES), "--out", str(out_json))
    assert code == 0, output
    assert f"{len(blanked)} recordings recovered, 0 not recoverable" in output
    doc = json.loads(out_json.read_text())
    for name, path in blanked.items():
        steps = doc[path.name]
        assert len(steps) == len(original_actions(name))
        # every recorded action is the one found or among the alternatives listed (all fit equally)
        for step, (aid, _, _) in zip(steps, original_actions(name), strict=True):
            fitting = {step["action"]} | {alt.split("@")[0] for alt in step.get("alternatives", [])}
            if step["n_fit"] <= 1 + len(step.get("alternatives", [])):  # every fit listed
                assert aid in fitting, (name, step, aid)
        assert doc["$recovery"]["files"][path.name]["provenance"].startswith("recovered from frames by arcstudy")

    scored = {}
    for label, inputs, extra in (("original", [FIXTURES / n for n in blanked], []),
                                 ("recovered", list(blanked.values()), ["--recovered-actions", str(out_json)]),
                                 ("in-line", list(blanked.values()), ["--recover-actions"])):
        out_dir = tmp_path / label
        code, output = cli("score", *map(str, inputs), "--games", str(GAMES), *extra, "--db",
                           str(tmp_path / f"{label}.duckdb"), "--out", str(out_dir), "--no-figures")
        assert code == 0, output
        assert "verified" in output and "not_replayable" not in output
        scored[label] = json.loads((out_dir / SLUG).read_text())
        checks = (out_dir / "replay_checks.csv").read_text()
        assert ("recovered from frames by arcstudy recover-actions" in checks) == (label != "original")

    def without_verification(card: dict) -> dict:
        return {k: v for k, v in card.items() if k != "verification"}

    # the same plays (same guids: the same card id), the same actions per level, the same scores
    assert without_verification(scored["recovered"]) == without_verification(scored["original"])
    assert scored["in-line"] == scored["recovered"]  # the provenance included
    assert scored["recovered"]["score"] == scored["original"]["score"]
    checks = scored["recovered"]["verification"]["replay_checks"]
    assert checks and all(c["status"] == "verified" and c["recovered"].startswith("recovered from frames")
                          for c in checks)
    assert not any("recovered" in c for c in scored["original"]["verification"]["replay_checks"])


def test_clicks_come_back_with_every_region_that_fits(blanked):
    name = "pl39_scripted-lose.frames.jsonl"
    found = recover(blanked[name])
    assert found.ok, found.error
    clicks = [s for s in found.steps if s.action_id == 6]
    assert clicks and all(s.x is not None and s.y is not None for s in clicks)
    several = [s for s in clicks if s.n_fit > 1]
    assert several, "pl39's script clicks places where several regions give the same outcome"
    for s in several:
        assert len(s.alternatives) == min(s.n_fit - 1, 8)
        assert all(a.startswith("ACTION6@(") for a in s.alternatives) and not s.ambiguous  # one kind: clicks
        assert s.label not in s.alternatives
    # where the script clicked, a click was found (not another kind of action: none of those fits there)
    recorded = original_actions(name)
    assert all(recorded[found.steps.index(s)][0] == "ACTION6" for s in clicks)


def test_an_ambiguous_step_names_actions_of_different_kinds(blanked):
    found = recover(blanked["ly28_scripted-lose.frames.jsonl"])
    assert found.ok, found.error
    # ly28: a fit whose hidden state a later frame contradicts was followed first, then left (and the whole
    # recording verifies: test_blanked_toolkit_recordings_recover_and_score_exactly_like_the_originals)
    assert found.n_backtracks >= 1
    ambiguous = [s for s in found.steps if s.ambiguous]
    assert ambiguous
    for s in ambiguous:
        kinds = {s.label.split("@")[0]} | {a.split("@")[0] for a in s.alternatives}
        assert len(kinds) > 1
        assert len(s.alternatives) == min(s.n_fit - 1, 8)
    assert any(a.startswith("ACTION6@") for s in ambiguous for a in s.alternatives)  # a click among them
    as_json = [s.to_json() for s in found.steps if s.ambiguous][0]
    assert as_json["ambiguous"] is True and as_json["n_fit"] >= 2 and as_json["alternatives"]


def test_frame_0_is_taken_from_make_whether_or_not_it_was_written(tmp_path):
    lines = toolkit_lines("tf62_scripted-win.frames.jsonl")
    without = recover(agents_recording(tmp_path, lines))
    with_0 = recover(agents_recording(tmp_path, lines, keep_frame_0=True))
    assert without.ok and with_0.ok, (without.error, with_0.error)
    assert with_0.steps[0].action_id == 0  # the written frame 0 is make()'s RESET (full_reset: true)
    assert [s.label for s in with_0.steps[1:]] == [s.label for s in without.steps]


def test_a_recording_without_frames_is_refused_in_one_line(tmp_path):
    path = agents_recording(tmp_path, toolkit_lines("tf62_scripted-lose.noframes.jsonl"))
    code, output = cli("recover-actions", str(path), "--games", str(GAMES), "--out", str(tmp_path / "r.json"))
    assert code == 3
    line = [ln for ln in output.splitlines() if path.name in ln and "cannot recover" in ln]
    assert len(line) == 1 and "the recording has no frames" in line[0]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert path.name not in doc and "no frames" in doc["$recovery"]["not_recovered"][path.name]["reason"]
    code, output = cli("score", str(path), "--games", str(GAMES), "--recover-actions", "--db",
                       str(tmp_path / "s.duckdb"), "--out", str(tmp_path / "s"), "--no-figures")
    assert code == 3 and "--recover-actions: cannot recover: the recording has no frames" in output


def test_a_frame_no_action_can_produce_ends_at_its_step(tmp_path):
    lines = toolkit_lines("tf62_scripted-win.frames.jsonl")
    bad = json.loads(json.dumps(lines))
    bad[6]["data"]["frame"][-1][10][10] = (bad[6]["data"]["frame"][-1][10][10] + 7) % 16  # one cell repainted
    found = recover(agents_recording(tmp_path, bad, tag="repainted"))
    assert not found.ok
    assert found.error.startswith("not recoverable at step 5 (line ")  # line 6 of the toolkit file = step 5
    assert "no candidate action reproduces it" in found.error and "frame" in found.error
    assert found.failed_step == 5


def test_lines_the_reader_left_out_are_named_and_the_exit_code_says_so(tmp_path):
    """A truncated last line was dropped without a word (exit 0, "recovered"); a line with a bad frame was not
    named, the failure blamed on the next line."""
    path = agents_recording(tmp_path, toolkit_lines("tf62_scripted-win.frames.jsonl"))
    text = path.read_text()
    path.write_text(text[:len(text) - 4000])  # cut mid-write: the last line has no end
    code, output = cli("recover-actions", str(path), "--games", str(GAMES), "--out", str(tmp_path / "r.json"))
    assert code == 3, output
    assert "recovered" in output and "left out, line " in output and "truncated_line" in output
    manifest = json.loads((tmp_path / "r.manifest.json").read_text())
    (left,) = manifest["notes"]["lines_left_out"][path.name]
    assert "truncated_line" in left


def test_a_flood_of_lines_left_out_is_listed_in_part_and_written_in_full(tmp_path, monkeypatch):
    """Each of a million bad lines was held as a string, printed and put in the manifest: the reasons now wait
    on disk, the manifest lists the first LISTED_PROBLEMS per file and names a file of every one."""
    from pipeline.core import manifest as manifest_mod
    from pipeline.core.spool import Spool

    monkeypatch.setattr(Spool.__init__, "__defaults__", ((), 50))  # the 300 reasons go through the disk
    monkeypatch.setattr(manifest_mod, "LISTED_PROBLEMS", 25)
    path = agents_recording(tmp_path, toolkit_lines("tf62_scripted-win.frames.jsonl"))
    with path.open("a") as fh:
        fh.write("{}\n" * 300)
    code, output = cli("recover-actions", str(path), "--games", str(GAMES), "--out", str(tmp_path / "r.json"))
    assert code == 3, output
    assert output.count("left out, line ") == 10 and "... and 290 more lines left out (see the manifest)" in output
    notes = json.loads((tmp_path / "r.manifest.json").read_text())["notes"]
    assert len(notes["lines_left_out"][path.name]) == 25 and notes["every_line_left_out_count"] == 300
    every = [json.loads(x) for x in (tmp_path / notes["every_line_left_out_file"]).read_text().splitlines()]
    assert len(every) == 300 and every[0].startswith(f"{path.name}: line ")
    assert json.loads((tmp_path / "r.json").read_text())  # the recovery itself is written


def test_a_long_run_of_identical_frames_ends_within_the_search_bounds(tmp_path):
    lines = toolkit_lines("tf62_scripted-win.frames.jsonl")
    start = lines[0]["data"]
    hostile = [lines[0]] + [{"data": {**start, "full_reset": False}} for _ in range(300)] + [lines[9]]
    path = agents_recording(tmp_path, hostile, tag="hostile")
    code, output = cli("recover-actions", str(path), "--games", str(GAMES), "--out", str(tmp_path / "h.json"),
                       "--max-backtrack-tries", "300")
    assert code == 3
    assert f"{path.name}: not recoverable at step 300 (line " in output
    assert "search budget exhausted" in output or "no candidate action reproduces it" in output


def test_recovered_actions_files_are_checked(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"$recovery": {"files": {"a.jsonl": {"provenance": "by hand"}}},
                                "a.jsonl": ["ACTION1", {"action": "ACTION6", "x": 3, "y": 63}, 2],
                                "b.jsonl": ["RESET"]}))
    loaded = load_recovered_actions(good)
    assert sorted(loaded) == ["a.jsonl", "b.jsonl"]
    assert loaded["a.jsonl"].provenance == "by hand"
    assert loaded["b.jsonl"].provenance == "recovered actions supplied with --recovered-actions good.json"
    for bad in ({"action": "ACTION6", "x": 64, "y": 0}, {"action": "ACTION1", "x": 1, "y": 1}, {"x": 1}):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps({"a.jsonl": ["ACTION1", bad]}))
        with pytest.raises(RecordingReadError, match="a.jsonl: action 1"):
            load_recovered_actions(path)


def test_view_recovers_in_line_and_says_so(blanked, tmp_path):
    path = blanked["ck17_scripted-lose.frames.jsonl"]
    code, output = cli("view", str(path), "--games", str(GAMES), "--recover-actions", "--out",
                       str(tmp_path / "v.html"))
    assert code == 0, output
    assert "replay: verified" in output and "actions recovered" in output
    assert "step 0 (line 2): 2 actions fit; shown: ACTION6@(31,10), also: ACTION6@(31,31)" in output
    html = (tmp_path / "v.html").read_text()
    assert "recovered from frames by arcstudy recover-actions" in html
    code, output = cli("view", str(path), "--games", str(GAMES), "--out", str(tmp_path / "w.html"))
    assert code == 0 and "replay: not_replayable" in output


def test_database_plays_recover_from_their_stored_frame_hashes(blanked, tmp_path):
    from pipeline.core.workspace import Workspace
    from pipeline.ingest import ingest_paths

    lost = [blanked["tf62_scripted-win.frames.jsonl"], blanked["ck17_scripted-lose.frames.jsonl"]]
    no_frames = agents_recording(tmp_path, toolkit_lines("tf62_scripted-lose.noframes.jsonl"))
    db = tmp_path / "study.duckdb"
    with Workspace(db) as ws:
        assert {f.status for f in ingest_paths(ws, [*lost, no_frames], run_id="t").files} == {"loaded"}
    cards = {}
    for label, inputs in (("db", ["--db", str(db)]), ("files", [*map(str, lost), "--db", str(tmp_path / "f.duckdb")])):
        code, output = cli("score", *inputs, "--games", str(GAMES), "--recover-actions", "--out",
                           str(tmp_path / label), "--no-figures")
        cards[label] = json.loads((tmp_path / label / SLUG).read_text())
        if label == "db":  # the recording without frames cannot be recovered: said, its play left out
            assert code == 3
            assert f"rejected input: {no_frames.name}: --recover-actions: cannot recover: the recording has no " \
                   "frames" in " ".join(output.split())
        else:
            assert code == 0, output
    runs = {label: [(e["id"], [(r["guid"], r["score"], r["actions"], r["level_actions"]) for r in e["runs"]])
                    for e in card["environments"]] for label, card in cards.items()}
    by_game = {label: {game: rs for game, rs in value} for label, value in runs.items()}
    for game, rs in by_game["files"].items():
        assert by_game["db"][game] == rs
    checks = [c for c in cards["db"]["verification"]["replay_checks"] if c["game_id"] in by_game["files"]]
    recovered = [c for c in checks if c.get("recovered")]
    assert recovered and all(c["status"] == "verified" for c in recovered)
    # the viewer recovers a database play the same way
    code, output = cli("view", recovered[0]["play_id"], "--db", str(db), "--games", str(GAMES), "--recover-actions",
                       "--out", str(tmp_path / "db.html"))
    assert code == 0, output
    assert "replay: verified" in output and "actions recovered" in output


def test_a_recording_made_through_the_rest_api_gets_its_full_resets_from_the_engine(tmp_path):
    """Lines made through the REST API always say `full_reset: false`: the recovered RESETs take the engine's
    kind (full or level reset), so the plays split and count as in the original."""
    # the whole file: its last line is a RESET right after a full reset, which a no-op action at the level's
    # start reproduces as well once full_reset says nothing; RESET, what the file says, is followed there (a no-op
    # was, and the play counted an action the original does not)
    lines = toolkit_lines("tf62_scripted-win.frames.jsonl")
    original = tmp_path / "tf62-original.jsonl"
    original.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    assert sum(ln["data"]["full_reset"] for ln in lines[1:]) >= 2  # full resets after frame 0: several plays
    rest = json.loads(json.dumps(lines))
    for ln in rest:
        ln["data"]["full_reset"] = False
    path = agents_recording(tmp_path, rest, tag="rest")
    found = recover(path)
    assert found.ok, found.error
    assert [s.full_reset for s in found.steps if s.action_id == 0] == \
        [ln["data"]["full_reset"] for ln in lines[1:] if ln["data"]["action_input"]["id"] == "RESET"]
    cards = {}
    for label, inputs, extra in (("original", [original], []), ("rest", [path], ["--recover-actions"])):
        code, output = cli("score", *map(str, inputs), "--games", str(GAMES), *extra, "--db",
                           str(tmp_path / f"{label}.duckdb"), "--out", str(tmp_path / label), "--no-figures")
        assert code == 0, output
        cards[label] = {k: v for k, v in json.loads((tmp_path / label / SLUG).read_text()).items()
                        if k != "verification"}
    assert cards["rest"] == cards["original"]


def test_an_agents_first_action_reset_at_the_start_is_a_free_full_reset(tmp_path):
    """Through the REST API an agent's first action is usually a RESET (make()'s own is never written, #92):
    at the start of level 1 it is a full reset, free (scoring.md §B.1). A no-op action reproduces its frame
    too; it was the one followed, and level 1 cost one action more than the original's."""
    lines = toolkit_lines("tf62_scripted-win.frames.jsonl")
    original = FIXTURES / "tf62_scripted-win.frames.jsonl"
    leading = json.loads(json.dumps(lines[0]))  # the agent's RESET: the engine answers it as make()'s RESET
    rest = json.loads(json.dumps([lines[0], leading, *lines[1:]]))
    for ln in rest:
        ln["data"]["full_reset"] = False
    path = agents_recording(tmp_path, rest, tag="rest-first-reset")
    found = recover(path)
    assert found.ok, found.error
    first = found.steps[0]
    assert (first.action_id, first.full_reset, first.ambiguous) == (0, True, True)
    cards = {}
    for label, inputs, extra in (("original", [original], []), ("rest", [path], ["--recover-actions"])):
        code, output = cli("score", *map(str, inputs), "--games", str(GAMES), *extra, "--out",
                           str(tmp_path / label), "--no-figures")
        assert code == 0, output
        card = json.loads((tmp_path / label / SLUG).read_text())
        cards[label] = (card["score"], [(r["actions"], r["level_actions"]) for e in card["environments"]
                                        for r in e["runs"] if r["actions"]])  # the free RESET's empty play aside
    assert cards["rest"] == cards["original"]


def test_states_out_of_the_backtracking_window_are_let_go(tmp_path, monkeypatch):
    """The search kept the state every step left (an engine snapshot, about 40 KB here), though no backtrack goes
    further back than its window: a 20,000-step recovery took its sandbox past 1 GB. Now at most the window's
    states are alive at once, and the actions found are the same."""
    import weakref

    from engine.env import FRAMES_ALL, GameEnv
    from engine.loader import resolve_game
    from pipeline.explore.recover import recover_steps, targets_of
    from pipeline.recordings.reader import read_recording_file

    parsed = read_recording_file(agents_recording(tmp_path, toolkit_lines("mz41_scripted-win.frames.jsonl")))
    targets = targets_of(parsed)

    def search(window: int) -> tuple[list, int]:
        env = GameEnv(resolve_game(parsed.game_id, [GAMES]), frames=FRAMES_ALL)
        env.reset()

        class Held:  # a snapshot, seen while it is alive
            __slots__ = ("state", "__weakref__")

        live: weakref.WeakSet = weakref.WeakSet()
        most = 0
        snapshot, restore = env.snapshot, env.restore

        def tracked(**kwargs):
            nonlocal most
            held = Held()
            held.state = snapshot(**kwargs)
            live.add(held)
            most = max(most, len(live))
            return held

        monkeypatch.setattr(env, "snapshot", tracked)
        monkeypatch.setattr(env, "restore", lambda held, **kwargs: restore(held.state, **kwargs))
        found = recover_steps(env, targets, RecoverLimits(window=window, max_branches=2))
        return [(s.action_id, s.x, s.y) for s in found.steps], most

    narrow, most_narrow = search(3)
    wide, most_wide = search(len(targets))
    assert narrow == wide and len(narrow) == len(targets) >= 90
    assert most_narrow <= 3 * 2 + 4 and most_wide >= len(targets)  # the window's path and fits, a step's, its base
