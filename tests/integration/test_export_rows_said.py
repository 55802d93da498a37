"""What a transitions dataset says of its rows.

A 2025 preview recording (formats.md A.4: `score` and `win_score` instead of `levels_completed` and `win_levels`;
"map ... `win_score`->`win_levels` (null when absent, never 0)") keeps its `win_levels`: the rows took
`levels_completed` from the line's `score` but left `win_levels` null. Rows the replay did not confirm are counted
and listed."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pipeline.cli import app

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SAMPLE = SHARED / "samples" / "arc-agi-3" / "fixtures" / "an53_scripted-win.frames.jsonl"
GAMES = SHARED / "conformance" / "environment_files"
NAMES = ["RESET"] + [f"ACTION{i}" for i in range(1, 8)]


def test_a_preview_recordings_win_score_is_its_rows_win_levels(tmp_path: Path):
    lines = []
    for raw in SAMPLE.read_text().splitlines():
        obj = json.loads(raw)
        data = obj["data"]
        data["score"], data["win_score"] = data.pop("levels_completed"), data.pop("win_levels")
        data["action_input"]["id"] = NAMES.index(data["action_input"]["id"])
        lines.append(obj)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "an53-preview.jsonl").write_text("".join(json.dumps(o) + "\n" for o in lines))
    result = CliRunner().invoke(app, ["--plain", "export-transitions", str(tmp_path / "in"), "--games", str(GAMES),
                                      "--out", str(tmp_path / "t")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = pl.read_parquet(tmp_path / "t" / "data" / "*.parquet").sort("play_id", "step")
    said = [o["data"]["win_score"] for o in lines]
    assert rows.height == len(lines) and rows["verified"].all()
    assert rows["win_levels"].to_list() == said and None not in said


def test_rows_the_replay_did_not_confirm_are_counted_and_listed_in_the_card(tmp_path: Path):
    """One pixel of one line changed, the replay matching again at the next step: the row keeps the file's frame
    with `verified` false, while the card said the engine confirmed every row ("all of them"), the plays not
    verified "None" and the command "0 unverified"."""
    lines = SAMPLE.read_text().splitlines()
    obj = json.loads(lines[9])
    obj["data"]["frame"][-1][5][5] = (obj["data"]["frame"][-1][5][5] + 1) % 16
    lines[9] = json.dumps(obj)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "an53-one-pixel.jsonl").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["--plain", "export-transitions", str(tmp_path / "in"), "--games", str(GAMES),
                                      "--out", str(tmp_path / "t")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = pl.read_parquet(tmp_path / "t" / "data" / "*.parquet")
    assert rows.height == len(lines) and (~rows["verified"]).sum() == 1
    assert "1 row(s) not confirmed by the replay" in result.output
    card = (tmp_path / "t" / "README.md").read_text()
    assert "(all of them)" not in card and "(not 1 row(s):" in card
    listed = card.split("## Rows whose frames the replay did not confirm")[1].split("## Left out")[0]
    [play_id] = rows.filter(~pl.col("verified"))["play_id"].to_list()
    assert f"| {play_id} |" in listed and "| 1 |" in listed


def test_a_play_given_twice_is_one_set_of_rows(tmp_path: Path):
    """A copy of a recording (the same guid and steps, one timestamp apart): `score` leaves the second file out
    (duplicate_play), and the export wrote both, every (play_id, step) twice and the card's counts doubled."""
    (tmp_path / "in").mkdir()
    text = SAMPLE.read_text()
    first = json.loads(text.splitlines()[0])["timestamp"]
    (tmp_path / "in" / "a.jsonl").write_text(text)
    (tmp_path / "in" / "b.jsonl").write_text(text.replace(first, first[:-7] + "999999" + first[-6:], 1))
    result = CliRunner().invoke(app, ["--plain", "export-transitions", str(tmp_path / "in"), "--games", str(GAMES),
                                      "--out", str(tmp_path / "t")], catch_exceptions=False)
    assert result.exit_code == 3, result.output  # rejected input, as score says of it
    rows = pl.read_parquet(tmp_path / "t" / "data" / "*.parquet")
    assert rows.height == rows.select("play_id", "step").n_unique() == len(text.splitlines())
    assert rows["file_id"].n_unique() == 1
    assert "rejected: " in result.output and "b.jsonl: duplicate_play" in result.output
    card = (tmp_path / "t" / "README.md").read_text()
    assert card.count("duplicate_play: the same play (guid) as in") == rows["play_id"].n_unique()


def test_repeated_rows_are_left_out_of_arrow_batches_too():
    """Rows exported by workers travel as Arrow batches, several files' rows in one (export_group)."""
    from pipeline.datasets.transitions import unrepeated_rows
    from schemas.transitions import ARROW_SCHEMA

    def batch(file_id: str, plays: list[str]) -> pa.RecordBatch:
        columns = {f.name: pa.nulls(len(plays), f.type) for f in ARROW_SCHEMA}
        columns["file_id"] = pa.array([file_id] * len(plays), pa.string())
        columns["play_id"] = pa.array(plays, pa.string())
        columns["step"] = pa.array(list(range(len(plays))), ARROW_SCHEMA.field("step").type)
        return pa.RecordBatch.from_arrays([columns[f.name] for f in ARROW_SCHEMA], schema=ARROW_SCHEMA)

    first_file: dict = {}
    one = list(unrepeated_rows([batch("A", ["g/0", "g/0", "h/0"])], first_file))
    two = list(unrepeated_rows([pa.concat_batches([batch("B", ["g/0", "k/0"]), batch("A", ["h/0"])])],
                               first_file))
    assert sum(b.num_rows for b in one) == 3
    [kept] = two
    assert kept.column("play_id").to_pylist() == ["k/0", "h/0"] and kept.column("file_id").to_pylist() == ["B", "A"]
    assert first_file == {"g/0": "A", "h/0": "A", "k/0": "B"}


def _export(*args: str) -> str:
    result = CliRunner().invoke(app, ["--plain", "export-transitions", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("frame_batch", [None, 3])
def test_the_database_with_kept_frames_exports_what_the_files_export(tmp_path: Path, monkeypatch, frame_batch):
    """`ingest --keep-frames` stores the recordings' frames beside the database. The database export used only
    their hashes: a play whose game cannot be loaded was left out ("the file has no frames"), and one whose frames
    differ where the replay reconverges later was cut there, where the file's export keeps both.
    The kept frames are read a row group at a time as the steps are (`frame_batch`: row groups of 3 frames, slices
    of 5 steps): read whole, a 300,000-step recording's took the export to 3.8 GB."""
    import pyarrow.parquet as pq

    import pipeline.datasets.transitions as transitions
    import pipeline.ingest.arc3_recordings as arc3_recordings
    from pipeline.core.workspace import Workspace
    from pipeline.ingest import ingest_paths

    reads: list[int] = []
    if frame_batch is not None:
        monkeypatch.setattr(arc3_recordings, "FRAME_BATCH", frame_batch)
        monkeypatch.setattr(transitions, "READ_SLICE_STEPS", 5)
        read_group = pq.ParquetFile.read_row_group

        def counted(self, i, *args, **kwargs):
            reads.append(i)
            return read_group(self, i, *args, **kwargs)

        monkeypatch.setattr(pq.ParquetFile, "read_row_group", counted)

    (tmp_path / "in").mkdir()
    lines = SAMPLE.read_text().splitlines()
    obj = json.loads(lines[9])
    obj["data"]["frame"][-1][5][5] = (obj["data"]["frame"][-1][5][5] + 1) % 16  # the replay reconverges after
    lines[9] = json.dumps(obj)
    (tmp_path / "in" / "an53-one-pixel.jsonl").write_text("\n".join(lines) + "\n")
    db = tmp_path / "s.duckdb"
    with Workspace(db) as ws:
        ingest_paths(ws, [tmp_path / "in"], run_id="kept", workers=1, keep_frames=True)
    (tmp_path / "no-games").mkdir()
    for games, label in ((GAMES, "loadable"), (tmp_path / "no-games", "unloadable")):
        _export(str(tmp_path / "in"), "--games", str(games), "--out", str(tmp_path / f"file-{label}"))
        _export("--db", str(db), "--games", str(games), "--out", str(tmp_path / f"db-{label}"))
        from_file = pl.read_parquet(tmp_path / f"file-{label}" / "data" / "*.parquet").sort("play_id", "step")
        from_db = pl.read_parquet(tmp_path / f"db-{label}" / "data" / "*.parquet").sort("play_id", "step")
        assert from_db.height == from_file.height == len(lines), label
        for column in ("play_id", "step", "frame_sha256s", "frames", "verified"):
            assert from_db[column].to_list() == from_file[column].to_list(), (label, column)
    if frame_batch is not None:  # each of the file's groups read about once for each of the two exports
        [kept] = [f for f in map(pq.ParquetFile, tmp_path.rglob("*.parquet")) if "pixels" in f.schema_arrow.names]
        groups = kept.num_row_groups
        assert groups >= len(lines) // 3 and len(set(reads)) == groups and len(reads) <= 2 * 2 * groups, reads


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["g", "h", "g/x", ""]),
                          st.one_of(st.integers(0, 40).map(str), st.sampled_from(["007", "00", "-1", "", "٣", "a"])),
                          st.sampled_from(["A", "B", "C", None])), max_size=80))
def test_play_owners_answer_as_a_dict_of_every_play_id(claims):
    """`PlayOwners` holds a guid's plays as runs of indices that one file gave: it answers `setdefault` and `get`
    as a dict of every play id does, whatever the order, the gaps, the files and the ids that are not
    `guid/index` (a leading zero, a sign, a non-ASCII digit, no index)."""
    from pipeline.datasets.transitions import PlayOwners

    owners, plain = PlayOwners(), {}
    for guid, index, file_id in claims:
        play_id = f"{guid}/{index}" if guid else index
        assert owners.setdefault(play_id, file_id) == plain.setdefault(play_id, file_id), play_id
    for guid in ("g", "h", "g/x", ""):
        for index in [*map(str, range(42)), "007", "00", "-1", "", "٣", "a"]:
            play_id = f"{guid}/{index}" if guid else index
            assert owners.get(play_id) == plain.get(play_id), play_id


def test_a_files_consecutive_plays_are_one_run():
    """A recording of many plays is one run of indices, however many plays it has: one tuple, until another run
    of the guid comes (a flood of one-play files, each its own guid, took about 450 bytes a guid as arrays)."""
    from pipeline.datasets.transitions import PlayOwners

    owners = PlayOwners()
    for i in range(10_000):
        assert owners.setdefault(f"g/{i}", "A") == "A"
    assert owners.setdefault("g/5", "B") == "A" and owners.get("g/10000") is None
    assert owners._run["g"] == (0, 10_000, "A") and "g" not in owners._runs
    assert owners.setdefault("g/20000", "B") == "B" and owners.setdefault("g/20001", "B") == "B"
    starts, stops, files = owners._runs["g"]
    assert (list(starts), list(stops), files) == ([0, 20_000], [10_000, 20_002], ["A", "B"]) and "g" not in owners._run
    assert owners.get("g/9999") == "A" and owners.get("g/20001") == "B" and owners.get("g/10000") is None
