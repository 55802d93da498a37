"""An output folder or file that cannot exist (under a regular file, a file where a folder is wanted) stops the
command with exit 1 or 2 and a message naming the option: never a traceback, and before the work (a build does
not touch the database, a game is not explored first)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.config import load_config
from pipeline.core.workspace import Workspace
from pipeline.transforms.build import build
from tests.fixtures.transforms.studies import baseline_study, low_effort_study
from tests.integration.test_harc_pipeline import TASK1, write_files

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"


def invoke(*args: str):
    return CliRunner().invoke(app, ["--plain", *args])


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, Path]:
    """A database with built baselines and H-ARC events, and a regular file to put outputs under."""
    root = tmp_path_factory.mktemp("out_paths")
    db = root / "study.duckdb"
    with Workspace(db) as ws:
        for st in (low_effort_study(), baseline_study()):
            st.load(ws)
        build(ws, load_config(), figures=False)
    res = invoke("ingest", str(write_files(root / "harc")), "--db", str(db))
    assert res.exit_code == 0, res.output
    a_file = root / "a_file"
    a_file.write_text("kept\n")
    return db, a_file


def runs_rows(db: Path) -> int:
    with Workspace(db, read_only=True) as ws:
        return ws.row_count("runs")


@pytest.mark.parametrize("args, option", [
    (["build", "--out-dir", "{under}"], "--out-dir"),
    (["report", "scores", "--out", "{under}"], "--out"),
    (["harc-analyses", "--out", "{under}", "--simulations", "2", "--no-figures"], "--out"),
    (["harc-graph", TASK1, "--out", "{under}", "--no-figure"], "--out"),
    (["baselines", "--out", "{under}.csv"], "--out"),
    (["baselines", "--write-metadata", "{under}"], "--write-metadata"),
    (["explore", "pv63", "--max-nodes", "5", "--out", "{under}"], "--out"),
    (["qualify", "pv63", "--regime", "quick", "--out", "{under}"], "--out"),
    (["simulate", "--out", "{under}", "--no-harc"], "--out"),
], ids=lambda v: v if isinstance(v, str) else "-".join(v[:2]))
def test_an_output_under_a_regular_file_is_said_not_a_traceback(study, args: list[str], option: str):
    db, a_file = study
    under = str(a_file / "sub")
    args = [a.replace("{under}", under) for a in args]
    before = runs_rows(db)
    db_args = [] if args[0] in ("explore", "qualify", "simulate") else ["--db", str(db)]
    res = invoke(*args, *db_args)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert f"cannot write {option} {under}" in text, text
    assert a_file.read_text() == "kept\n"
    assert runs_rows(db) == before  # nothing recorded: the command stopped before its work


def test_simulate_out_that_is_a_file_is_a_usage_error(study):
    _, a_file = study
    res = invoke("simulate", "--out", str(a_file), "--no-harc")
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == 2, res.output
    assert "is a file, not a folder" in " ".join(res.output.split())
    assert a_file.read_text() == "kept\n"


def test_demo_never_deletes_a_folder_that_is_not_an_earlier_demo(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("kept\n")
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    res = invoke("demo", "--out", str(precious), "--data", str(blocker / "data"))
    assert res.exit_code == 2, res.output
    assert "holds no earlier demo" in " ".join(res.output.split())
    assert (precious / "keep.txt").read_text() == "kept\n"


@pytest.mark.parametrize("out, data", [("d/r", "d"), ("d", "d/data"), ("d", "d")])
def test_demo_out_and_data_must_not_overlap(tmp_path, out: str, data: str):
    res = invoke("demo", "--out", str(tmp_path / out), "--data", str(tmp_path / data))
    assert res.exit_code == 2, res.output
    assert "overlap" in res.output
    assert not (tmp_path / "d").exists()


def test_simulate_overwrite_replaces_only_an_earlier_simulation(tmp_path):
    from games import GAMES_DIR
    from pipeline.simulate.study import simulate_study

    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("kept\n")
    (home / "SIMULATION.json").write_text("{}\n")
    with pytest.raises(FileExistsError, match=r"did not write \(thesis.tex\)"):
        simulate_study(home, environments_dir=GAMES_DIR, overwrite=True)
    assert sorted(p.name for p in home.iterdir()) == ["SIMULATION.json", "thesis.tex"]
    earlier = tmp_path / "earlier"
    (earlier / "arc3").mkdir(parents=True)
    (earlier / "arc3" / "old.jsonl").write_text("{}\n")
    (earlier / "SIMULATION.json").write_text("{}\n")
    with pytest.raises(ValueError, match="no game"):  # no games given: stops before touching the folder
        simulate_study(earlier, environments_dir=GAMES_DIR, specs=[], overwrite=True)
    assert sorted(p.name for p in earlier.iterdir()) == ["SIMULATION.json", "arc3"]


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError], ids=["ctrl-c", "disk error"])
def test_a_simulation_that_stops_midway_leaves_the_earlier_one_whole(tmp_path, monkeypatch, failure):
    """simulate --overwrite once removed the earlier study first: Ctrl-C midway left a partial study (no
    SIMULATION.json) that `ingest` would take for a smaller one. The folder is now written whole."""
    from games import GAMES_DIR
    from pipeline.simulate import study

    earlier = tmp_path / "earlier"
    (earlier / "arc3").mkdir(parents=True)
    (earlier / "arc3" / "old.jsonl").write_text("{}\n")
    (earlier / "SIMULATION.json").write_text('{"generator": "arcstudy simulate"}\n')

    def partway(out_dir, *args, **kwargs):
        (out_dir / "arc3" / "new.jsonl").parent.mkdir(parents=True, exist_ok=True)
        (out_dir / "arc3" / "new.jsonl").write_text("{}\n")  # some files written, then the stop
        raise failure()

    monkeypatch.setattr(study, "_simulate_into", partway)
    with pytest.raises(failure):
        study.simulate_study(earlier, environments_dir=GAMES_DIR, overwrite=True)
    assert sorted(str(p.relative_to(earlier)) for p in earlier.rglob("*")) == ["SIMULATION.json", "arc3",
                                                                               "arc3/old.jsonl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier"]  # no stage folder left beside it


@pytest.mark.parametrize("game_id", ["../x", "{tmp}/abs", "ab12-0000abcd/../../x"])
def test_baselines_write_metadata_never_leaves_its_folder(tmp_path, game_id: str):
    game_id = game_id.replace("{tmp}", str(tmp_path))  # an absolute path, inside tmp_path should it be written
    counts = tmp_path / "counts.csv"
    counts.write_text("game_id,level_index,player_id,actions,completed\n"
                      f"{game_id},1,p1,3,true\nab12-0000abcd,1,p2,5,true\n")
    target = tmp_path / "meta"
    res = invoke("baselines", "--from-counts", str(counts), "--write-metadata", str(target))
    assert res.exit_code == 3, res.output  # something was refused
    assert "is not a game id" in " ".join(res.output.split())
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("metadata.json"))
    assert written == ["meta/ab12/0000abcd/metadata.json"]



@pytest.fixture()
def foreign_db(tmp_path) -> Path:
    """A DuckDB file whose tables carry arcstudy names but other columns (another program's database)."""
    import duckdb

    db = tmp_path / "foreign.duckdb"
    con = duckdb.connect(str(db))
    for sql in ("CREATE TABLE out_arc3__level_baselines(x VARCHAR)", "INSERT INTO out_arc3__level_baselines VALUES ('q')",
                "CREATE TABLE core_harc__actions(z INTEGER)", "INSERT INTO core_harc__actions VALUES (1)",
                "CREATE TABLE runs(a INTEGER)"):
        con.execute(sql)
    con.close()
    return db


@pytest.mark.parametrize("args", [["baselines"], ["harc-graph", "aa000001", "--no-figure"],
                                  ["harc-analyses", "--no-figures", "--simulations", "2"], ["build", "--no-figures"]],
                         ids=lambda v: v[0])
def test_a_database_with_foreign_columns_is_said_not_a_traceback(foreign_db, tmp_path, args: list[str]):
    res = invoke(*args, "--db", str(foreign_db), *(["--out-dir" if args[0] == "build" else "--out",
                                                    str(tmp_path / "out")] if args[0] != "baselines" else []))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == 1, res.output
    assert "do not have the columns arcstudy expects" in " ".join(res.output.split())


@pytest.mark.parametrize("args", [["schema", "quarantine"], ["baselines", "--from-counts", "{counts}"]],
                         ids=lambda v: v[0])
def test_out_never_overwrites_a_database_without_db(tmp_path, args: list[str]):
    db = tmp_path / "study.duckdb"
    with Workspace(db) as ws:
        ws.ensure_tables(["runs"])
    before = db.read_bytes()
    counts = tmp_path / "counts.csv"
    counts.write_text("game_id,level_index,player_id,actions,completed\nab12-0000abcd,1,p2,5,true\n")
    res = invoke(*[a.replace("{counts}", str(counts)) for a in args], "--out", str(db))
    assert res.exit_code == 2, res.output
    assert "is a DuckDB database" in " ".join(res.output.split())
    assert db.read_bytes() == before


def test_report_of_a_folder_given_as_the_database_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCSTUDY_DB", str(tmp_path))
    res = invoke("report", "scores", "--out", str(tmp_path / "out"))
    assert res.exit_code == 1, res.output
    assert "is not a DuckDB database (not a regular file)" in " ".join(res.output.split())


@pytest.mark.parametrize("args, in_the_way", [
    (["build", "--force", "--out-dir", "{out}"], "figures"),
    (["report", "calibration", "--out", "{out}"], "figures"),
    (["harc-analyses", "--simulations", "2", "--out", "{out}"], "figures"),
    (["explore", "pv63", "--max-nodes", "5", "--out", "{out}"], "pv63-003f92f7"),
    (["qualify", "pv63", "--regime", "quick", "--out", "{out}"], "pv63-003f92f7"),
], ids=lambda v: v[0] if isinstance(v, list) else v)
def test_a_file_in_the_way_inside_out_is_said_not_a_traceback(study, tmp_path, args: list[str], in_the_way: str):
    db, _ = study
    out = tmp_path / "out"
    out.mkdir()
    (out / in_the_way).write_text("kept\n")  # a regular file where the command writes a folder
    db_args = [] if args[0] in ("explore", "qualify") else ["--db", str(db)]
    res = invoke(*[a.replace("{out}", str(out)) for a in args], *db_args)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == 1, res.output
    assert f"{out / in_the_way}" in " ".join(res.output.split())
    assert (out / in_the_way).read_text() == "kept\n"


@pytest.mark.parametrize("args", [["build"], ["ingest", "{sample}"]])
def test_writers_do_not_add_their_tables_to_another_programs_database(tmp_path, args):
    db = tmp_path / "theirs.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE customers (id INTEGER, name VARCHAR)")
    con.execute("INSERT INTO customers VALUES (1, 'a')")
    con.close()
    res = invoke(*[a.replace("{sample}", str(next(SAMPLES.rglob("*.jsonl")))) for a in args], "--db", str(db))
    assert res.exit_code == 1, res.output
    assert "of another program (tables customers; none of arcstudy's)" in " ".join(res.output.split())
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SHOW TABLES").fetchall() == [("customers",)]
    con.close()


def test_a_study_database_with_a_table_of_the_users_own_stays_usable(tmp_path):
    db = tmp_path / "study.duckdb"
    with Workspace(db) as ws:
        ws.ensure_tables()
        ws.con.execute("CREATE TABLE my_notes (note VARCHAR)")
    res = invoke("ingest", str(next(SAMPLES.rglob("*.jsonl"))), "--db", str(db))
    assert res.exit_code in (0, 3), res.output


@pytest.mark.parametrize(("args", "said"), [
    (["build", "--optimal", "{bad}"], "--optimal: cannot use the optimal source"),
    (["report", "calibration", "--out", "{out}", "--ground-truth", "{bad}"], "--ground-truth"),
])
def test_an_option_file_without_the_columns_it_needs_is_a_usage_error_said_before_the_database_is_touched(
        study, tmp_path, args, said):
    db, _ = study
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    before = runs_rows(db)
    res = invoke(*[a.replace("{bad}", str(bad)).replace("{out}", str(tmp_path / "out")) for a in args], "--db", str(db))
    assert res.exit_code == 2, res.output
    assert said in " ".join(res.output.split())
    assert runs_rows(db) == before
