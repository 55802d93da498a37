"""`arcstudy score --workers N / --scheduler ADDRESS`: the replay verification fanned out (scoring/parallel.py).

The scorecards and out tables must not depend on where the replays ran; a recording whose replay raises is
reported with its reason (exit code 3) while the others are scored. The fixture recordings of ../shared
replay on the conformance games.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import weakref
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.scoring import parallel
from pipeline.scoring.plays import STEP_COLUMNS, read_recording_files, recording_order, recordings_from_tables

from .test_executor_faults import external_cluster  # noqa: F401  (the fixture: dask scheduler + 2 workers)

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
FIXTURES = SHARED / "samples" / "arc-agi-3" / "fixtures"
GAMES = SHARED / "conformance" / "environment_files"
TABLES = ("out_arc3__replay_checks", "out_arc3__run_scores", "out_arc3__level_scores", "out_arc3__game_scores")


def score(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--plain", "score", *args], catch_exceptions=False)
    return result.exit_code, result.output


def outputs(out: Path, db: Path) -> dict[str, object]:
    """Every file written but the manifest (run id, times), and the out tables of the run's scorecard."""
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
             if p.is_file() and p.name != "manifest.json"}
    card_id = json.loads((out / "manifest.json").read_text())["notes"]["card_id"]
    with Workspace(db, read_only=True) as ws:
        tables = {t: ws.read(f"SELECT * FROM {t} WHERE card_id = ?", [card_id]) for t in TABLES}
    return {"files": files, "tables": tables}


def assert_same(a: dict, b: dict) -> None:
    assert a["files"].keys() == b["files"].keys() and a["files"] == b["files"]
    for name in TABLES:
        assert a["tables"][name].equals(b["tables"][name]), name


def manifest_config(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())["config"]


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("score-serial")
    code, output = score(str(FIXTURES), "--games", str(GAMES), "--db", str(root / "s.duckdb"), "--out",
                         str(root / "out"), "--no-figures", "--workers", "1")
    assert code == 0, output
    assert manifest_config(root / "out")["workers"] == 1
    return outputs(root / "out", root / "s.duckdb")


def spy_helpers(monkeypatch) -> list:
    """The helper executors `--workers 2` opens (this process and one helper process, scoring/parallel.py)."""
    opened = []
    real = parallel.open_helper_executor

    @contextlib.contextmanager
    def spy(*args, **kwargs):
        with real(*args, **kwargs) as ex:
            opened.append(ex)
            yield ex

    monkeypatch.setattr(parallel, "open_helper_executor", spy)
    return opened


def test_two_local_workers_give_the_same_scorecards_files_and_tables(serial, tmp_path, monkeypatch):
    helpers = spy_helpers(monkeypatch)
    code, output = score(str(FIXTURES), "--games", str(GAMES), "--db", str(tmp_path / "p.duckdb"), "--out",
                         str(tmp_path / "out"), "--no-figures", "--workers", "2")
    assert code == 0, output
    assert manifest_config(tmp_path / "out")["workers"] == 2
    # Both processes read and replayed files: the helper did some, not all (this process works meanwhile).
    assert len(helpers) == 1 and 0 < helpers[0].helper_pieces < len(list(FIXTURES.glob("*.jsonl")))
    got = outputs(tmp_path / "out", tmp_path / "p.duckdb")
    assert_same(serial, got)
    checks = got["tables"]["out_arc3__replay_checks"]
    assert checks.height > 16 and set(checks["verification_status"]) == {"verified"}


def test_database_plays_score_the_same_on_one_or_two_workers(tmp_path, monkeypatch):
    helpers = spy_helpers(monkeypatch)
    db = tmp_path / "study.duckdb"
    with Workspace(db) as ws:
        ingest_paths(ws, sorted(FIXTURES.glob("*.jsonl")), run_id="ingest", workers=1)
    got = {}
    for n in ("1", "2"):
        code, output = score("--games", str(GAMES), "--db", str(db), "--out", str(tmp_path / n), "--no-figures",
                             "--workers", n)
        assert code == 0, output
        got[n] = outputs(tmp_path / n, db)
    assert_same(got["1"], got["2"])
    assert len(helpers) == 1 and helpers[0].helper_pieces > 0


def test_two_workers_are_a_helper_and_more_start_a_cluster(monkeypatch):
    """`--workers 2` runs in this process and one helper process; 3 or more, or a scheduler, go to
    `open_executor` (a Dask cluster), as does 1 (which that runs serially)."""
    calls = []

    def opener(kind):
        @contextlib.contextmanager
        def open_(*args, **kwargs):
            calls.append((kind, args))
            yield kind
        return open_

    monkeypatch.setattr(parallel, "open_helper_executor", opener("helper"))
    monkeypatch.setattr(parallel, "open_executor", opener("open_executor"))
    for workers, scheduler in ((2, None), (3, None), (2, "tcp://x:1"), (1, None)):
        with parallel._open(workers, scheduler, 5) as ex:
            assert ex == calls[-1][0]
    assert calls == [("helper", (parallel.WORKER_PRELOAD,)), ("open_executor", (3, None)),
                     ("open_executor", (2, "tcp://x:1")), ("open_executor", (1, None))]


def test_an_external_scheduler_gives_the_same_scorecards(serial, external_cluster, tmp_path):  # noqa: F811
    code, output = score(str(FIXTURES), "--games", str(GAMES), "--db", str(tmp_path / "c.duckdb"), "--out",
                         str(tmp_path / "out"), "--no-figures", "--scheduler", external_cluster)
    assert code == 0, output
    assert manifest_config(tmp_path / "out")["scheduler"] == external_cluster
    assert_same(serial, outputs(tmp_path / "out", tmp_path / "c.duckdb"))


def test_a_replay_that_raises_is_reported_and_the_others_are_scored(monkeypatch, tmp_path):
    broken = "ck17"
    real = parallel.verify_recording

    def verify(rec, game_dirs, *, from_file):
        if rec.game_id.startswith(broken):
            raise RuntimeError("verifier exploded")
        return real(rec, game_dirs, from_file=from_file)

    monkeypatch.setattr(parallel, "verify_recording", verify)
    code, output = score(str(FIXTURES), "--games", str(GAMES), "--db", str(tmp_path / "x.duckdb"), "--out",
                         str(tmp_path / "out"), "--no-figures", "--workers", "1")
    assert code == 3, output
    assert "verifier exploded" in output
    with Workspace(tmp_path / "x.duckdb", read_only=True) as ws:
        checks = ws.read("SELECT * FROM out_arc3__replay_checks")
        scored = ws.read("SELECT DISTINCT game_id FROM out_arc3__run_scores")["game_id"].to_list()
    failed = checks.filter(pl.col("game_id").str.starts_with(broken))
    assert failed.height > 0 and set(failed["verification_status"]) == {"not_replayable"}
    assert failed["is_score_excluded"].all()
    assert all(r.startswith("replay failed: RuntimeError: verifier exploded") for r in failed["exclusion_reason"])
    others = checks.filter(~pl.col("game_id").str.starts_with(broken))
    assert set(others["verification_status"]) == {"verified"} and not others["is_score_excluded"].any()
    assert not any(g.startswith(broken) for g in scored) and len(scored) == 7


def test_a_recording_that_raises_on_a_worker_fails_alone():
    steps, plays, files, problems = read_recording_files(sorted(FIXTURES.glob("*.jsonl"))[:4])
    recs = recordings_from_tables(steps, plays, files)
    # One step record fewer than the file's steps: the replay's strict zip raises, on the worker.
    recs[1] = dataclasses.replace(recs[1], records=recs[1].records[:-1])
    serial = parallel.verify_recordings(recs, [GAMES], from_file=True, workers=1)
    spread = parallel.verify_recordings(recs, [GAMES], from_file=True, workers=2)
    assert spread == serial
    bad = {c.play_id for c in serial if c.status == "not_replayable"}
    assert bad == {pid for pid, _ in recs[1].plays()}
    assert all(c.detail.startswith(parallel.REPLAY_FAILED + "ValueError") for c in serial if c.play_id in bad)
    assert {c.status for c in serial if c.play_id not in bad} == {"verified"}



def test_one_worker_replays_file_by_file_and_keeps_no_pixels(monkeypatch):
    """Serially, each file is read, replayed and let go: the same tables and checks as reading every file first
    and replaying the parsed files, without holding any file's frames until scoring ends."""
    paths = sorted(FIXTURES.glob("*.jsonl"))
    parsed = []
    real = parallel.read_recording_files

    def spy(files, **kwargs):
        result = real(files, **kwargs)
        parsed.extend(weakref.ref(ref.parsed) for ref in result[2].values() if ref.parsed is not None)
        return result

    monkeypatch.setattr(parallel, "read_recording_files", spy)
    steps, plays, files, problems, checks = parallel.read_and_verify(paths, [GAMES], workers=1)
    gc.collect()
    assert len(parsed) == len(files) >= 16
    assert all(ref() is None for ref in parsed), "a parsed file (its pixels) outlived its replay"
    assert all(getattr(ref, "parsed", None) is None for ref in files.values())

    all_steps, all_plays, all_files, all_problems = read_recording_files(paths)
    # of the steps, the columns scoring reads (a column costs 8 to 16 bytes a step of a large file)
    assert steps.columns == list(STEP_COLUMNS)
    assert steps.equals(all_steps.select(STEP_COLUMNS)) and plays.equals(all_plays) and problems == all_problems
    recs = recordings_from_tables(all_steps, all_plays, all_files)
    assert checks == parallel.verify_recordings(recs, [GAMES], from_file=True, workers=1)


def test_the_order_of_recordings_is_known_without_building_them():
    """`read_and_verify` orders the checks by `recording_order` (building every recording again only for its
    order cost a second of a run): the same file ids in the same order as `recordings_from_tables`, also when a
    file has plays but no steps (it makes no recording)."""
    steps, plays, files, _ = read_recording_files(sorted(FIXTURES.glob("*.jsonl")))
    built = [rec.file_id for rec in recordings_from_tables(steps, plays, files)]
    assert recording_order(steps, plays) == built and len(set(built)) >= 16
    assert built != sorted(built)  # by guid first: an order of its own, not the file ids'
    stepless = built[3]
    fewer = steps.filter(pl.col("file_id") != stepless)
    assert recording_order(fewer, plays) == [r.file_id for r in recordings_from_tables(fewer, plays, files)]
    assert stepless not in recording_order(fewer, plays)


def test_below_the_automatic_threshold_one_process_replays_and_says_so(monkeypatch, capsys):
    """Without --workers, recordings under PARALLEL_MIN_BYTES are replayed in this process (a cluster would cost
    more to start than it saves), and the user is told why the other cores stay idle."""
    monkeypatch.setattr(parallel, "default_workers", lambda: 2)  # as on a machine with two cores
    paths = sorted(FIXTURES.glob("*.jsonl"))
    assert sum(p.stat().st_size for p in paths) < parallel.PARALLEL_MIN_BYTES
    opened = []
    real = parallel.open_executor

    def spy(workers, *args, **kwargs):
        opened.append(workers)
        return real(workers, *args, **kwargs)

    monkeypatch.setattr(parallel, "open_executor", spy)
    parallel.read_and_verify(paths, [GAMES])
    assert opened == [1]
    said = capsys.readouterr().err
    assert "below the 64 MB" in said and "in this one process" in said and "--workers N" in said
