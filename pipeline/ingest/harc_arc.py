"""ARC task JSON (spec/formats.md §E) and ARC-TGI export CSV (§F) readers.

ARC task JSON: `{"train": [{"input": grid, "output": grid}, ...], "test": [...]}` (key order free, test
outputs optional), or a Kaggle-style collection `{task_id: task, ...}`. A grid is a list of rows of ints
0-9, rectangular, 1x1 to 30x30. A single-task file with a bad task is rejected (`task_structure`,
`grid_invalid`); in a collection the bad task is quarantined (location `task <id>`) and the others load.
Flags: `id_not_filename` (the task carries an `id`/`task_id`/`name` that differs from the file name),
`nonstandard_task_id` (not 8 lowercase hex characters), `extra_keys` (top-level keys besides
train/test).

ARC-TGI: the CSV written by `ARCTask.append_to_csv`, read in bounded pieces (a row over 16 MiB is
`record_too_long`; an export of TGI_PIECED_BYTES or more is read and written a piece at a time, in two passes:
`_TgiExport`). Each JSON column is parsed (`invalid_json`, `wrong_json_type`, `duplicate_key` for an object
naming a key twice, as an ARC task file is refused), `data` must pass the ARC task checks, a blank task_id or
generator_name is `missing_value`, and `code` is stored as text: ingest never executes, imports or compiles it. Rows of all.csv / individual_files.csv (the dataset generator's files of every
folder's tasks) are flagged `aggregate_file`; a row repeating another file's task (`tgi_task_copies`) is stored
with its file, named in the ingest summary (`tgi_repeats`), and counted once by the families.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.spool import Spool
from pipeline.core.textfiles import (
    DUPLICATE_KEY,
    JSON_TOO_DENSE,
    LONE_SURROGATE,
    UTF8_BOM,
    DuplicateKey,
    MarkingDecoder,
    TextFacts,
    ascii_json,
    dense_json_reason,
    json_document,
    json_message,
    keys_twice,
    lone_surrogates,
    not_utf8_reason,
    path_text,
    read_text_document,
)
from pipeline.core.workspace import Workspace
from pipeline.ingest.base import (
    NESTED_TOO_DEEPLY,
    BadEntries,
    FileContext,
    FileRejected,
    ReaderOutput,
    Reject,
    clip,
)
from pipeline.ingest.formats import Head
from pipeline.ingest.harc_csv import (
    ROW,
    ROW_HASH,
    ROW_JSON,
    CsvSource,
    LoadedCsv,
    RowCheck,
    Variant,
    apply_checks,
    header_columns,
    listed_rows,
    load_csv,
    match_variant,
    not_blank,
    piece_bytes,
    raw_frame,
    read_header,
    required,
    short_row,
    src,
    with_row_json,
    without_long_rows,
)

TASKS = "core_arc__tasks"
PAIRS = "core_arc__task_pairs"
TGI_RAW = "raw_arctgi__csv_rows"
TGI_TASKS = "core_arctgi__tasks"
TASK_TABLES = (TASKS, PAIRS)
TGI_TABLES = (TGI_RAW, TGI_TASKS, PAIRS)
ARC_ID = re.compile(r"^[0-9a-f]{8}$")
ID_KEYS = ("id", "task_id", "name")
MAX_SIDE = 30

TGI_COLUMNS = ("task_id", "created_at", "generator_name", "input_reasoning_chain",
               "transformation_reasoning_chain", "task_variables", "code", "data")
TGI_VARIANTS = (Variant("ARC-TGI export (ARCTask.append_to_csv)", TGI_COLUMNS),)


class TaskInvalid(ValueError):
    def __init__(self, check: str, where: str, reason: str):
        super().__init__(f"{where}: {reason}")
        self.check = check
        self.where = where
        self.reason = reason


def grid_to_string(value: Any, where: str) -> tuple[str, int, int]:
    """An ARC JSON grid as an H-ARC grid string, with its height and width; TaskInvalid if malformed."""
    if not isinstance(value, list) or not value:
        raise TaskInvalid("grid_invalid", where, "must be a non-empty list of rows")
    if not all(isinstance(row, list) for row in value):
        raise TaskInvalid("grid_invalid", where, "every row must be a list of cells")
    height, width = len(value), len(value[0])
    for i, row in enumerate(value):
        if len(row) != width:
            raise TaskInvalid("grid_invalid", where,
                              f"is not rectangular: row 0 has {width} cells, row {i} has {len(row)}")
        for j, cell in enumerate(row):
            if type(cell) is not int or not 0 <= cell <= 9:
                raise TaskInvalid("grid_invalid", where, f"cell ({i}, {j}) is {cell!r}, expected an integer 0-9")
    if not (1 <= height <= MAX_SIDE and 1 <= width <= MAX_SIDE):
        raise TaskInvalid("grid_invalid", where, f"is {height} x {width}; sides must be 1-30")
    return "|" + "|".join("".join(map(str, row)) for row in value) + "|", height, width


def parse_task(obj: Any, task_id: str, where: str) -> tuple[list[dict], dict]:
    """Pairs (rows for core_arc__task_pairs, without file_id) and task facts; TaskInvalid if malformed."""
    if not isinstance(obj, dict):
        raise TaskInvalid("task_structure", where, f"is not a JSON object (got {type(obj).__name__})")
    missing = [k for k in ("train", "test") if k not in obj]
    if missing:
        raise TaskInvalid("task_structure", where, f"is missing {' and '.join(missing)} (a task needs train and test)")
    pairs: list[dict] = []
    has_test_outputs = True
    for split in ("train", "test"):
        items = obj[split]
        if not isinstance(items, list) or not items:
            raise TaskInvalid("task_structure", where, f"{split} must be a non-empty list of pairs")
        for i, pair in enumerate(items):
            at = f"{where} {split}[{i}]"
            if not isinstance(pair, dict) or "input" not in pair:
                raise TaskInvalid("task_structure", at, "is not an object with an input grid")
            if split == "train" and "output" not in pair:
                raise TaskInvalid("task_structure", at, "has no output grid (train pairs need one)")
            in_text, in_h, in_w = grid_to_string(pair["input"], f"{at}.input")
            out_text = out_h = out_w = None
            if pair.get("output") is not None:
                out_text, out_h, out_w = grid_to_string(pair["output"], f"{at}.output")
            elif split == "test":
                has_test_outputs = False
            pairs.append({"task_id": task_id, "pair_split": split, "pair_index": i, "input_grid": in_text,
                          "output_grid": out_text, "input_height": in_h, "input_width": in_w,
                          "output_height": out_h, "output_width": out_w})
    facts = {"task_id": task_id, "n_train_pairs": len(obj["train"]), "n_test_pairs": len(obj["test"]),
             "has_test_outputs": has_test_outputs, "task_json": json.dumps(obj, separators=(",", ":"))}
    return pairs, facts


def _task_flags(obj: dict, task_id: str, file_stem: str | None) -> list[str]:
    flags = []
    embedded = next((obj[k] for k in ID_KEYS if isinstance(obj.get(k), str)), None)
    if file_stem is not None and embedded is not None and embedded.removesuffix(".json") != file_stem:
        flags.append("id_not_filename")
    if not ARC_ID.match(task_id):
        flags.append("nonstandard_task_id")
    if set(obj) - {"train", "test"}:
        flags.append("extra_keys")
    return flags


def _is_task(obj: Any) -> bool:
    return isinstance(obj, dict) and "train" in obj and "test" in obj


def _is_collection(obj: Any) -> bool:
    # One task-shaped entry makes it a collection: its malformed entries are then quarantined one by one
    # rather than the whole file going unrecognised with its good tasks.
    return (isinstance(obj, dict) and bool(obj) and not _is_task(obj) and not _is_partial_task(obj)
            and any(isinstance(v, dict) and ("train" in v or "test" in v) for v in obj.values()))


def _is_partial_task(obj: Any) -> bool:
    """A task object missing train or test: read as a task, so the reason names what is missing."""
    return isinstance(obj, dict) and ("train" in obj or "test" in obj) and not _is_task(obj)


# An ARC task is tens of KB (ten 30x30 pairs: under 60 KB); one of megabytes is no task a person solves, and
# parsing JSON of small grids takes about 50 times its size in Python objects and rows (a 321 MB task of 2x2
# grids: 17.5 GB). So a task over MAX_TASK_BYTES is refused unparsed (`task_too_large`), and a file of that size or
# more is read as a collection, a task at a time, in pieces (a single task that big is refused whole).
MAX_TASK_BYTES = 4 << 20
TASK_TOO_LARGE = "task_too_large"
STREAM_TASKS_BYTES = MAX_TASK_BYTES
TASKS_PER_PIECE = 500  # tasks in a piece, at most ...
PIECE_TASK_CHARS = 8 << 20  # ... and their JSON's characters


class _TaskTooLarge(Exception):
    """A value of a streamed collection runs past MAX_TASK_BYTES: not parsed."""


@dataclass(frozen=True)
class _NestedTooDeep:
    """A collection's value that json cannot read for its depth (`_TaskCollection.entries`): its first characters."""

    head: str
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _end_of_value(text: str, start: int) -> int | None:
    """The index just past the JSON array or object that opens at `start` (its brackets counted outside its
    strings), or None when it does not close within `text`."""
    depth = 0
    for token in _JSON_TOKEN.finditer(text, start):
        first = token.group()[0]
        if first in "[{":
            depth += 1
        elif first in "]}":
            depth -= 1
            if depth == 0:
                return token.end()
    return None


class _TaskCollection:
    """The pieces of a big ARC task collection (`{"id": {task}, ...}`): its tasks parsed one at a time from a
    sliding window of the file, TASKS_PER_PIECE to a piece, so memory holds one piece whatever the file's size.
    Picklable; called once, in the writing process (`ReaderOutput.pieces`)."""

    WINDOW = 8 << 20

    def __init__(self, path: Path, file_id: str):
        self.path, self.file_id = path, file_id
        self.chars = 0  # characters of the values parsed so far
        self.text = TextFacts()  # a BOM, CRLF line ends: flagged as when the file is read whole

    def entries(self) -> Iterator[tuple[str, Any, list[DuplicateKey]]]:
        """(task id, task, the task's objects that name a key twice) for each entry of the collection."""
        decoder = MarkingDecoder()
        with open(self.path, "rb") as raw:
            self.text = TextFacts(has_bom=raw.read(len(UTF8_BOM)) == UTF8_BOM)
        last = ""  # the last character read (a CR ending one window, its LF starting the next)

        with open(self.path, encoding="utf-8-sig", newline="") as f:  # CRLF kept: JSON reads CR as space

            def read() -> str:
                nonlocal last
                more = f.read(self.WINDOW)
                if more and not self.text.has_crlf:
                    self.text.has_crlf = "\r\n" in last + more[:1] or "\r\n" in more
                last = more[-1:] or last
                return more

            buf, pos = read(), 0
            ended = False

            def need(n: int = 1) -> None:
                nonlocal buf, pos, ended
                while not ended and len(buf) - pos < n:
                    more = read()
                    ended = not more
                    buf, pos = buf[pos:] + more, 0

            def skip_space() -> None:
                nonlocal pos
                while True:
                    need()
                    while pos < len(buf) and buf[pos] in " \t\r\n":
                        pos += 1
                    if pos < len(buf) or ended:
                        return

            def value() -> Any:
                nonlocal buf, pos, ended
                while True:
                    try:
                        obj, end = decoder.raw_decode(buf, pos)
                        if end < len(buf) or ended:
                            self.chars += end - pos
                            pos = end
                            return obj
                    except json.JSONDecodeError:
                        if ended:
                            raise
                    except RecursionError:  # a value nested too deeply for json: skipped whole, said by the caller
                        end = _end_of_value(buf, pos)
                        if end is not None:
                            skipped = _NestedTooDeep(buf[pos:min(end, pos + 1024)])
                            self.chars += end - pos
                            pos = end
                            return skipped
                        if ended:
                            raise json.JSONDecodeError("a value nested too deeply is not closed", buf, pos) from None
                    if len(buf) - pos > MAX_TASK_BYTES:  # no end within the limit: not held, not parsed further
                        raise _TaskTooLarge
                    more = read()  # the value runs past the window: widen it
                    ended = not more
                    buf, pos = buf[pos:] + more, 0

            skip_space()
            if buf[pos:pos + 1] != "{":
                raise json.JSONDecodeError("expected a JSON object", buf, pos)
            pos += 1
            skip_space()
            if buf[pos:pos + 1] == "}":
                return
            while True:
                key = value()
                skip_space()
                if buf[pos:pos + 1] != ":":
                    raise json.JSONDecodeError("expected ':'", buf, pos)
                pos += 1
                skip_space()
                marked = decoder.marked
                task = value()
                yield key, task, (keys_twice(task, (key,)) if decoder.marked > marked else [])
                skip_space()
                sep = buf[pos:pos + 1]
                pos += 1
                if sep == "}":
                    return
                if sep != ",":
                    raise json.JSONDecodeError("expected ',' or '}'", buf, pos - 1)
                skip_space()

    def __call__(self) -> Iterator[ReaderOutput]:
        piece = ReaderOutput()
        tasks: list[dict] = []
        pairs: list[dict] = []

        def done() -> ReaderOutput:
            out = ReaderOutput(rejects=piece.rejects)
            _task_tables(out, self.file_id, self.path.name, tasks, pairs)
            return out

        seen: set[str] = set()
        last_id: str | None = None
        self.chars = piece_start = 0
        try:
            for task_id, task, twice in self.entries():
                last_id = task_id
                if isinstance(task, _NestedTooDeep):
                    piece.rejects.append(Reject(
                        f"task {ascii_json(task_id)}", "invalid_json",
                        f"task {ascii_json(task_id)} is nested too deeply to read (about a thousand brackets or more, "
                        "inside one another; no ARC task nests past four): it is quarantined, the other tasks load",
                        raw_text=task.head, target_table=TASKS, value=task_id))
                    continue
                if task_id in seen:  # the earlier task of this id is already loaded
                    piece.rejects.append(_task_twice(task_id, task, "the earlier one loaded, this one is quarantined"))
                    continue
                seen.add(task_id)
                _collection_entry(piece, task_id, task, tasks, pairs, BadEntries({task_id: task}, None, twice))
                if len(tasks) >= TASKS_PER_PIECE or self.chars - piece_start >= PIECE_TASK_CHARS:
                    yield done()
                    piece, tasks, pairs = ReaderOutput(), [], []
                    piece_start = self.chars
        except json.JSONDecodeError as err:
            piece.rejects.append(Reject("file", "invalid_json", f"not valid JSON from character {err.pos} of a "
                                        f"window on: {err.msg}; the tasks before it loaded", target_table=TASKS))
        except _TaskTooLarge:
            after = "the first task" if last_id is None else f"the task after {ascii_json(last_id)}"
            piece.rejects.append(Reject(
                "file", TASK_TOO_LARGE,
                f"{after} (or its id) runs over {MAX_TASK_BYTES >> 20} MiB of JSON, far more than any ARC task: it "
                "is not parsed, and the rest of the collection is not read (the tasks before it loaded); remove it "
                "or split the file", target_table=TASKS))
        last_piece = done()
        last_piece.flags = self.text.flags()  # known once the whole file was read
        yield last_piece


def _task_twice(task_id: str, task: Any, what_happened: str) -> Reject:
    """The reject of a task whose id the collection names twice (json keeps the later task only)."""
    return Reject(f"task {ascii_json(task_id)}", DUPLICATE_KEY,
                  f"the collection names the task id {ascii_json(task_id)} twice, and which task is meant cannot be "
                  f"known: {what_happened}; rename or remove one", clip(ascii_json(task)), TASKS, None,
                  ascii_json(task_id))


def _collection_entry(out: ReaderOutput, task_id: Any, task: Any, tasks: list[dict], pairs: list[dict],
                      bad: BadEntries) -> None:
    """One entry of a task collection: its task and pairs, or its reject."""
    reject = bad.reject((task_id,), f"task {ascii_json(task_id)}", "task", TASKS)
    if reject is not None:  # bad text (a lone surrogate escape) or a key named twice: this task is quarantined
        out.rejects.append(reject)
        return
    try:
        task_pairs, facts = parse_task(task, task_id, f"task {task_id}")
    except TaskInvalid as err:
        out.rejects.append(Reject(f"task {task_id}", err.check, f"{err.where} {err.reason}",
                                  raw_text=json.dumps(task), target_table=TASKS, value=task_id))
        return
    tasks.append({**facts, "flags": _task_flags(task, task_id, None)})
    pairs += task_pairs


def _task_tables(out: ReaderOutput, file_id: str, file_name: str, tasks: list[dict], pairs: list[dict]) -> None:
    fid = {"file_id": file_id}
    if not tasks:
        return
    # Columns in the table's order (task_id before file_name): the frame then needs no conforming select.
    out.tables[TASKS] = pl.DataFrame([{**fid, "task_id": t["task_id"], "file_name": file_name, **t} for t in tasks],
                                     schema_overrides={"flags": pl.List(pl.String)})
    out.tables[PAIRS] = pl.DataFrame([{**fid, **p} for p in pairs], infer_schema_length=None) if pairs \
        else pl.DataFrame()


def _opens_as_collection(path: Path) -> bool:
    """Whether the file opens as a collection: an object whose first key is no task key."""
    with open(path, "rb") as f:
        head = f.read(4096)
    text = head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    match = re.match(r'\{\s*"((?:[^"\\]|\\.)*)"', text)
    return match is not None and match.group(1) not in ("train", "test")


def read_task_json(ctx: FileContext) -> ReaderOutput:
    size = ctx.path.stat().st_size
    if size >= STREAM_TASKS_BYTES:
        if _opens_as_collection(ctx.path):
            return ReaderOutput(detection_evidence="a collection of ARC tasks keyed by task id (read a task at a "
                                "time)", pieces=_TaskCollection(ctx.path, ctx.file_id))
        raise FileRejected(f"{size / (1 << 20):,.1f} MiB of JSON that does not open as a task collection "
                           '({"<task id>": {task}, ...}): one ARC task that big is far more than any ARC task (at '
                           f"most {MAX_TASK_BYTES >> 20} MiB are read), so it is not parsed", check=TASK_TOO_LARGE)
    try:
        text, facts = read_text_document(ctx.path)  # BOM removed, CRLF accepted: both flagged
    except UnicodeDecodeError as err:
        raise FileRejected(not_utf8_reason(err), check="not_utf8") from None
    try:
        obj, twice = json_document(text)
    except json.JSONDecodeError as err:
        raise FileRejected(f"not valid JSON: {json_message(err)} at line {err.lineno} column {err.colno}",
                           check="invalid_json", raw_text=text) from err
    except RecursionError:
        if _opens_as_collection(ctx.path):  # read a task at a time: the task too deep is quarantined alone
            return ReaderOutput(detection_evidence="a collection of ARC tasks keyed by task id (one of them nested "
                                "too deeply to read: read a task at a time)", pieces=_TaskCollection(ctx.path, ctx.file_id))
        raise FileRejected(NESTED_TOO_DEEPLY, check="invalid_json", raw_text=text[:1000]) from None
    out = ReaderOutput(flags=facts.flags())
    tasks: list[dict] = []
    pairs: list[dict] = []
    stem = ctx.path.stem
    bad = BadEntries(obj, text, twice)
    if _is_collection(obj):
        out.detection_evidence = f"a collection of {len(obj)} ARC tasks keyed by task id"
        ids_twice = {b.key for b in twice if b.path == ()}
        bad.found = [b for b in bad.found if b.path != ()]
        for task_id, task in obj.items():
            if task_id in ids_twice:
                out.rejects.append(_task_twice(
                    task_id, task, "JSON keeps only the later one, which is quarantined here; the earlier one is lost"))
                continue
            _collection_entry(out, task_id, task, tasks, pairs, bad)
    else:
        if not isinstance(obj, dict):
            raise FileRejected(f"an ARC task file holds a JSON object, this one holds a {type(obj).__name__}",
                               check="task_structure", raw_text=text)
        bad.refuse_whole("task")  # a single task is one entry
        try:
            task_pairs, facts = parse_task(obj, stem, "task")
        except TaskInvalid as err:
            raise FileRejected(f"{err.where} {err.reason}; the file is not a valid ARC task",
                               check=err.check, raw_text=text) from err
        out.detection_evidence = "a single ARC task (train/test) named by its file"
        tasks.append({**facts, "flags": _task_flags(obj, stem, stem)})
        pairs += task_pairs
    fid = {"file_id": ctx.file_id}
    # Columns in the table's order (task_id before file_name): the frame then needs no conforming select.
    out.tables[TASKS] = pl.DataFrame([{**fid, "task_id": t["task_id"], "file_name": ctx.path.name, **t}
                                      for t in tasks],
                                     schema_overrides={"flags": pl.List(pl.String)}) if tasks else pl.DataFrame()
    out.tables[PAIRS] = pl.DataFrame([{**fid, **p} for p in pairs], infer_schema_length=None) if pairs \
        else pl.DataFrame()
    if not tasks:
        out.tables.pop(TASKS)
        out.tables.pop(PAIRS)
    return out


def sniff_task_json(head: Head) -> str | None:
    text = head.text.lstrip()
    if not text.startswith("{"):
        return None
    if head.is_complete:
        obj = head.json_value
        if obj is not None:
            if _is_task(obj):
                return "JSON object with train and test lists (ARC task)"
            if _is_partial_task(obj):
                return "JSON object with a train or test list (ARC task)"
            if _is_collection(obj):
                return f"JSON object of {len(obj)} tasks with train/test (ARC task collection)"
            return None
    if re.match(r'\{\s*"(train|test)"\s*:\s*\[', text):
        return "JSON starting with a train/test list (ARC task)"
    if re.match(r'\{\s*"[^"]{1,64}"\s*:\s*\{\s*"(train|test)"\s*:\s*\[', text):
        return "JSON object of tasks starting with train/test (ARC task collection)"
    return None


# --- ARC-TGI --------------------------------------------------------------------------------------

TGI_TIME_FORMATS = ("%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f")


def _tgi_time() -> tuple[pl.Expr, pl.Expr]:
    text = pl.col(src("created_at")).str.strip_chars()
    naive = pl.coalesce([text.str.to_datetime(f, strict=False, time_unit="us") for f in TGI_TIME_FORMATS])
    with_offset = pl.coalesce([
        text.str.to_datetime(f + "%:z", strict=False, time_unit="us", time_zone="UTC").dt.replace_time_zone(None)
        for f in TGI_TIME_FORMATS] + [
        text.str.replace(r"Z$", "+00:00").str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False,
                                                           time_unit="us", time_zone="UTC")
        .dt.replace_time_zone(None)])
    return pl.coalesce(naive, with_offset), naive.is_null() & with_offset.is_not_null()


def _json_of(value: str | None, column: str, kind: type, kind_name: str) -> tuple[Any, tuple[str, str] | None]:
    """A JSON column parsed, or (check, reason): not JSON, bad text, an object naming a key twice (as an ARC task
    file would be refused: `{"train": [...], "train": [...]}` keeps only the later list), or the wrong type."""
    too_dense = dense_json_reason(value or "", column)
    if too_dense is not None:
        return None, (JSON_TOO_DENSE, too_dense)
    try:
        parsed, twice = json_document(value or "")
    except json.JSONDecodeError as err:
        return None, ("invalid_json", f"{column} is not valid JSON: {json_message(err)} at character {err.pos}")
    except RecursionError:
        return None, ("invalid_json", f"{column} is not readable JSON: it is nested too deeply to read")
    row_words = ("this is quarantined", "this row is quarantined")
    if twice:
        where = path_text(twice[0].path)
        return None, (DUPLICATE_KEY, twice[0].reason(column + (f", field {where}" if where else "")).replace(*row_words))
    bad = lone_surrogates(parsed, value)
    if bad:
        return None, (LONE_SURROGATE, bad[0].reason(column).replace(*row_words))
    if not isinstance(parsed, kind):
        return None, ("wrong_json_type", f"{column} is a JSON {type(parsed).__name__}, expected {kind_name}")
    if kind is list and not all(isinstance(x, str) for x in parsed):
        return None, ("wrong_json_type", f"{column} must be a JSON list of strings")
    return parsed, None


GENERIC_SPLITS = {"train": "train", "training": "train", "eval": "eval", "evaluation": "eval", "test": "test"}
BENCHMARK_FOLDER = re.compile(r"^ARC([-_ ]|\d)")  # ARC-AGI-1-Train, ARC1-Final-Generators, ARC-Mini
NOT_A_BENCHMARK = re.compile(r"^ARC[-_ ](TGI|Task[-_ ]Generators)", re.IGNORECASE)  # the repository itself
BENCHMARK_SPLIT = re.compile(r"^(?P<benchmark>.+?)[-_ ](?P<split>train|training|eval|evaluation|test)$", re.IGNORECASE)


def family_prefix_from_path(path: Path) -> str | None:
    """The benchmark folder an ARC-TGI export belongs to, read from its path: the file's stem or the nearest
    folder whose name starts with `ARC` (the generator repository's folders: `ARC-AGI-1-Train`, `ARC-AGI-2-Eval`,
    `ARC-Mini`, `ARC1-Final-Generators`, ...), joined with a bare `Train`/`Eval` stem below it (the dataset
    generator names its output after the split). None when the path names none (`all.csv` in a plain folder)."""
    parts = [path.stem, *(p.name for p in path.parents if p.name)][:3]
    for i, part in enumerate(parts):
        if BENCHMARK_FOLDER.match(part) and not NOT_A_BENCHMARK.match(part):
            if i > 0 and path.stem.lower() in GENERIC_SPLITS and not BENCHMARK_SPLIT.match(part):
                return f"{part}-{path.stem}"
            return part
    return None


def benchmark_and_split(prefix: str | None) -> tuple[str | None, str | None]:
    """(`ARC-AGI-1`, `train`) from `ARC-AGI-1-Train`; (prefix, None) when it names no split."""
    if not prefix:
        return None, None
    m = BENCHMARK_SPLIT.match(prefix)
    if m is None:
        return prefix, None
    return m["benchmark"], GENERIC_SPLITS[m["split"].lower()]


TGI_PIECED_BYTES = 8 << 20  # an export at least this big is read in pieces, in two passes (`_TgiExport`)
TGI_SOURCE_NAME = "ARC-TGI export"  # in reasons and messages
TGI_PIECE_BYTES = 8 << 20  # the size of those pieces at most (each cut at a record boundary)
TGI_PIECE_ROWS = 5000  # rows of a piece, about, at most: each costs ~3 kB in memory as its task's dicts, whatever
# its length, so a piece of short rows is cut by its lines (as counted in the file's first MiB), not its bytes
_TGI_ID = "task_id"


def read_tgi(ctx: FileContext) -> ReaderOutput:
    prefix = ctx.options.get("family_prefix") or family_prefix_from_path(ctx.path)
    aggregate = ["aggregate_file"] if ctx.path.name.lower() in AGGREGATE_FILES else []
    header = read_header(ctx.path)
    variant = match_variant(header, TGI_VARIANTS, TGI_SOURCE_NAME)
    evidence = f"header is the {variant.name}"
    if ctx.path.stat().st_size >= TGI_PIECED_BYTES:
        size = piece_bytes(ctx.path, TGI_PIECE_ROWS, 64 << 10, TGI_PIECE_BYTES)  # a row's code spans several lines
        source = CsvSource(ctx.path, header, TGI_RAW, batch_bytes=size,
                           source_name=TGI_SOURCE_NAME)
        return ReaderOutput(detection_evidence=evidence,
                            pieces=_TgiExport(ctx.file_id, header, source, prefix, aggregate))
    loaded = load_csv(ctx.path, header, raw_table=TGI_RAW, source_name=TGI_SOURCE_NAME)
    n_rows = int(loaded.frame[ROW].max()) if loaded.frame.height else 0
    duplicates = _duplicate_ids(loaded.frame.select(_TGI_ID, ROW, ROW_JSON), ROW_JSON)  # exact: the rows' texts
    out = _tgi_piece(loaded, header, ctx.file_id, duplicates, n_rows, prefix, aggregate)
    out.flags = list(loaded.flags)
    out.detection_evidence = evidence
    return out


def _hash_repeated(values: pl.Series) -> pl.Series:
    """True where the value's 64-bit hash is another value's too: by sorting the hashes, about 30 bytes a value at
    the peak where `is_duplicated`'s hash table takes about 100 (1.2M ids: 112 MB)."""
    hashes = values.hash().to_numpy()
    ordered = np.sort(hashes)
    repeated = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    return pl.Series(np.isin(hashes, repeated))


def _duplicate_ids(rows: pl.DataFrame, content: str) -> pl.DataFrame:
    """What the two duplicate rules need of each task_id named on more than one row of the file (a blank id is
    judged by neither): its number of rows (`__dup_n`), of distinct contents (`__dup_distinct`, by the `content`
    column), its first row (`__dup_first`) and its rows, in order (`__dup_rows`, `listed_rows`). `rows`: every
    loaded row's task_id, row number and `content`."""
    key_ok = (pl.col(_TGI_ID).str.strip_chars() != "").fill_null(False)  # a blank id is quarantined as such
    # the ids whose 64-bit hash is on several rows first (most are on one row), then by their texts
    return (rows.filter(_hash_repeated(rows[_TGI_ID])).filter(key_ok).group_by(_TGI_ID)
            .agg(pl.len().alias("__dup_n"), pl.col(content).n_unique().alias("__dup_distinct"),
                 pl.col(ROW).min().alias("__dup_first"),
                 listed_rows().alias("__dup_rows"))
            .filter(pl.col("__dup_n") > 1))


def _tgi_piece(loaded: LoadedCsv, header: list[str], file_id: str, duplicates: pl.DataFrame, n_rows: int,
               prefix: str | None, aggregate: list[str]) -> ReaderOutput:
    """The rows of a whole export, or of one piece of it (`loaded`, with row_json), checked and made into its
    tables. `duplicates`: `_duplicate_ids` of the whole file; `n_rows`: the file's last row number."""
    out = ReaderOutput(rejects=Spool(loaded.rejects), flags=list(loaded.flags))
    out.tables[TGI_RAW] = raw_frame(loaded, file_id)
    generated_at, converted = _tgi_time()
    df = loaded.frame.rename({h: src(h) for h in header}).with_columns(
        pl.col(src(_TGI_ID)).alias(_TGI_ID), generated_at.alias("generated_at"), converted.alias("__converted"))
    if duplicates.height:
        df = df.join(duplicates, on=_TGI_ID, how="left", maintain_order="left")
    else:  # the usual case: no join (it would hash every row's id) to add null columns
        df = df.with_columns(pl.lit(None, duplicates.schema[c]).alias(c) for c in duplicates.columns if c != _TGI_ID)
    checks = [
        not_blank("task_id", "the generated task's id"), required("created_at", "a creation time"),
        not_blank("generator_name", "the generator name"), required("code", "the transform code (as text)"),
        *[required(c, "a JSON value") for c in ("input_reasoning_chain", "transformation_reasoning_chain",
                                                 "task_variables", "data")],
        RowCheck(TASK_TOO_LARGE, pl.col(src("data")).str.len_bytes() > MAX_TASK_BYTES,
                 pl.format("data holds {} MiB of JSON, far more than any ARC task (at most {} MiB are read): it is "
                           "not parsed", (pl.col(src("data")).str.len_bytes() / (1 << 20)).round(1),
                           pl.lit(MAX_TASK_BYTES >> 20)), "data"),
        RowCheck("time_unparsable", pl.col(src("created_at")).is_not_null() & pl.col("generated_at").is_null(),
                 pl.format("created_at '{}' is not an ISO-8601 time", pl.col(src("created_at"))), "created_at"),
        RowCheck("duplicate_task", (pl.col("__dup_n") > 1) & (pl.col("__dup_distinct") > 1),
                 pl.format("task_id {} appears on rows {} with different contents", pl.col("task_id"),
                           pl.col("__dup_rows")), "task_id"),
        RowCheck("duplicate_row", (pl.col("__dup_n") > 1) & (pl.col("__dup_distinct") == 1)
                 & (pl.col(ROW) != pl.col("__dup_first")),
                 pl.format("exact copy of row {} (task_id {}); the first copy was loaded", pl.col("__dup_first"),
                           pl.col("task_id")), "task_id"),
    ]
    structural = [c for c in [short_row(header, True, loaded.ends_with_newline, n_rows)] if c is not None]
    rejects, bad = apply_checks(df, checks, TGI_TASKS, structural=structural)
    out.rejects += rejects
    tasks: list[dict] = []
    pairs: list[dict] = []
    for rec in df.filter(~bad).iter_rows(named=True):
        row = rec[ROW]
        problems: list[tuple[str, str, str]] = []
        parsed = {}
        for column, kind, kind_name in (("input_reasoning_chain", list, "a list of strings"),
                                        ("transformation_reasoning_chain", list, "a list of strings"),
                                        ("task_variables", dict, "an object"), ("data", dict, "an ARC task object")):
            value, problem = _json_of(rec[src(column)], column, kind, kind_name)
            if problem:
                problems.append((problem[0], column, problem[1]))
            parsed[column] = value
        task_pairs: list[dict] = []
        facts: dict = {}
        if parsed["data"] is not None:
            try:
                task_pairs, facts = parse_task(parsed["data"], rec["task_id"], "data")
            except TaskInvalid as err:
                problems.append((err.check, "data", f"{err.where} {err.reason} (data must be an ARC task)"))
        if problems:
            for check, column, reason in problems:
                out.rejects.append(Reject(f"row {row}", check, reason, raw_text=rec[ROW_JSON], target_table=TGI_TASKS,
                                          column=column, value=(rec[src(column)] or "")[:200]))
            continue
        flags = (["offset_converted_to_utc"] if rec["__converted"] else []) + aggregate
        tasks.append({
            "file_id": file_id, "task_id": rec["task_id"], "row_number": row,
            "generated_at": rec["generated_at"], "generator_name": rec[src("generator_name")],
            "input_reasoning_chain_json": rec[src("input_reasoning_chain")],
            "transformation_reasoning_chain_json": rec[src("transformation_reasoning_chain")],
            "task_variables_json": rec[src("task_variables")], "code_text": rec[src("code")],
            "task_json": facts["task_json"], "n_train_pairs": facts["n_train_pairs"],
            "n_test_pairs": facts["n_test_pairs"], "has_test_outputs": facts["has_test_outputs"],
            "family_prefix": prefix, "flags": flags,
        })
        pairs += [{"file_id": file_id, **p} for p in task_pairs]
    if tasks:
        out.tables[TGI_TASKS] = pl.DataFrame(tasks, infer_schema_length=None,
                                             schema_overrides={"flags": pl.List(pl.String), "family_prefix": pl.String})
        out.tables[PAIRS] = pl.DataFrame(pairs, infer_schema_length=None)
    return out


class _TgiExport:
    """The pieces of a big ARC-TGI export (`ReaderOutput.pieces`), read in two passes of `CsvSource` batches so that
    memory holds one batch (and a few in flight) whatever the export's length, and stores exactly what reading it
    at once stores. The first pass keeps only what the duplicate rules look at across rows: each row's task_id,
    row number and 64-bit hash of its fields (`ROW_HASH`); the ids on several rows whose rows all hash alike are
    compared by their texts in one more pass (`_exact`), so a hash collision never passes different rows as
    copies. The second pass makes each batch's rows with `_tgi_piece`, as a whole file's. Picklable; called
    once, in the writing process."""

    def __init__(self, file_id: str, header: list[str], source: CsvSource, prefix: str | None,
                 aggregate: list[str]) -> None:
        self.file_id, self.header, self.source = file_id, header, source
        self.prefix, self.aggregate = prefix, aggregate

    def loaded(self, batch: LoadedCsv) -> LoadedCsv:
        """A batch as `load_csv` gives a whole file: without its rows over the record limit (quarantined)."""
        return without_long_rows(batch, self.header, TGI_RAW)

    def __call__(self) -> Iterator[ReaderOutput]:
        ids = pl.concat(self.source.scan(lambda b: self.loaded(b).frame.select(_TGI_ID, ROW, ROW_HASH)))
        n_rows = int(ids[ROW].max()) if ids.height else 0
        duplicates = self._exact(_duplicate_ids(ids, ROW_HASH), ids)
        ids = ids.clear()
        for batch in self.source.again():
            loaded = self.loaded(batch)
            piece = LoadedCsv(with_row_json(loaded, self.header), loaded.rejects, loaded.flags,
                              loaded.ends_with_newline)
            yield _tgi_piece(piece, self.header, self.file_id, duplicates, n_rows, self.prefix, self.aggregate)
        yield ReaderOutput(flags=self.source.flags)

    def _exact(self, duplicates: pl.DataFrame, ids: pl.DataFrame) -> pl.DataFrame:
        """`duplicates` with `__dup_distinct` counted on the rows' texts where their hashes say all alike: one more
        pass over the file, holding the first row's text of each such id until its last row is passed."""
        alike = duplicates.filter(pl.col("__dup_distinct") == 1)
        if alike.height == 0:
            return duplicates
        rows = ids.join(alike.select(_TGI_ID), on=_TGI_ID, how="semi")
        last = dict(rows.group_by(_TGI_ID).agg(pl.col(ROW).max()).iter_rows())
        wanted = rows[ROW].implode()
        first: dict[str, str] = {}
        differ: set[str] = set()
        for batch in self.source.again():
            picked = batch.frame.filter(pl.col(ROW).is_in(wanted))
            if picked.height == 0:
                continue
            texts = with_row_json(LoadedCsv(picked, [], [], True), self.header)
            for task_id, row, text in texts.select(_TGI_ID, ROW, ROW_JSON).iter_rows():
                kept = first.setdefault(task_id, text)
                if kept != text:
                    differ.add(task_id)
                if row == last[task_id]:
                    first.pop(task_id)
        return duplicates.with_columns(
            pl.when(pl.col(_TGI_ID).is_in(list(differ))).then(2).otherwise(pl.col("__dup_distinct"))
            .cast(duplicates.schema["__dup_distinct"]).alias("__dup_distinct"))


# One generated task instance: the same generator and identical code, task, reasoning chains and variables. The
# dataset generator writes each task to its folder's CSV and again to all.csv (and individual_files.csv), each
# time under a new task_id and created_at: those rows are copies of one instance, not new tasks.
AGGREGATE_FILES = ("all.csv", "individual_files.csv")  # the dataset generator's files of every folder's tasks
TGI_INSTANCE = ("generator_name", "code_text", "task_json", "input_reasoning_chain_json",
                "transformation_reasoning_chain_json", "task_variables_json")


def tgi_task_copies(tasks: pl.DataFrame, key: tuple[str, ...] = TGI_INSTANCE) -> pl.DataFrame:
    """`tasks` (core_arctgi__tasks rows: file_id, task_id, row_number, family_prefix and the TGI_INSTANCE
    columns) with, per row, the copy that stands for its task instance: `kept_file_id`, `kept_task_id`, and the
    instance's `family_prefix` (the first the copies name).

    Copies are matched across files only: two equal rows of one file are two tasks the generator happened to make
    alike (a duplicate the diversity table counts), so the k-th equal row of one file matches the k-th of another.
    The kept copy is one that names its benchmark folder (a per-folder CSV rather than all.csv) where any does,
    then one not from an aggregate file (flag `aggregate_file`: all.csv, individual_files.csv), then the first by
    file_id and row; every other copy is a repeat of it (one file ingested under two names too). Only content
    matches: a task_id another file gives to a different task is that file's own task. `key`: the TGI_INSTANCE columns, or one column that stands
    for them (tgi_repeats: their digest, so the code and tasks need not be read)."""
    inst = [*key, "_occurrence"]
    aggregate = (pl.col("flags").list.contains("aggregate_file").fill_null(False) if "flags" in tasks.columns
                 else pl.repeat(False, pl.len()))
    # A row whose task_id and content another file holds too is that row's copy (a file ingested under two names,
    # a CRLF copy): matched by its id, before the k-th-equal-row rule, which would otherwise pair it with another
    # equal row of its file when the file holds the content twice (and make its id stand for two tasks).
    same_id = (pl.col("file_id").n_unique().over("task_id", *key) > 1).alias("_same_id")
    occurrence = pl.int_range(pl.len()).over("file_id", *key, "_same_id", order_by="row_number")
    ranked = (tasks.sort(pl.col("family_prefix").is_null(), aggregate, "file_id", "row_number")
              .with_columns(same_id)
              .with_columns(pl.when(pl.col("_same_id")).then(pl.lit("id ") + pl.col("task_id"))
                            .otherwise(pl.lit("copy ") + occurrence.cast(pl.String)).alias("_occurrence"))
              .with_columns(pl.col("file_id").first().over(inst).alias("_inst_file"),
                            pl.col("task_id").first().over(inst).alias("_inst_task")))
    # by content only: a task_id that another file gives to a different task is a different task (an export
    # reusing a trusted export's ids replaced its tasks and took their witness verdicts)
    return (ranked.with_columns(pl.col("_inst_file").alias("kept_file_id"), pl.col("_inst_task").alias("kept_task_id"),
                                pl.col("family_prefix").drop_nulls().first().over(inst).alias("family_prefix"))
            .drop("_occurrence", "_same_id", "_inst_file", "_inst_task"))


def tgi_task_instances(tasks: pl.DataFrame, key: tuple[str, ...] = TGI_INSTANCE) -> pl.DataFrame:
    """Per stored task_id (of `tasks`, as `tgi_task_copies` takes them): the task instance it stands for
    (`kept_file_id`, `kept_task_id`), and `is_ambiguous` where it stands for more than one: two exports give the
    id to different tasks, so a row that names only the id (a human audit) cannot be told to either."""
    inst = tgi_task_copies(tasks, key).select("task_id", "kept_file_id", "kept_task_id").unique()
    return (inst.sort("kept_file_id", "kept_task_id").group_by("task_id", maintain_order=True)
            .agg(pl.col("kept_file_id").first(), pl.col("kept_task_id").first(),
                 (pl.len() > 1).alias("is_ambiguous")).sort("task_id"))


def _tgi_digests(ws: Workspace, where: str = "", params: list | None = None, *, shared: str) -> pl.DataFrame:
    """core_arctgi__tasks rows with the digest of their TGI_INSTANCE columns (`_instance`) instead of the columns:
    `tgi_task_copies(rows, ("_instance",))` without reading the code and tasks. Only the rows whose instance is
    in two files or more (`shared="instance"`: the only ones that can repeat or be repeated, copies being matched
    across files only), or the instances of the task ids in two files or more (`shared="task_id"`: the only ids
    that can stand for two instances, a file holding each id once), so that one big export is not held whole
    (600k rows: 0.5 GB); a row's copies are all kept, so `tgi_task_copies` finds the same copy for it."""
    digest = f"md5(to_json(list_value({', '.join(TGI_INSTANCE)}))) AS _instance"  # JSON: no two lists alike
    # first by the generator (one instance, one generator): the generators in two files or more, or of the ids in
    # two files or more, before any digest is made; the ids by their 64-bit hash and the files by their number,
    # so that the groups' state is two integers (1.2M ids of one file: 0.24 GB of texts otherwise), and two ids
    # of one hash only keep more rows for the exact test below
    numbered = f"{TGI_TASKS} JOIN (SELECT file_id, row_number() OVER () AS f FROM (SELECT DISTINCT file_id FROM " \
               f"{TGI_TASKS})) USING (file_id)"
    ids = (f"SELECT task_id FROM {TGI_TASKS} WHERE hash(task_id) IN "
           f"(SELECT hash(task_id) FROM {numbered} GROUP BY 1 HAVING min(f) < max(f))")
    generators = {"instance": f"SELECT generator_name FROM {numbered} GROUP BY 1 HAVING min(f) < max(f)",
                  "task_id": f"SELECT generator_name FROM {TGI_TASKS} WHERE task_id IN ({ids})"}
    rows = (f"SELECT file_id, task_id, row_number, family_prefix, flags, {digest} FROM (SELECT * FROM {TGI_TASKS} "
            f"{where}) WHERE generator_name IN ({generators[shared]})")
    wanted = {"instance": "SELECT _instance FROM d GROUP BY 1 HAVING count(DISTINCT file_id) > 1",
              "task_id": "SELECT _instance FROM d WHERE task_id IN "
                         "(SELECT task_id FROM d GROUP BY 1 HAVING count(DISTINCT file_id) > 1)"}[shared]
    return ws.read(f"WITH d AS MATERIALIZED ({rows}) SELECT * FROM d WHERE _instance IN ({wanted})", params)


def tgi_shared_ids(ws: Workspace, file_ids: list[str] | None = None, task_ids: list[str] | None = None
                   ) -> list[tuple[str, list[str]]]:
    """(task_id, paths of the files that hold it) for each ARC-TGI task id that two exports give to different
    tasks (`tgi_task_instances`: is_ambiguous), where one of the files is one of `file_ids` (all when None), among
    `task_ids` (all when None). Human audit rows naming such an id count in no family
    (pipeline.transforms.arctgi.family_audits)."""
    if not ws.has_table(TGI_TASKS) or file_ids == [] or task_ids == []:
        return []
    ids = (f"SELECT task_id FROM {TGI_TASKS} WHERE file_id IN (SELECT unnest(?))" if file_ids is not None
           else "SELECT unnest(?)")
    # every row of the generators whose rows use those ids: which instance a row is depends on its copies
    tasks = _tgi_digests(ws, shared="task_id") if file_ids is None and task_ids is None else _tgi_digests(
        ws, f"WHERE generator_name IN (SELECT generator_name FROM {TGI_TASKS} WHERE task_id IN ({ids}))",
        [file_ids if file_ids is not None else task_ids], shared="task_id")
    if tasks.height == 0:
        return []
    ambiguous = tgi_task_instances(tasks, ("_instance",)).filter("is_ambiguous")["task_id"]
    if task_ids is not None:
        ambiguous = ambiguous.filter(ambiguous.is_in(task_ids))
    rows = tasks.filter(pl.col("task_id").is_in(ambiguous.implode()))
    if file_ids is not None:
        rows = rows.filter(pl.col("task_id").is_in(rows.filter(pl.col("file_id").is_in(file_ids))["task_id"]
                                                    .implode()))
    if rows.height == 0:
        return []
    paths = dict(ws.read("SELECT file_id, any_value(file_path) FROM raw_ingest__files WHERE file_id IN "
                         "(SELECT unnest(?)) GROUP BY 1", [rows["file_id"].unique().to_list()]).rows())
    by_id = rows.group_by("task_id").agg(pl.col("file_id").unique().sort()).sort("task_id")
    return [(t, sorted(paths.get(f, f) for f in fs)) for t, fs in by_id.iter_rows()]


def tgi_repeats(ws: Workspace, file_ids: list[str]) -> list[tuple[str, int, str]]:
    """(file path, rows, path of the file they repeat) for each file whose core_arctgi__tasks rows repeat task
    instances another file holds (tgi_task_copies), where either file is one of `file_ids` (an ingest's files):
    the ingest summary says so. The rows stay stored with their file (its provenance); build and the witness
    checks count each instance once."""
    if not file_ids or not ws.has_table(TGI_TASKS):
        return []
    tasks = _tgi_digests(ws, f"WHERE generator_name IN (SELECT generator_name FROM {TGI_TASKS} WHERE file_id IN "
                             "(SELECT unnest(?)))", [file_ids], shared="instance")
    if tasks.height == 0:
        return []
    rep = (tgi_task_copies(tasks, ("_instance",))
           .filter(((pl.col("file_id") != pl.col("kept_file_id")) | (pl.col("task_id") != pl.col("kept_task_id")))
                   & (pl.col("file_id").is_in(file_ids) | pl.col("kept_file_id").is_in(file_ids)))
           .group_by("file_id", "kept_file_id").agg(pl.len().alias("n")))
    if rep.height == 0:
        return []
    paths = dict(ws.read("SELECT file_id, any_value(file_path) FROM raw_ingest__files WHERE file_id IN "
                         "(SELECT unnest(?)) GROUP BY 1", [rep["file_id"].to_list() + rep["kept_file_id"].to_list()])
                 .rows())
    return sorted((paths.get(f, f), int(n), paths.get(k, k)) for f, k, n in rep.iter_rows())


def sniff_tgi(head: Head) -> str | None:
    cols = header_columns(head)
    if not cols:
        return None
    hits = cols & set(TGI_COLUMNS)
    if {"generator_name", "code", "data"} <= cols or len(hits) >= 5:
        return f"CSV header has the ARC-TGI columns {', '.join(sorted(hits))}"
    return None


