"""The replay viewer's pure parts: palette, frame encoding, plays/levels/counts, divergence marking, page data."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.recording import read_recording
from engine.replay import Divergence
from pipeline.recordings.counting import StepEffect
from pipeline.report import viewer as v

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"


def grid(fill: int = 0) -> np.ndarray:
    return np.full((64, 64), fill, dtype=np.uint8)


# ---------------------------------------------------------------------------------------------------- palette
def test_palette_has_16_distinct_hex_colours_with_arc3_anchors():
    assert len(v.PALETTE) == 16
    assert all(re.fullmatch(r"#[0-9A-F]{6}", c) for c in v.PALETTE)
    assert len(set(v.PALETTE)) == 16
    assert v.PALETTE[0] == "#FFFFFF" and v.PALETTE[5] == "#000000"  # ARC-AGI-3: 0 white, 5 black


def test_the_page_takes_its_game_colours_from_the_palette_only():
    templates = Path(v.__file__).resolve().parents[1] / "templates"
    for name in ("viewer.html.j2", "viewer.js.j2"):
        text = (templates / name).read_text().upper()
        assert [c for c in v.PALETTE if c in text] == [], f"{name} spells out a palette colour"
    html = v.render_viewer_html(v.build_viewer_data(_source(SAMPLES / "fixtures" / "tf62_scripted-win.frames.jsonl"),
                                                    v.Verification("unverified", "-"), None))
    legend = re.findall(r'<span style="background:(#[0-9A-F]{6});color:#(?:000|fff)">(\d+)</span>', html)
    assert legend == [(colour, str(index)) for index, colour in enumerate(v.PALETTE)]


# ---------------------------------------------------------------------------------------------------- packing
def test_pack_puts_even_cells_in_the_high_nibble():
    g = grid()
    g[0, 0], g[0, 1], g[63, 63] = 0xA, 0x3, 0xF
    packed = v.pack_frame(g)
    assert len(packed) == 2048
    assert packed[0] == 0xA3 and packed[-1] == 0x0F
    assert np.array_equal(v.unpack_frame(packed), g)


def test_pack_rejects_bad_frames():
    with pytest.raises(ValueError, match="64x64"):
        v.pack_frame(np.zeros((63, 64), dtype=np.uint8))
    bad = grid()
    bad[1, 1] = 16
    with pytest.raises(ValueError, match="0-15"):
        v.pack_frame(bad)
    with pytest.raises(ValueError, match="2048"):
        v.unpack_frame(b"\x00" * 10)


# ---------------------------------------------------------------------------------------------------- encoding
def test_encoding_kinds_keyframes_deltas_and_gaps():
    a = grid(3)
    b = a.copy()
    b[10, 10:14] = 8  # a small move: one delta run
    c = a.copy()
    c[:, :] = (np.arange(4096).reshape(64, 64) % 16)  # everything changes: a delta would exceed a keyframe
    frames = [a, b, b, None, b, c]
    encoded = v.encode_frames(frames)
    assert [e[0] for e in encoded] == ["K", "D", "D", "N", "K", "K"]
    assert encoded[2] == "D"  # an unchanged step is an empty delta
    run = base64.b64decode(encoded[1][1:])
    assert run == (10 * 64 + 10).to_bytes(2, "big") + bytes([4]) + bytes([8, 8, 8, 8])
    decoded = v.decode_frames(encoded)
    assert decoded[3] is None
    for want, got in zip(frames, decoded, strict=True):
        assert (want is None and got is None) or np.array_equal(want, got)


def test_keyframe_every_interval_and_long_runs_split_at_255():
    base = grid(4)
    frames = []
    for i in range(10):
        f = base.copy()
        f.reshape(-1)[: 300 + i] = 9  # a contiguous change longer than one run
        frames.append(f)
    encoded = v.encode_frames(frames, keyframe_interval=4)
    assert [e[0] for e in encoded] == ["K", "D", "D", "D", "K", "D", "D", "D", "K", "D"]
    first_delta = base64.b64decode(encoded[1][1:])
    assert first_delta == (300).to_bytes(2, "big") + bytes([1, 9])  # only the one new cell
    decoded = v.decode_frames(encoded)
    assert all(np.array_equal(a, b) for a, b in zip(frames, decoded, strict=True))
    spread = base.copy()
    spread.reshape(-1)[100:700] = 2
    delta = base64.b64decode(v.encode_frames([base, spread])[1][1:])
    lengths, pos = [], 0
    while pos < len(delta):
        lengths.append(delta[pos + 2])
        pos += 3 + delta[pos + 2]
    assert lengths == [255, 255, 90]


def test_small_gaps_merge_into_one_run():
    a = grid(0)
    b = a.copy()
    b[0, 0] = b[0, 3] = 1  # a gap of two unchanged cells: cheaper inside the run than as a second header
    delta = base64.b64decode(v.encode_frames([a, b])[1][1:])
    assert delta == bytes([0, 0, 4, 1, 0, 0, 1])


def test_decoding_rejects_broken_streams():
    with pytest.raises(ValueError, match="delta with no frame"):
        v.decode_frames(["D"])
    with pytest.raises(ValueError, match="unknown kind"):
        v.decode_frames(["X"])
    key = v.encode_frames([grid()])[0]
    with pytest.raises(ValueError, match="invalid delta run"):
        v.decode_frames([key, "D" + base64.b64encode(bytes([0x0F, 0xFF, 5, 1])).decode()])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.lists(st.tuples(st.integers(0, 4095), st.integers(0, 15)), max_size=40)),
                min_size=1, max_size=30),
       st.integers(1, 8))
def test_round_trip_property(edits, interval):
    frames: list[np.ndarray | None] = []
    current = grid(5)
    for step in edits:
        if step is None:
            frames.append(None)
            continue
        current = current.copy()
        for cell, colour in step:
            current.reshape(-1)[cell] = colour
        frames.append(current)
    decoded = v.decode_frames(v.encode_frames(frames, keyframe_interval=interval))
    for want, got in zip(frames, decoded, strict=True):
        assert (want is None and got is None) or np.array_equal(want, got)


def test_display_frames_carries_forward_and_marks_unreached_steps():
    a, b = grid(1), grid(2)
    shown = v.display_frames([a, None, b, None], 6)
    assert shown[1] is a and shown[3] is b  # echo steps show the previous frame
    assert shown[4] is None and shown[5] is None  # never reached by the replay
    assert v.display_frames([None, a], 2)[0] is None


# ---------------------------------------------------------------------------------------------------- timeline
def write_recording(path: Path, steps: list[tuple], *, enum_ids: bool = True) -> Path:
    """A recording without frames: (action, state, levels, full_reset, win_levels) per frame line."""
    lines = []
    for action, state, levels, full, win in steps:
        data = {"game_id": "tl01-00000000", "state": state, "levels_completed": levels, "win_levels": win,
                "action_input": {"id": f"ACTION{action}" if action else "RESET", "data": {}} if enum_ids else
                {"id": action, "data": {}},
                "guid": "0d1c2b3a-0000-4000-8000-000000000001", "available_actions": [1, 2, 3, 4]}
        if full is not None:
            data["full_reset"] = full
        lines.append(json.dumps({"timestamp": f"2026-01-01T00:00:{len(lines):02d}+00:00", "data": data}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_timeline_plays_levels_and_charged_actions(tmp_path: Path):
    path = write_recording(tmp_path / "steps.jsonl", [
        (0, "NOT_FINISHED", 0, True, 3),   # 0 opening RESET: free
        (1, "NOT_FINISHED", 0, None, 3),   # 1
        (2, "NOT_FINISHED", 1, None, 3),   # 2 level 1 in 2 actions (the completing action counts on level 1)
        (3, "NOT_FINISHED", 1, None, 3),   # 3 level 2
        (0, "NOT_FINISHED", 1, False, 3),  # 4 level reset: counted on level 2
        (4, "GAME_OVER", 1, None, 3),      # 5
        (1, "NOT_FINISHED", 0, None, 0),   # 6 post-terminal echo: ignored
        (0, "NOT_FINISHED", 0, True, 3),   # 7 full reset: play 2
        (1, "NOT_FINISHED", 0, None, 3),   # 8
    ])
    t = v.step_timeline(v.load_recording_source(path).recording)
    assert t.effects[0] is StepEffect.OPEN and t.effects[6] is StepEffect.ECHO and t.effects[7] is StepEffect.FULL_RESET
    assert t.play == [0, 0, 0, 0, 0, 0, 0, 1, 1]
    assert t.level == [1, 1, 2, 2, 2, 2, 2, 1, 1]
    assert t.charged_level == [0, 1, 1, 2, 2, 2, 0, 0, 1]
    assert t.level_actions == [0, 1, 0, 1, 2, 3, 3, 0, 1]
    assert t.level_index == [{"play": 0, "level": 1, "step": 0}, {"play": 0, "level": 2, "step": 2},
                             {"play": 1, "level": 1, "step": 7}]


def test_timeline_stays_on_last_level_after_win_and_tolerates_missing_leading_reset(tmp_path: Path):
    path = write_recording(tmp_path / "no-reset.jsonl", [
        (1, "NOT_FINISHED", 0, None, 2), (1, "NOT_FINISHED", 1, None, 2), (1, "WIN", 2, None, 2)], enum_ids=False)
    source = v.load_recording_source(path)
    assert source.variant == "benchmarking"  # integer ids, no opening RESET: the agents recorder, as ingest reads it
    t = v.step_timeline(source.recording)
    assert t.level == [1, 2, 2] and t.charged_level == [1, 1, 2]


def test_timeline_takes_the_stored_step_classification(tmp_path: Path):
    """Scoring's classification of the steps (stored `step_effect`, handed over as `effects`) is what the page
    shows: the viewer classifies nothing itself."""
    path = write_recording(tmp_path / "r.jsonl", [(0, "NOT_FINISHED", 0, True, 3), (1, "NOT_FINISHED", 0, None, 3)])
    rec = v.load_recording_source(path).recording
    assert v.step_timeline(rec).effects == [StepEffect.OPEN, StepEffect.ACTION]
    assert rec.effects == tuple(StepEffect(e) for e in rec.steps["step_effect"].to_list())
    rec.effects = (StepEffect.OPEN, StepEffect.UNCOUNTED_UNDO)
    assert v.step_timeline(rec).effects == [StepEffect.OPEN, StepEffect.UNCOUNTED_UNDO]


def _sample_files() -> list[Path]:
    files = sorted((SAMPLES / "toolkit").glob("*.jsonl")) + sorted((SAMPLES / "fixtures").glob("*.jsonl"))
    files += sorted((SAMPLES / "human").glob("*/*.recording.jsonl"))
    assert len(files) >= 30, f"samples missing under {SAMPLES}"
    return files


@pytest.mark.parametrize("path", _sample_files(), ids=lambda p: p.name[:40])
def test_timeline_counts_match_the_toolkit_card(path: Path):
    """Per play, the actions the viewer charges to each level reproduce the toolkit card of every sample."""
    expected = json.loads(path.with_name(path.name.replace(".jsonl", ".expected.json")).read_text())
    card = expected["card"]
    source = v.load_recording_source(path)
    timeline = v.step_timeline(source.recording)
    plays = [i for i, g in enumerate(card["guids"] or [None] * card["total_plays"])
             if g in (None, source.guid)]
    if expected.get("stub_guid"):
        plays = plays[-(timeline.play[-1] + 1):]
    assert len(plays) == timeline.play[-1] + 1
    for play_number, slot in enumerate(plays):
        charged = [c for p, c in zip(timeline.play, timeline.charged_level, strict=True) if p == play_number and c]
        assert len(charged) == card["actions"][slot], f"play {play_number}: total actions"
        previous = 0
        for level, cumulative in card["actions_by_level"][slot]:
            assert sum(1 for c in charged if c <= level) == cumulative, f"play {play_number} level {level}"
            previous = cumulative
        assert previous <= len(charged)


# ---------------------------------------------------------------------------------------------------- divergence
def test_divergence_step_is_found_by_line_number():
    d = Divergence(line=7, step=3, action="ACTION1", field="state", expected="WIN", got="NOT_FINISHED")
    assert v.divergence_step(d, [2, 3, 5, 7, 9]) == 3
    assert v.divergence_step(d, [1, 2]) is None
    assert v.divergence_step(None, [1]) is None


def _source(path: Path) -> v.ViewerSource:
    return v.load_recording_source(path)


def test_page_data_marks_the_divergence_and_carries_the_columns():
    path = SAMPLES / "fixtures" / "tf62_scripted-win.frames.jsonl"
    source = _source(path)
    line_no = source.line_numbers[4]
    d = Divergence(line=line_no, step=4, action="ACTION1", field="frame", expected=None, got=None,
                   frame_index=0, cells_differing=6, bbox=(1, 3, 10, 11))
    data = v.build_viewer_data(source, v.Verification("divergent", d.describe(), divergence=d, step=4),
                               v.Baseline([1, 2, 4, 2, 4], "test"))
    assert data["verification"]["divergence"] == {"step": 4, "line": line_no, "field": "frame",
                                                  "text": d.describe(), "bbox": [1, 3, 10, 11]}
    n = source.n_steps
    assert data["n_steps"] == n and all(len(col) == n for col in data["steps"].values())
    assert len(data["frames"]) == n and data["frames_origin"] == "recording"
    shown = v.decode_frames(data["frames"])
    recorded = read_recording(path).frame_lines
    for index, line in enumerate(recorded):
        if line.data["frame"]:
            assert np.array_equal(shown[index], np.asarray(line.data["frame"][-1]))
    clicks = [i for i, line in enumerate(recorded) if line.action_id == 6]
    assert clicks and all(data["steps"]["x"][i] == recorded[i].action_data["x"] for i in clicks)
    assert data["baseline"] == [1, 2, 4, 2, 4] and data["palette"] == list(v.PALETTE)


def test_no_frames_and_no_game_gives_the_no_frames_state():
    source = _source(SAMPLES / "fixtures" / "ck17_scripted-win.noframes.jsonl")
    verification = v.verify_and_render(source, None)
    assert verification.status == "unverified" and "no --games" in verification.detail
    data = v.build_viewer_data(source, verification, None)
    assert data["frames_origin"] == "none" and data["frames"] == []


# ---------------------------------------------------------------------------------------------------- html safety
def test_script_json_cannot_close_the_script_element():
    text = v.script_json({"label": "</script><script>alert(1)</script>", "sep": "\u2028", "amp": "&"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text)["label"] == "</script><script>alert(1)</script>"


def test_rendered_page_escapes_user_text(tmp_path: Path):
    source = _source(SAMPLES / "fixtures" / "tf62_scripted-win.frames.jsonl")
    source.label = '<img src=x onerror="alert(1)">'
    source.notes.append("<b>bold</b>")
    html = v.render_viewer_html(v.build_viewer_data(source, v.Verification("unverified", "<i>why</i>"), None))
    assert '<img src=x onerror' not in html and "<b>bold</b>" not in html and "<i>why</i>" not in html
    assert "&lt;img src=x" in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert html.count("<script") == 2  # the JSON data block and the viewer script, nothing else
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # nothing fetched from anywhere


# ---------------------------------------------------------------------------------------------------- baselines
def test_baselines_explicit_metadata_and_exact_version(tmp_path: Path):
    games = SAMPLES.parent.parent / "conformance" / "environment_files"
    assert v.find_baseline("x", explicit="3, 4,5") == v.Baseline([3, 4, 5], "--baselines")
    meta = next(games.glob("an53/*/metadata.json"))
    assert v.find_baseline(None, explicit=str(meta)).actions == json.loads(meta.read_text())["baseline_actions"]
    found = v.find_baseline("an53-6f5f2264", games=[games])
    assert found is not None and found.actions == [2, 19, 7, 6] and "metadata.json" in found.source
    assert v.find_baseline("an53-00000000", games=[games]) is None  # another version's baseline is not used
    with pytest.raises(v.ViewerError):
        v.find_baseline("x", explicit="a,b")


def test_a_source_knowing_the_game_without_a_baseline_leaves_it_unscored(tmp_path: Path):
    """As in `arcstudy score`, the first source that knows the game decides, even without a usable baseline."""
    csv = tmp_path / "baselines.csv"
    csv.write_text("game_id,level_index,baseline_value\ntf62-28e6852d,1,\ntf62-28e6852d,2,3\n")
    found = v.find_baseline("tf62-28e6852d", explicit=str(csv), games=[SAMPLES.parent.parent / "conformance" /
                                                                      "environment_files"])
    assert found == v.Baseline(None, str(csv), ("baseline_too_few_completers",))
    source = _source(SAMPLES / "fixtures" / "tf62_scripted-win.frames.jsonl")
    data = v.build_viewer_data(source, v.Verification("unverified", "-"), found)
    assert data["baseline"] is None and data["baseline_source"] == str(csv)
    assert data["plays"] and all(p["run"]["score"] == 0.0 and p["run"]["message"] for p in data["plays"])
    assert "holds no usable baseline" in v.render_viewer_html(data)


def test_the_rows_digest_is_made_a_slice_at_a_time_and_is_the_canonical_jsons(monkeypatch):
    """`view --db` names the rows it read by the sha256 of their canonical JSON; made of all of them at once, two
    million stored steps took the command past 4 GB. A slice at a time, the digest is the same."""
    import hashlib
    import json

    import polars as pl

    from pipeline.report.viewer import data

    frame = pl.DataFrame({"n": range(23), "t": [None if i % 3 else f"é{i}" for i in range(23)],
                          "l": [[i, None] for i in range(23)]})

    def canonical(df: pl.DataFrame) -> str:
        text = json.dumps(df.to_dicts(), sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    monkeypatch.setattr(data, "DIGEST_ROWS", 5)
    for rows in (frame, frame.head(5), frame.head(1), frame.clear()):
        assert data._rows_digest(rows) == canonical(rows)
