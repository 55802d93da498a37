"""A JSON object that names a key twice is bad input, not the last value silently.

Python's json keeps the later value of a repeated key without a word: a study manifest with a second
`"plays": []` loaded no play at all, a scorecard with a second `"environments": []` no run, a task collection
naming a task id twice lost the first task, all with exit 0. Which value the writer meant cannot be known, so
the object is quarantined with the key named (a whole document when the repeat is at its top level), and the
rest of the file loads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.textfiles import DuplicateKey, DuplicateKeyError, json_document, unique_json
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths

RUN = {"guid": "00000000-0000-4000-8000-00000000000{n}", "score": 10.0, "levels_completed": 1, "actions": 5,
       "resets": 0, "state": "WIN", "completed": True, "level_scores": [10.0], "level_actions": [5],
       "level_baseline_actions": [3]}


def _run(n: int) -> str:
    return json.dumps({**RUN, "guid": RUN["guid"].format(n=n)})


def _ingest(path: Path, db: Path):
    with Workspace(db) as ws:
        ws.ensure_tables()
        report = ingest_paths(ws, [path], run_id="r", workers=1)
        q = ws.read("SELECT source_location, check_name, reason, failing_value FROM quarantine "
                    "ORDER BY source_location")
        counts = {t: ws.row_count(t) for t in ("core_study__session_plays", "core_arc__tasks",
                                                "core_arc3__scorecard_runs", "core_arc3__environments",
                                                "core_arc3__card_plays")
                  if ws.has_table(t)}
    return report, q, counts


# ------------------------------------------------------------------------------------------------ the loader
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
    max_leaves=30)


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_a_document_without_repeated_keys_reads_as_json_reads_it(value):
    text = json.dumps(value)
    assert json_document(text) == (json.loads(text), [])
    assert unique_json(text) == json.loads(text)


def test_every_object_naming_a_key_twice_is_found_in_document_order():
    text = '{"a": 1, "b": [{"x": 1, "y": 2, "x": 3}, {"z": {"k": 1, "k": 2, "k": 3}}], "a": 2}'
    doc, twice = json_document(text)
    assert doc == json.loads(text)
    assert twice == [DuplicateKey((), "a"), DuplicateKey(("b", 0), "x"), DuplicateKey(("b", 1, "z"), "k")]
    with pytest.raises(DuplicateKeyError, match='the document names the key "a" twice'):
        unique_json(text)
    with pytest.raises(DuplicateKeyError, match=r'the object at b\.1\.z names the key "k" twice'):
        unique_json('{"b": [1, {"z": {"k": 1, "k": 2}}]}')


# ------------------------------------------------------------------------------------------------ manifests
MANIFEST_HEAD = ('{"format": "arcstudy-study-manifest/1", "study_id": "pilot", '
                 '"participants": [{"participant_id": "p1"}], "sessions": [{"session_id": "s1", '
                 '"participant_id": "p1"}], ')
PLAY = '{{"guid": "00000000-0000-4000-8000-00000000000{n}", "session_id": "s1", "game_id": "ab12-0123abcd"}}'


def test_a_manifest_naming_plays_twice_is_refused_not_emptied(tmp_path, db_path):
    path = tmp_path / "study.json"
    path.write_text(MANIFEST_HEAD + f'"plays": [{PLAY.format(n=1)}, {PLAY.format(n=2)}], "plays": []}}')
    report, q, counts = _ingest(path, db_path)
    assert report.files[0].status == "rejected"
    assert q["check_name"].to_list() == ["duplicate_key"]
    assert 'names the key "plays" twice' in q["reason"][0]
    assert counts.get("core_study__session_plays", 0) == 0  # not an empty study that looks complete


def test_a_play_naming_a_key_twice_is_quarantined_and_the_others_load(tmp_path, db_path):
    path = tmp_path / "study.json"
    twice = PLAY.format(n=2)[:-1] + ', "session_id": "s2"}'
    path.write_text(MANIFEST_HEAD + f'"plays": [{PLAY.format(n=1)}, {twice}, {PLAY.format(n=3)}]}}')
    report, q, counts = _ingest(path, db_path)
    assert report.files[0].status == "loaded"
    assert q["source_location"].to_list() == ["plays[1]"]
    assert q["check_name"].to_list() == ["duplicate_key"]
    assert 'play names the key "session_id" twice' in q["reason"][0]
    assert q["failing_value"].to_list() == ['"session_id"']
    assert counts["core_study__session_plays"] == 2


# ------------------------------------------------------------------------------------------------ scorecards
def test_a_scorecard_naming_environments_twice_is_refused_by_ingest_and_score(tmp_path, db_path):
    path = tmp_path / "card.json"
    path.write_text(f'{{"card_id": "c1", "environments": [{{"id": "ab12-0123abcd", "runs": [{_run(1)}]}}], '
                    '"environments": []}')
    report, q, _ = _ingest(path, db_path)
    assert report.files[0].status == "rejected"
    assert 'names the key "environments" twice' in q["reason"][0]
    result = CliRunner().invoke(app, ["--plain", "score", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code != 0, result.output
    assert 'names the key "environments" twice' in " ".join(result.output.split())


def test_a_run_naming_a_key_twice_leaves_out_its_environment_only(tmp_path, db_path):
    path = tmp_path / "card.json"
    bad_run = _run(2)[:-1] + ', "actions": 50}'
    path.write_text(f'{{"card_id": "c1", "environments": [{{"id": "ab12-0123abcd", "runs": [{_run(1)}]}}, '
                    f'{{"id": "cd34-0123abcd", "runs": [{bad_run}]}}]}}')
    report, q, counts = _ingest(path, db_path)
    assert report.files[0].status == "loaded"
    assert q["source_location"].to_list() == ["environments[1]"]
    assert 'field runs.0 names the key "actions" twice' in q["reason"][0]
    assert counts["core_arc3__scorecard_runs"] == 1


def test_a_card_wrapper_naming_a_game_twice_is_refused(tmp_path, db_path):
    card = '{"game_id": "ab12-0123abcd", "total_plays": 1, "actions": [5], "states": ["WIN"]}'
    path = tmp_path / "cards.json"
    path.write_text(f'{{"won": 1, "played": 1, "cards": {{"ab12-0123abcd": {card}, "ab12-0123abcd": {card}}}}}')
    report, q, counts = _ingest(path, db_path)
    assert report.files[0].status == "rejected"
    assert q["check_name"].to_list() == ["duplicate_key"]
    assert 'names the key "ab12-0123abcd" twice' in q["reason"][0]
    assert counts.get("core_arc3__card_plays", 0) == 0


def test_a_metadata_file_naming_its_baselines_twice_is_refused(tmp_path, db_path):
    path = tmp_path / "metadata.json"
    path.write_text('{"game_id": "ab12-0123abcd", "title": "AB12", "baseline_actions": [3, 4], '
                    '"baseline_actions": [30, 40]}')
    report, q, counts = _ingest(path, db_path)
    assert report.files[0].status == "rejected"
    assert 'metadata names the key "baseline_actions" twice' in q["reason"][0]
    assert counts.get("core_arc3__environments", 0) == 0


# ------------------------------------------------------------------------------------------------ ARC tasks
TASK = {"train": [{"input": [[1]], "output": [[2]]}], "test": [{"input": [[1]], "output": [[2]]}]}


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_a_task_collection_naming_a_task_twice_quarantines_the_repeat(tmp_path, db_path, monkeypatch, streamed):
    from pipeline.ingest import harc_arc

    if streamed:
        monkeypatch.setattr(harc_arc, "STREAM_TASKS_BYTES", 1)
    t = json.dumps(TASK)
    inner = t.replace('"test": [{"input": [[1]], "output": [[2]]}]',
                      '"test": [{"input": [[1]], "output": [[2]], "output": [[3]]}]')
    assert inner != t
    path = tmp_path / "tasks.json"
    path.write_text(f'{{"aa": {t}, "bb": {t}, "cc": {inner}, "aa": {t}}}')
    report, q, counts = _ingest(path, db_path)
    assert report.files[0].status == "loaded"
    assert q["source_location"].to_list() == ['task "aa"', 'task "cc"']
    assert q["check_name"].to_list() == ["duplicate_key", "duplicate_key"]
    assert 'names the task id "aa" twice' in q["reason"][0]
    assert 'names the key "output" twice' in q["reason"][1]
    # the whole file: json keeps only the later "aa", which is quarantined; streamed: the earlier one loaded
    assert counts["core_arc__tasks"] == (2 if streamed else 1)


# ------------------------------------------------------------------------------------------------ other documents
def test_recovered_actions_naming_a_recording_twice_are_refused(tmp_path):
    from pipeline.scoring.plays import RecordingReadError, load_recovered_actions

    path = tmp_path / "recovered.json"
    path.write_text('{"a.recording.jsonl": [1, 2, 3], "a.recording.jsonl": [4]}')
    with pytest.raises(RecordingReadError, match='names the key "a.recording.jsonl" twice'):
        load_recovered_actions(path)


def test_a_comparison_card_naming_a_key_twice_is_refused(tmp_path):
    from pipeline.scoring.compare import CompareError, read_comparison_card

    path = tmp_path / "other.json"
    path.write_text(f'{{"environments": [{{"id": "ab12-0123abcd", "runs": [{_run(1)}]}}], "environments": []}}')
    with pytest.raises(CompareError, match='names the key "environments" twice'):
        read_comparison_card(path)


@pytest.mark.parametrize("text, words", [
    ('{"game_id": "ab12-0123abcd", "baseline_actions": [1, 2], "baseline_actions": [3, 4]}',
     'names the key "baseline_actions" twice'),
    ('{"game_id": "ab12-0123abcd", "baseline_actions": [1, 2], ', "not valid JSON"),
], ids=["repeated key", "broken"])
def test_a_published_baselines_folder_names_the_metadata_file_it_cannot_use(tmp_path, text, words):
    from pipeline.scoring.baseline_sources import BaselineSourceError, read_published

    path = tmp_path / "ab12" / "0123abcd" / "metadata.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(BaselineSourceError) as caught:
        read_published(tmp_path, "upper_median")
    assert str(caught.value).startswith(f"{path}: ") and words in str(caught.value)


@pytest.mark.parametrize("game_id", ["an53-6f5f2264\n\n# INJECTED <img src=x onerror=alert(1)>", "zz99\udfff",
                                     "zz99\x1b[2J"], ids=["markdown", "lone surrogate", "escape"])
def test_a_comparison_card_whose_environment_is_no_game_id_is_refused(tmp_path, game_id):
    """Its ids go into compare.md, compare.csv and the terminal: a heading and raw HTML were injected into
    compare.md, escape codes reached the terminal, and a lone surrogate crashed `score` (traceback)."""
    from pipeline.scoring.compare import CompareError, read_comparison_card

    path = tmp_path / "other.json"
    path.write_text(json.dumps({"environments": [{"id": game_id, "runs": [json.loads(_run(1))]}]}))
    with pytest.raises(CompareError, match=r"environments\[0\]: game id .* is not of the form"):
        read_comparison_card(path)


# ------------------------------------------------------------------------------------------------ recording lines
FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "fixtures"


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_a_line_without_repeated_keys_parses_as_before(value):
    """The line parsers' screen (`refuse_keys_twice`) lets every line without a repeated key through, whatever its
    strings hold (`":` among them) and however it is spaced."""
    from pipeline.recordings.lines import loads_as_json

    for text in (json.dumps({"data": value}), json.dumps({"data": value}, indent=1, separators=(" ,", " : "))):
        assert loads_as_json(text.encode()) == json.loads(text)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=3), JSON_VALUES, min_size=1, max_size=4), st.data(),
       st.sampled_from(["", " ", "\t", "\n ", "\r\n"]))
def test_a_line_naming_a_key_twice_is_refused_however_it_is_spaced(obj, data, space):
    """Every line with an object that names a key twice is refused, whatever spaces stand between a key and its
    colon (the screen counted `":` alone: `{"a":1,"a" :2}` has one `":` and one key once parsed, and went
    through with exit 0, the later value kept), and whatever the line's strings hold."""
    from pipeline.recordings.lines import LineError, loads_as_json, parse_line

    key = data.draw(st.sampled_from(sorted(obj)))
    again = data.draw(JSON_VALUES)
    body = ",".join(f"{json.dumps(k)}{space}:{json.dumps(v)}" for k, v in obj.items())
    text = "{" + body + f",{json.dumps(key)}{space}:{json.dumps(again)}" + "}"
    for line in (text, '{"data":' + text + "}"):
        with pytest.raises(LineError) as err:
            loads_as_json(line.encode())
        assert err.value.check == "duplicate_key"
    with pytest.raises(LineError) as err:
        parse_line(1, ('{"timestamp":"2026-01-01T00:00:00+00:00","data":' + text + "}").encode(), want_frames=False)
    assert err.value.check == "duplicate_key"


@pytest.mark.parametrize("fixture", ["an53_scripted-lose.noframes.jsonl", "an53_scripted-win.frames.jsonl"])
def test_a_recording_line_naming_a_key_twice_is_quarantined_and_the_rest_loads(tmp_path, db_path, fixture):
    """A recording line is read by orjson or json, which keep a repeated key's later value: a step whose second
    `"game_id"` or `"id"` was another game's or action would load as if written so (exit 0). Its line is
    quarantined instead, naming the key, on every path the reader takes (the frame cut out or not, json's reading
    of a line orjson refuses)."""
    from pipeline.recordings.lines import LineError, parse_line

    lines = (FIXTURES / fixture).read_text().splitlines()
    edited = list(lines)
    edited[3] = lines[3].replace('"game_id":', '"game_id": "zz99-00000000", "game_id":', 1)
    edited[4] = lines[4].replace('"id":', '"id" : "ACTION2", "id":', 1)  # (a space before the colon)
    edited[5] = lines[5].replace('"guid":', '"levels_completed": NaN, "guid":', 1).replace(
        '"state":', '"state": "WIN", "state":', 1)  # NaN: orjson refuses the line, json reads it
    assert all(a != b for a, b in zip(edited[3:6], lines[3:6], strict=True))
    for number, key in ((4, "game_id"), (5, "id"), (6, "state")):
        with pytest.raises(LineError, match=f'names the key "{key}" twice') as err:
            parse_line(number, edited[number - 1].encode(), want_frames=False)
        assert err.value.check == "duplicate_key"
    path = tmp_path / fixture
    path.write_text("\n".join(edited) + "\n")
    report, q, _ = _ingest(path, db_path)
    assert report.files[0].status == "loaded"
    assert q["check_name"].to_list() == ["duplicate_key"] * 3
    assert q["source_location"].to_list() == ["line 4", "line 5", "line 6"]
    with Workspace(db_path, read_only=True) as ws:
        assert ws.read("SELECT count(*) FROM core_arc3__steps").item() == len(lines) - 3
        assert ws.read("SELECT count(*) FROM core_arc3__steps WHERE game_id LIKE 'zz99%'").item() == 0


def test_a_playback_line_naming_a_key_twice_is_left_out_with_its_reason(tmp_path):
    from pipeline.recordings.playback import read_playback_file

    path = tmp_path / "ck17_twice.playback.jsonl"
    path.write_text('{"data": {"action_input": {"id": 1, "data": {"game_id": "ck17"}}}}\n'
                    '{"data": {"action_input": {"id": 1, "id": 6, "data": {"game_id": "ck17"}}}}\n'
                    '{"data": {"action_input": {"id": 2, "data": {"game_id": "ck17"}}}}\n')
    script = read_playback_file(path)
    assert [a.action_id for a in script.actions] == [1, 2]
    assert [(i.location, i.check) for i in script.issues] == [("line 2", "duplicate_key")]
    assert 'the object at data.action_input names the key "id" twice' in script.issues[0].reason
