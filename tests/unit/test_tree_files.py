"""The one folder walk of ingest, score and export-transitions (`special_files.tree_files`).

Path.rglob does not descend into a symlinked folder: its files were neither read nor named (an input folder
holding a link to a folder of recordings loaded only the others, exit 0). The walk follows a linked folder as
the folder it stands for, each real folder once, so a loop ends and no file is listed twice.
"""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.commands.score import expand_recordings
from pipeline.core.special_files import remove_tree, tree_files
from pipeline.ingest.runner import expand_paths


def _tree(tmp_path: Path) -> Path:
    top = tmp_path / "in"
    (top / "sub").mkdir(parents=True)
    (top / "a.jsonl").write_text("{}\n")
    (top / "sub" / "b.jsonl").write_text("{}\n")
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "c.jsonl").write_text("{}\n")
    (other / "d.jsonl").write_text("{}\n")
    os.symlink(other, top / "linked")  # a folder linked in: its files count
    os.symlink(other, top / "sub" / "again")  # a second link to it: walked once
    os.symlink(top, other / "loop")  # a link back up: the walk ends
    os.symlink(tmp_path / "nowhere", top / "dangling.jsonl")  # kept, for the reader to refuse by name
    return top


def test_a_linked_folder_is_walked_once_and_a_loop_ends(tmp_path):
    top = _tree(tmp_path)
    names = [str(p.relative_to(top)) for p in tree_files(top)]
    assert names == ["a.jsonl", "dangling.jsonl", "linked/c.jsonl", "linked/d.jsonl", "sub/b.jsonl"]


def test_ingest_and_score_read_the_files_of_a_linked_folder(tmp_path):
    top = _tree(tmp_path)
    for found in (expand_paths([top]), expand_recordings([top])):
        assert sorted(str(p.relative_to(top)) for p in found) == ["a.jsonl", "dangling.jsonl", "linked/c.jsonl",
                                                                  "linked/d.jsonl", "sub/b.jsonl"]


def test_a_folder_deeper_than_the_recursion_limit_is_walked(tmp_path):
    # os.walk of Python 3.11 recursed once per level: the ingest of such a folder failed as a whole
    top = tmp_path / "in"
    top.mkdir()
    (top / "top.jsonl").write_text("{}\n")
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1500):  # 3,000 characters of path: within PATH_MAX
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(os.open("bottom.jsonl", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    os.close(fd)
    try:
        found = tree_files(top)
        assert [p.name for p in found] == ["bottom.jsonl", "top.jsonl"]
        assert found[0] == Path(top, *["d"] * 1500, "bottom.jsonl")
    finally:
        remove_tree(top)  # pytest's own clean-up of old temporary folders recurses too


def test_a_link_to_a_folder_holding_the_walk_is_left_out(tmp_path):
    # followed, a link to / (or to the home folder, or to ..) walked the whole disk around the folder given
    top = tmp_path / "in"
    top.mkdir()
    (top / "a.jsonl").write_text("{}\n")
    os.symlink("/", top / "everything")
    os.symlink(tmp_path, top / "parent")
    assert [p.name for p in tree_files(top)] == ["a.jsonl"]


def test_the_walk_yields_paths_in_sorted_order_as_it_goes(tmp_path, monkeypatch):
    """`iter_walk_files` (export-transitions' walk of a flood of files): the order `sorted` gives paths (a folder
    `a` before a file `a.jsonl`, `a-b` after `a`'s files), named as `Path` names them, and lazily: the first file
    comes before the other folders are listed. The walk once listed the whole tree, then sorted it (about 650
    bytes a file as paths)."""
    import engine.loader as loader

    top = tmp_path / "in"
    for folder in ("a/x", "a-b", "b/c/d", "é"):
        (top / folder).mkdir(parents=True)
    for name in ("a.jsonl", "a/x/1.jsonl", "a/2.jsonl", "a-b/3.jsonl", "b/c/d/4.jsonl", "b/5.jsonl", "é/6.jsonl",
                 "Z.jsonl"):
        (top / name).write_text("{}\n")
    os.symlink(top / "b", top / "a" / "link")  # a linked folder: walked where it comes first by name
    listed: list[str] = []
    scandir = os.scandir
    monkeypatch.setattr(loader.os, "scandir", lambda path: listed.append(str(path)) or scandir(path))
    walk = loader.iter_walk_files(str(top) + "//")
    first = next(walk)
    assert first == str(top / "Z.jsonl") and listed == [str(top)]
    assert Path(next(walk)) == top / "a" / "2.jsonl" and listed == [str(top), str(top / "a")]
    rest = [first, str(top / "a" / "2.jsonl"), *walk]
    assert [Path(p) for p in rest] == sorted(Path(p) for p in rest)
    assert [str(Path(p).relative_to(top)) for p in rest] == [
        "Z.jsonl", "a/2.jsonl", "a/link/5.jsonl", "a/link/c/d/4.jsonl", "a/x/1.jsonl", "a-b/3.jsonl", "a.jsonl",
        "é/6.jsonl"]
    assert rest == [str(p) for p in tree_files(top)]
    monkeypatch.chdir(top)
    assert list(loader.iter_walk_files(".")) == [str(p) for p in tree_files(Path("."))] == [
        "Z.jsonl", "a/2.jsonl", "a/link/5.jsonl", "a/link/c/d/4.jsonl", "a/x/1.jsonl", "a-b/3.jsonl", "a.jsonl",
        "é/6.jsonl"]
