"""`arcstudy view` end to end: pages built from recordings and the database, opened in headless Chromium.

Each page is checked in the browser: no console errors, no network request, the script's state after load
(steps, level after a jump to level 2) and the pixels its decoder produces against the recording or the
engine. Screenshots go to reports/screenshots/ (git-ignored) for people to look at.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

import engine
from engine.enums import GameState
from engine.recording import RecordingWriter, read_recording
from pipeline.cli import app
from pipeline.report import viewer as v
from tests.integration.browser import Browser, browser

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
GAMES = SHARED / "conformance" / "environment_files"
FIXTURES = SHARED / "samples" / "arc-agi-3" / "fixtures"
SCREENSHOTS = REPO / "reports" / "screenshots"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with browser() as instance:
        yield instance


def arcstudy(*args: str) -> Result:
    """The CLI in-process (`returncode`/`stdout`/`stderr` like a finished subprocess)."""
    result = CliRunner().invoke(app, ["--plain", *args])
    result.returncode = result.exit_code  # type: ignore[attr-defined]
    return result


def as_grid(values: list[int] | None) -> np.ndarray | None:
    return None if values is None else np.asarray(values, dtype=np.uint8).reshape(64, 64)


def first_step_of_level(data: dict, level: int) -> int:
    entries = [e for e in data["level_index"] if e["level"] == level]
    assert entries, f"the recording never reaches level {level}"
    same_play = [e for e in entries if e["play"] == data["steps"]["play"][data["initial_step"]]]
    return (same_play or entries)[0]["step"]


def check_page(chromium: Browser, html: Path, data: dict, shot: str, *, level: int = 2) -> dict:
    """Open the page, check it loaded cleanly, jump to `level`, screenshot; returns the page state."""
    with chromium.page(html, wait_ms=150) as page:
        assert page.evaluate("document.body.dataset.ready") == "1"
        state = page.evaluate("arcViewer.state()")
        assert state["nSteps"] == data["n_steps"] and state["step"] == data["initial_step"]
        assert page.evaluate("document.body.dataset.nSteps") == str(data["n_steps"])
        step = page.evaluate(f"arcViewer.jumpToLevel({level})")
        assert step == first_step_of_level(data, level)
        assert page.evaluate("document.body.dataset.level") == str(level)
        assert page.evaluate("document.body.dataset.step") == str(step)
        assert page.evaluate("document.getElementById('f-level').textContent") == str(level)
        # one DOM tree whatever the length: no node per step
        assert page.evaluate("document.getElementsByTagName('*').length") < 600
        page.screenshot(SCREENSHOTS / shot)
        assert page.errors == [], page.errors
        assert [u for u in page.requests if not u.startswith("file:")] == []
        return {"state": page.evaluate("arcViewer.state()"), "step": step}


def engine_frames(recording: Path) -> list[np.ndarray | None]:
    """The settled frame of every line, from a fresh environment stepped by hand (independent of the viewer)."""
    rec = read_recording(recording)
    env = engine.make(rec.game_id, GAMES, frames="last")
    out = []
    for line in rec.frame_lines:
        response = env.step(line.action_id, line.action_data)
        out.append(np.asarray(response.frame[-1], dtype=np.uint8) if response.frame else None)
    return out


# ---------------------------------------------------------------------------------------------------- (a)
def test_recording_with_frames_verified_and_pixels_exact(chromium: Browser, tmp_path: Path):
    path = FIXTURES / "cm86_scripted-win.frames.jsonl"
    out = tmp_path / "cm86.html"
    res = arcstudy("view", str(path), "--games", str(GAMES), "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "replay: verified" in " ".join(res.stdout.split())
    manifest = json.loads((tmp_path / "cm86.manifest.json").read_text())
    assert str(path) in manifest["inputs"] and str(out) in manifest["outputs"]
    result = v.write_viewer(path, tmp_path / "cm86b.html", games=[GAMES])
    data = result.data
    assert data["frames_origin"] == "recording" and data["verification"]["status"] == "verified"
    assert data["baseline"] == json.loads(next(GAMES.glob("cm86/*/metadata.json")).read_text())["baseline_actions"]
    check_page(chromium, out, data, "viewer_recording_with_frames.png")
    lines = read_recording(path).frame_lines
    clicks = [i for i, line in enumerate(lines) if line.action_id == 6]
    with chromium.page(out, wait_ms=50) as page:
        for index in (0, 1, clicks[0], len(lines) // 2, len(lines) - 1):
            want = lines[index].data["frame"]
            if want:
                got = as_grid(page.evaluate(f"arcViewer.decodeFrame({index})"))
                assert np.array_equal(got, np.asarray(want[-1])), f"step {index}"
        page.evaluate(f"arcViewer.goTo({clicks[0]})")
        x, y = lines[clicks[0]].action_data["x"], lines[clicks[0]].action_data["y"]
        assert page.evaluate("document.getElementById('f-action').textContent") == f"ACTION6 at (x={x}, y={y})"
        page.screenshot(SCREENSHOTS / "viewer_click_marker.png")
        assert page.errors == []


# ---------------------------------------------------------------------------------------------------- (b)
def test_recording_without_frames_is_re_rendered_by_the_engine(chromium: Browser, tmp_path: Path):
    path = FIXTURES / "ly28_scripted-win.noframes.jsonl"
    result = v.write_viewer(path, tmp_path / "ly28.html", games=[GAMES])
    data = result.data
    assert data["frames_origin"] == "engine" and data["verification"]["status"] == "verified"
    assert "N" not in {f[:1] for f in data["frames"]}
    expected = engine_frames(path)
    check_page(chromium, result.out_path, data, "viewer_rerendered_by_engine.png")
    with chromium.page(result.out_path, wait_ms=50) as page:
        shown = v.display_frames(expected, len(expected))
        for index in range(0, len(expected), max(1, len(expected) // 8)):
            got = as_grid(page.evaluate(f"arcViewer.decodeFrame({index})"))
            assert np.array_equal(got, shown[index]), f"step {index}"
        assert page.evaluate("document.body.dataset.frames") == "engine"
        assert page.errors == []


def test_no_frames_and_no_game_shows_the_timeline_only(chromium: Browser, tmp_path: Path):
    path = FIXTURES / "ly28_scripted-win.noframes.jsonl"
    result = v.write_viewer(path, tmp_path / "ly28-none.html")
    assert result.data["frames_origin"] == "none" and result.data["verification"]["status"] == "unverified"
    check_page(chromium, result.out_path, result.data, "viewer_no_frames.png")
    with chromium.page(result.out_path, wait_ms=50) as page:
        assert page.evaluate("getComputedStyle(document.getElementById('noframes')).display") == "flex"
        assert page.evaluate("arcViewer.decodeFrame(0)") is None
        assert page.evaluate("document.getElementById('f-state').textContent") in ("NOT_FINISHED", "WIN", "GAME_OVER")


# ---------------------------------------------------------------------------------------------------- (c)
def random_recording(path: Path, *, game: str = "tf62", n_actions: int = 2000, seed: int = 11) -> None:
    """Seeded random play (no frames recorded); a RESET after every WIN / GAME_OVER."""
    rng = random.Random(seed)
    env = engine.make(game, GAMES, frames="none")
    with RecordingWriter(path, include_frames=False) as writer:
        writer.write(env.reset())
        for _ in range(n_actions):
            action = rng.choice(env.available_actions)
            data = {"x": rng.randrange(64), "y": rng.randrange(64)} if action == 6 else {}
            response = env.step(action, data)
            writer.write(response)
            if response.state in (GameState.WIN, GameState.GAME_OVER):
                writer.write(env.reset())


def test_long_recording_thousands_of_steps(chromium: Browser, tmp_path: Path):
    path = tmp_path / "tf62-long.jsonl"
    random_recording(path)
    result = v.write_viewer(path, tmp_path / "long.html", games=[GAMES])
    data = result.data
    n = data["n_steps"]
    assert n >= 2001 and data["frames_origin"] == "engine" and data["verification"]["status"] == "verified"
    keyframes = sum(1 for f in data["frames"] if f[0] == "K")
    assert keyframes <= n // v.KEYFRAME_INTERVAL + 50  # mostly deltas: a few hundred KB, not 4 KB per step
    assert result.n_bytes < 3_000_000
    decoded = v.decode_frames(data["frames"])
    check_page(chromium, result.out_path, data, "viewer_long_recording.png")
    with chromium.page(result.out_path, wait_ms=50) as page:
        for index in (n - 1, 0, n // 2, 2 * v.KEYFRAME_INTERVAL - 1, 2 * v.KEYFRAME_INTERVAL, 1234):
            got = as_grid(page.evaluate(f"arcViewer.decodeFrame({index})"))
            assert np.array_equal(got, decoded[index]), f"step {index}"
        walked = page.evaluate(f"(function () {{ for (var i = 0; i < {n}; i++) arcViewer.goTo(i); "
                               "return arcViewer.state().step; })()")
        assert walked == n - 1
        assert page.evaluate("arcViewer.cacheSize()") <= 256  # decoded frames stay bounded
        page.evaluate("arcViewer.goTo(0); document.getElementById('speed').value = '500'; arcViewer.play()")
        page.pump(400)
        state = page.evaluate("arcViewer.state()")
        assert state["playing"] and state["step"] > 10
        page.evaluate("arcViewer.pause()")
        assert page.evaluate("arcViewer.state().playing") is False
        assert page.errors == []


# ---------------------------------------------------------------------------------------------------- (d)
def tamper_frame(source: Path, target: Path, *, step: int) -> tuple[int, int, int, int]:
    """Change a 3x2 block of the settled frame of frame line `step` and of every later one up to the first WIN
    or GAME_OVER, where the file is cut; returns the bbox (x0, x1, y0, y1). Frames that differ and later match
    again are a frame-only divergence that reconverged (verified, with a note), and the replay counts the
    empty frame list of a post-terminal echo as matching: so the file ends before its echo lines."""
    lines = source.read_text().splitlines()
    frame_lines = [i for i, text in enumerate(lines) if '"action_input"' in text]
    end = len(lines)
    for index in frame_lines[step:]:
        obj = json.loads(lines[index])
        grid = obj["data"]["frame"][-1]
        for y in (20, 21):
            for x in (30, 31, 32):
                grid[y][x] = (grid[y][x] + 1) % 16
        lines[index] = json.dumps(obj)
        if obj["data"]["state"] in ("WIN", "GAME_OVER"):
            end = index + 1
            break
    target.write_text("\n".join(lines[:end]) + "\n")
    return (30, 32, 20, 21)


def test_tampered_recording_marks_the_first_divergence(chromium: Browser, tmp_path: Path):
    path = tmp_path / "cm86_tampered.jsonl"
    bbox = tamper_frame(FIXTURES / "cm86_scripted-win.frames.jsonl", path, step=12)
    result = v.write_viewer(path, tmp_path / "tampered.html", games=[GAMES])
    data = result.data
    div = data["verification"]["divergence"]
    assert data["verification"]["status"] == "divergent"
    assert div["step"] == 12 and div["field"] == "frame" and div["bbox"] == list(bbox)
    assert "6 cells differ" in div["text"]
    check_page(chromium, result.out_path, data, "viewer_tampered_overview.png")
    with chromium.page(result.out_path, wait_ms=50) as page:
        assert page.evaluate("document.body.dataset.status") == "divergent"
        assert page.evaluate("arcViewer.jumpToDivergence()") == 12
        assert page.evaluate("document.body.dataset.step") == "12"
        page.screenshot(SCREENSHOTS / "viewer_tampered_divergence.png")
        assert page.errors == []


def test_tampered_state_field_without_frames(tmp_path: Path):
    source = FIXTURES / "ly28_scripted-win.noframes.jsonl"
    lines = source.read_text().splitlines()
    obj = json.loads(lines[5])
    obj["data"]["available_actions"] = [1]
    lines[5] = json.dumps(obj)
    path = tmp_path / "ly28_tampered.jsonl"
    path.write_text("\n".join(lines) + "\n")
    data = v.write_viewer(path, tmp_path / "t.html", games=[GAMES]).data
    div = data["verification"]["divergence"]
    assert data["verification"]["status"] == "divergent" and div["field"] == "available_actions"
    assert div["line"] == 6 and div["step"] == 5
    assert "frames after it show the engine's state" in data["verification"]["detail"]
    assert "N" not in {f[:1] for f in data["frames"]}  # every step still has a re-rendered frame


# ---------------------------------------------------------------------------------------------------- database
WITH_FRAMES = FIXTURES / "an53_scripted-win.frames.jsonl"
WITHOUT_FRAMES = FIXTURES / "ck17_scripted-win.noframes.jsonl"


@pytest.fixture(scope="module")
def study_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ingest (with --keep-frames) shared by the database tests: a frames and a no-frames recording plus
    the an53 metadata (its baseline)."""
    db = tmp_path_factory.mktemp("db") / "study.duckdb"
    metadata = next(GAMES.glob("an53/*/metadata.json"))
    res = arcstudy("ingest", str(WITH_FRAMES), str(WITHOUT_FRAMES), str(metadata), "--db", str(db), "--keep-frames")
    assert res.returncode == 0, res.stdout + res.stderr
    return db


def test_view_a_play_from_the_database(chromium: Browser, study_db: Path, tmp_path: Path):
    guid = read_recording(WITH_FRAMES).frame_lines[0].data["guid"]
    out = tmp_path / "db-view.html"
    res = arcstudy("view", f"{guid}/1", "--db", str(study_db), "--games", str(GAMES), "--out", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "frames: parquet, replay: verified" in " ".join(res.stdout.split())
    data = v.write_viewer(f"{guid}/1", tmp_path / "db-view-b.html", db=study_db).data  # baseline from the DB alone
    assert data["frames_origin"] == "parquet" and data["kind"] == "database"
    assert data["baseline"] == [2, 19, 7, 6] and "core_arc3__environments" in data["baseline_source"]
    assert data["steps"]["play"][data["initial_step"]] == 1 and data["initial_step"] > 0  # opens at play 2
    recorded = v.load_recording_source(WITH_FRAMES).recorded_frames
    assert recorded is not None
    shown = v.display_frames(recorded, len(recorded))
    for got, want in zip(v.decode_frames(data["frames"]), shown, strict=True):
        assert np.array_equal(got, want)  # the Parquet pixels are the recording's
    verified = v.write_viewer(f"{guid}/1", tmp_path / "db-view-c.html", db=study_db, games=[GAMES]).data
    assert verified["verification"]["status"] == "verified"
    check_page(chromium, out, verified, "viewer_from_database.png", level=1)

    ck17 = read_recording(WITHOUT_FRAMES).frame_lines[0].data["guid"]
    data = v.write_viewer(ck17, tmp_path / "ck17.html", db=study_db, games=[GAMES]).data
    assert data["frames_origin"] == "engine" and data["verification"]["status"] == "verified"


def test_view_cli_usage_errors(study_db: Path, tmp_path: Path):
    res = arcstudy("view", str(WITH_FRAMES), "--out", str(tmp_path / "x.txt"))
    assert res.returncode == 2 and "HTML" in res.stderr
    res = arcstudy("view", "no-such-guid", "--out", str(tmp_path / "x.html"), "--db", str(tmp_path / "none.duckdb"))
    assert res.returncode == 2 and "no database" in res.stderr
    res = arcstudy("view", "no-such-guid", "--out", str(tmp_path / "x.html"), "--db", str(study_db))
    assert res.returncode == 1 and "no play with guid or play_id" in res.stderr
    for bad in ("7,x", "-3,4"):  # an unreadable --baselines is a usage error, like any other bad option
        res = arcstudy("view", str(WITH_FRAMES), "--out", str(tmp_path / "x.html"), "--baselines", bad)
        assert res.returncode == 2 and "--baselines" in res.stderr
    assert not (tmp_path / "x.html").exists()


@pytest.mark.parametrize("damage", [b"not parquet", b"PAR1" + b"\0" * 64], ids=["garbage", "header-only"])
def test_a_damaged_frames_parquet_is_a_note_not_a_traceback(tmp_path: Path, damage: bytes):
    """A frames store of `ingest --keep-frames` that cannot be read (overwritten, truncated) once ended `view`
    with a pyarrow ArrowInvalid traceback; it is now said as a missing one is, and frames are re-rendered."""
    db = tmp_path / "study.duckdb"
    res = arcstudy("ingest", str(WITH_FRAMES), "--db", str(db), "--keep-frames")
    assert res.returncode == 0, res.stdout + res.stderr
    (parquet,) = tmp_path.rglob("*.parquet")
    parquet.write_bytes(damage)
    guid = read_recording(WITH_FRAMES).frame_lines[0].data["guid"]
    res = arcstudy("view", guid, "--db", str(db), "--games", str(GAMES), "--out", str(tmp_path / "v.html"))
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stdout + res.stderr
    text = " ".join(res.stdout.split())
    assert f"note: frames file {parquet} (ingest --keep-frames) cannot be read" in text
    assert "frames: engine, replay: verified" in text


def test_database_frames_are_compared_pixel_by_pixel(study_db: Path):
    guid = read_recording(WITH_FRAMES).frame_lines[0].data["guid"]
    source = v.load_database_source(study_db, guid)
    assert source.frames_origin == "parquet" and source.recorded_frames is not None
    assert v.verify_and_render(source, [GAMES]).status == "verified"
    step = 7
    frame = source.recorded_frames[step].copy()
    frame[40:43, 5] = (frame[40:43, 5] + 1) % 16  # three cells of the settled frame, as if the Parquet were off
    source.recorded_frames[step] = frame
    verification = v.verify_and_render(source, [GAMES])
    assert verification.status == "divergent" and verification.step == step
    div = verification.divergence
    assert div.field == "frame" and div.cells_differing == 3 and div.bbox == (5, 5, 40, 42)
    assert div.frame_index == source.n_frames[step] - 1  # the settled frame of the line


def test_database_plays_show_the_stored_step_classification(study_db: Path, tmp_path: Path):
    """A classification stored with the steps (core_arc3__steps.step_effect) is what the page shows."""
    import shutil

    import duckdb

    db = tmp_path / "copy.duckdb"
    shutil.copy(study_db, db)
    guid = read_recording(WITHOUT_FRAMES).frame_lines[0].data["guid"]
    shown = v.load_database_source(db, guid)
    effects = [e.value for e in v.step_timeline(shown.recording).effects]
    assert effects[0] == "open" and "action" in effects
    stored = ["uncounted_undo" if e == "action" else e for e in effects]
    with duckdb.connect(str(db)) as con:
        con.execute("ALTER TABLE core_arc3__steps ADD COLUMN IF NOT EXISTS step_effect VARCHAR")
        for line, effect in zip(shown.line_numbers, stored, strict=True):
            con.execute("UPDATE core_arc3__steps SET step_effect = ? WHERE guid = ? AND line_number = ?",
                        [effect, guid, line])
    source = v.load_database_source(db, guid)
    assert [e.value for e in v.step_timeline(source.recording).effects] == stored
