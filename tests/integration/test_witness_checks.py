"""`arcstudy check-witnesses`: ARC-TGI witnesses run in the sandbox on every input, twice, against the stored
outputs. The export is a real one (ARC-TGI's dataset generator, tests/fixtures/witness/README.md); the
framework is our own stand-in checkout. Other cases are its rows with the `code` replaced: a mismatch, a
nondeterministic witness, and hostile witnesses, each of which must fail to pass, write or delete nothing, and
end within the limits."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.core.workspace import Workspace
from pipeline.ingest import ingest_paths

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "witness"
EXPORT = FIX / "three_generators.csv"
CHECKOUT = FIX / "checkout"
CROSS_FAMILY = "taskSJnVdxYZVwMNrhDp96terK"  # its witness paints the row and column of the first 6 with 6

csv.field_size_limit(1 << 30)


def _export_rows() -> list[dict]:
    with open(EXPORT, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _library():
    """The stand-in checkout's library, imported here to compute expected outputs independently (our code)."""
    spec = importlib.util.spec_from_file_location("witness_fixture_tlib",
                                                  CHECKOUT / "Framework" / "transformation_library.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_export(path: Path, cases: dict[str, str]) -> None:
    """An export whose rows are the cross family's task with each case's code (task_id = the case name)."""
    base = next(r for r in _export_rows() if r["generator_name"] == CROSS_FAMILY)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(base))
        writer.writeheader()
        for name, code in cases.items():
            writer.writerow({**base, "task_id": name, "code": code})


def _ingest(db: Path, *paths: Path) -> None:
    with Workspace(db) as ws:
        ingest_paths(ws, list(paths), run_id="t", workers=1)


def _check(db: Path, *args: str, framework: Path = CHECKOUT, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", "check-witnesses", "--framework",
                           str(framework), "--db", str(db), *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def _rows(db: Path) -> dict[str, dict]:
    with Workspace(db, read_only=True) as ws:
        frame = ws.read("SELECT * FROM out_arctgi__witness_checks")
    return {r["task_id"]: r for r in frame.iter_rows(named=True)}


def _pairs(row: dict) -> list[dict]:
    data = json.loads(row["data"])
    return data["train"] + data["test"]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(root.rglob("*")) if ".duckdb" not in p.name and ".runs" not in str(p)}


CROSS = "    return cross_through(grid, 6)\n"


def _witness(body: str) -> str:
    return "def transform_input(self, grid: np.ndarray) -> np.ndarray:\n" + body


def test_real_export_library_mismatch_and_nondeterminism_on_two_workers(tmp_path: Path):
    cases = {
        "uses_library": _witness(CROSS),
        # what ARC-TGI's executor puts in scope besides the library: np, defaultdict and the typing names
        "uses_scope": ("def transform_input(self, grid: np.ndarray) -> List[List[int]]:\n"
                       "    seen: Dict[Tuple[int, int], Any] = defaultdict(int)\n    seen[(0, 0)] += 1\n" + CROSS),
        "wrong_colour": _witness("    return cross_through(grid, 5)\n"),
        "uses_random": _witness("    import random\n    out = cross_through(grid, 6)\n"
                                "    out[0, 0] = random.randrange(10)\n    out[0, 1] = random.randrange(10)\n"
                                "    return out\n"),
    }
    made = tmp_path / "made.csv"
    _write_export(made, cases)
    db = tmp_path / "w.duckdb"
    _ingest(db, EXPORT, made)
    res = _check(db, "--workers", "2")
    assert res.returncode == 3, res.stdout + res.stderr  # a task that does not pass
    assert "Traceback" not in res.stderr
    rows = _rows(db)
    real = _export_rows()
    assert set(rows) == {r["task_id"] for r in real} | set(cases)
    for r in real:  # ARC-TGI's own witnesses reproduce every stored output
        got = rows[r["task_id"]]
        assert (got["status"], got["reason"], got["family_id"]) == ("pass", None, r["generator_name"])
        assert got["n_pairs"] == got["n_match"] == len(_pairs(r))
    cross_row = next(r for r in real if r["generator_name"] == CROSS_FAMILY)
    pairs = _pairs(cross_row)
    for name in ("uses_library", "uses_scope"):
        assert (rows[name]["status"], rows[name]["n_match"]) == ("pass", len(pairs)), rows[name]
    # the wrong colour reproduces exactly the pairs where painting 5 gives the stored output
    lib = _library()
    expected = sum(lib.cross_through(np.array(p["input"]), 5).tolist() == p["output"] for p in pairs)
    assert expected < len(pairs)
    wrong = rows["wrong_colour"]
    assert wrong["status"] == "mismatch" and wrong["n_match"] == expected
    assert "differs from the stored one" in wrong["reason"] and ("train[" in wrong["reason"] or "test[" in wrong["reason"])
    assert rows["uses_random"]["status"] == "nondeterministic"
    assert "the two runs returned different grids" in rows["uses_random"]["reason"]
    assert all(r["seconds"] >= 0 for r in rows.values())
    for name in ("wrong_colour", "uses_random"):
        assert name in res.stderr  # named in the summary


def test_hostile_witnesses_fail_write_nothing_and_end(tmp_path: Path):
    victim = tmp_path / "victim"
    victim.mkdir()
    sentinel = victim / "sentinel.txt"
    sentinel.write_text("keep me")

    def attempt(lines: str) -> str:
        # each swallows its failure and returns the right grid: only the sandbox can make it fail
        indented = "".join(f"        {line}\n" for line in lines.splitlines())
        return _witness(f"    try:\n{indented}    except BaseException:\n        pass\n{CROSS}")

    cases = {
        "file_write": attempt(f"open({str(victim / 'written.txt')!r}, 'w').write('x')"),
        "socket": attempt("import socket\ns = socket.socket()\ns.connect(('127.0.0.1', 9))"),
        "subprocess": attempt(f"import subprocess\nsubprocess.run(['touch', {str(victim / 'by_subprocess')!r}])"),
        "os_system": attempt(f"import os\nos.system('touch ' + {str(victim / 'by_system')!r})"),
        "ctypes": attempt(f"import ctypes\nctypes.CDLL(None).system(b'touch {victim / 'by_ctypes'}')"),
        "fork_loop": attempt("import os\nfor _ in range(1000):\n    os.fork()"),
        "endless_loop": _witness("    while True:\n        pass\n"),
        "sleep": _witness("    import time\n    time.sleep(3600)\n" + CROSS),
        "alloc_32gib": _witness("    big = np.ones(32 << 30, dtype=np.uint8)\n" + CROSS),
        "huge_output": _witness("    return np.zeros((30000, 30000), dtype=np.int64)\n"),
        "delete_file": attempt(f"import os\nos.remove({str(sentinel)!r})"),
        "syntax_error": "def transform_input(self, grid) return grid\n",
        "missing_name": _witness("    return _hidden(grid)\n"),  # private names of the library are not in scope
        "float_output": _witness("    return cross_through(grid, 6).astype(float)\n"),
        "returns_none": _witness("    cross_through(grid, 6)\n"),
        # the sandbox process itself ended: that task's failure, never a silent exit 0
        "exit_zero": _witness("    import os\n    os._exit(0)\n"),
        "kills_itself": _witness("    import os, signal\n    os.kill(os.getpid(), signal.SIGSEGV)\n"),
        # its message once reached the table as it was: no row of any task was written (a UnicodeEncodeError)
        "surrogate_message": _witness("    raise ValueError('bad ' + chr(0xDFFF) + ' text')\n"),
        # a daemon thread left spinning beside the export's later tasks (it was `pass`): the child is ended
        "daemon_thread": "STARTED = []\n\ndef spin():\n    while True:\n        pass\n\n" + _witness(
            "    import threading\n    if not STARTED:\n        STARTED.append(1)\n"
            "        threading.Thread(target=spin, name='spinner', daemon=True).start()\n" + CROSS),
        # a MemoryError the witness raises itself is its own exception; one from an allocation is the limit's
        "fake_memory_error": _witness("    raise MemoryError('fake')\n"),
        "memory_at_definition": "BIG = 'x' * (10 ** 10)\n" + _witness(CROSS),
    }
    made = tmp_path / "hostile.csv"
    _write_export(made, cases)
    db = tmp_path / "h.duckdb"
    _ingest(db, made)
    before, framework_before = _tree(tmp_path), _tree(CHECKOUT)
    res = _check(db, "--workers", "1", "--timeout", "2")
    assert res.returncode == 3, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    rows = _rows(db)
    assert set(rows) == set(cases)
    assert not [name for name, r in rows.items() if r["status"] == "pass"]
    expected = {"file_write": "refused", "socket": "refused", "subprocess": "refused", "os_system": "refused",
                "ctypes": "refused", "fork_loop": "refused", "endless_loop": "timeout", "sleep": "timeout",
                "alloc_32gib": "refused", "delete_file": "refused", "syntax_error": "error", "missing_name": "error",
                "float_output": "mismatch", "returns_none": "error", "exit_zero": "error",
                "kills_itself": "error", "surrogate_message": "error", "daemon_thread": "refused",
                "fake_memory_error": "error", "memory_at_definition": "refused"}
    assert {n: rows[n]["status"] for n in expected} == expected, {n: (r["status"], r["reason"]) for n, r in rows.items()}
    assert rows["huge_output"]["status"] in ("mismatch", "refused"), rows["huge_output"]
    assert "NameError" in rows["missing_name"]["reason"] and "_hidden" in rows["missing_name"]["reason"]
    assert "float64" in rows["float_output"]["reason"]
    assert "does not compile" in rows["syntax_error"]["reason"]
    assert "ValueError: bad \\udfff text" in rows["surrogate_message"]["reason"]
    assert "wall-clock limit of 2 s" in rows["sleep"]["reason"] and "--timeout" in rows["sleep"]["reason"]
    assert "exit code 0" in rows["exit_zero"]["reason"] and "SIGSEGV" in rows["kills_itself"]["reason"]
    assert "left 1 thread(s) running after its call (daemon thread 'spinner')" in rows["daemon_thread"]["reason"]
    assert "the witness raised MemoryError: fake" in rows["fake_memory_error"]["reason"]
    assert "ran out of its memory limit" in rows["memory_at_definition"]["reason"]
    assert "ran out of its memory limit" in rows["alloc_32gib"]["reason"]
    assert all(r["reason"] for r in rows.values()) and all(r["n_match"] == 0 for r in rows.values())
    # nothing written, nothing deleted: the folder and the checkout are as they were
    assert sentinel.read_text() == "keep me"
    assert _tree(tmp_path) == before
    assert _tree(CHECKOUT) == framework_before


def test_a_witness_whose_output_is_too_large_is_refused_saying_so_not_nondeterministic(tmp_path: Path):
    """A witness printing 10 MB a call was called `nondeterministic` (its prints went to the sandbox's log, whose
    size limit made the later calls raise `OSError: File too large`), one printing 100 MB an `error`. Prints are
    now counted and dropped: past the limit the task is refused with the limit named; a quiet print still passes."""
    from pipeline.core.sandbox import Limits
    from pipeline.qualify.witness_child import MAX_PRINTED_BYTES

    cases = {"prints_10mb": _witness("    print('x' * (10 << 20))\n" + CROSS),
             "prints_100mb_to_stderr": _witness("    import sys\n    print('x' * (100 << 20), file=sys.stderr)\n"
                                                + CROSS),
             "prints_10mb_bytes": _witness("    import sys\n    sys.stdout.buffer.write(b'x' * (10 << 20))\n" + CROSS),
             "prints_hello": _witness("    print('hello')\n" + CROSS),
             "writes_fd_1": _witness("    import os\n    os.write(1, b'x' * (10 << 20))\n" + CROSS)}
    made = tmp_path / "loud.csv"
    _write_export(made, cases)
    db = tmp_path / "l.duckdb"
    _ingest(db, made)
    res = _check(db, "--workers", "1")
    assert res.returncode == 3, res.stdout + res.stderr
    rows = {name: (r["status"], r["reason"]) for name, r in _rows(db).items()}
    printed = (f"output too large: the witness printed more than {MAX_PRINTED_BYTES >> 20} MiB to stdout/stderr "
               "(the limit per task)")
    for loud in ("prints_10mb", "prints_100mb_to_stderr", "prints_10mb_bytes"):
        assert rows[loud][0] == "refused" and rows[loud][1].startswith(printed), rows
    assert rows["prints_hello"] == ("pass", None), rows
    assert rows["writes_fd_1"][0] == "refused", rows
    assert rows["writes_fd_1"][1].startswith("output too large: the witness wrote past the sandbox's file size "
                                             f"limit of {Limits().file_bytes >> 20} MiB"), rows


def test_framework_without_the_library_is_a_usage_error(tmp_path: Path):
    db = tmp_path / "u.duckdb"
    _ingest(db, EXPORT)
    (tmp_path / "Framework").mkdir()
    res = _check(db, framework=tmp_path)
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Framework/transformation_library.py" in lines[0], res.stderr
    with Workspace(db, read_only=True) as ws:  # nothing was written
        assert ws.read("SELECT count(*) AS n FROM out_arctgi__witness_checks")["n"][0] == 0


def test_a_framework_that_does_not_import_stops_with_its_reason(tmp_path: Path):
    db = tmp_path / "b.duckdb"
    _ingest(db, EXPORT)
    broken = tmp_path / "broken" / "Framework"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("")
    (broken / "transformation_library.py").write_text("import arcstudy_no_such_module\n")
    res = _check(db, framework=broken.parent)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "arcstudy_no_such_module" in res.stderr and "requirements.txt" in res.stderr
    assert "Traceback" not in res.stderr


class _Children:
    """check_task's children (witnesses.WitnessChildren) as a test drives them: `run` answers `reply` (or raises
    it), and counts what it was asked and how often the child was discarded."""

    def __init__(self, reply):
        self.reply, self.calls, self.discarded = reply, [], 0

    def run(self, file_id, _job):
        self.calls.append(file_id)
        if isinstance(self.reply, BaseException):
            raise self.reply
        return self.reply

    def discard(self):
        self.discarded += 1


@pytest.fixture(scope="module")
def tgi_tasks(tmp_path_factory) -> pl.DataFrame:
    db = tmp_path_factory.mktemp("tasks") / "m.duckdb"
    _ingest(db, EXPORT)
    with Workspace(db, read_only=True) as ws:
        return ws.read("SELECT * FROM core_arctgi__tasks")


@pytest.mark.parametrize(("kind", "status"), [("timeout", "timeout"), ("cpu", "timeout"), ("memory", "refused"),
                                              ("output_too_large", "refused"), ("crashed", "error"),
                                              ("exited", "error"), ("refused", "refused")])
def test_a_sandbox_failure_is_the_tasks_row_never_a_silent_pass(tgi_tasks, kind, status):
    """check_task turns every way the sandbox can stop a call into the task's non-pass row, with the reason."""
    from pipeline.core.sandbox import SandboxFailure
    from pipeline.qualify.witnesses import check_task, witness_tasks

    task = witness_tasks(tgi_tasks)[0]
    children = _Children(SandboxFailure(kind, "what happened"))
    row = check_task(task, children)
    assert (row["status"], row["n_match"]) == (status, 0)
    assert "what happened" in row["reason"] and kind in row["reason"]
    assert row["n_pairs"] == len(task.inputs)
    assert children.calls == [task.file_id] and children.discarded == 0  # the sandbox replaces a child it stopped


def test_a_reply_of_the_wrong_shape_or_a_bad_grid_is_not_a_pass(tgi_tasks):
    """The parent checks what the child sends back: a grid with a colour 10 or of the wrong shape fails."""
    from pipeline.qualify.witnesses import judge, witness_tasks

    task = witness_tasks(tgi_tasks)[0]
    good = [("grid", out) for out in task.outputs]
    assert judge(task, {"compile": None, "runs": [good, good]})[0] == "pass"
    assert judge(task, {"compile": None, "runs": [good]})[0] == "error"
    bad = [("grid", ((10,),))] + good[1:]
    status, reason, _ = judge(task, {"compile": None, "runs": [bad, bad]})
    assert status == "mismatch" and "ARC colours are integers 0-9" in reason


def test_the_reason_names_the_first_pair_that_failed_whichever_way_it_failed(tgi_tasks):
    """A mismatch reason named an invalid grid of train[1] before a differing grid of train[0]."""
    from pipeline.qualify.witnesses import judge, witness_tasks

    task = witness_tasks(tgi_tasks)[0]
    assert len(task.labels) >= 3
    good = [("grid", out) for out in task.outputs]
    differs = ("grid", tuple(tuple((c + 1) % 10 for c in row) for row in task.outputs[0]))
    runs = [differs, ("grid", ((10,),)), *good[2:]]
    status, reason, n_match = judge(task, {"compile": None, "runs": [runs, runs]})
    assert status == "mismatch" and n_match == len(task.labels) - 2
    assert reason.startswith(f"{task.labels[0]}: output differs from the stored one"), reason
    assert reason.endswith("(and 1 more input(s))")


def test_the_child_turns_outputs_into_grids_or_says_why_not():
    """as_grid (run in the child on what the witness returned): ARC's bounds, integer cells, two dimensions."""
    from pipeline.qualify.witness_child import as_grid

    assert as_grid(np.array([[1, 2], [3, 4]])) == ("grid", ((1, 2), (3, 4)))
    assert as_grid([[0, 9]]) == ("grid", ((0, 9),))
    for value, words in ((np.zeros((31, 2), dtype=np.int64), "31 x 2"), (np.zeros((2, 2)), "float64"),
                         (np.zeros(4, dtype=np.int64), "1-D"), (np.zeros((0, 3), dtype=int), "0 x 3"),
                         ([[1, 2], [3]], "not a grid")):
        kind, why = as_grid(value)
        assert kind == "invalid" and words in why, (value, why)
    assert as_grid(None)[0] == "none"


# --- hostile witnesses against other tasks: another export, the reasons, the framework's import -----------------

POISON = '''import sys as _s
_wc = _s.modules["pipeline.qualify.witness_child"]
_real_as_grid = _wc.as_grid
def _as_grid(value):  # every later output in this child: its first cell painted 9
    kind, rows = _real_as_grid(value)
    if kind == "grid":
        rows = ((9,) + rows[0][1:],) + rows[1:]
    return kind, rows
_wc.as_grid = _as_grid
def transform_input(self, grid):
    return grid
'''


def _file_id(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_hostile_export_does_not_change_another_exports_verdicts(tmp_path: Path):
    """A witness that replaces the child's as_grid made every later task in that child a mismatch, those of another
    export too (one child served the tasks of all exports, in file_id order, which a hostile file can grind). Tasks
    of different exports now never share a child: the trusted export's rows are those it gets checked alone."""
    hostile = tmp_path / "hostile.csv"
    for i in range(200):  # a hostile file whose file_id sorts first: its child would serve the trusted tasks next
        _write_export(hostile, {"p1": POISON + f"# {i}\n", "p2": POISON + f"# {i}\n"})
        if _file_id(hostile) < _file_id(EXPORT):
            break
    assert _file_id(hostile) < _file_id(EXPORT)
    alone, both = tmp_path / "alone.duckdb", tmp_path / "both.duckdb"
    _ingest(alone, EXPORT)
    _ingest(both, EXPORT, hostile)
    res_alone = _check(alone, "--workers", "1")
    res_both = _check(both, "--workers", "1")
    assert res_alone.returncode == 0, res_alone.stdout + res_alone.stderr
    assert res_both.returncode == 3, res_both.stdout + res_both.stderr
    got_alone, got_both = _rows(alone), _rows(both)
    assert {r["status"] for r in got_alone.values()} == {"pass"}
    keys = ("file_id", "status", "reason", "n_pairs", "n_match")
    for task_id, row in got_alone.items():
        assert {k: got_both[task_id][k] for k in keys} == {k: row[k] for k in keys}, got_both[task_id]
    # the hostile export's own second task is a mismatch of its own (its witness returns its input); the first's
    # replacement of as_grid is a changed module, which ends its child (test_verdicts_do_not_depend_on_workers...)
    assert got_both["p2"]["status"] == "mismatch" and got_both["p2"]["file_id"] == _file_id(hostile)


FORGE_NEXT = '''import sys as _s
_wc = _s.modules["pipeline.qualify.witness_child"]
_wc.run_witness = lambda job: {"compile": "\\x1b[2J\\x1b[31m" + "forged\\n" * 700_000, "runs": []}
_wc.changed_modules = lambda: []  # and hides that it changed modules (which closes the child): code can
''' + CROSS.replace("    ", "def transform_input(self, grid):\n    ", 1)


def test_a_forged_reply_is_that_tasks_error_bounded_and_the_next_task_gets_a_fresh_child(tmp_path: Path):
    """A witness that replaces the child's run_witness: the next task's reply is a 5 MB reason full of line breaks
    and terminal escapes, which was printed and stored as it was (and every later task of the child got it). Now
    that reply is the victim's `error`, one short visible line; the child is closed, so the task after it passes."""
    cases = {"a_good": _witness(CROSS), "b_forges_next": FORGE_NEXT, "c_victim": _witness(CROSS),
             "d_good": _witness(CROSS)}
    made = tmp_path / "forge.csv"
    _write_export(made, cases)
    db = tmp_path / "f.duckdb"
    _ingest(db, made)
    res = _check(db, "--workers", "1")
    assert res.returncode == 3, res.stdout[-2000:] + res.stderr[-2000:]
    assert len(res.stdout) + len(res.stderr) < 5000 and "\x1b" not in res.stdout + res.stderr
    rows = _rows(db)
    assert {n: r["status"] for n, r in rows.items()} == {"a_good": "pass", "b_forges_next": "pass",
                                                         "c_victim": "error", "d_good": "pass"}, rows
    reason = rows["c_victim"]["reason"]
    assert "sent back a reply that arcstudy's code in it does not make" in reason, reason
    assert len(reason) <= 500 and "\n" not in reason and "\x1b" not in reason


def test_every_reason_from_the_child_is_one_short_visible_line_and_a_forged_reply_closes_the_child(tgi_tasks):
    """check_task on replies run_witness never makes: each is the task's error with a bounded reason, and the child
    is discarded; a well-formed reply is judged as before and keeps its child."""
    from pipeline.core.sandbox import SandboxFailure
    from pipeline.qualify.witness_child import MAX_TEXT
    from pipeline.qualify.witnesses import MAX_REASON_CHARS, check_task, witness_tasks

    task = witness_tasks(tgi_tasks)[0]
    n = len(task.inputs)
    good = [("grid", out) for out in task.outputs]
    huge = "\x1b[31m\r\n" * 2_000_000
    forged = {
        "not_a_dict": ["compile", "runs"],
        "huge_compile": {"compile": huge, "runs": []},
        "huge_too_large": {"compile": None, "runs": [], "too_large": huge},
        "huge_raised": {"compile": None, "runs": [[("raised", huge)] * n] * 2},
        "unknown_key": {"compile": None, "runs": [good, good], "extra": 1},
        "unknown_kind": {"compile": None, "runs": [[("pass", None)] * n] * 2},
        "not_pairs": {"compile": None, "runs": [[1] * n] * 2},
        "compile_not_text": {"compile": 12, "runs": []},
        "empty_too_large": {"compile": None, "runs": [good], "too_large": ""},
        "one_run": {"compile": None, "runs": [good]},
    }
    for name, reply in forged.items():
        children = _Children(reply)
        row = check_task(task, children)
        assert row["status"] == "error" and "does not make" in row["reason"], (name, row)
        assert len(row["reason"]) <= MAX_REASON_CHARS and "\n" not in row["reason"] and "\x1b" not in row["reason"]
        assert children.discarded == 1, name
    # a grid whose cell is an integer of 10^6 digits: a mismatch said in a few words, not a 10^6-digit repr
    big_cell = [("grid", ((10 ** 1_000_000,),))] + good[1:]
    children = _Children({"compile": None, "runs": [big_cell, big_cell]})
    row = check_task(task, children)
    assert row["status"] == "mismatch" and "an integer of" in row["reason"] and len(row["reason"]) < 300, row
    # the longest texts the child itself sends are within its bound, shown visibly
    text = "\x07" + "y" * (MAX_TEXT - 1)
    children = _Children({"compile": text, "runs": []})
    row = check_task(task, children)
    assert (row["status"], children.discarded) == ("error", 0) and row["reason"].startswith("\\x07yyy"), row
    assert check_task(task, _Children({"compile": None, "runs": [good, good]}))["status"] == "pass"
    # a sandbox failure's detail (up to 1000 characters from the child) is bounded too
    row = check_task(task, _Children(SandboxFailure("error", "z\x1b" * 500)))
    assert len(row["reason"]) <= MAX_REASON_CHARS and "\x1b" not in row["reason"]


def test_a_framework_whose_import_ends_the_process_is_said_so_without_a_requirements_hint(tmp_path: Path):
    db = tmp_path / "x.duckdb"
    _ingest(db, EXPORT)
    exits = tmp_path / "exits" / "Framework"
    exits.mkdir(parents=True)
    (exits / "__init__.py").write_text("")
    (exits / "transformation_library.py").write_text("import os\nos._exit(0)\n")
    res = _check(db, framework=exits.parent)
    assert res.returncode == 1, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "did not finish" in lines[0] and "exit code 0" in lines[0] and "ends the process" in lines[0], lines
    assert "requirements" not in lines[0]


def test_a_framework_import_stopped_at_the_start_up_limit_names_that_limit_not_timeout():
    """A hanging import ran for 30 s under `--timeout 3` and was said to exceed "the wall-clock limit of 3 s" (the
    sandbox's start gets the larger of the call's limit and its own floor): the message names the limit that held."""
    from pipeline.core.sandbox import SandboxFailure
    from pipeline.qualify.witnesses import START_LIMIT_S, _import_failure, witness_limits

    failure = SandboxFailure("timeout", "the sandbox did not start: the code ran longer than the wall-clock limit "
                                        "of 3 s (its process group was killed)")
    said = _import_failure(Path("/fw"), failure, witness_limits(3), START_LIMIT_S + 0.2)
    assert f"start-up limit of {START_LIMIT_S:g} s" in said and "did not finish" in said
    assert "limit of 3 s" not in said and "requirements" not in said
    said = _import_failure(Path("/fw"), failure, witness_limits(100), 100.3)
    assert "start-up limit of 100 s" in said and "after 100 s" in said


def test_verdicts_do_not_depend_on_workers_and_a_monkeypatch_ends_its_child(tmp_path: Path):
    """A witness that replaced np.array made the next task of its export `error` with --workers 1 and `pass` with
    --workers 2 (the tasks of an export shared a child per worker, so what ran before a task depended on the
    workers). Tasks now run in fixed batches, each in a fresh child, and a witness that changes a module (by
    name) ends its child: the next task passes either way. A change in place (os.environ), which that check does
    not see, reaches the next task of the batch: the same with one worker as with two."""
    cases = {
        "a_patches_numpy": _witness("    np.array = lambda *a, **k: (_ for _ in ()).throw(RuntimeError('sabotaged'))\n"
                                    + CROSS),
        "b_good": _witness(CROSS),
        "c_marks_environ": _witness("    import os\n    os.environ['ARCSTUDY_WITNESS_MARK'] = '1'\n" + CROSS),
        "d_reads_environ": _witness("    import os\n    if os.environ.get('ARCSTUDY_WITNESS_MARK'):\n"
                                    "        return cross_through(grid, 5)\n" + CROSS),
        "e_good": _witness(CROSS),
    }
    made = tmp_path / "patch.csv"
    _write_export(made, cases)
    db = tmp_path / "p.duckdb"
    _ingest(db, EXPORT, made)  # two exports: two batches, so two workers are two processes
    seen = {}
    for workers in ("1", "2"):
        res = _check(db, "--workers", workers)
        assert res.returncode == 3, res.stdout + res.stderr
        seen[workers] = {name: (r["status"], r["reason"]) for name, r in _rows(db).items()}
    assert seen["1"] == seen["2"]
    statuses = {name: seen["1"][name][0] for name in cases}
    assert statuses == {"a_patches_numpy": "nondeterministic", "b_good": "pass", "c_marks_environ": "pass",
                        "d_reads_environ": "mismatch", "e_good": "pass"}, seen["1"]


def test_batches_are_cut_by_export_and_size_only(tgi_tasks):
    import dataclasses

    from pipeline.qualify.witnesses import witness_batches, witness_tasks

    one = witness_tasks(tgi_tasks)[0]
    tasks = [dataclasses.replace(one, file_id=f, task_id=f"t{i}") for f, n in (("f1", 5), ("f2", 3)) for i in range(n)]
    batches = witness_batches(tasks, size=2)
    assert [(b.key, [t.task_id for t in b.tasks]) for b in batches] == [
        ("f1#0", ["t0", "t1"]), ("f1#1", ["t2", "t3"]), ("f1#2", ["t4"]), ("f2#0", ["t0", "t1"]), ("f2#1", ["t2"])]
    assert all({t.file_id for t in b.tasks} == {b.key.split("#")[0]} for b in batches)


def test_a_task_that_changed_modules_or_raised_past_run_witness_closes_its_child(tgi_tasks):
    from pipeline.core.sandbox import SandboxFailure
    from pipeline.qualify.witnesses import check_task, witness_tasks

    task = witness_tasks(tgi_tasks)[0]
    good = [("grid", out) for out in task.outputs]
    children = _Children({"compile": None, "runs": [good, good], "changed": "numpy"})
    assert check_task(task, children, "k#0")["status"] == "pass"  # its own row is its own
    assert children.calls == ["k#0"] and children.discarded == 1
    children = _Children(SandboxFailure("error", "KeyboardInterrupt: "))
    assert check_task(task, children)["status"] == "error" and children.discarded == 1


def test_the_simulators_arc_tgi_witnesses_pass_check_witnesses(tmp_path: Path):
    """What `arcstudy simulate` writes as an ARC-TGI export is checked as a real one: every witness ran and
    reproduced its task (the simulator once wrote `transform_input(grid)`, and each of them failed with a
    TypeError, since the generators' signature is `transform_input(self, grid)`, formats.md §F)."""
    from pipeline.simulate.arc_tasks import generate_task_pool, tgi_csv_text

    tasks = generate_task_pool(5, 4, 3)
    export = tmp_path / "simulated_tgi.csv"
    export.write_text(tgi_csv_text(tasks), encoding="utf-8")
    db = tmp_path / "w.duckdb"
    _ingest(db, export)
    done = _check(db, "--workers", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _rows(db)
    assert len(rows) == len(tasks) and {r["status"] for r in rows.values()} == {"pass"}, rows
