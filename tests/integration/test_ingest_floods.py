"""Memory bounded by the chunk (issue 29, finding 3): floods of bad lines, checked by behaviour on small floods.

The full-size floods (a million `{}` lines, H-ARC short rows, 2 million steps, a 400 MB task collection, `view`
of 2 million bad lines) are measured by benchmarks/flood_memory.py; here the same shapes, small, show that
quarantine rows are made and written a bounded batch at a time (the rest waiting on disk in a `Spool`), that
the raw text kept per rejected line is capped with its full length and sha256 beside it, and that `view`
names a bounded number of bad lines.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core import spool as spool_mod
from pipeline.core.spool import Spool
from pipeline.core.textfiles import DENSE_JSON_FROM_BYTES
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.ingest import prepared as prepared_mod
from pipeline.ingest.base import MAX_RAW_TEXT, Reject
from pipeline.recordings.playback import read_playback_file
from pipeline.report.viewer import data as viewer_data

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "integrity"
FIRST_LINE = (FIXTURES / "lone_surrogate.recording.jsonl").read_bytes().splitlines(keepends=True)[0]


def _braces(path: Path, n: int, extra: bytes = b"") -> Path:
    path.write_bytes(FIRST_LINE + b"{}\n" * n + extra)
    return path


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of 50: a flood of a few hundred lines goes through every path a million-line flood takes."""
    monkeypatch.setattr(spool_mod, "SPOOL_LIMIT", 50)
    monkeypatch.setattr(Spool.__init__, "__defaults__", ((), 50))
    monkeypatch.setattr(prepared_mod, "QUARANTINE_BATCH", 50)


@pytest.mark.parametrize("chunk_bytes", [None, 256], ids=["whole", "streamed"])
def test_a_flood_of_bad_lines_is_quarantined_line_by_line_in_batches(tmp_path, db_path, small_batches,
                                                                     chunk_bytes):
    n = 432
    path = _braces(tmp_path / "flood.recording.jsonl", n)
    with Workspace(db_path) as ws:
        report = ingest_paths(ws, [path], run_id="r", workers=1, chunk_bytes=chunk_bytes)
        assert report.files[0].status == "loaded" and report.files[0].n_quarantined == n
        q = ws.read("SELECT source_location, check_name, n_raw_bytes, raw_sha256 FROM quarantine")
        assert q.height == n == q["source_location"].n_unique()
        assert set(q["source_location"]) == {f"line {i}" for i in range(2, n + 2)}
        assert set(q["n_raw_bytes"]) == {2} and set(q["raw_sha256"]) == {hashlib.sha256(b"{}").hexdigest()}
        assert ws.read("SELECT n_records_quarantined FROM raw_ingest__files").item() == n


def test_a_long_bad_line_keeps_4_kib_of_text_with_its_full_length_and_hash(tmp_path, db_path):
    long = b'{"x": "' + b"a" * 100_000 + b'"}'
    path = _braces(tmp_path / "long.recording.jsonl", 1, long + b"\n")
    with Workspace(db_path) as ws:
        ingest_paths(ws, [path], run_id="r", workers=1)
        row = ws.read("SELECT raw_text, n_raw_bytes, raw_sha256 FROM quarantine WHERE source_location = 'line 3'")
    text, n_bytes, digest = row.row(0)
    assert n_bytes == len(long) and digest == hashlib.sha256(long).hexdigest()
    assert len(text) < MAX_RAW_TEXT + 100 and text.startswith(long[:1000].decode())


def test_a_reject_caps_its_text_when_made():
    text = "é" * (MAX_RAW_TEXT * 2)
    r = Reject("row 1", "c", "why", text)
    assert r.n_raw_bytes == len(text.encode()) and r.raw_sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert len(r.raw_text) < MAX_RAW_TEXT + 100


def test_a_spool_holds_a_bounded_batch_and_gives_back_everything_in_order(tmp_path):
    spool = Spool(limit=10)
    spool.extend(range(95))
    spool += range(95, 100)
    spool.append(100)
    assert list.__len__(spool) < 10 and len(spool) == 101  # the rest is on disk
    assert list(spool) == list(range(101)) and spool[37] == 37 and spool[-1] == 100
    assert all(len(b) <= 10 for b in spool.batches())
    copy = pickle.loads(pickle.dumps(spool))  # to and from a worker process
    assert list(copy) == list(range(101))



def test_a_spool_of_frozen_dataclasses_comes_back_equal_from_disk(tmp_path):
    """Rejects (a frozen dataclass) go to disk as their field dicts and come back equal, their fields as
    `__post_init__` left them; a batch of mixed items is pickled as it is."""
    long = "x" * (MAX_RAW_TEXT * 2)
    items = [Reject(f"line {i}", "c", "why", long if i == 3 else "{}") for i in range(25)]
    spool = Spool(limit=10)
    spool.extend(items)
    assert spool._path is not None and list(spool) == items
    back = list(spool)[3]
    assert back.raw_text == items[3].raw_text and back.n_raw_bytes == len(long) and len(back.raw_text) < len(long)
    with pytest.raises(Exception, match="cannot assign"):
        back.check = "other"  # still frozen
    mixed = Spool([1, "a", None, items[0]] * 5, limit=10)
    assert list(mixed) == [1, "a", None, items[0]] * 5


def test_a_spool_extended_from_another_reads_it_without_a_copy(tmp_path):
    """`extend_mapped`: another spool's items, converted as they are read, follow this spool's own; this spool
    writes nothing of them to disk, and what it gets afterwards follows them in order."""
    source = Spool(range(35), limit=10)
    joined = Spool(limit=10)
    joined.extend_mapped(source, lambda i: i * 2)
    joined.extend_mapped(Spool([100, 101], limit=10))
    joined.append(-1)
    assert joined._path is None and len(joined) == 38 and bool(joined)
    assert list(joined) == [i * 2 for i in range(35)] + [100, 101, -1]
    assert joined[34] == 68 and joined[-1] == -1 and joined[:3] == [0, 2, 4]
    assert all(len(b) <= 10 for b in joined.batches())
    assert list(pickle.loads(pickle.dumps(joined))) == list(joined)  # to another process: its own copy
    assert list.__len__(source) == 0  # a part holds nothing in memory: its items went to its file
    owned = Spool(range(-12, 0), limit=10)  # items of its own already: they stay first
    owned.extend_mapped(source, str)
    owned.extend_mapped([8, 9])  # not a spool: copied
    assert list(owned) == [*range(-12, 0), *map(str, range(35)), 8, 9] and len(owned) == 49
    assert owned._path is None and len(owned._parts) == 2

def test_repeated_rejects_across_batches_are_kept_once(tmp_path, db_path, small_batches):
    """The same reject word for word (one location, check and reason) in two batches: one quarantine row."""
    from pipeline.ingest.base import FileContext
    from pipeline.ingest.commit import _insert_quarantine

    with Workspace(db_path) as ws:
        ctx = FileContext(tmp_path / "f", "a" * 64, "r", __import__("datetime").datetime.now())
        rejects = [Reject(f"row {i % 60}", "c", "why", "x") for i in range(120)]
        with ws.transaction() as con:
            n = _insert_quarantine(ws, con, ctx, "fmt", rejects)
        assert n == 60 == ws.row_count("quarantine")


def test_view_of_a_flood_names_a_bounded_number_of_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(viewer_data, "MAX_NOTES", 20)
    path = _braces(tmp_path / "flood.recording.jsonl", 300)
    page = tmp_path / "v.html"
    result = CliRunner().invoke(app, ["--plain", "view", str(path), "--out", str(page)])
    assert result.exit_code == 3, result.output
    text = page.read_text()
    assert "line 21:" in text and "line 22:" not in text  # lines 2..21: the first 20 bad lines
    assert "and 280 more lines left out" in text


def test_an_h_arc_file_of_short_rows_is_read_in_pieces_by_its_rows(tmp_path, db_path, monkeypatch,
                                                                   small_batches):
    """784 KB of two-byte rows once took 2.6 GB, read as one piece: pieces are now bounded by rows too."""
    from pipeline.ingest import harc
    from pipeline.ingest.runner import prepare_file

    monkeypatch.setattr(harc, "MAX_BATCH_ROWS", 2_000)
    path = tmp_path / "harc" / "data.csv"
    path.parent.mkdir()
    n = 40_000
    path.write_bytes((",".join(harc.DATA_CURRENT) + "\n").encode() + b"1\n" * n)
    assert prepare_file(path, run_id="p").output.pieces is not None  # 80 KB, yet more than one piece
    with Workspace(db_path) as ws:
        report = ingest_paths(ws, [path], run_id="r", workers=1)
        assert report.files[0].n_quarantined == n
        q = ws.read("SELECT count(*) AS n, count(DISTINCT source_location) AS rows, min(n_raw_bytes) AS b "
                    "FROM quarantine").row(0, named=True)
    assert q["n"] == q["rows"] == n and q["b"] > 0


def _collection(path: Path, n: int, bad: dict | None = None) -> Path:
    grid = [[1, 2, 3], [4, 5, 6]]
    tasks = {f"{i:08x}": {"train": [{"input": grid, "output": [[i % 10]]}], "test": [{"input": grid, "output": grid}]}
             for i in range(n)}
    path.write_text(json.dumps({**tasks, **(bad or {})}, indent=1))
    return path


def _task_rows(db: Path) -> dict:
    with Workspace(db, read_only=True) as ws:
        return {"tasks": ws.read("SELECT * EXCLUDE (file_id) FROM core_arc__tasks ORDER BY task_id").rows(),
                "pairs": ws.read("SELECT * EXCLUDE (file_id) FROM core_arc__task_pairs ORDER BY ALL").rows(),
                "quarantine": ws.read("SELECT source_location, check_name FROM quarantine ORDER BY ALL").rows()}


def test_a_big_task_collection_is_read_a_task_at_a_time_with_the_same_rows(tmp_path, monkeypatch):
    from pipeline.ingest import harc_arc

    bad = {"zz000001": {"train": "not a list", "test": []}, "zz000002": {"train": [], "test": [], "note": "\udfff"}}
    path = _collection(tmp_path / "tasks.json", 300, bad)
    whole = tmp_path / "whole.duckdb"
    with Workspace(whole) as ws:
        ingest_paths(ws, [path], run_id="w", workers=1)
    monkeypatch.setattr(harc_arc, "STREAM_TASKS_BYTES", 1)
    monkeypatch.setattr(harc_arc, "TASKS_PER_PIECE", 40)
    monkeypatch.setattr(harc_arc._TaskCollection, "WINDOW", 512)  # values run past the window
    from pipeline.ingest.runner import prepare_file
    assert prepare_file(path, run_id="p").output.pieces is not None
    streamed = tmp_path / "streamed.duckdb"
    with Workspace(streamed) as ws:
        report = ingest_paths(ws, [path], run_id="s", workers=1)
    assert report.files[0].status == "loaded"
    a, b = _task_rows(whole), _task_rows(streamed)
    assert len(a["tasks"]) == 300 and a["tasks"] == b["tasks"] and a["pairs"] == b["pairs"]
    assert [c for _, c in b["quarantine"]] == [c for _, c in a["quarantine"]] and len(b["quarantine"]) == 2


def _task_json(pairs: int) -> str:
    pair = {"input": [[1, 2], [3, 4]], "output": [[4, 3], [2, 1]]}
    return json.dumps({"train": [pair] * pairs, "test": [pair]})


def test_a_task_too_big_for_any_arc_task_is_refused_unparsed(tmp_path, monkeypatch):
    """One task of megabytes (parsed, JSON of small grids took 50 times its size: 17.5 GB for 321 MB) is refused
    as `task_too_large` without being parsed; a task under the limit still loads."""
    from pipeline.ingest import harc_arc

    monkeypatch.setattr(harc_arc, "MAX_TASK_BYTES", 4000)
    monkeypatch.setattr(harc_arc, "STREAM_TASKS_BYTES", 4000)
    parsed, parse = [], harc_arc.json_document
    monkeypatch.setattr(harc_arc, "json_document", lambda text: parsed.append(len(text)) or parse(text))
    (tmp_path / "in").mkdir()
    giant, small = tmp_path / "in" / "0a1b2c3d.json", tmp_path / "in" / "4e5f6a7b.json"
    giant.write_text(_task_json(200))
    small.write_text(_task_json(2))
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [giant, small], run_id="r", workers=1)
        status = {Path(f.path).name: (f.status, f.message) for f in report.files}
        assert ws.read("SELECT task_id FROM core_arc__tasks").rows() == [("4e5f6a7b",)]
        rejected = ws.read("SELECT check_name, reason FROM quarantine").rows()
    assert status["0a1b2c3d.json"][0] == "rejected" and status["4e5f6a7b.json"][0] == "loaded"
    assert [c for c, _ in rejected] == ["task_too_large"] and "not parsed" in rejected[0][1]
    assert parsed == [len(small.read_text())]  # the giant file's text was never parsed


@pytest.mark.parametrize("piece_chars", [1 << 30, 3000])
def test_a_collection_entry_too_big_for_any_task_stops_the_collection_there(tmp_path, monkeypatch, piece_chars):
    """A streamed collection whose entry runs past MAX_TASK_BYTES: the tasks before it load (in pieces of a bounded
    number of characters), the entry is not parsed and the file's reject says the rest was not read."""
    from pipeline.ingest import harc_arc

    monkeypatch.setattr(harc_arc, "MAX_TASK_BYTES", 4000)
    monkeypatch.setattr(harc_arc, "STREAM_TASKS_BYTES", 4000)
    monkeypatch.setattr(harc_arc, "PIECE_TASK_CHARS", piece_chars)
    monkeypatch.setattr(harc_arc._TaskCollection, "WINDOW", 512)
    small = _task_json(1)
    path = tmp_path / "tasks.json"
    path.write_text("{" + ", ".join(f'"t{i:03d}": {small}' for i in range(60)) + f', "giant": {_task_json(200)}, '
                    f'"after": {small}}}')
    from pipeline.ingest.runner import prepare_file
    pieces = list(prepare_file(path, run_id="p").output.pieces())
    assert len(pieces) == 1 if piece_chars == 1 << 30 else len(pieces) >= 3
    with Workspace(tmp_path / "db.duckdb") as ws:
        report = ingest_paths(ws, [path], run_id="r", workers=1)
        tasks = [r[0] for r in ws.read("SELECT task_id FROM core_arc__tasks ORDER BY task_id").rows()]
        rejected = ws.read("SELECT source_location, check_name, reason FROM quarantine").rows()
    assert report.files[0].status == "loaded" and tasks == [f"t{i:03d}" for i in range(60)]
    assert [(loc, check) for loc, check, _ in rejected] == [("file", "task_too_large")]
    assert '"t059"' in rejected[0][2] and "rest of the collection is not read" in rejected[0][2]


@pytest.mark.parametrize("bom_crlf", [False, True])
def test_a_task_collection_read_a_task_at_a_time_keeps_the_files_flags(tmp_path, monkeypatch, bom_crlf):
    """A byte-order mark and CRLF line ends are flagged on a collection read a task at a time (from 4 MiB on: an
    ARC-AGI-2 challenges file is one) as on one read whole, CRLF split across two windows included."""
    from pipeline.ingest import harc_arc

    path = _collection(tmp_path / "tasks.json", 60)
    if bom_crlf:
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    dbs = {}
    for name, threshold in (("whole", 1 << 40), ("streamed", 1)):
        monkeypatch.setattr(harc_arc, "STREAM_TASKS_BYTES", threshold)
        monkeypatch.setattr(harc_arc._TaskCollection, "WINDOW", 511)  # odd: some CR and LF fall in two windows
        db = tmp_path / f"{name}.duckdb"
        with Workspace(db) as ws:
            report = ingest_paths(ws, [path], run_id=name, workers=1)
            assert report.files[0].status == "loaded"
            flags = ws.read("SELECT flags FROM raw_ingest__files").item().to_list()
        dbs[name] = (flags, _task_rows(db))
    (whole_flags, whole), (streamed_flags, streamed) = dbs["whole"], dbs["streamed"]
    assert sorted(streamed_flags) == sorted(whole_flags) == (["crlf_line_endings", "utf8_bom"] if bom_crlf else [])
    assert streamed == whole


def _frame_line(frame_text: bytes, action: str) -> bytes:
    """FIRST_LINE as a step of `action` whose `frame` is ``frame_text`` (raw JSON text)."""
    obj = json.loads(FIRST_LINE)
    obj["data"]["action_input"]["id"] = action
    obj["data"]["full_reset"] = action == "RESET"
    obj["data"]["frame"] = "FRAME_TEXT"
    return json.dumps(obj).encode().replace(b'"FRAME_TEXT"', frame_text) + b"\n"


def _frames_text(n: int) -> bytes:
    return json.dumps([[[0] * 64] * 64] * n).encode()


def test_a_line_far_denser_in_arrays_than_any_record_is_quarantined_unparsed(tmp_path, db_path):
    """A 57 MB line of `[[0]],` repeated took 2.4 GB to parse before any rule saw it; such a line is refused from its
    bracket count. A frame line longer still, with real 64x64 frames (one array per 126 bytes or more), loads."""
    dense = b"[" + b"[[0]]," * 200_000 + b"[[0]]]"  # 1.2 MB, an array per 3 bytes
    many_frames = _frames_text(130)  # 1.6 MB
    assert len(dense) >= DENSE_JSON_FROM_BYTES and len(many_frames) >= DENSE_JSON_FROM_BYTES
    path = tmp_path / "dense.recording.jsonl"
    path.write_bytes(_frame_line(_frames_text(1), "RESET") + _frame_line(dense, "ACTION3")
                     + _frame_line(many_frames, "ACTION3"))
    with Workspace(db_path) as ws:
        report = ingest_paths(ws, [path], run_id="r", workers=1)
        assert report.files[0].status == "loaded" and report.files[0].n_quarantined == 1
        q = ws.read("SELECT source_location, check_name, reason FROM quarantine")
        assert q.rows()[0][:2] == ("line 2", "json_too_dense") and "arrays and objects" in q["reason"][0]
        steps = ws.read("SELECT line_number, n_frames FROM core_arc3__steps ORDER BY line_number").rows()
        assert steps == [(1, 1), (3, 130)]


def test_a_playback_line_far_denser_than_any_action_is_quarantined_unparsed(tmp_path):
    action = b'{"data": {"action_input": {"id": 3, "data": {"game_id": "bt11-fd9df0622a1a"}}}}\n'
    dense = b'{"data": {"action_input": {"id": 3, "data": {}, "reasoning": [' + b"[[0]]," * 200_000 + b"0]}}}\n"
    path = tmp_path / "bt11_dense.playback.jsonl"
    path.write_bytes(action + dense + action)
    script = read_playback_file(path)
    assert [a.line_number for a in script.actions] == [1, 3]
    assert [(i.location, i.check) for i in script.issues] == [("line 2", "json_too_dense")]
