"""The DuckDB workspace: tables from schemas/, transactions, run manifests, locking."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import duckdb
import polars as pl
import pytest

from pipeline.core import workspace
from pipeline.core.manifest import RunManifest, sha256_file
from pipeline.core.workspace import QueryRefused, Workspace, WorkspaceError
from schemas import TABLES
from tests.unit.test_schemas import good_files_frame


def test_creates_every_table_from_schemas(db_path: Path):
    with Workspace(db_path) as ws:
        assert set(TABLES) <= set(ws.table_names())
        cols = ws.read("SELECT column_name FROM information_schema.columns WHERE table_name = 'runs' "
                       "ORDER BY ordinal_position")["column_name"].to_list()
        assert cols == list(TABLES["runs"].columns)


def test_transaction_rolls_back_on_error(db_path: Path):
    with Workspace(db_path) as ws:
        with pytest.raises(RuntimeError):
            with ws.transaction() as con:
                ws.insert_frame("raw_ingest__files", good_files_frame(), con=con)
                raise RuntimeError("crash mid-file")
        assert ws.row_count("raw_ingest__files") == 0
        ws.run_in_transaction(lambda con: ws.insert_frame("raw_ingest__files", good_files_frame(), con=con))
        assert ws.row_count("raw_ingest__files") == 3


def test_insert_refuses_invalid_rows(db_path: Path):
    bad = good_files_frame().with_columns(pl.lit(-1).alias("n_bytes"))
    with Workspace(db_path) as ws, pytest.raises(WorkspaceError, match="n_bytes"):
        ws.insert_frame("raw_ingest__files", bad)


def test_run_manifest_recorded_in_table_and_json(db_path: Path, tmp_path: Path):
    src = tmp_path / "input.txt"
    src.write_text("hello")
    manifest = RunManifest(command="arcstudy test", config={"rule": "upper-median"}, seeds={"simulate": 7})
    manifest.add_input(src)
    out_file = tmp_path / "out" / "result.csv"
    out_file.parent.mkdir()
    out_file.write_text("a,b\n1,2\n")
    manifest.add_output(out_file)
    manifest.finish(0)
    path = manifest.write_json(out_file.parent)
    data = json.loads(path.read_text())
    assert data["inputs"][str(src)] == sha256_file(src)
    assert data["outputs"][str(out_file)] == sha256_file(out_file)
    assert data["config"] == {"rule": "upper-median"} and data["seeds"] == {"simulate": 7}
    assert "polars" in data["packages"] and "duckdb" in data["packages"]
    assert data["arcstudy_version"]
    with Workspace(db_path) as ws:
        ws.record_run(manifest)
        row = ws.read("SELECT * FROM runs").row(0, named=True)
        assert row["run_id"] == manifest.run_id and row["exit_code"] == 0
        assert json.loads(row["manifest_json"])["inputs"] == data["inputs"]


def test_read_only_workspace_needs_existing_file(tmp_path: Path):
    with pytest.raises(WorkspaceError, match="does not exist"):
        Workspace(tmp_path / "missing.duckdb", read_only=True)


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize("content", ['{"timestamp": "2026-01-01T00:00:00+00:00", "data": {}}\n', "a,b\n1,2\n"])
def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path, content: str, read_only: bool):
    """DuckDB opens a JSON or CSV file given as the database as an in-memory database with a view over it: an
    ingest into it reported every file loaded and kept nothing (and left the file as it was)."""
    path = tmp_path / "recording.jsonl"
    path.write_text(content)
    with pytest.raises(WorkspaceError, match="is not a DuckDB database"):
        Workspace(path, read_only=read_only)
    assert path.read_text() == content


def test_second_writer_waits_then_fails_clearly(db_path: Path):
    Workspace(db_path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('locked', flush=True); time.sleep(30)",
         str(db_path)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        # the holder is a plain DuckDB client, not arcstudy: the message names its PID, not "another arcstudy"
        with pytest.raises(WorkspaceError, match=rf"is open in another process \(PID {holder.pid}\)"):
            Workspace(db_path, lock_timeout_s=0.5)
    finally:
        holder.kill()
        holder.wait()
    Workspace(db_path, lock_timeout_s=5).close()  # free again once the holder is gone


def test_read_only_connection_carries_duckdbs_guards(db_path: Path):
    Workspace(db_path).close()
    with Workspace(db_path, read_only=True) as ws:
        settings = dict(ws.con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access', 'lock_configuration', "
            "'autoinstall_known_extensions', 'autoload_known_extensions', 'access_mode')").fetchall())
    assert settings == {"access_mode": "read_only", "enable_external_access": "false", "lock_configuration": "true",
                        "autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}


@pytest.mark.parametrize("read_only", [False, True])
def test_read_runs_exactly_one_read_statement(db_path: Path, read_only: bool):
    """`read` means read, on a writable workspace too: DuckDB's parser classifies the statement."""
    Workspace(db_path).close()
    with Workspace(db_path, read_only=read_only) as ws:
        assert ws.read("SELECT count(*) AS n FROM runs").item() == 0
        assert ws.read("EXPLAIN SELECT 1").height == 1
        for sql, refusal in [("DELETE FROM runs", "DELETE statement"), ("SELECT 1; SELECT 2", "2 statements"),
                             ("  ;", "empty"), ("CREATE TABLE x (a INT)", "CREATE statement")]:
            with pytest.raises(QueryRefused, match=refusal):
                ws.read(sql)
        assert "x" not in ws.table_names()


class _CommitWatch:
    """A workspace connection that notes DuckDB's memory limit as each COMMIT is sent."""

    def __init__(self, con):
        self._con = con
        self.limits_at_commit: list[str] = []

    def execute(self, sql, *args):
        if sql.strip().upper() == "COMMIT":
            self.limits_at_commit.append(_memory_limit(self._con))
        return self._con.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._con, name)


def _memory_limit(con) -> str:
    with closing(con.cursor()) as cur:
        return cur.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]


def test_a_commit_runs_under_a_bounded_memory_limit_and_the_defaults_come_back(db_path: Path):
    """DuckDB writes a transaction's rows into its log at COMMIT; under its own limit (most of the RAM) it held a
    400 MB task collection's at once. The bound is the one named in the workspace, and it is gone afterwards."""
    with duckdb.connect() as fresh:
        default = _memory_limit(fresh)
        fresh.execute(f"SET memory_limit = '{workspace.COMMIT_MEMORY}'")
        bounded = _memory_limit(fresh)
    assert bounded != default
    with Workspace(db_path) as ws:
        watch = _CommitWatch(ws.con)
        ws.con = watch
        with ws.transaction() as con:
            ws.insert_frame("raw_ingest__files", good_files_frame(), con=con)
        assert watch.limits_at_commit == [bounded]
        assert _memory_limit(watch._con) == default
        assert ws.row_count("raw_ingest__files") == 3


class _InsertWatch(_CommitWatch):
    """Notes DuckDB's memory limit as each INSERT is sent."""

    def __init__(self, con):
        super().__init__(con)
        self.limits_at_insert: list[str] = []

    def execute(self, sql, *args):
        if sql.strip().upper().startswith("INSERT"):
            self.limits_at_insert.append(_memory_limit(self._con))
        return super().execute(sql, *args)


def test_a_long_frame_is_inserted_in_slices_under_the_bound_and_lands_whole(tmp_path: Path, monkeypatch):
    """A frame of BOUNDED_INSERT_ROWS rows or more goes in as a stream of slices under COMMIT_MEMORY (a million
    plays' frame held its Arrow copy and DuckDB's buffer whole: 0.38 GB); a shorter one as it was."""
    monkeypatch.setattr(workspace, "INSERT_SLICE_ROWS", 1)  # two rows: two slices
    with duckdb.connect() as fresh:
        default = _memory_limit(fresh)
        fresh.execute(f"SET memory_limit = '{workspace.COMMIT_MEMORY}'")
        bounded = _memory_limit(fresh)
    frame = good_files_frame()
    assert frame.height == 3
    with Workspace(tmp_path / "whole.duckdb") as ws:  # (the threshold: one insert, as before)
        ws.insert_frame("raw_ingest__files", frame)
        whole = ws.read("SELECT * FROM raw_ingest__files ORDER BY file_id")
    with Workspace(tmp_path / "sliced.duckdb") as ws:
        watch = _InsertWatch(ws.con)
        ws.con = watch
        monkeypatch.setattr(workspace, "BOUNDED_INSERT_ROWS", 2)
        with ws.transaction() as con:
            ws.insert_frame("raw_ingest__files", frame.head(1), con=con)
            ws.insert_frame("raw_ingest__files", frame.tail(2), con=con)
        assert watch.limits_at_insert == [default, bounded]
        assert _memory_limit(watch._con) == default
        assert ws.read("SELECT * FROM raw_ingest__files ORDER BY file_id").equals(whole)


@pytest.mark.parametrize("rows", [1, 3], ids=["whole", "in-slices"])
def test_an_insert_that_fails_in_a_transaction_raises_its_own_error(db_path: Path, monkeypatch, rows: int):
    """Unregistering the rows after a failed insert was itself refused (the transaction is aborted), and that
    refusal hid the insert's error: "Current transaction is aborted" instead of the constraint that failed."""
    monkeypatch.setattr(workspace, "BOUNDED_INSERT_ROWS", rows)
    monkeypatch.setattr(workspace, "INSERT_SLICE_ROWS", 1)
    bad = good_files_frame().with_columns(pl.lit(None, pl.String).alias("file_id"))  # NOT NULL in the table
    with Workspace(db_path) as ws:
        with pytest.raises(duckdb.ConstraintException, match="NOT NULL constraint failed"):
            with ws.transaction() as con:
                ws.insert_frame("raw_ingest__files", bad, con=con, validate=False)
        ws.insert_frame("raw_ingest__files", good_files_frame())  # rolled back: the next insert lands
        assert ws.row_count("raw_ingest__files") == 3


def test_a_commit_whose_bound_duckdb_refuses_still_lands(db_path: Path, monkeypatch):
    monkeypatch.setattr(workspace, "COMMIT_MEMORY", "not a size")
    with Workspace(db_path) as ws:
        ws.run_in_transaction(lambda con: ws.insert_frame("raw_ingest__files", good_files_frame(), con=con))
        assert ws.row_count("raw_ingest__files") == 3


def test_a_transaction_bigger_than_the_commit_bound_lands_whole(tmp_path: Path, monkeypatch):
    """The bound streams a commit rather than failing it, with rows about twice the bound (64 MB, a quarter of the
    real bound; DuckDB needs 16-64 MB for the biggest commits measured): 123 MB of rows under 64 MB."""
    monkeypatch.setattr(workspace, "COMMIT_MEMORY", "64MB")
    with Workspace(tmp_path / "big.duckdb") as ws:
        ws.con.execute("CREATE TABLE scratch (id BIGINT, text VARCHAR)")
        with ws.transaction() as con:
            con.execute("INSERT INTO scratch SELECT i, repeat(md5(i::VARCHAR), 128) FROM range(30000) t(i)")
        assert ws.read("SELECT count(*) AS n, sum(length(text)) AS chars FROM scratch").rows() == [(30000, 122_880_000)]


def test_a_connection_that_refuses_settings_still_commits_under_best_effort_bounds(tmp_path: Path):
    """A bound that cannot be set is not reset either: resetting it would fail after the commit had landed."""
    con = duckdb.connect(str(tmp_path / "locked.duckdb"), config={"lock_configuration": True})
    con.execute("CREATE TABLE t (x INTEGER)")
    con.execute("BEGIN TRANSACTION")
    con.execute("INSERT INTO t VALUES (1), (2)")
    with workspace.duckdb_bounds(con, memory=workspace.COMMIT_MEMORY, best_effort=True):
        con.execute("COMMIT")
    assert con.execute("SELECT count(*) FROM t").fetchall() == [(2,)]
    with pytest.raises(duckdb.Error), workspace.duckdb_bounds(con, memory=workspace.COMMIT_MEMORY):
        pass
    con.close()


def test_score_reads_the_stored_steps_under_a_bounded_memory_limit(db_path: Path):
    """`score --db` sorts and reads every stored step of the scored plays: DuckDB does it under the workspace's
    bounded limit (at its default, its sort of a million steps held 0.7 GB of its own), and its default is
    back afterwards."""
    from pipeline.ingest import ingest_paths
    from pipeline.scoring.storage import read_db_plays

    sample = (Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "toolkit"
              / "bt11_two_plays_fullreset.noframes.jsonl")
    limits: list[str] = []
    with Workspace(db_path) as ws:
        ws.ensure_tables()
        ingest_paths(ws, [sample], run_id="t")
        default = ws.con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        read = ws.read

        def watched(sql: str, params=None):
            if "core_arc3__steps" in sql:
                limits.append(ws.con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
            return read(sql, params)

        ws.read = watched
        steps, plays, _ = read_db_plays(ws, [])
        assert steps.height > 0 and plays.height > 0
        with closing(duckdb.connect()) as other:
            other.execute(f"SET memory_limit = '{workspace.COMMIT_MEMORY}'")
            bound = other.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        assert limits and set(limits) == {bound} and bound != default  # (each query of the read: `read_narrow_steps`)
        assert ws.con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0] == default
