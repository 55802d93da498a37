"""Removing trees that code from outside made (`special_files.remove_tree`): a sandbox's scratch folder.

shutil.rmtree recurses once per level: a game that left a few thousand nested folders in its scratch folder made
the clean-up raise RecursionError (which `ignore_errors` does not cover), and every later arcstudy command that
started a sandbox failed in its sweep of stale scratch folders, with a message about input nested too deeply.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pipeline.core import sandbox as sandbox_module
from pipeline.core.sandbox import Limits, Sandbox
from pipeline.core.special_files import remove_tree
from tests.unit import sandbox_targets as t

DEEP = 3000  # past Python's recursion limit, and 6,000 characters of path: past PATH_MAX (4,096)


def _chain(top: Path, depth: int) -> None:
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for i in range(depth):
        os.mkdir("d", dir_fd=fd)
        if i % 500 == 0:  # files and a side folder on the way down
            os.close(os.open(f"f{i}", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
            os.mkdir(f"side{i}", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)


def test_a_tree_deeper_than_the_recursion_limit_and_path_max_is_removed(tmp_path):
    top = tmp_path / "scratch"
    _chain(top, DEEP)
    remove_tree(top)  # (were it left, pytest's clean-up of old temporary folders would fail on it)
    assert not top.exists()
    assert list(tmp_path.iterdir()) == []


def test_symlinks_are_removed_never_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    top = tmp_path / "scratch"
    (top / "a").mkdir(parents=True)
    (top / "a" / "link").symlink_to(outside, target_is_directory=True)
    (top / "file-link").symlink_to(outside / "keep.txt")
    remove_tree(top)
    assert not top.exists()
    assert (outside / "keep.txt").read_text() == "keep"
    link = tmp_path / "link-to-outside"
    link.symlink_to(outside, target_is_directory=True)
    remove_tree(link)  # the link itself goes; what it points at stays
    assert not link.is_symlink() and (outside / "keep.txt").exists()
    remove_tree(tmp_path / "missing")  # nothing there: nothing to do, no error


def test_a_deep_tree_left_in_a_scratch_folder_is_removed_when_the_sandbox_closes():
    sandbox = Sandbox(Limits(wall_s=20, cpu_s=10, memory_bytes=512 << 20, output_bytes=1 << 20))
    try:
        assert sandbox.call(t.deep_scratch_tree, DEEP) == DEEP
        scratch = sandbox.scratch
        assert scratch is not None and (scratch / "d" / "d").is_dir()
    finally:
        sandbox.close()  # raised RecursionError
    assert not scratch.exists()


def test_the_sweep_of_stale_scratch_folders_removes_a_deep_one_and_does_not_fail(tmp_path, monkeypatch):
    # a temporary folder of this test's own: in the shared one, another test process's sandbox start sweeps the
    # stale folder while it is still being built
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid names no process now
    stale = Path(tempfile.gettempdir()) / f"arcstudy-sandbox-{dead.pid}-deeptest"
    try:
        _chain(stale, DEEP)
        sandbox_module._sweep_stale_scratch()  # raised RecursionError, failing the command that started a sandbox
        assert not stale.exists()
    finally:
        remove_tree(stale)
