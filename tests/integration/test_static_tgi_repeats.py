"""The ARC-TGI dataset generator's output folder: each task is written to its folder's CSV and again to all.csv
under a new task_id and created_at. Ingesting the folder keeps every row with its file, counts each task once in
the families (as its folder copy), and says in the ingest summary which rows repeat which file; all.csv alone
cannot tell two generators of one name apart, and the family says so (`folder_unknown`).

Fixture `tgi_generator_out`: real rows of the generator's output (-g ARC-AGI-1-Train ARC-AGI-2-Train): one
task0a938d79 task per folder CSV, and all.csv holding both again plus one task of ARC-AGI-1-Train whose folder
row is not in the fixture."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.config import load_config
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.qualify.witnesses import witness_tasks
from pipeline.transforms.build import build

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "static" / "tgi_generator_out"
SAME = ("generator_name", "input_reasoning_chain", "transformation_reasoning_chain", "task_variables", "code", "data")


def _rows(name: str) -> list[dict]:
    with open(OUT / name, newline="") as fh:
        return list(csv.DictReader(fh))


def _expected() -> dict[str, tuple[str, int, bool]]:
    """Worked out from the files in plain Python: task_id -> (family_id, ...) for the task each row stands for."""
    folder = {name[:-4]: _rows(name) for name in ("ARC-AGI-1-Train.csv", "ARC-AGI-2-Train.csv")}
    kept = {}
    for prefix, rows in folder.items():
        for r in rows:
            kept[tuple(r[c] for c in SAME)] = (r["task_id"], f"{prefix}/{r['generator_name']}")
    only_all = [r for r in _rows("all.csv") if tuple(r[c] for c in SAME) not in kept]
    return {**{t: f for t, f in kept.values()}, **{r["task_id"]: r["generator_name"] for r in only_all}}


def _ingest_and_build(db: Path, *runs: list[Path]) -> None:
    with Workspace(db) as ws:
        for i, paths in enumerate(runs):
            ingest_paths(ws, paths, run_id=f"t{i}", workers=1)
        build(ws, load_config(), figures=False)


def _families(db: Path) -> list[tuple]:
    with Workspace(db, read_only=True) as ws:
        return ws.read("SELECT family_id, n_tasks, n_duplicate_tasks, diversity_flags FROM "
                       "out_arctgi__family_diversity ORDER BY family_id").rows()


def test_the_fixture_is_what_the_generator_writes():
    """all.csv repeats each folder row with the same contents under another task_id."""
    all_rows = {tuple(r[c] for c in SAME): r["task_id"] for r in _rows("all.csv")}
    for name in ("ARC-AGI-1-Train.csv", "ARC-AGI-2-Train.csv"):
        for r in _rows(name):
            assert all_rows[tuple(r[c] for c in SAME)] != r["task_id"]
    assert len(_expected()) == 3 and len(_rows("all.csv")) == 3


def test_the_output_folder_counts_each_task_once_under_its_folder(tmp_path: Path):
    db = tmp_path / "f.duckdb"
    _ingest_and_build(db, [OUT])
    expected = _expected()
    with Workspace(db, read_only=True) as ws:
        stored = ws.read("SELECT f.file_name, t.task_id, t.flags FROM core_arctgi__tasks t JOIN raw_ingest__files f "
                         "USING (file_id) ORDER BY 1, 2")
        q = ws.read("SELECT count(*) AS n FROM quarantine")["n"][0]
        tasks = ws.read("SELECT * FROM core_arctgi__tasks")
    # every row is stored with its file (provenance), none is quarantined
    assert sorted(stored.select("file_name", "task_id").rows()) == sorted(
        (name, r["task_id"]) for name in ("ARC-AGI-1-Train.csv", "ARC-AGI-2-Train.csv", "all.csv")
        for r in _rows(name))
    assert q == 0
    assert {n: f for n, _, f in stored.rows()} == {"ARC-AGI-1-Train.csv": [], "ARC-AGI-2-Train.csv": [],
                                                   "all.csv": ["aggregate_file"]}
    # each task once: the folder copies in their folder's family, all.csv's own task under the bare name, flagged
    fams: dict[str, int] = {}
    for fid in expected.values():
        fams[fid] = fams.get(fid, 0) + 1
    assert _families(db) == sorted((fid, n, 0, ["folder_unknown"] if "/" not in fid else [])
                                   for fid, n in fams.items())
    assert _families(db) == [("ARC-AGI-1-Train/task0a938d79", 1, 0, []), ("ARC-AGI-2-Train/task0a938d79", 1, 0, []),
                             ("task0a938d79", 1, 0, ["folder_unknown"])]
    # the witness checks run every file's copy, each in its own export's child, under the task's family
    checked = {(t.file_id, t.task_id): t.family_id for t in witness_tasks(tasks)}
    assert sorted(checked) == sorted(tasks.select("file_id", "task_id").rows())
    assert {task_id: family for (_f, task_id), family in checked.items() if task_id in expected} == expected


def test_the_order_of_ingest_does_not_change_the_families(tmp_path: Path):
    folder = tmp_path / "out"
    shutil.copytree(OUT, folder)
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    _ingest_and_build(a, [folder])
    _ingest_and_build(b, [folder / "all.csv"], [folder / "ARC-AGI-2-Train.csv", folder / "ARC-AGI-1-Train.csv"])
    assert _families(a) == _families(b)


def test_all_csv_alone_says_the_folder_is_unknown(tmp_path: Path):
    db = tmp_path / "all.duckdb"
    _ingest_and_build(db, [OUT / "all.csv"])
    # two generators (ARC-AGI-1-Train and ARC-AGI-2-Train) share the name: one family, flagged, not merged silently
    assert _families(db) == [("task0a938d79", 3, 0, ["folder_unknown"])]


def test_the_ingest_summary_names_the_repeated_rows_and_their_file(tmp_path: Path):
    res = CliRunner().invoke(app, ["ingest", str(OUT), "--db", str(tmp_path / "c.duckdb")])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    for name in ("ARC-AGI-1-Train.csv", "ARC-AGI-2-Train.csv"):
        assert f"all.csv: 1 row(s) repeat ARC-TGI tasks already read from {OUT / name}" in text
    assert "0 records quarantined" in text
    # a second ingest of the same files skips them and has nothing new to say
    again = CliRunner().invoke(app, ["ingest", str(OUT / "all.csv"), "--db", str(tmp_path / "c.duckdb")])
    assert again.exit_code == 0 and "repeat ARC-TGI tasks" not in again.output


@pytest.mark.parametrize("aggregate", ["all.csv", "individual_files.csv"])
def test_a_copy_in_a_plain_folder_is_kept_over_the_aggregate_file(tmp_path: Path, aggregate: str):
    """Neither file names a benchmark folder (the generator's `-g Generators/ARC-AGI-1/Train` writes Train.csv):
    the task stands as the Train.csv row, the aggregate file's row repeats it."""
    folder = tmp_path / "out2"
    folder.mkdir()
    shutil.copy(OUT / "ARC-AGI-2-Train.csv", folder / "Train.csv")
    shutil.copy(OUT / "all.csv", folder / aggregate)
    db = tmp_path / "p.duckdb"
    _ingest_and_build(db, [folder])
    with Workspace(db, read_only=True) as ws:
        tasks = ws.read("SELECT * FROM core_arctgi__tasks")
    train_ids = {r["task_id"] for r in _rows("ARC-AGI-2-Train.csv")}
    checked = {t.task_id for t in witness_tasks(tasks)}
    assert train_ids <= checked and len(checked) == tasks.height  # every file's copy, in its own export's child
    assert tasks.filter(pl.col("task_id").is_in(list(train_ids)))["flags"].to_list() == [[]]


def test_audits_of_a_repeated_copy_count_for_the_task_it_repeats(tmp_path: Path):
    """Auditors shown all.csv's copy (its task_id) and the folder's copy audit one task."""
    folder_row = _rows("ARC-AGI-1-Train.csv")[0]
    all_copy = next(r for r in _rows("all.csv") if all(r[c] == folder_row[c] for c in SAME))
    audit = tmp_path / "audit.csv"
    audit.write_text("task_ID,task_set,test_index,session_ID,start_time_seconds,duration_seconds,submissions,"
                     "correct_submissions\n"
                     f"{all_copy['task_id']},ARC-TGI,0,a1,0,30,1,1\n{folder_row['task_id']},ARC-TGI,0,a2,0,50,2,0\n")
    db = tmp_path / "au.duckdb"
    _ingest_and_build(db, [OUT, audit])
    with Workspace(db, read_only=True) as ws:
        got = ws.read("SELECT family_id, n_tasks, n_sessions, n_attempts, n_solved FROM out_arctgi__family_audits")
        calib = ws.read("SELECT count(*) AS n FROM out_arc2__pair_calibration")["n"][0]
    assert got.rows() == [("ARC-AGI-1-Train/task0a938d79", 1, 2, 2, 1)]
    assert calib == 0  # audit rows, not ARC-AGI-2 calibration
