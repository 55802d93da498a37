"""Small files are committed many to a transaction (`batches.commit_batch`): the tables, the registry, the
quarantine and the per-file reports are exactly those of committing the same files one by one, and a bad
file in a batch is refused alone while the others land."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import batches, ingest_paths, runner
from schemas import TABLES

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
TOOLKIT = SHARED / "samples" / "arc-agi-3" / "toolkit"
NOFRAMES = TOOLKIT / "bt11_two_plays_fullreset.noframes.jsonl"
SCORED = TOOLKIT / "tu93_explore_reset_solve_5levels.noframes.expected.json"
METADATA = SHARED / "conformance" / "environment_files" / "ck17" / "8ce0c519" / "metadata.json"


def _grid(rng: random.Random) -> list[list[int]]:
    h, w = rng.randint(1, 6), rng.randint(1, 6)
    return [[rng.randint(0, 9) for _ in range(w)] for _ in range(h)]


def _task(rng: random.Random) -> dict:
    return {"train": [{"input": _grid(rng), "output": _grid(rng)} for _ in range(rng.randint(1, 3))],
            "test": [{"input": _grid(rng), "output": _grid(rng)}]}


REFUSED = {"c0ffee00.json", "c0ffee01.json", "notes.txt"}


def _small_inputs(folder: Path) -> list[str]:
    """Task files (their names returned), a scorecard, a card, a metadata.json, a study manifest with bad
    entries, recordings, and files that are refused whole: each kind of small file the batches see."""
    rng = random.Random(7)
    folder.mkdir()
    tasks = [f"{rng.getrandbits(32):08x}.json" for _ in range(12)]
    for name in tasks:
        (folder / name).write_text(json.dumps(_task(rng)))
    (folder / "c0ffee00.json").write_text('{"train": [{"input": [[1, 2]], "output": [[3]]}], "test": [')  # cut off
    (folder / "c0ffee01.json").write_text(json.dumps({"train": [{"input": [[1, 12]], "output": [[3]]}],
                                                      "test": [{"input": [[1]]}]}))  # cell 12
    (folder / "notes.txt").write_text("free text that no reader claims\n")
    expected = json.loads(SCORED.read_text())
    (folder / "scorecard.json").write_text(json.dumps({"card_id": "c1", "score": expected["scored"]["scorecard_score"],
                                                       "environments": [expected["scored"]["environment"]]}))
    (folder / "card.json").write_text(json.dumps({"won": 0, "played": 1, "total_actions": 150, "levels_completed": 5,
                                                  "cards": {expected["game_id"]: expected["card"]}}))
    shutil.copy(METADATA, folder / "metadata.json")
    (folder / "study.json").write_text(json.dumps({
        "format": "arcstudy-study-manifest/1", "study_id": "s1",
        "participants": [{"participant_id": "p1"}],
        "sessions": [{"session_id": "s1", "participant_id": "p1", "started_at": "2026-03-01T10:00:00+00:00"},
                     {"session_id": "s2", "participant_id": "ghost", "started_at": "2026-03-01T10:00:00+00:00"}],
        "plays": [{"guid": "g1", "session_id": "s1"}, {"guid": "g2", "session_id": "nowhere"}],
    }))
    for sample in sorted(TOOLKIT.glob("*.noframes.jsonl"))[:3]:
        shutil.copy(sample, folder / sample.name)
    return tasks


def _snapshot(ws: Workspace, report) -> tuple:
    """Every table's rows (less the ingest clock), and the per-file reports."""
    tables = {}
    for name in TABLES:
        if ws.has_table(name) and ws.row_count(name):
            clock = {"raw_ingest__files": " EXCLUDE (ingested_at)",
                     "schema_version": " EXCLUDE (migrated_at)"}.get(name, "")  # the clocks
            tables[name] = ws.read(f"SELECT *{clock} FROM {name} ORDER BY ALL").rows()
    files = [(f.path.name, f.status, f.source_format, f.n_loaded, f.n_quarantined, f.message, f.tables)
             for f in report.files]
    return files, tables


def _four_runs(root: Path, monkeypatch: pytest.MonkeyPatch, *, batched: bool) -> tuple[list[tuple], int]:
    """A first ingest (every frame clean: validated stacked); a second after changing a task file and adding a
    study manifest with a row that fails its schema (validated file by file); a third with --force; a fourth
    after adding a copy of a recording with other bytes but the same plays (a key clash: committed file by
    file). Returns the snapshot after each, and the batches written at once. The inputs are made afresh at the same path (rows and quarantine ids name it)."""
    folder = root / "inputs"
    shutil.rmtree(folder, ignore_errors=True)
    tasks = _small_inputs(folder)
    written = []
    real_write = batches._write_batch
    monkeypatch.setattr(batches, "_write_batch", lambda ws, plan: (written.append(len(plan.reports)),
                                                                  real_write(ws, plan)))
    if not batched:
        monkeypatch.setattr(runner, "BATCH_MAX_FILES", 1)
    snapshots = []
    with Workspace(root / f"{'batched' if batched else 'single'}.duckdb") as ws:
        snapshots.append(_snapshot(ws, ingest_paths(ws, [folder], run_id="a", workers=1)))
        (folder / tasks[0]).write_text(json.dumps(_task(random.Random(99))))
        (folder / "study2.json").write_text(json.dumps({
            "format": "arcstudy-study-manifest/1", "study_id": "s9", "participants": [{"participant_id": "p9"}],
            "sessions": [{"session_id": "s9", "participant_id": "p9", "started_at": "2026-03-02T10:00:00+00:00"}],
            "plays": [{"guid": "g9", "session_id": "s9", "order_in_session": 0},  # below the schema's minimum
                      {"guid": "g10", "session_id": "s9", "order_in_session": 2}]}))
        snapshots.append(_snapshot(ws, ingest_paths(ws, [folder], run_id="b", workers=1)))
        snapshots.append(_snapshot(ws, ingest_paths(ws, [folder], run_id="c", workers=1, force=True)))
        (folder / "zz_copy.jsonl").write_text(NOFRAMES.read_text() + "\n")
        snapshots.append(_snapshot(ws, ingest_paths(ws, [folder], run_id="d", workers=1)))
    monkeypatch.undo()
    return snapshots, len(written)


def test_a_batch_writes_exactly_what_one_file_at_a_time_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    batched, n_batches = _four_runs(tmp_path, monkeypatch, batched=True)
    single, n_single = _four_runs(tmp_path, monkeypatch, batched=False)
    # The batch path really ran, but for the run with a key clash across files (it commits file by file).
    assert n_single == 0 and n_batches == 3
    statuses = [{name: status for name, status, *_ in files} for files, _ in batched]
    assert list(statuses[1].values()).count("replaced") == 1
    study2 = next(f for f in batched[1][0] if f[0] == "study2.json")
    assert study2[1] == "loaded" and study2[4] == 1
    assert set(statuses[2].values()) == {"loaded", "rejected"}
    copy = next(f for f in batched[3][0] if f[0] == "zz_copy.jsonl")
    assert copy[1] == "loaded" and copy[4] > 0  # its plays are quarantined as duplicates across files
    for (b_files, b_tables), (s_files, s_tables) in zip(batched, single, strict=True):
        assert [f[0] for f in b_files] == [f[0] for f in s_files]
        assert b_files == s_files
        assert b_tables.keys() == s_tables.keys()
        for name in b_tables:
            assert b_tables[name] == s_tables[name], name


def test_a_bad_file_in_a_batch_is_refused_alone_and_the_others_land(tmp_path: Path):
    folder = tmp_path / "inputs"
    _small_inputs(folder)
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [folder], run_id="a", workers=1)
        by_name = {f.path.name: f for f in report.files}
        refused = REFUSED
        assert {n for n, f in by_name.items() if f.status == "rejected"} == refused
        assert all(f.status == "loaded" for n, f in by_name.items() if n not in refused)
        assert report.has_rejections
        registry = set(ws.read("SELECT file_name FROM raw_ingest__files")["file_name"])
        assert registry == set(by_name) - refused
        assert ws.row_count("core_arc__tasks") == 12
        q = ws.read("SELECT file_path, check_name FROM quarantine WHERE source_location = 'file'").rows()
        assert {(Path(p).name, c) for p, c in q} == {("c0ffee00.json", "invalid_json"),
                                                      ("c0ffee01.json", "grid_invalid"),
                                                      ("notes.txt", "unknown_format")}
        assert by_name["study.json"].n_quarantined == 2  # row-level rejects of a loaded file land too
        assert ws.read("SELECT count(*) AS n FROM quarantine WHERE file_path LIKE '%study.json'")["n"][0] == 2


def test_a_write_that_fails_in_a_batch_leaves_whole_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The batch rolls back and its files are committed one by one: those before the failing file land
    wholly, the failing one and those after it not at all (as without batches)."""
    folder = tmp_path / "inputs"
    tasks = _small_inputs(folder)
    real_insert = Workspace.insert_frame

    def crash_on_the_study(self, table_name, df, **kw):
        if table_name == "core_study__participants":
            raise RuntimeError("disk full (simulated)")
        return real_insert(self, table_name, df, **kw)

    monkeypatch.setattr(Workspace, "insert_frame", crash_on_the_study)
    with Workspace(tmp_path / "db.duckdb") as ws:
        with pytest.raises(RuntimeError, match="disk full"):
            ingest_paths(ws, [folder], run_id="a", workers=1)
        monkeypatch.undo()
        files = runner.expand_paths([folder])
        before = {p.name for p in files[:[p.name for p in files].index("study.json")]}
        loaded = set(ws.read("SELECT file_name FROM raw_ingest__files")["file_name"])
        assert loaded == before - REFUSED and "scorecard.json" in loaded
        assert ws.row_count("core_study__sessions") == 0
        assert set(ws.read("SELECT file_name FROM core_arc__tasks")["file_name"]) == loaded & set(tasks)


def test_a_copy_of_an_older_version_in_the_same_batch_is_committed_in_order(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch):
    """z.json changes while b.json, new, holds z.json's old bytes; with --force, one by one, b.json takes over
    the old version's content hash first, so z.json finds no older version of itself left to replace. The
    batch, whose files would see the same registry row, commits them in order too."""
    old, new = json.dumps(_task(random.Random(1))), json.dumps(_task(random.Random(2)))
    results = []
    for batch_files in (runner.BATCH_MAX_FILES, 1):
        monkeypatch.setattr(runner, "BATCH_MAX_FILES", batch_files)
        folder = tmp_path / "inputs"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        (folder / "z.json").write_text(old)
        (folder / "c.json").write_text(json.dumps(_task(random.Random(3))))
        with Workspace(tmp_path / f"db{batch_files}.duckdb") as ws:
            ingest_paths(ws, [folder], run_id="a", workers=1)
            (folder / "z.json").write_text(new)
            (folder / "b.json").write_text(old)
            results.append(_snapshot(ws, ingest_paths(ws, [folder], run_id="b", workers=1, force=True)))
    (batched_files, batched_tables), (single_files, single_tables) = results
    assert [(name, status) for name, status, *_ in single_files] == [
        ("b.json", "loaded"), ("c.json", "loaded"), ("z.json", "loaded")]
    assert batched_files == single_files
    assert batched_tables == single_tables


def test_recordings_of_a_few_mb_are_batched_with_the_result_of_one_by_one(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch):
    """Recordings above SMALL_FILE_BYTES but read whole are committed a batch at a time (the per-file costs of
    a commit were most of the writer's time on engine-made recordings); tables, registry, quarantine and
    reports are those of committing each alone, a copy with the same plays (a key clash) included."""
    folder = tmp_path / "in"
    folder.mkdir()
    samples = sorted((SHARED / "samples" / "arc-agi-3" / "fixtures").glob("*.jsonl"))
    for sample in samples:
        shutil.copy(sample, folder / sample.name)
    # the same plays in other bytes (CRLF line ends): its plays clash with the original's
    (folder / "zz-copy.jsonl").write_bytes(samples[0].read_bytes().replace(b"\n", b"\r\n"))
    monkeypatch.setattr(batches, "SMALL_FILE_BYTES", 4096)  # every recording here is "of a few MB"
    sizes = [batches.SMALL_FILE_BYTES < p.stat().st_size <= batches.SMALL_RECORDING_BYTES
             for p in folder.iterdir()]
    assert all(sizes)
    committed: list[int] = []
    real = runner.commit_batch

    def spy(ws, batch):
        committed.append(len(batch))
        return real(ws, batch)

    monkeypatch.setattr(runner, "commit_batch", spy)
    snapshots = []
    for recording_limit in (batches.SMALL_RECORDING_BYTES, 0):
        monkeypatch.setattr(batches, "SMALL_RECORDING_BYTES", recording_limit)
        with Workspace(tmp_path / f"db{recording_limit}.duckdb") as ws:
            snapshots.append(_snapshot(ws, ingest_paths(ws, [folder], run_id="a", workers=1)))
        if recording_limit:
            assert sum(committed) == len(sizes) and max(committed) > 1  # batched, each file once
            committed.clear()
    assert committed == []  # with the limit at 0, every recording went alone through commit_file
    (batched_files, batched_tables), (single_files, single_tables) = snapshots
    assert batched_files == single_files
    assert batched_tables == single_tables
    statuses = {name: status for name, status, *_ in single_files}
    assert set(statuses.values()) == {"loaded"}
    assert batched_tables["quarantine"]  # the copy's plays were quarantined as duplicates, in both
