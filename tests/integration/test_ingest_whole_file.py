"""A file lands whole or not at all (issue 29, finding 1 and the skipped-copy note of finding 8).

The case: a recording ingested once, then again as a BOM or CRLF copy under another folder. Its play is a
duplicate; its steps and its card must go to quarantine with it, naming the file it duplicates. A database
where an older arcstudy let such steps in must still build, leaving that one file out (exit 3), and
`arcstudy forget` must remove what one file or one run brought.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths

SAMPLE = Path("arc-agi-3/human/vc33/82f713eb-a8b5-43fe-a7e2-ca6a5e9451c7.recording.jsonl")


def cli(*args: str):
    return CliRunner().invoke(app, ["--plain", *map(str, args)])


def _copies(shared_dir: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """The sample in a/, a BOM copy in b/ and a CRLF copy in c/ (other encodings, other folders)."""
    text = (shared_dir / "samples" / SAMPLE).read_bytes()
    folders = [tmp_path / n for n in ("a", "b", "c")]
    for f in folders:
        f.mkdir()
    (folders[0] / SAMPLE.name).write_bytes(text)
    (folders[1] / ("bom-" + SAMPLE.name)).write_bytes(b"\xef\xbb\xbf" + text)
    (folders[2] / ("crlf-" + SAMPLE.name)).write_bytes(text.replace(b"\n", b"\r\n"))
    return folders[0], folders[1], folders[2]


def _rows_by_file(ws: Workspace, table: str) -> dict[str, int]:
    return dict(ws.read(f"SELECT f.file_path, count(*) FROM {table} t JOIN raw_ingest__files f USING (file_id) "
                        "GROUP BY 1").iter_rows())


@pytest.mark.parametrize("chunk_bytes", [None, 4096], ids=["in-memory", "streamed"])
def test_duplicate_play_takes_its_steps_and_card_to_quarantine(shared_dir, tmp_path, db_path, chunk_bytes):
    a, b, c = _copies(shared_dir, tmp_path)
    with Workspace(db_path) as ws:
        ws.ensure_tables()
        ingest_paths(ws, [a], run_id="r1", workers=1)
        steps = _rows_by_file(ws, "core_arc3__steps")
        cards = _rows_by_file(ws, "core_arc3__card_plays")
        original = str(a / SAMPLE.name)
        for copy in (b, c):
            report = ingest_paths(ws, [copy], run_id=f"r-{copy.name}", workers=1, chunk_bytes=chunk_bytes)
            assert report.has_rejections
            # nothing of the copy's play reached the core tables: the original's rows alone
            assert _rows_by_file(ws, "core_arc3__steps") == steps
            assert _rows_by_file(ws, "core_arc3__card_plays") == cards
            assert _rows_by_file(ws, "core_arc3__plays") == {original: 1}
            q = ws.read("SELECT check_name, target_table, source_location, reason FROM quarantine WHERE run_id = ?",
                        [f"r-{copy.name}"])
            by_table = dict(q.group_by("target_table").len().iter_rows())
            assert by_table == {"core_arc3__plays": 1, "core_arc3__steps": steps[original],
                                "core_arc3__card_plays": cards[original]}
            assert all(original in r for r in q["reason"]), q["reason"].to_list()
            step_rows = q.filter(q["target_table"] == "core_arc3__steps")
            assert set(step_rows["check_name"]) == {"duplicate_play"}
            assert all(loc.startswith("line ") for loc in step_rows["source_location"])
            n_q = ws.read("SELECT n_records_quarantined FROM raw_ingest__files WHERE run_id = ?",
                          [f"r-{copy.name}"]).item()
            assert n_q == q.height


def test_copy_then_build_succeeds(shared_dir, tmp_path, db_path):
    a, b, _ = _copies(shared_dir, tmp_path)
    assert cli("ingest", a, "--db", db_path).exit_code == 0
    assert cli("ingest", b, "--db", db_path).exit_code == 3
    result = cli("build", "--db", db_path, "--no-figures")
    assert result.exit_code == 0, result.output


def _old_database(shared_dir: Path, tmp_path: Path, db_path: Path) -> tuple[str, str]:
    """The state an older arcstudy left: the copy's play quarantined, but its steps and card landed."""
    a, b, _ = _copies(shared_dir, tmp_path)
    assert cli("ingest", a, "--db", db_path).exit_code == 0
    assert cli("ingest", b, "--db", db_path).exit_code == 3
    with Workspace(db_path) as ws:
        ids = dict(ws.read("SELECT file_path, file_id FROM raw_ingest__files").iter_rows())
        original, copy = str(a / SAMPLE.name), str(b / ("bom-" + SAMPLE.name))
        for table in ("core_arc3__steps", "core_arc3__card_plays"):
            ws.con.execute(f"INSERT INTO {table} SELECT * REPLACE (? AS file_id) FROM {table} WHERE file_id = ?",
                           [ids[copy], ids[original]])
    return original, copy


def test_build_leaves_out_one_file_and_names_it(shared_dir, tmp_path, db_path):
    original, copy = _old_database(shared_dir, tmp_path, db_path)
    result = cli("build", "--db", db_path, "--no-figures")
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    assert f"left out of the out_* tables: {copy}" in result.output.replace("\n", "")
    with Workspace(db_path, read_only=True) as ws:
        assert ws.read("SELECT count(*) FROM out_arc3__plays").item() == 1  # the original's play was built
        assert ws.read("SELECT exit_code FROM runs WHERE command LIKE 'arcstudy build%'").item() == 3
    again = cli("build", "--db", db_path, "--no-figures")  # nothing to rebuild, and still said
    assert again.exit_code == 3 and copy in again.output.replace("\n", "")
    # forget the copy: the study builds cleanly
    forgot = cli("forget", copy, "--db", db_path)
    assert forgot.exit_code == 0, forgot.output
    assert cli("build", "--db", db_path, "--no-figures").exit_code == 0
    with Workspace(db_path, read_only=True) as ws:
        assert ws.read("SELECT count(*) FROM raw_ingest__files WHERE file_path = ?", [copy]).item() == 0
        assert ws.read("SELECT count(*) FROM quarantine WHERE file_path = ?", [copy]).item() == 0
        runs = ws.read("SELECT command, manifest_json FROM runs WHERE command LIKE 'arcstudy forget%'")
        assert runs.height == 1 and copy in runs["manifest_json"][0]


def test_forget_a_run_in_one_transaction(shared_dir, tmp_path, db_path):
    a, b, _ = _copies(shared_dir, tmp_path)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "broken.recording.jsonl").write_text('{"not": "a recording"\n')
    with Workspace(db_path) as ws:
        ws.ensure_tables()
        ingest_paths(ws, [a], run_id="keep", workers=1)
        ingest_paths(ws, [b, bad], run_id="drop", workers=1)
        before = ws.read("SELECT count(*) FROM core_arc3__steps").item()
        assert ws.read("SELECT count(*) FROM quarantine WHERE run_id = 'drop'").item() > 0
    result = cli("forget", "drop", "--db", db_path)
    assert result.exit_code == 0, result.output
    with Workspace(db_path, read_only=True) as ws:
        assert ws.read("SELECT count(*) FROM quarantine WHERE run_id = 'drop'").item() == 0
        assert ws.read("SELECT count(*) FROM raw_ingest__files WHERE run_id = 'drop'").item() == 0
        assert ws.read("SELECT count(*) FROM core_arc3__steps").item() == before
        assert ws.read("SELECT count(*) FROM raw_ingest__files WHERE run_id = 'keep'").item() == 1
    nothing = cli("forget", tmp_path / "never-ingested.jsonl", "--db", db_path)
    assert nothing.exit_code == 1 and "Traceback" not in nothing.output
    # an empty target (an unset shell variable) once meant the current folder: everything ingested below it
    for empty in ("", "  "):
        refused = cli("forget", empty, "--db", db_path)
        assert refused.exit_code == 2 and "an empty target names no file" in refused.output
    with Workspace(db_path, read_only=True) as ws:
        assert ws.read("SELECT count(*) FROM raw_ingest__files WHERE run_id = 'keep'").item() == 1


def test_forget_is_one_transaction(shared_dir, tmp_path, db_path, monkeypatch):
    """A failure half-way through removes nothing."""
    from pipeline.ingest import forget as forget_mod

    a, _, _ = _copies(shared_dir, tmp_path)
    with Workspace(db_path) as ws:
        ws.ensure_tables()
        ingest_paths(ws, [a], run_id="r1", workers=1)
        counts = {t: ws.row_count(t) for t in ("core_arc3__steps", "core_arc3__plays", "raw_ingest__files")}
        found = forget_mod.resolve_target(ws, str(a / SAMPLE.name))
        real_execute = ws.con.execute

        class Boom(RuntimeError):
            pass

        def failing(sql, *params):
            if sql.startswith("DELETE") and "core_arc3__plays" in sql:
                raise Boom
            return real_execute(sql, *params)

        class Con:
            def __getattr__(self, name):
                return failing if name == "execute" else getattr(ws.con_real, name)

        ws.con_real = ws.con
        ws.con = Con()
        with pytest.raises(Boom):
            forget_mod.forget(ws, found)
        ws.con = ws.con_real
        assert {t: ws.row_count(t) for t in counts} == counts


def test_skipped_copy_names_the_file_it_matched(shared_dir, tmp_path, db_path):
    a, _, _ = _copies(shared_dir, tmp_path)
    same = tmp_path / "same"
    same.mkdir()
    (same / "renamed.jsonl").write_bytes((a / SAMPLE.name).read_bytes())
    assert cli("ingest", a, "--db", db_path).exit_code == 0
    result = cli("ingest", same, "--db", db_path)
    with Workspace(db_path, read_only=True) as ws:
        manifest = ws.read("SELECT manifest_json FROM runs ORDER BY started_at DESC LIMIT 1").item()
    assert result.exit_code == 0
    from pipeline.ingest.runner import ingest_paths as again
    with Workspace(db_path) as ws:
        report = again(ws, [same], run_id="r3", workers=1)
    assert report.files[0].status == "skipped"
    assert str(a / SAMPLE.name) in report.files[0].message
    assert manifest  # the skip is a recorded run
    # two identical copies in one run: the second names the first
    both = tmp_path / "both"
    both.mkdir()
    (both / "one.jsonl").write_bytes(b"\xef\xbb\xbf" + (a / SAMPLE.name).read_bytes())
    (both / "two.jsonl").write_bytes(b"\xef\xbb\xbf" + (a / SAMPLE.name).read_bytes())
    with Workspace(db_path) as ws:
        report = again(ws, [both], run_id="r4", workers=1)
    two = next(f for f in report.files if f.path.name == "two.jsonl")
    assert two.status == "skipped" and str(both / "one.jsonl") in two.message


def test_forget_removes_the_scores_and_harc_analyses_made_with_the_files(report_db, tmp_path):
    """`forget` said it removed "the out_* rows derived from" the files, but the score runs that counted their
    plays and the H-ARC checks and analyses made with their rows stayed, and the reports still showed them."""
    import shutil

    db = tmp_path / "s.duckdb"
    shutil.copyfile(report_db.db, db)
    with Workspace(db, read_only=True) as ws:
        cards = dict(ws.read("SELECT card_id, count(*) FROM out_arc3__run_scores GROUP BY 1").iter_rows())
        random_card = ws.read("SELECT DISTINCT r.card_id FROM out_arc3__run_scores r JOIN core_arc3__plays p "
                              "USING (play_id) JOIN raw_ingest__files f USING (file_id) WHERE f.file_path LIKE ?",
                              [f"{(report_db.agents_dir / 'random').resolve()}/%"]).to_series().to_list()
        assert len(cards) >= 3 and len(random_card) == 1
        assert ws.read("SELECT count(*) FROM out_harc__trace_checks").item() > 0
    result = cli("forget", report_db.agents_dir / "random", "--db", db)
    assert result.exit_code == 0, result.output
    assert f"removed the score run(s) that counted their plays ({random_card[0]})" in " ".join(result.output.split())
    with Workspace(db, read_only=True) as ws:
        for table in ("out_arc3__run_scores", "out_arc3__game_scores", "out_arc3__level_scores",
                      "out_arc3__replay_checks", "out_arc3__policy_sensitivity"):
            assert ws.read(f"SELECT count(*) FROM {table} WHERE card_id = ?", random_card).item() == 0, table
        left = dict(ws.read("SELECT card_id, count(*) FROM out_arc3__run_scores GROUP BY 1").iter_rows())
        assert left == {card: n for card, n in cards.items() if card != random_card[0]}  # the others whole
        assert ws.read("SELECT count(*) FROM out_harc__trace_checks").item() > 0  # no H-ARC file forgotten
    harc = report_db.ground_truth.parent.parent / "harc" / "current"
    result = cli("forget", harc, "--db", db)
    assert result.exit_code == 0, result.output
    assert "removed the H-ARC trace checks and analyses made with them" in " ".join(result.output.split())
    with Workspace(db, read_only=True) as ws:
        harc_tables = [t for t in ws.table_names() if t.startswith("out_harc__")]
        assert len(harc_tables) >= 10
        assert all(ws.read(f"SELECT count(*) FROM {t}").item() == 0 for t in harc_tables)


def test_forgetting_the_original_counts_every_row_its_copy_had_quarantined(shared_dir, tmp_path, db_path):
    """A copy of a recording has its whole play quarantined (`duplicate_play`, each row naming the original);
    forgetting the original said "1 of its rows were quarantined as copies", counting `duplicate_across_files`
    alone, where every one of the copy's rows waits to be loaded again."""
    a, b, _ = _copies(shared_dir, tmp_path)
    with Workspace(db_path) as ws:
        ws.ensure_tables()
        ingest_paths(ws, [a], run_id="first", workers=1)
        ingest_paths(ws, [b], run_id="copy", workers=1)
        held = ws.read("SELECT count(*) FROM quarantine WHERE run_id = 'copy' AND check_name IN "
                       "('duplicate_play', 'duplicate_across_files')").item()
        assert held > 10
    result = cli("forget", a / SAMPLE.name, "--db", db_path)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert f"{b / ('bom-' + SAMPLE.name)}: {held:,} of its rows were quarantined as copies" in said, said
