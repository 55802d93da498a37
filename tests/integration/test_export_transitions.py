"""`arcstudy export-transitions`: rows from every recording variant, checked against the files and the engine;
a divergent play cut at its divergence; the layout read by polars, DuckDB and the Hugging Face / pyarrow
Parquet loaders; refusals.

Games: the conformance kit's fixture games (an53, ck17, ...) are loadable; the human-dataset sample's game
(lp85) is not shipped, so its rows come from the file's frames, unverified."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3" / "fixtures"
SAMPLES = FIXTURES.parent
PLAYBACK = SAMPLES.parent / "playback-arc-agi-3"
ENVS = SAMPLES.parents[1] / "conformance" / "environment_files"
AN53 = FIXTURES / "an53_scripted-win.frames.jsonl"
HUMAN = SAMPLES / "human" / "lp85" / "4706abe4-58a9-41e9-9a91-9927b5cc2d8e.recording.jsonl"


def export(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["--plain", "export-transitions", *args, "--workers", "1"])
    return result.exit_code, result.output


def frames_of(value: list[bytes]) -> np.ndarray:
    """A row's frames as the (n, 64, 64) uint8 array they encode."""
    return np.stack([np.frombuffer(f, dtype=np.uint8).reshape(64, 64) for f in value]) if value else \
        np.zeros((0, 64, 64), dtype=np.uint8)


def rows_of(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "data" / "*.parquet").sort("file_id", "play_id", "step")


def file_lines(path: Path) -> list[dict]:
    return [json.loads(x)["data"] for x in path.read_text().splitlines() if x.strip()]


def lost_copy(folder: Path, guid: str | None = None) -> tuple[Path, Path, int]:
    """an53's recording as the agents recorder writes it (every action id RESET, without its data; another
    ``guid`` to be stored beside an53's own), the --recovered-actions file that gives its actions back (one per
    frame line that is not a post-terminal echo, an empty frame), and its number of lines."""
    lines = [json.loads(x) for x in AN53.read_text().splitlines() if x.strip()]
    actions = []
    for line in lines:
        ai = line["data"]["action_input"]
        if line["data"].get("frame") != []:
            actions.append({"action": ai["id"], **{k: v for k, v in (ai.get("data") or {}).items() if k in "xy"}})
        line["data"]["action_input"] = {"id": "RESET", "data": {}, "reasoning": None}
        if guid is not None:
            line["data"]["guid"] = guid
    lost = folder / "an53-lost.jsonl"
    lost.write_text("".join(json.dumps(x) + "\n" for x in lines))
    recovered = folder / "recovered.json"
    recovered.write_text(json.dumps({lost.name: actions}))
    return lost, recovered, len(lines)


def agents_copy(src: Path, folder: Path) -> Path:
    """The toolkit recording as the agents recorder writes it: no opening RESET line, integer action ids, the
    recorder's file name; a session of its own (another guid: the same session in two files is one set of rows,
    its second file left out as a duplicate_play)."""
    lines = [json.loads(x) for x in src.read_text().splitlines() if x.strip()][1:]
    guid = str(uuid.uuid5(uuid.NAMESPACE_URL, "agents copy of " + lines[0]["data"]["guid"]))
    for line in lines:
        action = line["data"]["action_input"]
        action["id"] = ["RESET", *(f"ACTION{i}" for i in range(1, 8))].index(action["id"])
        line["data"]["guid"] = guid
    path = folder / f"{lines[0]['data']['game_id']}.random.80.{guid}.recording.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_every_variant_exports_rows_that_match_the_files(tmp_path):
    agents = agents_copy(AN53, tmp_path)
    ck17_noframes = FIXTURES / "ck17_scripted-win.noframes.jsonl"
    script = PLAYBACK / "ck17_scripted-win.playback.jsonl"
    out = tmp_path / "ds"
    code, output = export(str(AN53), str(ck17_noframes), str(agents), str(HUMAN), str(script),
                          "--games", str(ENVS), "--out", str(out))
    assert code == 0, output
    df = rows_of(out)
    assert set(df["source"]) == {"agent", "human", "playback"}

    # every frame hash is the conformance kit's: sha256 of the uint8 row-major cells
    for frames, hashes, shape in df.select("frames", "frame_sha256s", "frame_shape").iter_rows():
        assert [hashlib.sha256(f).hexdigest() for f in frames] == hashes
        assert all(len(f) == 4096 for f in frames) and shape == [64, 64]

    # steps: 0 for the session's opening RESET, then one per action, across the plays of the file
    for _key, rows in df.group_by("file_id"):
        rows = rows.sort("step")
        start = rows["step"][0]  # 1: a file without the opening RESET line, whose game is not here to replay
        assert rows["step"].to_list() == list(range(start, start + rows.height))
        assert rows["action"][0] == "RESET" if start == 0 else rows["source"][0] == "human"
        assert rows["play_id"].to_list() == sorted(rows["play_id"].to_list(), key=lambda p: int(p.split("/")[1]))

    # the toolkit recording with frames: one row per line, the file's frames and fields, verified
    lines = file_lines(AN53)
    tk = df.filter(pl.col("line_number").is_not_null() & pl.col("file_id").is_in(
        [hashlib.sha256(AN53.read_bytes()).hexdigest()])).sort("line_number")
    assert tk.height == len(lines)
    assert tk["verified"].all() and not tk["recovered"].any()
    for row, line in zip(tk.iter_rows(named=True), lines, strict=True):
        assert np.array_equal(frames_of(row["frames"]), np.asarray(line["frame"], dtype=np.uint8).reshape(-1, 64, 64))
        assert (row["state"], row["levels_completed"], row["action"]) == (
            line["state"], line["levels_completed"], line["action_input"]["id"])
    expected = json.loads(AN53.with_name(AN53.name.replace(".jsonl", ".expected.json")).read_text())
    counted = tk.group_by("play_id", maintain_order=True).agg(pl.col("is_counted").sum())["is_counted"].to_list()
    assert counted == expected["card"]["actions"]  # what the toolkit's card counted, play by play
    assert tk["is_level_change"].sum() == sum(len(p) for p in expected["card"]["actions_by_level"])

    # the agents-recorder copy: its missing opening RESET is the engine's (step 0, no line), and equals the
    # toolkit's recorded one; the other rows are the same frames
    ag = df.filter(pl.col("file_id") == hashlib.sha256(agents.read_bytes()).hexdigest()).sort("line_number",
                                                                                             nulls_last=False)
    assert ag["step"][0] == 0 and ag["line_number"][0] is None and ag["action"][0] == "RESET"
    assert ag.height == tk.height and ag["verified"].all()
    assert ag["frame_sha256s"].to_list() == tk["frame_sha256s"].to_list()

    # the playback script: every response made by the replay; the same steps as the official recording of
    # those actions (ck17_scripted-win.noframes, written by the toolkit), whose frames come from the replay too
    pb = df.filter(pl.col("source") == "playback").sort("play_id", "step")
    official = file_lines(ck17_noframes)
    assert pb.height == len(official) and pb["verified"].all()
    assert [(r["action"], r["state"], r["levels_completed"]) for r in pb.iter_rows(named=True)] == [
        (x["action_input"]["id"], x["state"], x["levels_completed"]) for x in official]
    nf = df.filter(pl.col("file_id") == hashlib.sha256(ck17_noframes.read_bytes()).hexdigest()).sort("line_number")
    assert nf["frame_sha256s"].to_list() == pb["frame_sha256s"].to_list()

    # the human-dataset file: its game is not among the games, so its frames are the file's, unverified
    hu = df.filter(pl.col("source") == "human").sort("line_number")
    hlines = [x for x in file_lines(HUMAN) if "frame" in x]
    assert hu.height == len(hlines) and not hu["verified"].any()
    assert np.array_equal(frames_of(hu["frames"][-1].to_list()), np.asarray(hlines[-1]["frame"], dtype=np.uint8))
    card = (out / "README.md").read_text()
    assert "license: other" in card and "lp85-" in card and "## Columns" in card
    manifest = json.loads((out / "manifest.json").read_text())
    assert str(out / "data" / "train-00000.parquet") in manifest["outputs"]
    # every input's sha256 (taken from its reading, not read again) is its bytes' hash
    inputs = [AN53, ck17_noframes, agents, HUMAN, script]
    assert manifest["inputs"] == {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in inputs}


def _tamper(src: Path, dst: Path, line_no: int, guid: str | None = None, **changes) -> Path:
    lines = [json.loads(x) for x in src.read_text().splitlines() if x.strip()]
    lines[line_no - 1]["data"].update(changes)
    for line in lines if guid else ():
        line["data"]["guid"] = guid
    dst.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return dst


def test_a_divergent_play_is_cut_at_its_divergence(tmp_path):
    # line 10 says ACTION5 is not available: the engine says it is; the play keeps lines 1-9 (steps 0-8)
    bad = _tamper(AN53, tmp_path / "an53-divergent.jsonl", 10, available_actions=[1, 2])
    # the last line's frame is recorded differently: frames never match again, cut at the last step
    lines = file_lines(AN53)
    last = np.asarray(lines[-1]["frame"])
    last[:, 0, 0] = (last[:, 0, 0] + 1) % 16
    frame_bad = _tamper(AN53, tmp_path / "an53-lastframe.jsonl", len(lines), frame=last.tolist(),
                        guid="00000000-0000-4000-8000-000000000001")
    out = tmp_path / "ds"
    code, output = export(str(bad), str(frame_bad), "--games", str(ENVS), "--out", str(out))
    assert code == 0, output
    df = rows_of(out)
    cut = df.filter(pl.col("file_id") == hashlib.sha256(bad.read_bytes()).hexdigest())
    assert cut["line_number"].to_list() == list(range(1, 10)) and cut["step"].to_list() == list(range(9))
    frame_cut = df.filter(pl.col("file_id") == hashlib.sha256(frame_bad.read_bytes()).hexdigest())
    assert frame_cut["line_number"].max() == len(lines) - 1
    card = (out / "README.md").read_text()
    section = card.split("## Plays cut at a divergence", 1)[1].split("\n## ", 1)[0]
    assert "line 10" in section and "available_actions" in section
    assert "00000000-0000-4000-8000-000000000001/" in section and f"line {len(lines)} " in section
    notes = json.loads((out / "manifest.json").read_text())["notes"]["transitions"]
    # the play holding the divergence keeps its rows; later plays of the session (after full resets) follow it.
    # The last line of the file is a full RESET that opens a play: that play keeps nothing.
    kept = {p["play_id"].split("/")[0]: p["rows"] for p in notes["plays_cut"] if "earlier" not in p["detail"]}
    assert kept == {"e834078e-f7da-412b-98f1-52cb64982f14": 9, "00000000-0000-4000-8000-000000000001": 0}


def test_the_layout_loads_with_polars_duckdb_and_parquet_datasets(tmp_path):
    out = tmp_path / "ds"
    code, output = export(str(AN53), str(PLAYBACK / "mz41_scripted-lose.playback.jsonl"), "--games", str(ENVS),
                          "--out", str(out))
    assert code == 0, output
    n = rows_of(out).height
    polars_df = pl.read_parquet(out / "data" / "*.parquet")
    assert polars_df.schema["frames"] == pl.List(pl.Binary)
    assert frames_of(polars_df["frames"][0].to_list()).shape[1:] == (64, 64)

    import duckdb

    con = duckdb.connect()
    total, size = con.execute(f"SELECT count(*), max(octet_length(frames[1])) FROM '{out}/data/*.parquet'").fetchone()
    assert (total, size) == (n, 4096)
    first = con.execute(f"SELECT frames FROM '{out}/data/*.parquet' WHERE step = 0 LIMIT 1").fetchone()[0]
    assert frames_of(first).shape[1:] == (64, 64)

    try:
        from datasets import load_dataset
    except ImportError:  # the Hugging Face loader reads Parquet through pyarrow's dataset API
        load_dataset = None
    if load_dataset is not None:
        ds = load_dataset("parquet", data_files=str(out / "data" / "*.parquet"), split="train",
                          cache_dir=str(tmp_path / "hf"))
        assert len(ds) == n
        assert frames_of(ds[0]["frames"]).shape[1:] == (64, 64) and ds[0]["frame_shape"] == [64, 64]
    import pyarrow.dataset as pads

    table = pads.dataset(out / "data", format="parquet").to_table()
    assert table.num_rows == n and str(table.schema.field("frames").type) == "list<element: binary>"


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError], ids=["ctrl-c", "disk error"])
def test_an_overwrite_that_stops_midway_leaves_the_old_dataset_whole(tmp_path, monkeypatch, failure):
    """--overwrite once removed the old dataset before exporting: Ctrl-C or a failure midway left nothing (or a
    mix). The folder is now written whole: until the new dataset is complete, the old one stays as it was."""
    from pipeline.datasets.shards import ShardWriter

    out = tmp_path / "ds"
    code, output = export(str(AN53), "--games", str(ENVS), "--out", str(out))
    assert code == 0, output
    (out / "notes.txt").write_text("mine")
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def stop(self, export):
        raise failure(28, "No space left on device") if failure is OSError else failure()

    monkeypatch.setattr(ShardWriter, "write_export", stop)
    result = CliRunner().invoke(app, ["--plain", "export-transitions", str(AN53), str(PLAYBACK / "an53_scripted-lose"
                                      ".playback.jsonl"), "--games", str(ENVS), "--out", str(out), "--overwrite",
                                      "--workers", "1"])
    assert result.exit_code != 0
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # no stage folder left beside it


def test_refusals(tmp_path):
    out = tmp_path / "ds"
    (out).mkdir()
    (out / "notes.txt").write_text("mine")
    code, output = export(str(AN53), "--games", str(ENVS), "--out", str(out))
    assert code == 2 and "not empty" in output
    code, output = export(str(AN53), "--games", str(ENVS), "--out", str(out), "--overwrite")
    assert code == 0 and (out / "notes.txt").read_text() == "mine"  # only the dataset's files are replaced
    # a playback script whose game cannot be loaded: exit 3 with the reason, the other files still exported
    script = tmp_path / "zz99.playback.jsonl"
    script.write_text(json.dumps({"data": {"action_input": {"id": 1, "data": {"game_id": "zz99-deadbeef"}}}}) + "\n")
    out2 = tmp_path / "ds2"
    code, output = export(str(script), str(AN53), "--games", str(ENVS), "--out", str(out2))
    assert code == 3 and "zz99" in output and "cannot replay" in output
    assert rows_of(out2).height == len(file_lines(AN53))
    assert "zz99" in (out2 / "README.md").read_text()
    # a licence that is not an identifier: it would go into the card's YAML front matter as it is
    for bad in ("a\nb", "mit: x", ""):
        code, output = export(str(AN53), "--games", str(ENVS), "--out", str(tmp_path / "ds3"), "--licence", bad)
        assert code == 2 and "give a licence identifier" in output and not (tmp_path / "ds3").exists()
    code, output = export(str(AN53), "--games", str(ENVS), "--out", str(tmp_path / "ds3"), "--licence", "cc-by-4.0")
    assert code == 0 and "license: cc-by-4.0\n" in (tmp_path / "ds3" / "README.md").read_text()


def test_database_export_matches_the_file_export(tmp_path):
    db = tmp_path / "t.duckdb"
    script = PLAYBACK / "an53_scripted-lose.playback.jsonl"
    ingested = CliRunner().invoke(app, ["--plain", "ingest", str(AN53), str(script), "--db", str(db)])
    assert ingested.exit_code == 0, ingested.output
    code, output = export("--db", str(db), "--games", str(ENVS), "--out", str(tmp_path / "db"))
    assert code == 0, output
    code, output = export(str(AN53), str(script), "--games", str(ENVS), "--out", str(tmp_path / "files"))
    assert code == 0, output
    cols = ["play_id", "step", "action", "state", "levels_completed", "frame_sha256s", "is_counted", "verified"]
    assert rows_of(tmp_path / "db").select(cols).equals(rows_of(tmp_path / "files").select(cols))
    # without --workers: a few steps are exported in this one process, and the command says so
    auto = CliRunner().invoke(app, ["--plain", "export-transitions", "--db", str(db), "--games", str(ENVS),
                                    "--out", str(tmp_path / "auto")])
    assert auto.exit_code == 0, auto.output
    assert "exported in this one process" in auto.output  # the reason depends on the cores: see the next test
    assert rows_of(tmp_path / "auto").equals(rows_of(tmp_path / "db"))


def test_a_stored_file_is_read_a_slice_at_a_time_in_narrow_types_with_the_same_values(tmp_path, monkeypatch):
    """Read whole in the stored types, two million steps of one file took 0.59 GB of table and 1.03 GB at the
    read's peak (the export peaked at 1.06 GB): `read_narrow_steps` reads a slice of lines at a time, each in the
    narrowest types, every column in buffers of its own; small files together, in file order."""
    from pipeline.core.workspace import Workspace
    from pipeline.datasets.transitions import DB_STEP_COLUMNS
    from pipeline.scoring import storage

    db = tmp_path / "t.duckdb"
    script = PLAYBACK / "an53_scripted-lose.playback.jsonl"
    ingested = CliRunner().invoke(app, ["--plain", "ingest", str(AN53), str(script), "--db", str(db)])
    assert ingested.exit_code == 0, ingested.output
    monkeypatch.setattr(storage, "STEP_SLICE_ROWS", 7)
    with Workspace(db, read_only=True) as ws:
        file_ids = ws.read("SELECT DISTINCT file_id FROM core_arc3__steps").to_series().to_list()
        for file_id in file_ids:
            whole = storage.read_stored_steps(ws, DB_STEP_COLUMNS, [file_id])
            sliced = storage.read_narrow_steps(ws, DB_STEP_COLUMNS, [file_id])
            ranges = (whole["line_number"] // 7).unique()  # slices of 7 line numbers, each with a step
            assert whole.height > 14 and sliced["line_number"].n_chunks() == ranges.len() > 2
            assert sliced.schema["file_id"] == pl.Categorical and sliced.schema["action_id"] == pl.Int8
            assert sliced.schema["line_number"] in (pl.Int8, pl.Int16)
            assert sliced.with_columns(pl.col(c).cast(t) for c, t in whole.schema.items()).equals(whole)
        whole = storage.read_stored_steps(ws, DB_STEP_COLUMNS, file_ids)
        both = storage.read_narrow_steps(ws, DB_STEP_COLUMNS, list(reversed(file_ids)))  # in file order all the same
        assert len(file_ids) == 2 and both.with_columns(pl.col(c).cast(t) for c, t in whole.schema.items()).equals(whole)
    code, output = export("--db", str(db), "--games", str(ENVS), "--out", str(tmp_path / "db"))
    assert code == 0, output
    code, output = export(str(AN53), str(script), "--games", str(ENVS), "--out", str(tmp_path / "files"))
    assert code == 0, output
    cols = ["play_id", "step", "action", "x", "y", "state", "levels_completed", "frame_sha256s", "is_counted",
            "verified"]
    assert rows_of(tmp_path / "db").select(cols).equals(rows_of(tmp_path / "files").select(cols))


def test_stored_steps_read_a_block_at_a_time_answer_as_the_table_does(tmp_path, monkeypatch):
    """`StoredSteps` stands for a stored file's steps table where the export and the scoring rebuild read it:
    its slices (across blocks, from the end, past it, empty), selections and parts are the table's, and the
    recording rebuilt from it counts as the one rebuilt from the table."""
    from pipeline.core.workspace import Workspace
    from pipeline.datasets.transitions import DB_STEP_COLUMNS
    from pipeline.scoring import storage
    from pipeline.scoring.plays import StepRecordChunks, recordings_from_tables, step_records_of

    db = tmp_path / "t.duckdb"
    ingested = CliRunner().invoke(app, ["--plain", "ingest", str(AN53), "--db", str(db)])
    assert ingested.exit_code == 0, ingested.output
    with Workspace(db, read_only=True) as ws:
        file_id = ws.read("SELECT DISTINCT file_id FROM core_arc3__steps").item()
        plays = ws.read("SELECT * FROM core_arc3__plays")
        whole = storage.read_stored_steps(ws, DB_STEP_COLUMNS, [file_id])
        stored = storage.StoredSteps(ws, file_id, DB_STEP_COLUMNS, block_rows=7)
        n = whole.height
        assert stored.height == len(stored) == n > 21
        for offset, length in ((0, 7), (3, 9), (5, 30), (-10, 4), (n - 3, 10), (n + 5, 2), (4, 0), (8, None)):
            assert stored.slice(offset, length).equals(whole.slice(offset, length)), (offset, length)
        picked = stored.select("line_number", "action_id")
        assert picked.slice(6, 3).equals(whole.select("line_number", "action_id").slice(6, 3))
        assert stored.select(["state"]).slice(0).equals(whole.select("state"))
        parts = list(stored.parts())  # a block per 7 line numbers with a step
        ranges = whole.group_by(pl.col("line_number") // 7).len().sort("line_number")
        assert [p.height for p in parts] == ranges["len"].to_list() and len(parts) > 3
        assert pl.concat(parts).equals(whole)
        assert pl.concat(list(stored.select("state").parts())).equals(whole.select("state"))
        read, asked = storage.read_stored_steps, []
        monkeypatch.setattr(storage, "read_stored_steps",
                            lambda ws, columns, *a, **k: asked.append(tuple(columns)) or read(ws, columns, *a, **k))
        # a pass reads only its columns (a stored file's records: in a pass, or a chunk at a time from the blocks)
        chunks = StepRecordChunks(stored, chunk_rows=5)
        assert list(chunks) == step_records_of(whole) and chunks[23] == step_records_of(whole)[23]
        assert asked[0] == tuple(chunks._steps.columns) != DB_STEP_COLUMNS and asked[-1] == DB_STEP_COLUMNS
        from_table, = recordings_from_tables(whole, plays)
        from_store, = recordings_from_tables(stored, plays)
        uncounted, = recordings_from_tables(stored, plays, cards=False)  # (the export's: no card built)
    assert from_store.card == from_table.card and list(from_store.effects) == list(from_table.effects)
    assert list(from_store.step_play) == list(from_table.step_play) and from_store.play_ids == from_table.play_ids
    assert list(from_store.records) == list(from_table.records)
    assert uncounted.card is None and uncounted.actions_known and from_table.actions_known
    assert from_table.card.total_plays > 1 and uncounted.play_ids == from_table.play_ids
    assert list(uncounted.step_play) == list(from_table.step_play)


def test_a_stored_file_is_exported_a_block_of_steps_at_a_time_with_the_same_rows(tmp_path, monkeypatch):
    """Held whole, even in narrow types, a stored file's steps took about 185 bytes a step: 0.62 GB for two
    million steps of one file, the export's peak, which a longer file would have taken past 1 GB. The database
    export now reads them a block at a time as it goes (`StoredSteps`). Forced here (blocks of 7 steps, a
    recording, a playback script, a file whose lost actions are given, and a recording whose frames were kept):
    every read of a file's stored steps is a block at most, but the recovered file's (its actions rewrite the
    table, held whole as they are given), and the rows are the file export's."""
    from pipeline.scoring import storage

    script = PLAYBACK / "an53_scripted-lose.playback.jsonl"
    lost, recovered, n_lines = lost_copy(tmp_path, guid="a-session-of-its-own")
    db, kept = tmp_path / "t.duckdb", tmp_path / "kept.duckdb"
    for args in ([str(AN53), str(script), str(lost), "--db", str(db)], [str(AN53), "--db", str(kept), "--keep-frames"]):
        ingested = CliRunner().invoke(app, ["--plain", "ingest", *args])
        assert ingested.exit_code == 0, ingested.output
    reads: list[tuple[str, int]] = []
    read = storage.read_stored_steps

    def counted(ws, columns, file_ids, lines=None):
        found = read(ws, columns, file_ids, lines=lines)
        reads.append((",".join(file_ids), found.height))
        return found

    monkeypatch.setattr(storage, "read_stored_steps", counted)
    monkeypatch.setattr(storage, "STORED_BLOCK_ROWS", 7)
    # Nor are its plays read: only the first play's row, what a recording takes from its plays (read whole, a
    # million one-step plays' rows and ids took 0.3 GB), the play ids being made from the steps.
    from pipeline.core.workspace import Workspace

    with Workspace(db, read_only=True) as ws:
        n_plays = dict(ws.read("SELECT file_id, count(*) FROM core_arc3__plays GROUP BY 1").iter_rows())
    assert max(n_plays.values()) > 1
    plays_read: list[int] = []
    real_read = Workspace.read

    def spied(self, sql, params=None):
        found = real_read(self, sql, params)
        if "is_replay_needed" in found.columns:  # a read of a file's plays
            plays_read.append(found.height)
        return found

    monkeypatch.setattr(Workspace, "read", spied)
    cols = ["play_id", "step", "action", "x", "y", "state", "levels_completed", "frames", "frame_sha256s",
            "is_counted", "is_level_change", "verified", "recovered", "line_number"]
    given = {"db": [str(AN53), str(script), str(lost), "--recovered-actions", str(recovered)], "kept": [str(AN53)]}
    for name, stored in (("db", db), ("kept", kept)):
        code, output = export("--db", str(stored), *given[name][3:], "--games", str(ENVS), "--out",
                              str(tmp_path / name))
        assert code == 0, output
        code, output = export(*given[name], "--games", str(ENVS), "--out", str(tmp_path / f"{name}-files"))
        assert code == 0, output
        assert rows_of(tmp_path / name).select(cols).equals(rows_of(tmp_path / f"{name}-files").select(cols))
    lost_id = hashlib.sha256(lost.read_bytes()).hexdigest()
    assert rows_of(tmp_path / "db").filter(pl.col("file_id") == lost_id)["recovered"].all()
    blocks = [n for fid, n in reads if fid != lost_id]
    assert len(blocks) > 10 and max(blocks) == 7
    assert max(n for fid, n in reads if fid == lost_id) == n_lines
    assert len(plays_read) >= len(n_plays) and max(plays_read) == 1


@pytest.mark.parametrize("cores", [1, 2, 4, 8])
def test_the_automatic_choice_keeps_one_process_on_two_cores_and_small_input(tmp_path, monkeypatch, cores):
    """Without --workers: on two cores one process (its sandbox child replays on the other core; a two-worker
    cluster was slower at every size measured); on more, a worker per two cores from the scorer's thresholds on,
    one process below them. Whenever it stays in one process it says why."""
    import pipeline.core.executor as executor
    from pipeline.commands import export_transitions as command
    from pipeline.scoring.parallel import PARALLEL_MIN_BYTES, PARALLEL_MIN_STEPS

    monkeypatch.setattr(executor, "default_workers", lambda: cores)
    messages: list[str] = []
    monkeypatch.setattr(command.out, "info", messages.append)
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small.write_bytes(b"x" * 1000)
    with open(big, "wb") as fh:
        fh.truncate(PARALLEL_MIN_BYTES)  # sparse: the size is what counts
    files = lambda *paths: (len(paths), sum(p.stat().st_size for p in paths))  # noqa: E731
    choices = (command._automatic_workers(*files(small, small)), command._automatic_workers(*files(small, big)),
               command._automatic_workers_db(2, 10), command._automatic_workers_db(2, PARALLEL_MIN_STEPS))
    said = "\n".join(messages)
    if cores == 1:
        assert choices == (None, None, None, None) and not said  # serial anyway, nothing to say
    elif cores == 2:
        assert choices == (1, 1, 1, 1) and said.count("2 usable cores") == 4
    else:
        assert choices == (1, cores // 2, 1, cores // 2)
        assert "MiB of input: below the" in said and "steps: below the" in said
    assert said.count("exported in this one process") == choices.count(1)


def test_shards_are_bounded_and_atomic(tmp_path):
    from pipeline.datasets.shards import ShardWriter
    from pipeline.datasets.transitions import ExportJob, batches_from_bytes, export_transitions

    export_ = export_transitions(ExportJob(path=str(AN53), game_dirs=(str(ENVS),), batch_rows=8))
    batches = [b for data in export_.batches for b in batches_from_bytes(data)]
    assert len(batches) == 6 and sum(b.num_rows for b in batches) == 42
    writer = ShardWriter(tmp_path, max_bytes=1)  # every batch closes its shard
    for b in batches[:3]:
        writer.write(b)
    writer.write(batches[3])  # a shard in the making is closed on write: then one more left open ...
    writer._open()
    writer._writer.write_batch(batches[4])
    writer.abort()  # ... and abandoned (a full disk, a crash): no file of it looks like a shard
    shards = sorted((tmp_path / "data").iterdir())
    assert [p.name for p in shards] == [f"train-{i:05d}.parquet" for i in range(4)]
    assert pl.read_parquet(tmp_path / "data" / "*.parquet").height == sum(b.num_rows for b in batches[:4])


@pytest.mark.parametrize("bad", ["not json at all\n", ""])
def test_bad_files_are_rejected_with_a_reason(tmp_path, bad):
    path = tmp_path / "bad.jsonl"
    path.write_text(bad)
    code, output = export(str(path), str(AN53), "--games", str(ENVS), "--out", str(tmp_path / "ds"))
    assert code == 3 and "bad.jsonl" in output


def test_two_workers_write_the_same_rows_as_one(tmp_path):
    """The pieces run on a local Dask cluster and come back as compressed Arrow streams; the single writer
    writes them in input order, so the dataset is the serial one."""
    inputs = [str(AN53), str(PLAYBACK / "ck17_scripted-win.playback.jsonl"), str(HUMAN)]
    code, output = export(*inputs, "--games", str(ENVS), "--out", str(tmp_path / "one"))
    assert code == 0, output
    result = CliRunner().invoke(app, ["--plain", "export-transitions", *inputs, "--games", str(ENVS), "--out",
                                      str(tmp_path / "two"), "--workers", "2"])
    assert result.exit_code == 0, result.output
    one = pl.read_parquet(tmp_path / "one" / "data" / "*.parquet")
    two = pl.read_parquet(tmp_path / "two" / "data" / "*.parquet")
    assert one.height == len(file_lines(AN53)) + 20 + len([x for x in file_lines(HUMAN) if "frame" in x])
    assert two.equals(one)  # same rows, same order


def test_lost_actions_left_out_unless_recovered(tmp_path):
    """The agents-harness sample lost its action ids (every line says RESET); the actions were ACTION1 x3
    (its expected.json). Without them the play is left out (exit 3); with --recovered-actions its rows carry
    them, `recovered` true. Its game (ls20) is not among the games here, so the frames are the file's."""
    sample = next((SAMPLES / "benchmarking").glob("*.recording.jsonl"))
    code, output = export(str(sample), "--out", str(tmp_path / "lost"))
    assert code == 3 and "action ids lost" in output
    assert not list((tmp_path / "lost" / "data").glob("*.parquet"))
    recovered = tmp_path / "recovered.json"
    recovered.write_text(json.dumps({sample.name: ["ACTION1"] * 3}))
    code, output = export(str(sample), "--out", str(tmp_path / "found"), "--recovered-actions", str(recovered))
    assert code == 0, output
    df = rows_of(tmp_path / "found").sort("line_number")
    assert df["action"].to_list() == ["ACTION1"] * 3 and df["recovered"].all() and not df["verified"].any()
    assert df["is_counted"].all() and df["step"].to_list() == [1, 2, 3]  # make()'s RESET is not in the file
    lines = [x for x in file_lines(sample) if "frame" in x]
    assert [frames_of(f).tolist() for f in df["frames"].to_list()] == [x["frame"] for x in lines]


def test_a_hostile_game_is_stopped_in_the_sandbox(tmp_path):
    """The game's code runs in the sandbox: a game that ends its process mid-step (tests/fixtures/hostile_games
    ox01, os._exit(0) on ACTION2) leaves its script unexported, named with the reason (exit 3); the other
    files are still exported."""
    hostile = Path(__file__).resolve().parents[1] / "fixtures" / "hostile_games"
    script = tmp_path / "ox01.playback.jsonl"
    script.write_text("".join(json.dumps({"data": {"action_input": {"id": a, "data": {"game_id": "ox01-0000beef"}}}})
                              + "\n" for a in (1, 2, 1)))
    out = tmp_path / "ds"
    code, output = export(str(script), str(AN53), "--games", str(hostile), "--games", str(ENVS), "--out", str(out))
    assert code == 3, output
    assert "ox01" in output and "sandbox" in output
    df = rows_of(out)
    assert set(df["game_id"]) == {"an53-6f5f2264"} and df.height == len(file_lines(AN53))
    assert "ox01" in (out / "README.md").read_text().split("## Left out", 1)[1]


def test_a_game_that_forges_hashes_cannot_change_the_published_ones(tmp_path):
    """A game's code runs in the sandbox's child and can replace anything there, hashlib too (tests/fixtures/
    hostile_games hx01 makes every sha256 of that process the digest of other bytes): each row's frame_sha256s
    is still the sha256 of the frames written beside it, since they are hashed in the command's own process."""
    hostile = Path(__file__).resolve().parents[1] / "fixtures" / "hostile_games"
    script = tmp_path / "hx01.playback.jsonl"
    script.write_text("".join(json.dumps({"data": {"action_input": {"id": a, "data": {"game_id": "hx01-0000beef"}}}})
                              + "\n" for a in (2, 1, 2)))
    out = tmp_path / "ds"
    code, output = export(str(script), "--games", str(hostile), "--out", str(out))
    assert code == 0, output
    df = rows_of(out)
    assert df.height == 4 and df["verified"].all()  # make()'s RESET, then the three actions
    assert df["levels_completed"].to_list() == [0, 0, 1, 1]
    for frames, hashes in df.select("frames", "frame_sha256s").iter_rows():
        assert frames and [hashlib.sha256(f).hexdigest() for f in frames] == hashes


def test_playback_rows_carry_the_reference_engines_frame_hashes(tmp_path):
    """Each fixture game's scripted-win episode of the conformance kit's golden traces (recorded with the
    reference engine), turned into an action-only playback script: every exported step's frame hashes are the
    golden step's (step 0 = make()'s RESET, step k = the k-th action)."""
    import gzip

    golden = ENVS.parent / "golden"
    expected: dict[str, list[list[str]]] = {}
    scripts = []
    for trace in sorted(golden.glob("*.jsonl.gz")):
        lines = [json.loads(x) for x in gzip.open(trace, "rt")]
        game_id = lines[0]["game_id"]
        episode = next(x for x in lines if x["kind"] == "episode")
        if episode.get("start_level") is not None or episode["only_reset_levels"]:
            continue
        steps = [x for x in lines if x["kind"] == "step" and x["episode"] == episode["episode"]]
        script = tmp_path / f"{game_id}.playback.jsonl"
        script.write_text("".join(json.dumps({"data": {"action_input": {"id": s["action"], "data": {
            "game_id": game_id, **s["data"]}}}}) + "\n" for s in steps[1:]))
        scripts.append(str(script))
        expected[game_id] = [s["frame_sha256"] for s in steps]
    assert len(expected) >= 4
    code, output = export(*scripts, "--games", str(ENVS), "--out", str(tmp_path / "ds"))
    assert code == 0, output
    df = pl.read_parquet(tmp_path / "ds" / "data" / "*.parquet")
    for game_id, hashes in expected.items():
        rows = df.filter(pl.col("game_id") == game_id).sort("step")
        assert rows["step"].to_list() == list(range(len(hashes)))
        assert rows["frame_sha256s"].to_list() == hashes, game_id


@pytest.mark.parametrize("kind", ["recording", "playback"])
def test_a_file_is_exported_in_bounded_batches(tmp_path, monkeypatch, kind):
    """In this process (the serial writer's case) a file's rows come as an iterator of batches of at most
    `batch_rows` rows, and the sandbox replays it in chunks of at most `batch_rows` steps as the batches are
    taken: the first batch is out before the rest of the file is replayed."""
    import pipeline.datasets.transitions as transitions

    calls: list[int] = []  # responses per sandbox call
    run = transitions._in_sandbox

    def counted(info, fn, arg, lane=0):
        out = run(info, fn, arg, lane)
        calls.append(out.get("n", 0))
        return out

    monkeypatch.setattr(transitions, "_in_sandbox", counted)
    if kind == "playback":
        path = tmp_path / "an53.playback.jsonl"
        path.write_text("".join(json.dumps({"data": {"action_input": {"id": line["action_input"]["id"], "data": {
            "game_id": "an53-6f5f2264", **{k: v for k, v in (line["action_input"].get("data") or {}).items()
                                           if k in ("x", "y")}}}}}) + "\n" for line in file_lines(AN53)[1:]))
    else:
        path = AN53
    n_rows = len(file_lines(AN53))  # 42: the recording's lines; the script's actions and make()'s RESET
    export_ = transitions.export_transitions(transitions.ExportJob(path=str(path), game_dirs=(str(ENVS),),
                                                                   batch_rows=8, compress=False))
    stream = iter(export_.batches)
    first = next(stream)
    assert first.num_rows == 8 and len(calls) <= 2 and export_.n_rows == 0  # not the whole file yet
    batches = [first, *stream]
    assert [b.num_rows for b in batches] == [8, 8, 8, 8, 8, 2] and export_.n_rows == n_rows
    assert len(calls) >= 5 and max(calls) <= 8 + 1  # + make()'s RESET, in the first chunk
    assert sum(calls) == n_rows
    rows = pl.from_arrow(pa_table(batches))
    assert rows["step"].to_list() == list(range(n_rows)) and rows["verified"].all()
    # the same rows as one batch per file
    whole = transitions.export_transitions(transitions.ExportJob(path=str(path), game_dirs=(str(ENVS),),
                                                                 batch_rows=1024, compress=False))
    assert pa_table(list(whole.batches)).equals(pa_table(batches))


@pytest.mark.parametrize("with_game", [True, False])
def test_a_large_files_pixels_waiting_on_disk_export_the_same_rows(tmp_path, monkeypatch, with_game):
    """A large recording with frames (its lines held as columns) keeps its pixels on disk past a bound: held,
    100,000 framed steps took 0.75 GB and 300,000 took 1.8 GB. Forced here at 1 byte: the same rows, whether the
    replay confirms the file's frames or, its game missing, they are exported unchecked."""
    import pipeline.recordings.reader as reader
    from pipeline.datasets.transitions import ExportJob, export_transitions

    dirs = (str(ENVS),) if with_game else ()

    def rows():
        export_ = export_transitions(ExportJob(path=str(AN53), game_dirs=dirs, batch_rows=8, compress=False))
        return pa_table(list(export_.batches)), export_

    held, held_export = rows()
    monkeypatch.setattr(reader, "COLUMNS_FROM_BYTES", 0)
    monkeypatch.setattr(reader, "HELD_FRAME_BYTES", 1)
    spilled = []
    column = reader.FrameColumn.__init__

    def noted(self, held_bytes=None):
        column(self, held_bytes)
        spilled.append(self)

    monkeypatch.setattr(reader.FrameColumn, "__init__", noted)
    on_disk, disk_export = rows()
    assert spilled and spilled[-1].spilled() >= 40  # every frame line's pixels but the first's
    assert on_disk.num_rows == held.num_rows == len(file_lines(AN53)) and on_disk.equals(held)
    assert [p.status for p in disk_export.plays] == [p.status for p in held_export.plays] == \
        (["exported"] if with_game else ["unverified"]) * len(held_export.plays)


def transitions_export(path):
    from pipeline.datasets.transitions import ExportJob, export_transitions

    return export_transitions(ExportJob(path=str(path), game_dirs=(str(ENVS),), compress=True))


def pa_table(items):
    """The rows of a file's export items (row blocks in this process, IPC streams from a worker) as one table."""
    import pyarrow as pa

    from pipeline.datasets.transitions import batches_from_bytes

    return pa.Table.from_batches([b for item in items for b in batches_from_bytes(item)])


def test_the_writer_gathers_many_files_rows_into_one_row_group(tmp_path, monkeypatch):
    """In this process a file's rows come as row blocks, which the single writer gathers, several files' at once,
    into batches of about a row group: the rows are those of each file's own batches (as a worker sends them),
    in input order."""
    import pyarrow.parquet as pq

    from pipeline.datasets import shards
    from pipeline.datasets.transitions import ExportJob, export_transitions

    monkeypatch.setattr(shards, "ROW_GROUP_ROWS", 50)
    paths = [AN53, PLAYBACK / "ck17_scripted-win.playback.jsonl", AN53]  # 42, 20 and 42 rows
    writer = shards.ShardWriter(tmp_path)
    for path in paths:
        writer.write_export(export_transitions(ExportJob(path=str(path), game_dirs=(str(ENVS),), compress=False)))
    (shard,) = writer.close()
    meta = pq.ParquetFile(shard).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [62, 42]  # 42 + 20 in one
    alone = pa_table([item for path in paths for item in export_transitions(
        ExportJob(path=str(path), game_dirs=(str(ENVS),), compress=True)).batches])
    assert pq.read_table(shard).equals(alone)


def test_a_shard_holds_a_bounded_number_of_row_groups(tmp_path, monkeypatch):
    """Parquet's writer holds every row group's metadata until its file closes, and replayed frames compress so
    well that a long export stayed in one shard under --shard-mb (1.5 million rows, 1,465 row groups, memory
    growing about 15 bytes a row): a shard closes at MAX_SHARD_ROW_GROUPS too. The rows are the same, in order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.datasets import shards
    from pipeline.datasets.transitions import ExportJob, export_transitions

    monkeypatch.setattr(shards, "ROW_GROUP_ROWS", 10)
    monkeypatch.setattr(shards, "MAX_SHARD_ROW_GROUPS", 2)
    paths = [AN53, PLAYBACK / "ck17_scripted-win.playback.jsonl", AN53]  # 42, 20 and 42 rows
    writer = shards.ShardWriter(tmp_path)
    for path in paths:
        writer.write_export(export_transitions(ExportJob(path=str(path), game_dirs=(str(ENVS),), compress=False)))
    written = writer.close()
    groups = [pq.ParquetFile(s).metadata.num_row_groups for s in written]
    assert sum(groups) > 2 and len(written) >= 2 and all(n <= 2 for n in groups)
    alone = pa_table([item for path in paths for item in export_transitions(
        ExportJob(path=str(path), game_dirs=(str(ENVS),), compress=True)).batches])
    assert pa.concat_tables([pq.read_table(s) for s in written]).equals(alone)


def test_without_workers_small_input_is_exported_in_this_process(tmp_path):
    """Without --workers, a few MB of files are exported in this one process (a local cluster costs more to start
    than it saves), and the command says so; the manifest keeps what was asked."""
    result = CliRunner().invoke(app, ["--plain", "export-transitions", str(AN53),
                                      str(PLAYBACK / "ck17_scripted-win.playback.jsonl"), "--games", str(ENVS),
                                      "--out", str(tmp_path / "ds")])
    assert result.exit_code == 0, result.output
    assert "exported in this one process" in result.output and "--workers N" in result.output
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert manifest["config"]["workers"] is None and manifest["notes"]["transitions"]["rows"] == 42 + 20


def test_an_export_of_files_starts_without_duckdb(tmp_path):
    """An export of files opens no database, so the command never imports DuckDB (~0.15 s of every run's
    start-up, before the sandbox can replay anything): the modules every command imports load it only where a
    database is opened."""
    import subprocess
    import sys

    script = str(PLAYBACK / "ck17_scripted-win.playback.jsonl")
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "pipeline.cli", "--plain", "export-transitions",
                          script, "--games", str(ENVS), "--out", str(tmp_path / "ds")], capture_output=True,
                         text=True, cwd=Path(__file__).resolve().parents[2], timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time")}
    assert "pipeline.datasets.transitions" in imported and "duckdb" not in imported


def test_files_are_grouped_into_pieces_of_bounded_size_in_order(tmp_path):
    from pipeline.datasets.transitions import ExportJob, export_group, iter_job_pieces

    sizes = [10, 10, 10, 50, 10, 10, 10, 10, None, 10]  # (None: a size not known counts as the bound)
    jobs = []
    for i, n in enumerate(sizes):
        path = tmp_path / f"f{i}.jsonl"
        path.write_bytes(b"x" * (n or 1))
        jobs.append(ExportJob(path=str(path)))
    groups = list(iter_job_pieces(zip(jobs, sizes, strict=True), max_bytes=35, max_files=3, lanes=2))
    assert [[Path(j.path).name for j in g] for g in groups] == [
        ["f0.jsonl", "f1.jsonl", "f2.jsonl"], ["f3.jsonl"], ["f4.jsonl", "f5.jsonl", "f6.jsonl"], ["f7.jsonl"],
        ["f8.jsonl"], ["f9.jsonl"]]
    assert [{j.lane for j in g} for g in groups] == [{0}, {1}, {0}, {1}, {0}, {1}]  # a piece's files to one lane
    # one piece's files exported in order, their rows gathered into streams that keep the file order; a bad file
    # is that file's rejection, the others are exported
    script = PLAYBACK / "ck17_scripted-win.playback.jsonl"
    piece = [ExportJob(path=str(p), game_dirs=(str(ENVS),)) for p in (AN53, jobs[0].path, script)]
    exports = export_group(piece)
    assert [e.label for e in exports] == [j.label for j in piece]
    assert [e.n_rows for e in exports] == [len(file_lines(AN53)), 0, 20] and exports[1].rejected
    assert exports[1].problems and not exports[0].rejected and not exports[2].rejected
    alone = pa_table([item for p in (AN53, script) for item in transitions_export(p).batches])
    assert pa_table([item for e in exports for item in e.batches]).equals(alone)
    assert sum(len(e.batches) for e in exports) == 1  # 62 rows of two files: one stream


def _shipped_scripts(folder: Path, n_actions: int = 6) -> list[Path]:
    """A short playback script of each shipped game: the first actions of its solutions/win.jsonl."""
    from engine.loader import find_games

    scripts = []
    for info in find_games([Path(__file__).resolve().parents[2] / "games"]):
        win = info.directory / "solutions" / "win.jsonl"
        if not win.is_file():
            continue
        actions = [json.loads(x)["data"]["action_input"] for x in win.read_text().splitlines() if x.strip()]
        script = folder / f"{info.short_id}.playback.jsonl"
        script.write_text("".join(json.dumps({"data": {"action_input": {"id": a["id"], "data": {
            "game_id": info.game_id, **{k: v for k, v in (a.get("data") or {}).items() if k in ("x", "y")}}}}})
            + "\n" for a in actions[1:1 + n_actions]))
        scripts.append(script)
    return scripts


def test_short_files_are_replayed_in_one_sandbox_call_with_the_same_rows(tmp_path, monkeypatch):
    """The first replay call of each file of a group goes to the sandbox in one (`replay_chunks`: the shipped
    games share a sandbox); the rows are those of each file exported on its own."""
    from pipeline.datasets import transitions

    scripts = _shipped_scripts(tmp_path)
    assert len(scripts) >= 3
    alone = tmp_path / "alone"
    for script in scripts:
        code, output = export(str(script), "--out", str(alone / script.name))
        assert code == 0, output
    calls: list[str] = []
    run = transitions.run_game_code

    def counted(fn, arg, **kwargs):
        calls.append(fn.__name__)
        return run(fn, arg, **kwargs)

    monkeypatch.setattr(transitions, "run_game_code", counted)
    code, output = export(*map(str, scripts), "--out", str(tmp_path / "together"))
    assert code == 0, output
    assert calls == ["replay_chunks"]
    together = pl.read_parquet(tmp_path / "together" / "data" / "*.parquet")
    each = pl.concat([pl.read_parquet(alone / s.name / "data" / "*.parquet") for s in scripts])
    assert together.height == each.height == sum(len(s.read_text().splitlines()) + 1 for s in scripts)
    assert together.sort("file_id", "step").equals(each.sort("file_id", "step"))


def test_a_hostile_game_stopped_in_a_group_call_costs_only_its_own_file(tmp_path):
    """Several scripts of one game from outside go to its sandbox in one call; when one of them ends the
    sandbox's process (ox01: os._exit on ACTION2), each file is replayed on its own again, so only that file is
    left out and the others of the same game are exported."""
    hostile = Path(__file__).resolve().parents[1] / "fixtures" / "hostile_games"
    paths = []
    for name, actions in (("a", (1,)), ("b", (1, 2, 1)), ("c", (1, 1))):
        script = tmp_path / f"ox01_{name}.playback.jsonl"
        script.write_text("".join(json.dumps({"data": {"action_input": {"id": a, "data": {
            "game_id": "ox01-0000beef"}}}}) + "\n" for a in actions))
        paths.append(str(script))
    out = tmp_path / "ds"
    code, output = export(*paths, "--games", str(hostile), "--out", str(out))
    assert code == 3, output
    assert "ox01_b" in output and "sandbox" in output and "ox01_a" not in output and "ox01_c" not in output
    df = rows_of(out)
    assert sorted(df.group_by("file_id").len()["len"].to_list()) == [2, 3]  # make()'s RESET + the actions


def test_a_groups_replay_runs_in_the_background_while_the_next_files_are_read(tmp_path, monkeypatch):
    """In this process (`export_files`, the serial writer's) a group's replay call is made on the background
    thread: the function returns once the files are read, and a stream waits for its answer only when it is
    consumed. The rows are those of the synchronous path (`export_group`, as on a worker)."""
    import threading

    from pipeline.datasets import transitions

    scripts = _shipped_scripts(tmp_path)
    games = str(Path(__file__).resolve().parents[2] / "games")
    jobs = [transitions.ExportJob(path=str(s), game_dirs=(games,)) for s in scripts]
    release, threads = threading.Event(), []
    run = transitions.run_game_code

    def held(fn, arg, **kwargs):
        threads.append(threading.current_thread().name)
        assert release.wait(30), "the test never released the call"
        return run(fn, arg, **kwargs)

    monkeypatch.setattr(transitions, "run_game_code", held)
    exports = transitions.export_files(jobs)  # returns although the group's call is held
    assert not release.is_set() and [e.label for e in exports] == [j.label for j in jobs]
    release.set()
    ahead = pa_table([block for e in exports for block in e.batches])
    assert threads == ["export-ahead-0"]  # one call for the whole group, made on the background thread
    monkeypatch.setattr(transitions, "run_game_code", run)
    synchronous = pa_table([item for e in transitions.export_group(jobs) for item in e.batches])
    assert ahead.num_rows == sum(len(s.read_text().splitlines()) + 1 for s in scripts)
    assert ahead.equals(synchronous)


def test_a_long_files_next_chunk_is_replayed_while_this_one_is_turned_into_rows(monkeypatch):
    """A file longer than a chunk: the call for the next chunk is made on the background thread before the
    chunk in hand is handed out, so the sandbox replays it while this process makes rows."""
    import threading

    from pipeline.datasets import transitions

    calls: list[str] = []
    second = threading.Event()
    run = transitions._in_sandbox

    def counted(info, fn, arg, lane=0):
        calls.append(threading.current_thread().name)
        if len(calls) == 2:
            second.set()
        return run(info, fn, arg, lane)

    monkeypatch.setattr(transitions, "_in_sandbox", counted)
    export_ = transitions.export_transitions(transitions.ExportJob(path=str(AN53), game_dirs=(str(ENVS),),
                                                                   batch_rows=8, compress=False))
    stream = iter(export_.batches)
    first = next(stream)
    assert second.wait(30)  # made without asking for the next batch
    batches = [first, *stream]
    assert calls[0] == "MainThread" and set(calls[1:]) == {"export-ahead-0"} and len(calls) >= 5
    whole = transitions.export_transitions(transitions.ExportJob(path=str(AN53), game_dirs=(str(ENVS),),
                                                                 batch_rows=1024, compress=False))
    assert pa_table(batches).equals(pa_table(list(whole.batches)))



def test_pieces_are_replayed_by_two_sandbox_children_in_turn_with_the_same_rows(tmp_path, monkeypatch):
    """In this process the pieces go to the game's sandbox lanes in turn (`replay_lanes`: a child per lane, each
    with its own background thread), so that two children replay while this one writes; a long file's later
    chunks stay in its lane's child, which holds its replay. The dataset is that of one lane."""
    import threading

    from pipeline.core import game_code, sandbox
    from pipeline.datasets import transitions

    scripts = _shipped_scripts(tmp_path)
    long_script = tmp_path / "long.playback.jsonl"  # a file of two chunks (BATCH_ROWS steps a call), 2nd piece
    long_script.write_text(scripts[0].read_text() * (transitions.BATCH_ROWS // 6 + 1))
    inputs = [*map(str, scripts[:2]), str(long_script), *map(str, scripts[2:])]
    monkeypatch.setattr(transitions, "GROUP_FILES", 2)
    monkeypatch.setattr(transitions, "replay_lanes", lambda: 1)
    code, output = export(*inputs, "--out", str(tmp_path / "one"))
    assert code == 0, output
    monkeypatch.setattr(transitions, "replay_lanes", lambda: 2)
    seen: list[tuple[str, str, int | None]] = []
    run = transitions.run_game_code

    def watched(fn, arg, **kwargs):
        out = run(fn, arg, **kwargs)
        box = next(b for ident, b in sandbox._cache.items() if ident[3] == kwargs["key"])
        seen.append((threading.current_thread().name, kwargs["key"], box.pid))
        return out

    monkeypatch.setattr(transitions, "run_game_code", watched)
    code, output = export(*inputs, "--out", str(tmp_path / "two"))
    assert code == 0, output
    keys = {key for _, key, _ in seen}
    assert len(keys) == 2 and len({pid for _, _, pid in seen}) == 2  # two children of the shipped games
    assert {(thread[-1], key.endswith("#lane1")) for thread, key, _ in seen if thread != "MainThread"} == {
        ("0", False), ("1", True)}  # each lane's calls on its own thread, to its own child
    one, two = rows_of(tmp_path / "one"), rows_of(tmp_path / "two")
    assert two.height == one.height == sum(len(Path(p).read_text().splitlines()) + 1 for p in inputs)
    assert two.equals(one)
    # room for one child only: the long file's child is held while its replay lives there, and a child answering
    # a call is not closed, so the other lane's children never end it; the rows are the same
    monkeypatch.setattr(sandbox, "MAX_CACHED", 1)
    held: list[str] = []
    hold = transitions.hold_game_child

    def counted_hold(key):
        held.append(key)
        return hold(key)

    monkeypatch.setattr(transitions, "hold_game_child", counted_hold)
    code, output = export(*inputs, "--out", str(tmp_path / "tight"))
    assert code == 0, output
    assert rows_of(tmp_path / "tight").equals(one)
    assert held == [f"{game_code.SHIPPED_GAMES_KEY}#lane1"]  # the long file alone (2nd piece), in its lane's child
    assert not sandbox._holds  # released once its file was exported


def test_a_game_stopped_in_a_later_chunk_cuts_the_play_after_the_rows_already_streamed(tmp_path):
    """A long file whose game ends the sandbox's process in its third chunk (ox01: os._exit on ACTION2, asked for
    ahead on the background thread while the second chunk is turned into rows): the rows of the chunks answered
    before stay, the play is listed as cut, and the file's problem says why."""
    from pipeline.datasets import transitions

    hostile = Path(__file__).resolve().parents[1] / "fixtures" / "hostile_games"
    script = tmp_path / "ox01_long.playback.jsonl"
    actions = [1, 0] * 10 + [2] + [1] * 5  # each win is followed by a RESET: the game never stays finished
    script.write_text("".join(json.dumps({"data": {"action_input": {"id": a, "data": {
        "game_id": "ox01-0000beef"}}}}) + "\n" for a in actions))
    export_ = transitions.export_transitions(transitions.ExportJob(path=str(script), game_dirs=(str(hostile),),
                                                                   batch_rows=8, compress=False))
    rows = pl.from_arrow(pa_table(list(export_.batches)))
    assert rows["step"].to_list() == list(range(17))  # make()'s RESET, then two chunks of 8 actions
    assert not export_.rejected and export_.n_rows == 17
    *before, last = export_.plays  # a play ends at each full reset (the RESET after a win)
    assert last.status == "cut" and "stopped" in last.detail and {p.status for p in before} == {"exported"}
    assert any(p.startswith("cut:") and "sandbox" in p for p in export_.problems)


def test_the_dataset_card_keeps_names_from_input_inert(tmp_path):
    """A file named with CRs and HTML was written into the card's Markdown as it was: a heading and an
    `<img onerror>` of its own (the card is meant for publishing, e.g. on the Hugging Face Hub)."""
    name = "x\r\r## INJECTED\r<img src=x onerror=alert(1)>.playback.jsonl"
    script = tmp_path / "in" / name
    script.parent.mkdir()
    script.write_text(json.dumps({"data": {"action_input": {"id": 1, "data": {"game_id": "zz99-deadbeef"}}}}) + "\n")
    code, output = export(str(script), str(AN53), "--games", str(ENVS), "--out", str(tmp_path / "ds"))
    assert code == 3, output
    raw = (tmp_path / "ds" / "README.md").read_bytes()
    assert b"\r" not in raw
    card = raw.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;" in card  # the table row names the file, inert
    assert not any(line.lstrip().startswith("## INJECTED") for line in card.splitlines())
    # the command line that made the card quotes the name in a code span, its CRs as escapes
    (made,) = [line for line in card.splitlines() if "<img" in line]
    assert "`arcstudy export-transitions " in made and "x\\x0d\\x0d## INJECTED\\x0d<img" in made


def test_a_file_given_again_under_another_name_is_exported_once(tmp_path):
    """Two copies of a recording exported every row twice (same play ids, same file id), exit 0; `score` reads
    such a file once and says so."""
    folder = tmp_path / "in"
    folder.mkdir()
    text = AN53.read_text()
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        (folder / name).write_text(text)
    code, output = export(str(folder), "--games", str(ENVS), "--out", str(tmp_path / "ds"))
    assert code == 3, output
    assert f"{folder / 'b.jsonl'}: same content as {folder / 'a.jsonl'} (given twice: read once)" in output
    assert f"{folder / 'c.jsonl'}: same content as {folder / 'a.jsonl'}" in output
    rows = rows_of(tmp_path / "ds")
    assert rows.height == len(file_lines(AN53)) and not rows.select("play_id", "step").is_duplicated().any()


def test_recovered_steps_are_made_a_slice_at_a_time_with_the_same_rows(tmp_path, monkeypatch):
    """With --recovered-actions a file's steps were made whole, each with its pixels (an export of 100,000
    recovered steps peaked at 0.8 GB, 5.9 KB a step); now a slice at a time from the parsed lines. Forced here
    (columns, pixels on disk, slices of 5 steps): the rows of the whole-list export."""
    import pipeline.datasets.transitions as transitions
    import pipeline.recordings.reader as reader

    lost, recovered, n_lines = lost_copy(tmp_path)

    def rows(out: str) -> pl.DataFrame:
        code, output = export(str(lost), "--games", str(ENVS), "--out", str(tmp_path / out), "--recovered-actions",
                              str(recovered))
        assert code == 0, output
        return rows_of(tmp_path / out)

    whole = rows("whole")
    made: list[int] = []
    steps = transitions.file_steps
    monkeypatch.setattr(transitions, "file_steps", lambda rec, a, b: made.append(b - a) or steps(rec, a, b))
    monkeypatch.setattr(transitions, "READ_SLICE_STEPS", 5)
    monkeypatch.setattr(reader, "COLUMNS_FROM_BYTES", 0)
    monkeypatch.setattr(reader, "HELD_FRAME_BYTES", 1)
    sliced = rows("sliced")
    assert whole.height == n_lines and whole["recovered"].all() and whole["verified"].all()
    assert sliced.equals(whole) and made and max(made) <= 1024


@pytest.mark.parametrize("verb", ["export-transitions", "score"])
def test_recovered_actions_for_no_file_given_are_said(tmp_path, verb):
    """A --recovered-actions key that names no file given (a recording renamed since its actions were recovered)
    was ignored without a word: the file's plays stayed uncounted or unexported, exit 0 for the rest."""
    sample = next((SAMPLES / "benchmarking").glob("*.recording.jsonl"))
    guid = json.loads(sample.read_text().splitlines()[1])["data"]["guid"]
    recovered = tmp_path / "recovered.json"
    recovered.write_text(json.dumps({guid: ["ACTION1"] * 3, "renamed.recording.jsonl": ["ACTION1"] * 3}))
    result = CliRunner().invoke(app, ["--plain", verb, str(sample), "--recovered-actions", str(recovered),
                                      "--out", str(tmp_path / "out"), *(["--no-figures"] if verb == "score" else [])])
    said = " ".join(result.output.split())
    assert result.exit_code == 3, result.output
    assert "--recovered-actions: 'renamed.recording.jsonl' names no file given" in said, said
    assert f"'{guid}'" not in said  # the key naming the file by its guid was used


def test_a_game_that_cannot_be_loaded_is_looked_for_once_however_many_files_name_it(tmp_path, monkeypatch):
    """Each file of a game not shipped walked the game folders again (100,000 one-play files: 74 s, 23 s since):
    the game is looked for once, and every file still says why its plays are left out."""
    from pipeline.datasets import transitions

    for i in range(3):  # three frameless files of one game that no folder holds
        guid = f"00000000-0000-0000-0000-00000000000{i}"
        steps = [{"timestamp": f"2026-11-22T03:00:0{k}+00:00", "data": {
            "game_id": "zz99-00000000", "state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 3, "guid": guid,
            "action_input": {"id": action, "data": {}}, "full_reset": k == 0, "available_actions": [1, 2]}}
            for k, action in enumerate(("RESET", "ACTION1", "ACTION2"))]
        (tmp_path / f"gone-{i}.jsonl").write_text("".join(json.dumps(step) + "\n" for step in steps))
    looked: list[str] = []
    real = transitions.resolve_game

    def counted(game_id, dirs):
        looked.append(game_id)
        return real(game_id, dirs)

    monkeypatch.setattr(transitions, "resolve_game", counted)
    transitions._game_or_why.cache_clear()
    code, output = export(str(tmp_path), "--out", str(tmp_path / "out"))
    transitions._game_or_why.cache_clear()
    assert code == 3
    assert looked == ["zz99-00000000"], output
    listed = json.loads((tmp_path / "out" / "manifest.json").read_text())["notes"]["transitions"]
    assert len(listed["plays_not_exported"]) == 3
    assert all("game not loadable" in p["detail"] for p in listed["plays_not_exported"])
