"""Outputs, from the cases of issue 29 (findings 5 to 8):

- a failure, a full disk or Ctrl-C in the middle of `report` leaves the old complete set (every hash its
  manifest lists still matches), no `.tmp` and no stage folder, and ends in one line, exit 1 (130 for Ctrl-C);
- pre-placed symlinks (score CSVs and manifest, view page and manifest, `query --out`, the report's files and
  its old `.tmp` name, `build --out-dir`'s manifest) are replaced, never written through;
- ENOSPC, ENOTDIR and ENAMETOOLONG on an output give one line naming the path and the OS reason, exit 1;
- guids and file names that a spreadsheet would run (`@SUM(1)`, `=HYPERLINK(1,2).jsonl`, fixtures under
  tests/fixtures/outputs/) are neutralised in the report, score, query and baselines CSVs, raw with --raw-csv,
  and raw in Parquet;
- a frames folder or $TMPDIR that cannot be written is exit 1 and one line, with no quarantine row and nothing
  called unreadable; `<db>.runs` as a file, a full database disk and a 252-character database name are one
  line, exit 1; a skipped byte-identical copy names the file it matched.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core import outputs

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "outputs"
HYPERLINK = FIXTURES / "=HYPERLINK(1,2).jsonl"  # a recording copied under a formula-like name
AT_SUM = FIXTURES / "guid-at-sum.jsonl"  # the same play with its guid edited to @SUM(1)
GAMES = ROOT / "games"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--plain", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.output


def one_error(text: str) -> str:
    """The command's one error line (rich may wrap it: joined), with no traceback."""
    assert "Traceback" not in text, text
    assert text.count("error:") == 1, text
    return " ".join(text[text.index("error:"):].split())


def leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.name.endswith(".tmp") or outputs.STAGE_MARK in p.name)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """The two formula-named plays ingested and scored (database plays)."""
    db = tmp_path_factory.mktemp("outputs") / "study.duckdb"
    code, text = run("ingest", str(FIXTURES), "--db", str(db))
    assert code == 0, text
    code, text = run("score", "--db", str(db), "--games", str(GAMES), "--no-figures")
    assert code == 0, text
    return db


def fill_fails_at(monkeypatch, n: int, error: BaseException) -> None:
    """The disk fills up (or the run is interrupted) while the n-th file is written: half of it is on disk."""
    real = outputs._fill
    calls = {"n": 0}

    def fill(tmp: Path, data: bytes) -> None:
        calls["n"] += 1
        if calls["n"] == n:
            tmp.write_bytes(data[: len(data) // 2])
            raise error
        real(tmp, data)

    # an output streamed into its file (`open_output`: query's results) counts from its first part
    real_part, files = outputs._write_part, set()

    def write_part(fh, text: str) -> int:
        if id(fh) not in files:
            files.add(id(fh))
            calls["n"] += 1
            if calls["n"] == n:
                fh.write(text[: len(text) // 2])
                raise error
        return real_part(fh, text)

    monkeypatch.setattr(outputs, "_fill", fill)
    monkeypatch.setattr(outputs, "_write_part", write_part)


# --------------------------------------------------------------------------------------------------------
# finding 5: reports that look complete but are not
# --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("error, code, words", [
    (OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), 1, "No space left on device"),
    (KeyboardInterrupt(), 130, "interrupted"),
], ids=["disk-full", "ctrl-c"])
def test_a_report_stopped_midway_leaves_the_old_complete_set(study, tmp_path, monkeypatch, error, code, words):
    out = tmp_path / "reports"
    assert run("report", "scores", "--db", str(study), "--out", str(out), "--explore-seconds", "0")[0] == 0
    old = snapshot(out)
    assert any(name.endswith(".csv") for name in old) and any(name.startswith("figures/") for name in old)
    fill_fails_at(monkeypatch, 4, error)  # after some CSVs, before the page and its manifest
    got, text = run("report", "scores", "--db", str(study), "--out", str(out), "--explore-seconds", "0")
    assert got == code, text
    line = one_error(text)
    assert words in line and (code == 130 or str(out) in line), line
    assert snapshot(out) == old
    manifest = json.loads((out / "scores.manifest.json").read_text())
    for path, digest in manifest["outputs"].items():
        assert sha(Path(path)) == digest, path  # every file the manifest lists is the one it hashed
    assert leftovers(tmp_path) == []


def test_a_report_replaces_symlinks_and_old_tmp_files_without_following_them(study, tmp_path):
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("precious\n")
    out = tmp_path / "reports"
    out.mkdir()
    for name in ("scores.html", "scores.html.tmp", "scores__totals.csv", "scores__totals.csv.tmp", "index.html"):
        (out / name).symlink_to(sentinel)
    code, text = run("report", "scores", "--db", str(study), "--out", str(out), "--explore-seconds", "0")
    assert code == 0, text
    assert sentinel.read_text() == "precious\n"
    assert not any(p.is_symlink() for p in out.iterdir()) and leftovers(tmp_path) == []
    assert "<html" in (out / "scores.html").read_text()[:500].lower()


def test_build_out_dir_on_a_full_disk_keeps_the_old_figures(tmp_path, monkeypatch):
    """`build --out-dir` on a full disk once ended in a traceback and left `*.png.tmp`."""
    from pipeline.core.workspace import Workspace
    from tests.fixtures.transforms.studies import baseline_study, low_effort_study

    db = tmp_path / "b.duckdb"
    with Workspace(db) as ws:  # a small human study: the build draws its figures
        for st in (low_effort_study(), baseline_study()):
            st.load(ws)
    out = tmp_path / "build"
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("precious\n")
    out.mkdir()
    (out / "manifest.json").symlink_to(sentinel)
    code, text = run("build", "--db", str(db), "--out-dir", str(out))
    assert code == 0, text
    assert sentinel.read_text() == "precious\n" and not (out / "manifest.json").is_symlink()
    old = snapshot(out)
    assert any(name.startswith("figures/") and name.endswith(".png") for name in old), old.keys()
    fill_fails_at(monkeypatch, 4, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    code, text = run("build", "--db", str(db), "--out-dir", str(out), "--force")
    assert code == 1, text
    assert "No space left on device" in one_error(text)
    assert snapshot(out) == old and leftovers(tmp_path) == []


# --------------------------------------------------------------------------------------------------------
# finding 8: symlinks written through (score, view, query)
# --------------------------------------------------------------------------------------------------------
def test_score_view_and_query_replace_symlinks_never_write_through(study, tmp_path):
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("precious\n")
    out = tmp_path / "score"
    out.mkdir()
    for name in ("replay_checks.csv", "manifest.json", "scorecard__arc-agi-3_2026-04.json"):
        (out / name).symlink_to(sentinel)
    page, page_manifest, query_out = tmp_path / "v.html", tmp_path / "v.manifest.json", tmp_path / "q.csv"
    for link in (page, page_manifest, query_out):
        link.symlink_to(sentinel)
    db = tmp_path / "s.duckdb"
    assert run("score", str(AT_SUM), "--db", str(db), "--games", str(GAMES), "--no-figures", "--out", str(out))[0] == 0
    assert run("view", str(AT_SUM), "--games", str(GAMES), "--out", str(page))[0] == 0
    assert run("query", "SELECT guid FROM core_arc3__plays", "--db", str(study), "--out", str(query_out))[0] == 0
    assert sentinel.read_text() == "precious\n"
    for path in (out / "replay_checks.csv", out / "manifest.json", page, page_manifest, query_out):
        assert path.is_file() and not path.is_symlink(), path
    assert leftovers(tmp_path) == []


# --------------------------------------------------------------------------------------------------------
# output-side OSErrors: one line, exit 1
# --------------------------------------------------------------------------------------------------------
OUT_ARGS = {
    "report": lambda db, out: ("report", "scores", "--db", str(db), "--explore-seconds", "0", "--out", str(out)),
    "score": lambda db, out: ("score", str(HYPERLINK), "--db", str(db.with_name("o.duckdb")), "--games", str(GAMES),
                              "--no-figures", "--out", str(out)),
    "query": lambda db, out: ("query", "SELECT 1 AS one", "--db", str(db), "--format", "csv", "--out", str(out)),
    "view": lambda db, out: ("view", str(HYPERLINK), "--games", str(GAMES), "--out", f"{out}.html"),
    "build": lambda db, out: ("build", "--db", str(db.with_name("o.duckdb")), "--out-dir", str(out)),
}


@pytest.mark.parametrize("verb", list(OUT_ARGS))
@pytest.mark.parametrize("where", ["ENOTDIR", "ENAMETOOLONG", "ENOSPC", "EACCES"])
def test_an_output_that_cannot_be_written_is_one_line(study, tmp_path, monkeypatch, verb, where):
    db = tmp_path / "study.duckdb"
    shutil.copy(study, db)
    if verb == "build":
        assert run("ingest", str(FIXTURES), "--db", str(db.with_name("o.duckdb")))[0] == 0
    blocker = tmp_path / "blocker"
    blocker.write_text("a file\n")
    out = {"ENOTDIR": blocker / "out", "ENAMETOOLONG": tmp_path / ("n" * 300)}.get(where, tmp_path / "out")
    if where in ("ENOSPC", "EACCES"):  # a full disk; a folder we may not write in (root may write anywhere)
        code = getattr(errno, where)
        fill_fails_at(monkeypatch, 1, OSError(code, os.strerror(code)))
    code, text = run(*OUT_ARGS[verb](db, out))
    assert code == 1, text
    line = one_error(text)
    reason = {"ENOTDIR": "Not a directory", "ENAMETOOLONG": "File name too long",
              "ENOSPC": "No space left on device", "EACCES": "Permission denied"}[where]
    assert reason in line and str(out) in line, line
    assert line.startswith("error: cannot write"), line  # the output's failure, never blamed on an input
    assert blocker.read_text() == "a file\n" and leftovers(tmp_path) == []


# --------------------------------------------------------------------------------------------------------
# finding 6: CSV formula injection
# --------------------------------------------------------------------------------------------------------
def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _cells(path: Path) -> list[str]:
    return [c for row in pl.read_csv(path, infer_schema_length=0).iter_rows() for c in row if c is not None]


def test_formula_guids_and_file_names_are_neutralised_in_every_csv(study, tmp_path):
    reports, score, q = tmp_path / "reports", tmp_path / "score", tmp_path / "q.csv"
    assert run("report", "scores", "--db", str(study), "--out", str(reports), "--explore-seconds", "0")[0] == 0
    assert run("score", str(AT_SUM), str(HYPERLINK), "--db", str(tmp_path / "s.duckdb"), "--games", str(GAMES),
               "--no-figures", "--out", str(score))[0] == 0
    sql = "SELECT f.file_name, p.guid, -1 AS n, '-1' AS t FROM core_arc3__plays p JOIN raw_ingest__files f USING (file_id)"
    assert run("query", sql, "--db", str(study), "--out", str(q))[0] == 0
    code, stdout = run("query", sql, "--db", str(study), "--format", "csv")
    assert code == 0
    csvs = [*reports.glob("*.csv"), score / "replay_checks.csv", q]
    cells = [c for path in csvs for c in _cells(path)]
    assert "'@SUM(1)" in cells and "'=HYPERLINK(1,2).jsonl" in cells
    assert not [c for c in cells if c.startswith(outputs.FORMULA_STARTS) and not _is_number(c)], csvs
    assert {"-1", "'-1"} <= set(_cells(q))  # a number stays a number; "-1" as text is text
    assert "'=HYPERLINK(1,2).jsonl" in stdout and "\n=HYPERLINK" not in stdout
    parquet = pl.read_parquet(next(reports.glob("scores__replay_checks.parquet")))
    assert any(str(v).startswith("@SUM(1)") for v in parquet.to_dicts()[0].values())  # Parquet stays raw


def test_raw_csv_writes_the_cells_as_they_are(study, tmp_path):
    reports, score, q = tmp_path / "reports", tmp_path / "score", tmp_path / "q.csv"
    assert run("report", "scores", "--db", str(study), "--out", str(reports), "--explore-seconds", "0",
               "--raw-csv")[0] == 0
    assert run("score", str(AT_SUM), "--db", str(tmp_path / "s.duckdb"), "--games", str(GAMES), "--no-figures",
               "--out", str(score), "--raw-csv")[0] == 0
    assert run("query", "SELECT file_name FROM raw_ingest__files", "--db", str(study), "--out", str(q),
               "--raw-csv")[0] == 0
    assert "@SUM(1)" in _cells(score / "replay_checks.csv")
    assert any(c.startswith("@SUM(1)") for path in reports.glob("*.csv") for c in _cells(path))
    assert "=HYPERLINK(1,2).jsonl" in _cells(q)


def test_baselines_csv_is_neutralised(tmp_path):
    counts = tmp_path / "counts.csv"
    rows = ["game_id,level_index,player_id,actions,completed"]
    rows += [f"=cmd-00000001,1,{p},{10 + p},true" for p in range(1, 6)]
    counts.write_text("\n".join(rows) + "\n")
    out, raw = tmp_path / "b.csv", tmp_path / "raw.csv"
    code, text = run("baselines", "--from-counts", str(counts), "--out", str(out))
    assert code in (0, 3), text
    assert run("baselines", "--from-counts", str(counts), "--out", str(raw), "--raw-csv")[0] == code
    assert "'=cmd-00000001" in _cells(out) and "=cmd-00000001" in _cells(raw)


# --------------------------------------------------------------------------------------------------------
# finding 7 and 8: the frames folder, the runs folder and the database itself
# --------------------------------------------------------------------------------------------------------
def _quarantine_and_files(db: Path) -> tuple[int, int]:
    if not db.exists():
        return 0, 0
    with duckdb.connect(str(db), read_only=True) as con:
        return (con.execute("SELECT count(*) FROM quarantine").fetchone()[0],
                con.execute("SELECT count(*) FROM raw_ingest__files").fetchone()[0])


def test_a_wrong_frames_dir_is_an_output_error_not_unreadable_recordings(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file\n")
    db = tmp_path / "f.duckdb"
    code, text = run("ingest", str(FIXTURES), "--db", str(db), "--keep-frames", "--frames-dir", str(blocker / "fr"))
    assert code == 1, text
    line = one_error(text)
    assert "--frames-dir" in line and "Not a directory" in line and "unreadable" not in text
    assert _quarantine_and_files(db)[0] == 0


def test_a_full_frames_dir_stops_ingest_without_quarantining(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    db, frames = tmp_path / "f.duckdb", tmp_path / "frames"
    recording = ROOT.parent / "shared" / "samples" / "arc-agi-3" / "fixtures" / "an53_scripted-win.frames.jsonl"
    code, text = run("ingest", str(recording), "--db", str(db), "--keep-frames", "--frames-dir", str(frames),
                     "--workers", "1")
    assert code == 1, text
    line = one_error(text)
    assert "No space left on device" in line and str(frames) in line and "unreadable" not in text
    assert _quarantine_and_files(db) == (0, 0)
    assert leftovers(tmp_path) == []


def test_runs_folder_that_is_a_file_is_one_line(tmp_path):
    db = tmp_path / "r.duckdb"
    (tmp_path / "r.runs").write_text("in the way\n")
    code, text = run("ingest", str(AT_SUM), "--db", str(db))
    assert code == 1, text
    line = one_error(text)
    assert "r.runs" in line and "Not a directory" in line
    assert (tmp_path / "r.runs").read_text() == "in the way\n"


def test_a_database_name_too_long_for_its_log_is_one_line(tmp_path):
    db = tmp_path / ("d" * 245 + ".duckdb")  # 252 characters: its .wal would be 256
    code, text = run("ingest", str(AT_SUM), "--db", str(db))
    assert code == 1, text
    assert "File name too long" in one_error(text)


def test_a_full_database_disk_is_one_line(tmp_path, monkeypatch):
    from pipeline.core.workspace import Workspace

    def full(self, *args, **kwargs):
        raise duckdb.TransactionException('TransactionContext Error: Failed to commit: Could not write file '
                                          '"x.duckdb.wal": No space left on device')

    monkeypatch.setattr(Workspace, "insert_frame", full)
    code, text = run("ingest", str(AT_SUM), "--db", str(tmp_path / "x.duckdb"))
    assert code == 1, text
    line = one_error(text)
    assert "cannot write the database" in line and "No space left on device" in line


def test_a_full_temporary_folder_stops_ingest_without_quarantining(tmp_path, monkeypatch):
    """A big H-ARC data file spills its pieces to $TMPDIR: a full $TMPDIR is the environment's failure (exit 1,
    one line), never the file's (unreadable, quarantined)."""
    import tempfile

    import pipeline.ingest.harc as harc
    from tests.integration.test_harc_pipeline import write_files

    files = write_files(tmp_path / "harc")
    monkeypatch.setattr(harc, "BATCH_BYTES", 4096)  # read in pieces, as a big file is
    real = tempfile.mkdtemp

    def full(*args, **kwargs):
        if str(kwargs.get("prefix", "")).startswith("arcstudy-"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkdtemp", full)
    db = tmp_path / "h.duckdb"
    code, text = run("ingest", str(files), "--db", str(db), "--workers", "1")
    assert code == 1, text
    line = one_error(text)
    assert "No space left on device" in line and tempfile.gettempdir() in line and "unreadable" not in text
    assert _quarantine_and_files(db)[0] == 0


def test_a_skipped_byte_identical_copy_names_the_file_it_matched(tmp_path):
    from pipeline.core.workspace import Workspace
    from pipeline.ingest import ingest_paths

    copy = tmp_path / "elsewhere" / "copy.jsonl"
    copy.parent.mkdir()
    shutil.copy(AT_SUM, copy)
    with Workspace(tmp_path / "c.duckdb") as ws:
        assert ingest_paths(ws, [AT_SUM], run_id="first", workers=1).files[0].status == "loaded"
        again = ingest_paths(ws, [copy, AT_SUM], run_id="second", workers=1).files
    assert [f.status for f in again] == ["skipped", "skipped"]
    assert f"copy of {AT_SUM.resolve()}" in again[0].message
    assert again[1].message.startswith("already ingested")  # the same file again: nothing else to name


@pytest.mark.parametrize("verb", ["score", "export-transitions", "build", "report"])
def test_an_output_folder_named_as_the_database_log_is_refused(tmp_path, verb):
    """`score ... --out s.duckdb.wal --db s.duckdb` wrote a folder where DuckDB keeps the database's log: every
    later opening of the database failed ("Failure while replaying WAL file ... Is a directory")."""
    shared = ROOT.parent / "shared"
    recording = shared / "samples" / "arc-agi-3" / "fixtures" / "an53_scripted-win.frames.jsonl"
    db = tmp_path / "s.duckdb"
    runner = CliRunner()
    assert runner.invoke(app, ["--plain", "ingest", str(recording), "--db", str(db)]).exit_code == 0
    wal = tmp_path / "s.duckdb.wal"
    option = "--out-dir" if verb == "build" else "--out"
    extra = {"score": [str(recording), "--games", str(shared / "conformance" / "environment_files"),
                       "--no-figures"], "report": ["scores"]}.get(verb, [])
    result = runner.invoke(app, ["--plain", verb, *extra, option, str(wal), "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert f"{option} {wal} is the database log ({wal}); choose another name" in " ".join(result.output.split())
    assert not wal.exists()
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM core_arc3__plays").fetchall()[0][0] > 0
