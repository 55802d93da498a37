"""A flood of bad lines through `score`, `export-transitions` and `replay`: every reason is kept, none of them all
in memory.

A 9 MB recording of 3,000,000 `{}` lines once took `score` to 4.7 GB and an exit 1 (its manifest, 425 MB of
reasons, did not fit DuckDB's runs table), and `export-transitions` to 2.6 GB and a 470 MB manifest. The reasons
now wait on disk (`Spool`), the manifest lists the first LISTED_PROBLEMS of them and names a JSON-lines file that
holds every one, and the screen shows the first LISTED_ON_SCREEN. Here the same shapes, small (spools of 50, a
manifest list of 25); the full sizes are measured by benchmarks/flood_memory.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core import manifest as manifest_mod
from pipeline.core import spool as spool_mod
from pipeline.core.spool import Spool
from pipeline.recordings.playback import read_playback_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "integrity"
FIRST_LINE = (FIXTURES / "lone_surrogate.recording.jsonl").read_bytes().splitlines(keepends=True)[0]
N_BAD = 300
LISTED = 25


@pytest.fixture
def small_lists(monkeypatch):
    monkeypatch.setattr(spool_mod, "SPOOL_LIMIT", 50)
    monkeypatch.setattr(Spool.__init__, "__defaults__", ((), 50))
    monkeypatch.setattr(manifest_mod, "LISTED_PROBLEMS", LISTED)


def _braces(path: Path, n: int) -> Path:
    path.write_bytes(FIRST_LINE + b"{}\n" * n)
    return path


def _script(path: Path, n_bad: int) -> Path:
    """A script of bg41 (shipped): one action, `n_bad` lines with an action id no game has, one more action."""
    good = json.dumps({"data": {"action_input": {"id": 1, "data": {"game_id": "bg41-a6ea70d5"}}}}) + "\n"
    bad = json.dumps({"data": {"action_input": {"id": 99, "data": {}}}}) + "\n"
    path.write_text(good + bad * n_bad + good)
    return path


def _run(*args: str, manifest: Path) -> tuple[str, dict]:
    """The command's output (its exit code 3: rejected input) and its run manifest."""
    result = CliRunner().invoke(app, ["--plain", *args])
    assert result.exit_code == 3, result.output
    return result.output, json.loads(manifest.read_text())


def _listed_file(folder: Path, note: dict, key: str, n: int) -> list[str]:
    """The note lists the first LISTED and names the file of all `n`; returns the file's problems."""
    assert len(note[key]) == LISTED and note[f"{key}_count"] == n
    every = [json.loads(line) for line in (folder / note[f"{key}_file"]).read_text().splitlines()]
    assert len(every) == n and every[:LISTED] == note[key]
    return every


# ---- the spool: every item, whichever way it is joined or sliced ------------------------------------------
def test_a_spool_joined_to_a_list_keeps_the_items_on_disk():
    spool = Spool(range(25), limit=10)  # 20 of them on disk
    assert list([-1] + spool) == [-1, *range(25)]  # list.__add__ would join the 5 in memory only
    assert list(spool + [25]) == [*range(26)]
    assert isinstance([-1] + spool, Spool) and isinstance(spool.copy(), Spool) and list(spool.copy()) == [*range(25)]
    assert 3 in spool and 99 not in spool and spool.count(3) == 1 and next(reversed(spool)) == 24
    for refused in (spool.sort, spool.reverse, spool.pop, lambda: spool.insert(0, 1), lambda: spool.index(3)):
        with pytest.raises(TypeError, match="gone to disk"):
            refused()
    small = Spool([3, 1, 2], limit=10)  # nothing on disk: a list's methods as they are
    small.sort()
    assert list(small) == [1, 2, 3] and small.pop() == 3 and small.index(2) == 1


def test_a_slice_of_a_spool_reads_back_only_the_batches_before_its_end(monkeypatch):
    spool = Spool(range(1000), limit=10)
    read = []
    real = spool_mod._unpacked
    monkeypatch.setattr(spool_mod, "_unpacked", lambda packed: read.append(1) or real(packed))
    assert spool[:3] == [0, 1, 2] and len(read) == 1
    assert spool[15:22] == [*range(15, 22)] and len(read) == 4  # two batches more
    assert spool[-2:] == [998, 999] and spool[::400] == [0, 400, 800]


def test_a_playback_scripts_bad_lines_wait_on_disk(tmp_path, small_lists):
    script = read_playback_file(_script(tmp_path / "bg41_bad.playback.jsonl", N_BAD))
    assert isinstance(script.issues, Spool) and script.issues._spilled > 0
    assert [i.location for i in script.issues] == [f"line {n}" for n in range(2, N_BAD + 2)]
    assert [a.line_number for a in script.actions] == [1, N_BAD + 2]


# ---- the commands -------------------------------------------------------------------------------------
def test_score_of_a_flood_lists_the_first_reasons_and_writes_every_one_beside_the_manifest(tmp_path, small_lists):
    path = _braces(tmp_path / "flood.recording.jsonl", N_BAD)
    out = tmp_path / "scored"
    output, manifest = _run("score", str(path), "--out", str(out), manifest=out / "manifest.json")
    every = _listed_file(out, manifest["notes"], "rejected_input", N_BAD)
    assert [p.split(": ")[1] for p in every] == [f"line {n}" for n in range(2, N_BAD + 2)]  # in order
    assert any(name.endswith("rejected_input.jsonl") for name in manifest["outputs"])
    assert output.count("rejected input: flood.recording.jsonl: line ") == 10
    assert f"... and {N_BAD - 10:,} more rejected inputs (see rejected_input.jsonl)" in output


def test_a_few_reasons_stay_in_the_manifest_alone(tmp_path, small_lists):
    path = _braces(tmp_path / "few.recording.jsonl", 12)
    out = tmp_path / "scored"
    output, manifest = _run("score", str(path), "--out", str(out), manifest=out / "manifest.json")
    assert len(manifest["notes"]["rejected_input"]) == 12 and "rejected_input_count" not in manifest["notes"]
    assert not (out / "rejected_input.jsonl").exists()
    assert "... and 2 more rejected inputs (see manifest.json)" in output


def test_an_export_of_a_flood_lists_the_first_problems_and_writes_every_one(tmp_path, small_lists):
    path = _script(tmp_path / "bg41_bad.playback.jsonl", N_BAD)
    out = tmp_path / "dataset"
    output, manifest = _run("export-transitions", str(path), "--out", str(out), manifest=out / "manifest.json")
    note = manifest["notes"]["transitions"]
    every = _listed_file(out, note, "problems", N_BAD)
    assert [p.split(": ")[1] for p in every] == [f"line {n}" for n in range(2, N_BAD + 2)]
    assert note["rows"] == 3  # make()'s RESET and the two good actions: the rest of the file is exported
    assert output.count("rejected: ") == 10
    assert f"... and {N_BAD - 10:,} more rejected (see problems.jsonl)" in output


def test_a_replay_of_a_flood_lists_the_first_lines_left_out_and_writes_every_one(tmp_path, small_lists):
    path = _script(tmp_path / "bg41_bad.playback.jsonl", N_BAD)
    out = tmp_path / "replayed.jsonl"
    output, manifest = _run("replay", str(path), "--out", str(out), manifest=tmp_path / "replayed.manifest.json")
    assert len(out.read_text().splitlines()) == 3
    notes = manifest["notes"]["replay"]
    every = _listed_file(tmp_path, notes, "action_lines_left_out", N_BAD)
    assert notes["action_lines_left_out_file"] == "replayed.left_out.jsonl"
    assert every[-1].startswith(f"line {N_BAD + 1}: ")
    assert output.count("left out: line ") == 10
    assert f"... and {N_BAD - 10:,} more lines left out (see replayed.left_out.jsonl)" in output


# ---- a flood of plays: every play is listed in a file, the card and the manifest name the first few --------------
GUID = "9064696e-1bf8-40f1-8b96-607f92b98787"
SHIPPED = Path(__file__).resolve().parents[2] / "games"


def _one_step_plays(path: Path, n: int, game_id: str, answer: dict, wrong: int | None = None) -> Path:
    """A frameless recording of ``n`` one-step plays: every line a RESET with `full_reset` true, answered with
    ``answer`` (line ``wrong`` records other available actions: its replay diverges there)."""
    lines = []
    for i in range(n):
        data = {"game_id": game_id, **answer, "full_reset": True, "guid": GUID,
                "action_input": {"id": "RESET", "data": {}, "reasoning": None}}
        if i == wrong:
            data["available_actions"] = [5]
        lines.append(json.dumps({"timestamp": f"2026-11-22T03:00:00.{i:06d}+00:00", "data": data}) + "\n")
    path.write_text("".join(lines))
    return path


def _reset_answer(game_id: str) -> dict:
    """What a shipped game answers to make()'s RESET, as a frameless recording line holds it."""
    from engine.base_game import FRAMES_NONE
    from engine.env import GameEnv
    from engine.loader import resolve_game

    response = GameEnv(resolve_game(game_id, [SHIPPED])).reset(frames=FRAMES_NONE)
    return {"state": response.state.name, "levels_completed": response.levels_completed,
            "win_levels": response.win_levels, "available_actions": [int(a) for a in response.available_actions]}


def test_an_export_of_a_flood_of_plays_left_out_lists_the_first_and_writes_every_one(tmp_path, small_lists):
    """A recording of a million one-step plays whose game is not found once took `export-transitions` to 2.1 GB:
    every play's entry held, and listed in full in a 197 MB card, a 277 MB manifest and a line each on the
    screen. Here 300 plays: their entries wait on disk, each list names the first, a file holds every one."""
    path = _one_step_plays(tmp_path / f"zz00-00000000-{GUID}.jsonl", N_BAD, "zz00-00000000",
                           {"state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 5,
                            "available_actions": [1, 2]})
    out = tmp_path / "dataset"
    output, manifest = _run("export-transitions", str(path), "--out", str(out), manifest=out / "manifest.json")
    note = manifest["notes"]["transitions"]
    every = _listed_file(out, note, "plays_not_exported", N_BAD)
    assert [p["play_id"] for p in every] == [f"{GUID}/{i}" for i in range(N_BAD)]  # in play order
    assert all("zz00-00000000' not found" in p["detail"] and p["file"] == str(path) for p in every)
    assert output.count("left out: ") == 10
    assert f"... and {N_BAD - 10:,} more plays left out (see plays_not_exported.jsonl)" in output
    left_out = (out / "README.md").read_text().split("## Left out", 1)[1].split("## Columns", 1)[0]
    assert left_out.count(f"| {GUID}/") == LISTED
    assert f"The first {LISTED} of {N_BAD}: every one is in `plays_not_exported.jsonl`." in left_out
    # the plays' entries as the export made them: a spool, most of it on disk, every play in order
    from pipeline.datasets.transitions import ExportJob, export_transitions

    result = export_transitions(ExportJob(path=str(path), game_dirs=(str(SHIPPED),), compress=True))
    assert isinstance(result.plays, Spool) and result.plays._spilled >= N_BAD - 50
    assert [p.play_id for p in result.plays] == [f"{GUID}/{i}" for i in range(N_BAD)]


def test_an_export_of_a_flood_of_files_lists_the_first_inputs_and_writes_every_one(tmp_path, small_lists,
                                                                                      monkeypatch):
    """100,000 two-line files once took `export-transitions` to 0.31 GB, growing about 2 KB a file: the paths,
    the jobs, and a manifest naming every input (18.6 MB). The files are now walked and grouped as they are
    exported, and past LISTED_INPUTS the manifest names a file beside it that lists every input with its sha256.
    Here 80 one-play files, 2 of them copies of another (left out, as before, and not inputs)."""
    import hashlib

    monkeypatch.setattr(manifest_mod, "LISTED_INPUTS", LISTED)
    game_id = "bg41-a6ea70d5"
    answer = _reset_answer(game_id)
    folder = tmp_path / "recordings"
    paths = []
    for i in range(80):
        sub = folder / f"d{i // 30}"
        sub.mkdir(parents=True, exist_ok=True)
        guid = f"00000000-0000-4000-8000-{i:012d}"
        data = {"game_id": game_id, **answer, "full_reset": True, "guid": guid,
                "action_input": {"id": "RESET", "data": {}, "reasoning": None}}
        paths.append(sub / f"{game_id}-{guid}.jsonl")
        paths[-1].write_text(json.dumps({"timestamp": "2026-11-22T03:00:00.000000+00:00", "data": data}) + "\n")
    copies = [folder / "d2" / "z-copy-1.jsonl", folder / "d2" / "z-copy-2.jsonl"]  # (after their first)
    for copy, of in zip(copies, (paths[3], paths[70]), strict=True):
        copy.write_bytes(of.read_bytes())
    out = tmp_path / "dataset"
    output, manifest = _run("export-transitions", str(folder), "--out", str(out), manifest=out / "manifest.json")
    note = manifest["notes"]["transitions"]
    assert note["rows"] == 80 and note["inputs_count"] == 80 and note["inputs_file"] == "inputs.jsonl"
    every = [json.loads(line) for line in (out / "inputs.jsonl").read_text().splitlines()]
    assert [e["path"] for e in every] == [str(p) for p in sorted(paths)]  # the order of the walk
    assert all(e["sha256"] == hashlib.sha256(Path(e["path"]).read_bytes()).hexdigest() for e in every)
    assert manifest["inputs"] == {e["path"]: e["sha256"] for e in every[:LISTED]}
    assert str(out / "inputs.jsonl") in manifest["outputs"]
    assert note["problems"] == [f"{copies[0]}: same content as {paths[3]} (given twice: read once)",
                                f"{copies[1]}: same content as {paths[70]} (given twice: read once)"]
    assert output.count("rejected: ") == 2


def test_plays_after_a_divergence_are_listed_cut_from_disk_in_order(tmp_path, small_lists):
    """300 one-step plays of a shipped game, the 101st recording other available actions than the game answers: the 100
    plays before it are exported a row each, and it and every play after it are cut, entries made in play order
    and let go to disk as they are finished; the card and the manifest list the first, a file every one."""
    from pipeline.datasets.transitions import ExportJob, export_transitions

    game_id, wrong = "bg41-a6ea70d5", 100
    path = _one_step_plays(tmp_path / f"{game_id}-{GUID}.jsonl", N_BAD, game_id, _reset_answer(game_id), wrong)
    result = export_transitions(ExportJob(path=str(path), game_dirs=(str(SHIPPED),), compress=True))
    assert isinstance(result.plays, Spool) and result.plays._spilled >= N_BAD - 50
    plays = list(result.plays)
    assert [p.play_id for p in plays] == [f"{GUID}/{i}" for i in range(N_BAD)]
    assert [(p.status, p.n_rows) for p in plays[:wrong]] == [("exported", 1)] * wrong
    assert plays[wrong].status == "cut" and plays[wrong].detail.startswith("exported up to the divergence")
    assert all(p.status == "cut" and p.n_rows == 0 and p.detail.startswith("follows a divergence")
               for p in plays[wrong + 1:])
    assert result.n_rows == wrong and not result.problems  # a divergence of the data: a fact about the file

    out = tmp_path / "dataset"
    ran = CliRunner().invoke(app, ["--plain", "export-transitions", str(path), "--out", str(out)])
    assert ran.exit_code == 0, ran.output
    note = json.loads((out / "manifest.json").read_text())["notes"]["transitions"]
    every = _listed_file(out, note, "plays_cut", N_BAD - wrong)
    assert [p["play_id"] for p in every] == [f"{GUID}/{i}" for i in range(wrong, N_BAD)]
    assert note["rows"] == wrong and "plays_not_exported_count" not in note and note["plays_not_exported"] == []
    cut = (out / "README.md").read_text().split("## Plays cut at a divergence", 1)[1].split("## Plays not", 1)[0]
    assert cut.count(f"| {GUID}/") == LISTED
    assert f"The first {LISTED} of {N_BAD - wrong}: every one is in `plays_cut.jsonl`." in cut


def test_an_overwrite_removes_the_listings_an_earlier_export_wrote(tmp_path, small_lists):
    """The listings beside the manifest describe the export that wrote them: an export over it that lists
    everything in its manifest removes them (a stale problems.jsonl or plays_not_exported.jsonl would speak of
    files and plays not there)."""
    flood = _one_step_plays(tmp_path / f"zz00-00000000-{GUID}.jsonl", N_BAD, "zz00-00000000",
                            {"state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 5,
                             "available_actions": [1, 2]})
    bad_lines = _script(tmp_path / "bg41_bad.playback.jsonl", N_BAD)
    out = tmp_path / "dataset"
    _run("export-transitions", str(flood), str(bad_lines), "--out", str(out), manifest=out / "manifest.json")
    assert (out / "plays_not_exported.jsonl").exists() and (out / "problems.jsonl").exists()
    (out / "inputs.jsonl").write_text("{}\n")  # (an export of a flood of files writes it)
    game_id = "bg41-a6ea70d5"
    (tmp_path / "few").mkdir()
    few = _one_step_plays(tmp_path / "few" / f"{game_id}-{GUID}.jsonl", 3, game_id, _reset_answer(game_id))
    ran = CliRunner().invoke(app, ["--plain", "export-transitions", str(few), "--out", str(out), "--overwrite"])
    assert ran.exit_code == 0, ran.output
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "data", "manifest.json"]


def test_a_block_of_stored_steps_reads_the_texts_of_its_own_plays_only(tmp_path, monkeypatch):
    """A block of a stored file's steps reads the texts (play_id, guid, game_id) of the plays its steps name, not
    every play of the file: a stored recording of a million one-step plays read all of them for each block, past
    the export's 64 MB DuckDB limit (every such file failed) and in time per play. The blocks are the table's."""
    from pipeline.core.workspace import Workspace
    from pipeline.datasets.transitions import DB_STEP_COLUMNS
    from pipeline.scoring import storage

    game_id = "bg41-a6ea70d5"
    path = _one_step_plays(tmp_path / f"{game_id}-{GUID}.jsonl", 60, game_id, _reset_answer(game_id))
    db = tmp_path / "t.duckdb"
    ingested = CliRunner().invoke(app, ["--plain", "ingest", str(path), "--db", str(db)])
    assert ingested.exit_code == 0, ingested.output
    with Workspace(db, read_only=True) as ws:
        file_id = ws.read("SELECT DISTINCT file_id FROM core_arc3__steps").item()
        whole = storage.read_stored_steps(ws, DB_STEP_COLUMNS, [file_id])
        keys_read: list[int] = []
        read = ws.read

        def spied(sql, *args, **kwargs):
            frame = read(sql, *args, **kwargs)
            if frame.columns == ["file_id", "play_id", "guid", "game_id"]:
                keys_read.append(frame.height)
            return frame

        monkeypatch.setattr(ws, "read", spied)
        parts = list(storage.StoredSteps(ws, file_id, DB_STEP_COLUMNS, block_rows=7).parts())
    assert whole.height == 60 and whole["play_id"].n_unique() == 60
    assert pl.concat(parts).equals(whole) and len(parts) == len(keys_read) > 8
    assert keys_read == [part["play_id"].n_unique() for part in parts] and max(keys_read) <= 7
