"""A file saved as UTF-16 (Notepad's and Excel's "Unicode") or UTF-32 is named as such, with the advice to re-save it
as UTF-8, by every reader that refuses it: it was "not UTF-8 text (invalid start byte at byte 0)", or a recording
"format not recognised (starts with '\\x00{\\x00...')". The wording lives in one place
(pipeline.core.textfiles.not_utf8_reason)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.core.config import ConfigError, load_config
from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths
from pipeline.ingest.baseline_counts import CountsFileError, read_counts
from pipeline.recordings.reader import RecordingRejected, read_recording_file
from pipeline.scoring.plays import read_recording_files

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "arc-agi-3"
RECORDING = SAMPLES / "fixtures" / "an53_scripted-lose.noframes.jsonl"
ENCODINGS = {  # as an editor writes them: the byte-order mark, then the text
    "utf-16-le": (b"\xff\xfe", "utf-16-le", "UTF-16", "FF FE"),
    "utf-16-be": (b"\xfe\xff", "utf-16-be", "UTF-16", "FE FF"),
    "utf-32-le": (b"\xff\xfe\x00\x00", "utf-32-le", "UTF-32", "FF FE 00 00"),
}


def _save(path: Path, text: str, encoding: str) -> Path:
    mark, codec, _, _ = ENCODINGS[encoding]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(mark + text.encode(codec))
    return path


def _says(encoding: str) -> str:
    _, _, name, mark = ENCODINGS[encoding]
    return f"{name} text, not UTF-8 (it starts with the {name} byte-order mark {mark}); re-save the file as UTF-8"


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_ingest_names_a_utf16_recording_and_metadata(tmp_path: Path, encoding: str):
    rec = _save(tmp_path / "an53.jsonl", RECORDING.read_text(encoding="utf-8"), encoding)
    meta = _save(tmp_path / "an53" / "6f5f2264" / "metadata.json",
                 json.dumps({"game_id": "an53-6f5f2264", "baseline_actions": [2, 19, 7, 6]}), encoding)
    with Workspace(tmp_path / "db.duckdb") as ws:
        ingest_paths(ws, [rec, meta], run_id="t", workers=1)
        q = {Path(p).name: (c, r) for p, c, r in ws.read("SELECT file_path, check_name, reason FROM quarantine").rows()}
    assert q["metadata.json"] == ("not_utf8", _says(encoding)), q
    assert q["an53.jsonl"][0] == "unknown_format" and _says(encoding) in q["an53.jsonl"][1], q


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_the_other_readers_name_it_too(tmp_path: Path, encoding: str):
    rec = _save(tmp_path / "an53.jsonl", RECORDING.read_text(encoding="utf-8"), encoding)
    with pytest.raises(RecordingRejected) as err:  # the one recording reader: refused whole, not 38 bad lines
        read_recording_file(rec)
    assert (err.value.check, err.value.reason) == ("not_utf8", _says(encoding))
    problems = read_recording_files([rec])[3]  # score FILE
    assert [(p, why) for p, why in problems] == [(rec, f"not an ARC-AGI-3 recording ({_says(encoding)})")]
    counts = _save(tmp_path / "counts.csv", "game_id,level_index,player_id,actions,completed\ng1,1,a,4,true\n",
                   encoding)
    with pytest.raises(CountsFileError) as err:
        read_counts(counts)
    assert str(err.value) == f"{counts}:1: {_says(encoding)}"
    config = _save(tmp_path / "arcstudy.toml", "[scoring]\n", encoding)
    with pytest.raises(ConfigError) as err:
        load_config(config)
    assert str(err.value) == f"{config} is {_says(encoding)}"


def test_other_bytes_that_are_not_utf8_keep_the_decoders_reason():
    from pipeline.core.textfiles import not_utf8_reason

    err = UnicodeDecodeError("utf-8", b"ab\xe9", 2, 3, "invalid continuation byte")
    assert not_utf8_reason(err) == "not UTF-8 text (invalid continuation byte at byte 2); re-save the file as UTF-8"
    assert not_utf8_reason(err, subject="line").startswith("line is not UTF-8 text (")
    # a mark is looked for at the start only: a line that fails later is not called UTF-16
    later = UnicodeDecodeError("utf-8", b"\xff\xfe", 1, 2, "invalid start byte")
    assert not_utf8_reason(later).startswith("not UTF-8 text (invalid start byte at byte 1)")
