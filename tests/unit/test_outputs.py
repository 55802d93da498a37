"""pipeline.core.outputs: files and folders written whole, symlinks replaced, CSV cells a spreadsheet would run
neutralised (OWASP's rule), output-side OSErrors as one OutputError."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from pipeline.core import outputs
from pipeline.core.manifest import RunManifest
from pipeline.core.outputs import (
    OutputError,
    csv_text,
    output_folder,
    raw_csv,
    write_csv,
    write_text,
)


def leftovers(root: Path) -> list[str]:
    """Temporary files or stage folders anywhere under `root`."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.name.endswith(".tmp") or outputs.STAGE_MARK in p.name)


def test_a_symlink_at_a_file_output_is_replaced_not_written_through(tmp_path):
    sentinel = tmp_path / "outside" / "sentinel.txt"
    sentinel.parent.mkdir()
    sentinel.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.csv").symlink_to(sentinel)
    (out / "a.csv.tmp").symlink_to(sentinel)  # where an older arcstudy put its temporary file
    write_text(out / "a.csv", "new\n")
    assert sentinel.read_text() == "precious\n"
    assert not (out / "a.csv").is_symlink() and (out / "a.csv").read_text() == "new\n"


def test_the_null_device_is_written_as_itself_never_replaced(tmp_path, monkeypatch):
    """`--out /dev/null` (which the commands let through, to discard an output) was written as any file: a
    temporary file in /dev renamed over it, which run as root made /dev/null a regular file holding the output.
    Checked on a stand-in (renaming over the real device is what must never happen, here least of all)."""
    link = tmp_path / "null-link"
    link.symlink_to(os.devnull)
    assert outputs.is_null_device(os.devnull) and outputs.is_null_device(link)
    assert not outputs.is_null_device(tmp_path) and not outputs.is_null_device(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    assert not outputs.is_null_device(tmp_path / "file")
    stand_in = tmp_path / "dev" / "null"
    stand_in.parent.mkdir()
    stand_in.write_text("the device\n")
    monkeypatch.setattr(outputs, "is_null_device", lambda path: Path(path) == stand_in)
    write_text(stand_in, "an output\n")
    write_csv(pl.DataFrame({"a": [1]}), stand_in)
    with outputs.open_output(stand_in) as fh:
        fh.write("streamed\n")
    assert stand_in.read_text() == "the device\n" and sorted(os.listdir(stand_in.parent)) == ["null"]


@pytest.mark.parametrize("how", ["bytes", "text"])
def test_a_failed_file_write_keeps_the_old_file_and_leaves_no_tmp(tmp_path, monkeypatch, how):
    target = tmp_path / "x.json"
    target.write_text("old\n")

    def half_then_full(tmp: Path, data: bytes) -> None:
        tmp.write_bytes(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def part_then_full(fh, text: str) -> int:  # (a text is written a slice at a time, as a stream is)
        fh.write(text[: len(text) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(outputs, "_fill", half_then_full)
    monkeypatch.setattr(outputs, "_write_part", part_then_full)
    with pytest.raises(OutputError) as info:
        if how == "bytes":
            outputs.write_bytes(target, b"a new and longer content\n")
        else:
            write_text(target, "a new and longer content\n")
    assert info.value.errno == errno.ENOSPC and info.value.path == str(target)
    assert str(info.value) == f"cannot write {target}: No space left on device"
    assert target.read_text() == "old\n" and leftovers(tmp_path) == []


def test_a_long_text_is_written_a_slice_at_a_time_and_whole(tmp_path, monkeypatch):
    """`write_text` encodes a slice at a time (`score`'s 110 MB scorecard was held twice, as text and as bytes):
    the file holds the text exactly, non-ASCII text across a slice's edge included."""
    monkeypatch.setattr(outputs, "TEXT_SLICE", 7)
    parts: list[str] = []
    real = outputs._write_part
    monkeypatch.setattr(outputs, "_write_part", lambda fh, text: parts.append(text) or real(fh, text))
    text = "héllo wörld, ☃ and 𝔘nicode\n" * 3
    write_text(tmp_path / "t.txt", text)
    assert (tmp_path / "t.txt").read_bytes() == text.encode("utf-8") and max(map(len, parts)) == 7
    write_text(tmp_path / "empty.txt", "")
    assert (tmp_path / "empty.txt").read_bytes() == b""


@pytest.mark.parametrize("where", ["under-a-file", "too-long"])
def test_paths_that_cannot_be_are_output_errors(tmp_path, where):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file\n")
    target = blocker / "x.csv" if where == "under-a-file" else tmp_path / ("n" * 300 + ".csv")
    with pytest.raises(OutputError) as info:
        write_text(target, "x\n")
    assert info.value.errno == (errno.ENOTDIR if where == "under-a-file" else errno.ENAMETOOLONG)
    assert blocker.read_text() == "a file\n" and leftovers(tmp_path) == []


def _fill_folder(folder: Path, text: str) -> None:
    (folder / "figures").mkdir(parents=True, exist_ok=True)
    write_text(folder / "a.html", text)
    write_text(folder / "figures" / "f.svg", text)


def test_a_folder_is_swapped_whole_and_keeps_what_the_run_did_not_write(tmp_path):
    out = tmp_path / "reports"
    _fill_folder(out, "old")
    (out / "scores").mkdir()
    (out / "scores" / "other.json").write_text("another command's\n")
    (out / "stale.png.tmp").write_text("left by a crash\n")
    with output_folder(out) as stage:
        assert stage.parent == out.parent and stage != out
        assert (stage / "a.html").read_text() == "old"  # the stage starts as the folder
        _fill_folder(stage, "new")
        assert (out / "a.html").read_text() == "old"  # nothing visible until the block ends
    assert (out / "a.html").read_text() == "new" and (out / "figures" / "f.svg").read_text() == "new"
    assert (out / "scores" / "other.json").read_text() == "another command's\n"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("error", [RuntimeError("a writer failed"), KeyboardInterrupt(),
                                   OSError(errno.ENOSPC, "No space left on device")])
def test_a_failure_inside_the_folder_leaves_the_old_one_untouched(tmp_path, error):
    out = tmp_path / "reports"
    _fill_folder(out, "old")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(type(error) if not isinstance(error, OSError) else OutputError):
        with output_folder(out) as stage:
            write_text(stage / "a.html", "new")
            raise error
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert leftovers(tmp_path) == []


def test_a_symlinked_file_in_the_folder_is_replaced_not_written_through(tmp_path):
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").symlink_to(sentinel)
    with output_folder(out) as stage:
        write_text(stage / "manifest.json", "{}\n")
    assert sentinel.read_text() == "precious\n" and (out / "manifest.json").read_text() == "{}\n"
    assert not (out / "manifest.json").is_symlink()


def test_the_working_directory_is_updated_file_by_file(tmp_path, monkeypatch):
    """The folder the process runs in cannot be swapped (the process would be left in the old one): its files
    are moved in one by one, and what the run removed from its copy is removed."""
    out = tmp_path / "here"
    _fill_folder(out, "old")
    (out / "gone.csv").write_text("removed by the run\n")
    monkeypatch.chdir(out)
    with output_folder(Path(".")) as stage:
        _fill_folder(stage, "new")
        (stage / "gone.csv").unlink()
    assert Path.cwd() == out.resolve()
    assert (out / "a.html").read_text() == "new" and not (out / "gone.csv").exists()
    assert leftovers(tmp_path) == []


def test_a_stage_of_a_killed_run_is_swept_by_the_next(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = tmp_path / f".out{outputs.STAGE_MARK}{proc.stdout.strip()}-deadbeef"
    dead.mkdir()
    with output_folder(out) as stage:
        write_text(stage / "x", "1")
    assert not dead.exists() and (out / "x").read_text() == "1"


def test_a_manifest_written_in_the_stage_names_the_final_paths(tmp_path):
    out = tmp_path / "out"
    manifest = RunManifest(command="test", config={"out": "x"})
    with output_folder(out) as stage:
        write_text(stage / "a.csv", "a\n")
        manifest.add_output(stage / "a.csv")
        manifest.config["out"] = str(stage)
        manifest.write_json(stage)
    doc = json.loads((out / "manifest.json").read_text())
    assert list(doc["outputs"]) == [str(out / "a.csv")] and doc["config"]["out"] == str(out)


def test_a_file_where_the_folder_goes_is_an_output_error(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("kept\n")
    with pytest.raises(OutputError, match="Not a directory"), output_folder(blocker):
        pass
    assert blocker.read_text() == "kept\n" and leftovers(tmp_path) == []


# --------------------------------------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------------------------------------
FORMULAS = ["=HYPERLINK(\"http://x\",\"y\")", "+1+2", "-2+3", "@SUM(1)", "\tcmd", "\rcmd", "-1"]


def test_formula_cells_are_neutralised_and_numbers_stay_numbers():
    df = pl.DataFrame({"text": [*FORMULAS, "plain", None], "n": list(range(-4, len(FORMULAS) - 2)),
                       "x": [-1.5] * (len(FORMULAS) + 2)})
    back = pl.read_csv(csv_text(df).encode(), infer_schema_length=0)  # every column as text
    assert back["text"].to_list() == [*("'" + f for f in FORMULAS), "plain", None]
    assert back["n"].to_list() == [str(v) for v in df["n"].to_list()]  # -4 stays -4: a number, not text
    assert back["x"].to_list() == ["-1.5"] * len(df)


def test_categorical_and_header_cells_are_neutralised_too():
    df = pl.DataFrame({"=cmd": ["@x", "ok"]}).with_columns(pl.col("=cmd").cast(pl.Categorical))
    assert csv_text(df).splitlines() == ["'=cmd", "'@x", "ok"]


def test_raw_csv_turns_it_off(tmp_path):
    df = pl.DataFrame({"guid": ["@SUM(1)"]})
    with raw_csv(True):
        assert csv_text(df).splitlines()[1] == "@SUM(1)"
    assert csv_text(df).splitlines()[1] == "'@SUM(1)"
    write_csv(df, tmp_path / "raw.csv", raw=True)
    assert (tmp_path / "raw.csv").read_text().splitlines()[1] == "@SUM(1)"


def test_a_folder_whose_parent_is_not_writable_is_staged_inside_it(tmp_path, monkeypatch):
    """A writable folder in a parent we may not write in (a shared reports folder): staged inside, moved in."""
    out = tmp_path / "shared" / "reports"
    _fill_folder(out, "old")
    (out / "gone.csv").write_text("removed by the run\n")
    real_mkdir = os.mkdir

    def no_siblings(path, *args, **kwargs):
        if Path(path).parent == out.parent:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(outputs.os, "mkdir", no_siblings)
    with output_folder(out) as stage:
        assert stage.parent == out
        _fill_folder(stage, "new")
        (stage / "gone.csv").unlink()
    monkeypatch.undo()
    assert (out / "a.html").read_text() == "new" and not (out / "gone.csv").exists()
    assert leftovers(tmp_path) == [] and sorted(p.name for p in out.iterdir()) == ["a.html", "figures"]


def test_a_database_in_the_folder_is_never_copied_swapped_or_brought_back(tmp_path):
    """`report --db reports/demo/demo.duckdb --out reports/demo`: the database lives in the output folder. It
    is not carried into the stage, the folder is updated file by file, and a write-ahead log that DuckDB
    removed meanwhile (a checkpoint) is not brought back."""
    out = tmp_path / "demo"
    _fill_folder(out, "old")
    (out / "demo.duckdb").write_bytes(b"db")
    (out / "demo.duckdb.wal").write_bytes(b"log")
    inode = (out / "demo.duckdb").stat().st_ino
    with output_folder(out) as stage:
        assert not (stage / "demo.duckdb").exists() and not (stage / "demo.duckdb.wal").exists()
        (out / "demo.duckdb.wal").unlink()  # the database checkpoints while the report is written
        _fill_folder(stage, "new")
    assert (out / "demo.duckdb").stat().st_ino == inode and not (out / "demo.duckdb.wal").exists()
    assert (out / "a.html").read_text() == "new" and leftovers(tmp_path) == []


def test_a_file_replaced_by_someone_else_meanwhile_is_not_removed(tmp_path, monkeypatch):
    out = tmp_path / "here"
    _fill_folder(out, "old")
    (out / "x.csv").write_text("old\n")
    monkeypatch.chdir(out)  # updated file by file
    with output_folder(out) as stage:
        (stage / "x.csv").unlink()  # the run removes its old export ...
        (out / "x.csv").unlink()
        (out / "x.csv").write_text("another program's\n")  # ... which another program replaced meanwhile
    assert (out / "x.csv").read_text() == "another program's\n"


def test_a_stage_that_cannot_be_made_names_the_output_not_the_stage(tmp_path, monkeypatch):
    """`score --out /proc/x` once said "cannot write --out /proc/.x.arcstudy-stage-6044-e1d92b07": the error
    names the folder the user asked for."""
    real_mkdir = os.mkdir

    def refuse_stages(path, *args, **kwargs):
        if outputs.STAGE_MARK in str(path):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", refuse_stages)
    target = tmp_path / "out"
    with pytest.raises(OutputError) as caught, output_folder(target):
        pass
    assert caught.value.path == str(target)
    assert outputs.STAGE_MARK not in str(caught.value) and "No such file or directory" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_while_the_old_folder_is_copied_leaves_no_stage(tmp_path, monkeypatch):
    """Ctrl-C while `report` copied its old output into the stage left a hidden .OUT.arcstudy-stage-* folder."""
    target = tmp_path / "out"
    target.mkdir()
    for i in range(5):
        (target / f"f{i}.txt").write_text("old")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(outputs, "_clone", interrupted)
    with pytest.raises(KeyboardInterrupt), output_folder(target):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert sorted(p.name for p in target.iterdir()) == [f"f{i}.txt" for i in range(5)]


def test_markdown_text_keeps_input_on_its_line_and_inert():
    """Names, ids and reasons from input files go into the Markdown files arcstudy writes (the dataset card,
    compare.md): a file name with a CR once started a heading and raw HTML of its own there."""
    from pipeline.core.outputs import markdown_text

    hostile = "x\r\r## INJECTED\r<img src=x onerror=alert(1)> [click](javascript:alert(2)) a|b `c` \x1b[2J\u2028end"
    text = markdown_text(hostile)
    assert "\r" not in text and "\n" not in text and "\u2028" not in text and "\x1b" not in text
    assert "<img" not in text and "&lt;img" in text
    assert "\\[click\\](javascript:alert(2))" in text and "a\\|b" in text and "\\`c\\`" in text
    assert markdown_text("ls20-9607627b") == "ls20-9607627b"  # ordinary ids are unchanged


def test_markdown_code_is_one_inert_code_span():
    from pipeline.core.outputs import markdown_code

    assert markdown_code("arcstudy score 'x\r\n## H'") == "`arcstudy score 'x\\x0d\\x0a## H'`"
    assert markdown_code("a `b` c") == "``a `b` c``" and markdown_code("`x`") == "`` `x` ``"
