"""Run manifests: what ran, on which code, with which configuration, reading and writing which bytes.

Every command that writes outputs records one (CONVENTIONS.md, "Runs and outputs"): in the `runs` table and
as JSON next to the outputs, so a number can always be traced back to its inputs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import platform
import subprocess
import sys
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pipeline
from pipeline.core.outputs import open_output, public_json, write_text

REPO_ROOT = Path(__file__).resolve().parents[2]
TRACKED_PACKAGES = ("arcstudy", "polars", "duckdb", "pandera", "pyarrow", "numpy", "altair",
                    "vl-convert-python", "statsmodels", "typer", "rich", "jinja2")


FileVersion = tuple[int, int, int, int]
# Problems (rejected inputs, lines left out) a manifest lists word for word. A flood of bad lines gives millions:
# past this many, the manifest counts them and names a file beside it that lists every one.
LISTED_PROBLEMS = 1_000
LISTED_INPUTS = 1_000  # input files a manifest names (past them, every one is in a file beside it: `listed_inputs`)
LISTED_ON_SCREEN = 10  # ... and a command prints one by one (the rest counted, with where to find them)


def manifest_beside(out_file: Path) -> Path:
    """The run manifest of a command whose output is one file: `<stem>.manifest.json` beside it."""
    return out_file.with_name(out_file.stem + ".manifest.json")


def unlisted_note(n: int, what: str, file_name: str, manifest_name: str = "manifest.json") -> str | None:
    """"... and N more <what> (see <where>)" for `n` problems of which the first LISTED_ON_SCREEN were printed:
    where every one is, the manifest, or past LISTED_PROBLEMS the file `listed_problems` wrote. None when every
    one was printed."""
    if n <= LISTED_ON_SCREEN:
        return None
    return f"... and {n - LISTED_ON_SCREEN:,} more {what} (see {manifest_name if n <= LISTED_PROBLEMS else file_name})"


def file_version(path: Path) -> FileVersion:
    """What tells one version of a file from the next without reading it: device, inode, size and modification
    time in ns (an edit in place, an append or a replacement by rename each change one of them)."""
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def sha256_file(path: Path, chunk_size: int = 1 << 20) -> str:
    """The file's sha256 (hex), read into one reused buffer: a new bytes object per read cost a fifth of the
    time (364 MB of recordings: 0.32 s of CPU against 0.26 s)."""
    digest = hashlib.sha256()
    buffer = bytearray(chunk_size)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(buffer):
            digest.update(view[:n])
    return digest.hexdigest()


def git_state(repo: Path = REPO_ROOT) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the arcstudy checkout, or (None, None) outside a git checkout."""
    if not (repo / ".git").exists():
        return None, None
    try:
        commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit or None, bool(status.strip())


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def new_run_id(now: datetime | None = None) -> str:
    """Sortable and unique: a timestamp for people, a random suffix so two runs never collide."""
    now = now or datetime.now(UTC)
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


@dataclass
class RunManifest:
    command: str
    config: dict[str, Any] = field(default_factory=dict)
    seeds: dict[str, int] = field(default_factory=dict)
    policy_ids: list[str] = field(default_factory=list)
    run_id: str = field(default_factory=new_run_id)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    exit_code: int | None = None
    inputs: dict[str, str] = field(default_factory=dict)  # path -> sha256
    outputs: dict[str, str] = field(default_factory=dict)  # path -> sha256
    notes: dict[str, Any] = field(default_factory=dict)

    def add_input(self, path: Path | str, digest: str | None = None) -> None:
        p = Path(path)
        self.inputs[str(p)] = digest or sha256_file(p)

    def add_output(self, path: Path | str) -> None:
        p = Path(path)
        self.outputs[str(p)] = sha256_file(p)

    def listed_problems(self, key: str, problems: Iterable[str], path: Path) -> dict[str, Any]:
        """The note of a run's problems: ``{key: the first LISTED_PROBLEMS, word for word}``. When there are
        more, every one is written to ``path`` (JSON lines: a string each, in order, as they are read: a `Spool`
        of millions stays on disk), an output of the run, and the note adds ``<key>_count`` and ``<key>_file``
        (its name): the manifest, and the runs table that holds it, stay small."""
        them = iter(problems)
        listed = list(itertools.islice(them, LISTED_PROBLEMS))
        more = next(them, None)
        if more is None:
            return {key: listed}
        n = 0
        with open_output(path) as fh:
            for problem in itertools.chain(listed, [more], them):
                fh.write(json.dumps(problem, ensure_ascii=False) + "\n")
                n += 1
        self.add_output(path)
        return {key: listed, f"{key}_count": n, f"{key}_file": path.name}

    def listed_inputs(self, inputs: Iterable[tuple[str, str | None]], path: Path) -> dict[str, Any]:
        """Add the (path, sha256) ``inputs`` (a digest None: the file is read for it; one that cannot be read is
        left out), as `listed_problems` lists problems: the first LISTED_INPUTS in the manifest's inputs and, when
        there are more, every one in ``path`` (JSON lines: an object of ``path`` and ``sha256`` each, in order),
        an output of the run, which the note returned names with ``inputs_count`` and ``inputs_file``. A flood of
        input files leaves the manifest small, and the inputs are never all in memory. The note is empty when
        every one is in the manifest."""
        def digested() -> Iterator[tuple[str, str]]:
            for name, digest in inputs:
                try:
                    yield name, digest or sha256_file(Path(name))
                except OSError:
                    continue

        them = digested()
        listed = list(itertools.islice(them, LISTED_INPUTS))
        more = next(them, None)
        self.inputs.update(listed)
        if more is None:
            return {}
        n = 0
        with open_output(path) as fh:
            for name, digest in itertools.chain(listed, [more], them):
                fh.write(json.dumps({"path": name, "sha256": digest}, ensure_ascii=False) + "\n")
                n += 1
        self.add_output(path)
        return {"inputs_count": n, "inputs_file": path.name}

    def finish(self, exit_code: int) -> None:
        self.finished_at = datetime.now(UTC)
        self.exit_code = exit_code

    def to_dict(self) -> dict[str, Any]:
        commit, dirty = git_state()
        return public_json({
            "run_id": self.run_id,
            "command": self.command,
            "arcstudy_version": pipeline.__version__,
            "git_commit": commit,
            "is_git_dirty": dirty,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "exit_code": self.exit_code,
            "python_executable": sys.executable,
            "platform": platform.platform(),
            "packages": package_versions(),
            "config": self.config,
            "seeds": self.seeds,
            "policy_ids": self.policy_ids,
            "inputs": dict(sorted(self.inputs.items())),
            "outputs": dict(sorted(self.outputs.items())),
            "notes": self.notes,
            "env": {k: os.environ[k] for k in ("ONLY_RESET_LEVELS", "CI") if k in os.environ},
        })  # paths under an output folder being staged read as their final place

    def write_json(self, directory: Path) -> Path:
        """Write `manifest.json` next to the outputs (the manifest itself is not one of its outputs), whole
        (pipeline.core.outputs: a symlink there is replaced; an OSError is raised as OutputError)."""
        return write_text(directory / "manifest.json", self.to_json())

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, default=str) + "\n"
