"""H-ARC CSV readers (spec/formats.md §D) and the registration of every H-ARC / ARC / ARC-TGI format.

Formats (detected by the CSV header; the file name is only supporting evidence):
- `harc-data`: data.csv (current, 40 columns with `action_id`) and clean_data*.csv (2024, `num_actions`)
- `harc-summary`: summary_data.csv / clean_summary_data*.csv (13 columns)
- `harc-errors`: incorrect_submissions.csv / clean_errors*.csv (with or without `hashed_output_grid`)
- `harc-survey`: feedback, demographics, withdraw (current and 2024 column sets, either file-name spelling)
- `arc-task`, `arc-tgi`: see pipeline/ingest/harc_arc.py

Validator (§D.9), rule ids as written to `quarantine.check_name`:
- reject file: `header_unknown` (not a known column set; the reason names missing/unexpected columns).
- quarantine row: `field_count`, `csv_malformed` (the row does not split into the header's fields),
  `invalid_utf8` (the row holds bytes that are not UTF-8), `header_repeated` (the row is the header line
  again, as where two files were joined: that one reject, not one per column),
  `missing_value`, `not_an_integer`, `not_a_boolean`, `out_of_range` (also an integer past 64 bits), `out_of_vocabulary`,
  `grid_malformed`, `size_mismatch` (drop-downs disagree with the grid and no undo explains it),
  `unknown_action`, `attempt_out_of_range`, `time_unparsable`, `invalid_json`, `joint_id_mismatch`,
  `invalid_md5`, `duplicate_row` (exact copy of an earlier row: the copy is quarantined),
  `duplicate_action` / `duplicate_attempt` / `duplicate_grid` / `duplicate_participant` (the same key
  with different contents: every row of the key is quarantined).
- flag (row `flags`): `tutorial`, `no_terminal_row`, `time_not_monotonic`, `incomplete_participant`,
  `size_lags_undo`, `input_size_mismatch`, `input_placeholder`, `description_varies`, `md5_mismatch`.
- normalize: task_name -> task_id without `.json`; action_id/num_actions -> action_number;
  times (four formats) -> naive timestamps on the participant's clock; x/y -> row/col; sizes ->
  height/width; empty fields -> null.

Not carried into core tables (the raw layer keeps them): the survey and withdraw columns that data.csv
repeats on every row (the survey files are their source), and `joint_id_task` (checked against
hashed_id + "_" + task_name, then implied by participant_id and task_id).
Where the header does not tell the release (summary, feedback, current-form errors), the `clean_`
file-name prefix does; a byte-identical file under both names is one file (same content hash).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate
from pathlib import Path
from typing import NamedTuple

import polars as pl

from pipeline.core.spool import Spool
from pipeline.ingest import harc_arc
from pipeline.ingest.base import FileChangedError, FileContext, FileRejected, ReaderOutput
from pipeline.ingest.buckets import BatchSlices, BucketFiles, bucket_of, read_ipc, scratch_folder
from pipeline.ingest.formats import Head, InputFormat, register
from pipeline.ingest.harc_csv import (
    BATCH_BYTES,
    EXTRA,
    ROW,
    ROW_HASH,
    ROW_JSON,
    SRC,
    UNSPLIT,
    CsvSource,
    LoadedCsv,
    RowCheck,
    Variant,
    apply_checks,
    as_bool,
    as_int,
    broken,
    duplicate_rules,
    flag_lists,
    grid_check,
    header_columns,
    header_repeated,
    int_parse_failed,
    json_explain,
    json_list_ok_series,
    load_csv,
    match_variant,
    md5_texts,
    not_in,
    out_of_range,
    parse_failed,
    read_header,
    required,
    short_row,
    src,
    typed,
    with_grid_columns,
)
from schemas.harc import HARC_ACTIONS, HARC_CSV_COLUMNS, HARC_TOOLS, SELECT_LOCATIONS, raw_csv_column
from schemas.vocabulary import HARC_SPLITS, HARC_TERMINAL_ACTIONS

RAW = "raw_harc__csv_rows"
ACTIONS = "core_harc__actions"
TASKS = "core_harc__participant_tasks"
ATTEMPTS = "core_harc__attempts"
ERRORS = "core_harc__incorrect_submissions"
FEEDBACK = "core_harc__feedback"
DEMOGRAPHICS = "core_harc__demographics"
WITHDRAWALS = "core_harc__withdrawals"

REALIGNING_ACTIONS = ("change_height", "change_width", "copy_from_input", "reset_grid")
PLACEHOLDER = "|000|000|000|"

SURVEY_TAIL = ("age", "gender", "race", "education_level", "household_income", "normal_vision", "color_blind",
                "fluent_english")
DATA_CURRENT = (
    "exp_name", "task_type", "hashed_id", "joint_id_task", "task_name", "task_number", "is_tutorial", "time",
    "attempt_number", "action_id", "solved", "done", "test_input_grid", "test_input_size_x",
    "test_input_size_y", "test_output_grid", "test_output_size_x", "test_output_size_y", "action", "action_x",
    "action_y", "select_loc", "selected_data", "selected_symbol", "selected_tool", "copy_paste_data",
    "first_written_solution", "last_written_solution", "withdraw", "withdraw_reason", "withdraw_comment",
    *SURVEY_TAIL, "complete",
)
DATA_2024 = tuple("num_actions" if c == "action_id" else c for c in DATA_CURRENT)
DATA_VARIANTS = (
    Variant("current (OSF) 40-column data.csv", DATA_CURRENT, "osf-current"),
    Variant("2024 clean_data*.csv (num_actions)", DATA_2024, "2024"),
)
SUMMARY = ("exp_name", "task_type", "hashed_id", "joint_id_task", "task_name", "task_number", "attempt_number",
           "num_actions", "solved", "test_output_grid", "first_written_solution", "last_written_solution",
           "complete")
SUMMARY_VARIANTS = (Variant("13-column summary_data.csv", SUMMARY),)
ERRORS_CURRENT = ("task_name", "task_type", "test_output_grid", "count")
ERROR_VARIANTS = (
    Variant("current incorrect_submissions.csv", ERRORS_CURRENT),
    Variant("2024 clean_errors*.csv (with hashed_output_grid)", (*ERRORS_CURRENT, "hashed_output_grid"), "2024"),
)
_WHO = ("exp_name", "task_type", "hashed_id")
SURVEY_VARIANTS = (
    Variant("feedback survey", (*_WHO, "feedback")),
    Variant("current demographics survey", (*_WHO, "age", "gender", "race", "education_level", "normal_vision",
                                            "color_blind", "fluent_english"), "osf-current"),
    Variant("2024 demographics survey", (*_WHO, "age", "gender", "race", "education_level", "household_income",
                                         "normal_vision", "color_blind", "fluent_english", "complete"), "2024"),
    Variant("current withdraw survey", (*_WHO, "withdraw", "withdraw_reason", "withdraw_comment"), "osf-current"),
    Variant("2024 withdraw survey", (*_WHO, "withdraw", "withdraw_reason", "withdraw_comment", "complete"), "2024"),
)
TIME_HELP = ("YYYY-MM-DDTHH:MM:SS.ffffff, YYYY-MM-DD HH:MM:SS.ffffff, M/D/YYYY, h:mm:ss AM/PM or "
             "M/D/YYYY, HH:MM:SS")


def release_from_name(path: Path, variant: Variant) -> str:
    """The header decides when it can; otherwise the 2024 files are the ones named clean_*.csv."""
    if variant.release:
        return variant.release
    return "2024" if path.name.lower().startswith("clean_") else "osf-current"


def _structural(n_rows: int, ends_with_newline: bool, header: Sequence[str], last_required: bool) -> list[RowCheck]:
    check = short_row(header, last_required, ends_with_newline, n_rows)
    return [header_repeated(header), *([check] if check is not None else [])]


def _loaded_structural(loaded: LoadedCsv, header: Sequence[str], last_required: bool) -> list[RowCheck]:
    n_rows = loaded.frame.height and int(loaded.frame[ROW].max())
    return _structural(n_rows, loaded.ends_with_newline, header, last_required)


class _OpenedFile(NamedTuple):
    header: list[str]
    release: str
    loaded: LoadedCsv
    out: ReaderOutput


# The H-ARC files besides data.csv (summary, incorrect submissions, surveys) are read whole: a few MB each in the
# release. One over this is refused unread rather than taking about ten times its size in memory.
MAX_RELEASE_FILE_BYTES = 64_000_000


def _open_release_file(
    ctx: FileContext, variants: Sequence, what: str, *, release_by_name: bool = True,
    evidence: str = "header is the {variant}", last_required: Callable[[list[str]], bool] = lambda header: True,
) -> _OpenedFile:
    """The steps every H-ARC reader starts with: match the header to a known variant, find the release
    generation (from the file name where variants are shared by releases), load the CSV and keep every
    row in the raw table."""
    header = read_header(ctx.path)
    variant = match_variant(header, variants, what)
    release = release_from_name(ctx.path, variant) if release_by_name else variant.release
    if (size := ctx.path.stat().st_size) > MAX_RELEASE_FILE_BYTES:
        raise FileRejected(f"an {what} of {size / 1e6:,.0f} MB: over {MAX_RELEASE_FILE_BYTES / 1e6:,.0f} MB, ten times "
                           "the release's largest (the summary of 1,729 participants is about 6 MB), so it is not "
                           "read (it is read whole: about ten times its size in memory); split it", "file_too_large")
    # a file whose last column may be empty (a survey without `complete`): its rows' fields are counted exactly
    loaded = load_csv(ctx.path, header, raw_table=RAW, exact_fields=not last_required(header))
    out = ReaderOutput(rejects=Spool(loaded.rejects), flags=list(loaded.flags),
                       detection_evidence=evidence.format(variant=variant.name, release=release))
    out.tables[RAW] = raw_rows(loaded.frame, ctx.file_id, header)
    return _OpenedFile(header, release, loaded, out)


def raw_rows(frame: pl.DataFrame, file_id: str, header: Sequence[str]) -> pl.DataFrame:
    """The raw table's rows of a batch: file_id, row_number and each field as read, as text, under
    `csv_<header name>` (a column selection: no value is copied, encoded or hashed), and the surplus fields of
    a row that had too many (EXTRA, or, in a frame whose fields are already folded into row_json, taken back
    out of it)."""
    unknown = [h for h in header if h not in HARC_CSV_COLUMNS]
    if unknown:  # the variants and the schema's column list disagree: a programming error, not bad input
        raise ValueError(f"H-ARC CSV column(s) {unknown} have no raw column in schemas.harc.HARC_CSV_COLUMNS")
    if EXTRA in frame.columns:
        extra = pl.col(EXTRA)
    elif ROW_JSON in frame.columns:
        json = pl.col(ROW_JSON)
        extra = pl.when(json.str.contains('"__extra_fields":"', literal=True)).then(
            json.str.json_path_match("$.__extra_fields"))
    else:
        extra = pl.lit(None, pl.String)
    return frame.select(pl.lit(file_id, pl.String).alias("file_id"), pl.col(ROW).cast(pl.Int64),
                        *[pl.col(h).alias(raw_csv_column(h)) for h in header],
                        extra.cast(pl.String).alias("extra_fields_json"))


def _source_frame(loaded: LoadedCsv, header: Sequence[str]) -> pl.DataFrame:
    return loaded.frame.rename({h: src(h) for h in header})


def _common_who(split_required: bool = True) -> list[RowCheck]:
    checks = [required("hashed_id", "the participant id")]
    if split_required:
        checks.append(required("task_type", "the split (training or evaluation)"))
    checks.append(not_in("task_type", HARC_SPLITS))
    return checks


def _participant_task_columns() -> list[pl.Expr]:
    """Who and which task, as the event and summary files both name them (joint_id_task kept as `__joint`
    for the joint_id_mismatch check)."""
    return [pl.col(src("task_name")).str.strip_suffix(".json").alias("task_id"), *_renamed({
        "hashed_id": "participant_id", "task_name": "task_file_name", "exp_name": "exp_name",
        "task_type": "task_split", "first_written_solution": "first_description",
        "last_written_solution": "last_description", "joint_id_task": "__joint"})]


def _renamed(names: dict[str, str]) -> list[pl.Expr]:
    """Text columns of the file under their table names ({file column: table column})."""
    return [pl.col(src(file_column)).alias(column) for file_column, column in names.items()]


def _joint_id_check() -> RowCheck:
    return RowCheck(
        "joint_id_mismatch",
        pl.col("__joint") != pl.format("{}_{}", pl.col(src("hashed_id")), pl.col(src("task_name"))),
        pl.format("joint_id_task '{}' is not hashed_id + '_' + task_name ('{}_{}')", pl.col("__joint"),
                  pl.col(src("hashed_id")), pl.col(src("task_name"))), "joint_id_task")


# --- data.csv -------------------------------------------------------------------------------------
#
# data.csv is the one big H-ARC file (~600k rows, ~1 kB each), so it is read in batches (CsvSource) and its
# tables are written piece by piece (ReaderOutput.pieces), holding one batch at a time. Rules that look
# across rows (duplicates, undo before a size change, terminal row, time order) need the whole file: a
# first pass parses each batch and takes the few columns those rules use to work out each row's task
# context, and hands out the batch's raw rows (they need nothing else, so the database writes them while the
# first pass goes on); the second pass parses each batch again and checks it with its slice of that context
# beside it, handing out its events (parsing again is cheaper than writing the parsed batches out and reading
# them back). Both passes run when the pieces are written. A file of one batch is read the same way (kept in
# memory, parsed once) and returned whole.
#
# The per-row state of the two passes (the event order and task context, the task facts) grows with the file:
# a file above BOUNDED_BYTES keeps it on disk, split into buckets by task (`_DataFile.bucketed`), since every
# rule that looks across rows looks within one task (joint id) only. Each bucket is worked out by the same
# code as a whole file, so both ways give the same rows.

BOUNDED_BYTES = 512 << 20  # files above this size keep their per-row state on disk, in buckets by task
BUCKET_BYTES = 256 << 20  # about this much of the file per bucket (the state is ~1/15 of it, its work ~3x)
MAX_BUCKETS = 256

_DATA_KEY = ("__joint", "action_number")  # a data.csv event: joint_id_task and its counter
_EVENT_ORDER = ("__joint", "action_number", "attempt_number", "action", "occurred_at")
# the shape of the two grids of every row (`with_grid_columns`): worked out in the first pass, which has time to
# spare while DuckDB writes the raw rows, and handed to the second with the task context
_GRIDS = (("test_input_grid", "__in"), ("test_output_grid", "__out"))
_GRID_FACTS = tuple(f"{prefix}_{k}" for _, prefix in _GRIDS for k in ("hraw", "wmin", "wmax", "code", "h", "w"))
_TASK_CONTEXT = ("occurred_at", "__lag_ok", "__time_back", "has_terminal_row", "__first_event",
                 "__task_time_back", "__dup_n", "__dup_distinct", "__dup_first", "__dup_rows", *_GRID_FACTS)
# what _participant_tasks reads of the loaded rows, kept until the end of the file: the texts that repeat
# on every row of a task as categoricals, the constant columns added back at the end
_TASK_FACTS = ("participant_id", "task_id", "action_number", "exp_name", "task_split", "task_number",
               "first_description", "last_description", "has_terminal_row", "is_tutorial", "is_complete",
               "__task_time_back")
_REPEATED_TEXT = ("participant_id", "task_id", "exp_name", "task_split", "first_description", "last_description")
# the columns no rule of the second pass reads and no core table keeps (the raw layer, written in the first
# pass, has them): a batch the first pass found clean is parsed again without them (`_DataFile.clean`)
_NOT_CHECKED = frozenset({"withdraw", "withdraw_reason", "withdraw_comment", *SURVEY_TAIL})


def read_data(ctx: FileContext, *, batch_bytes: int | None = None) -> ReaderOutput:
    """`batch_bytes`: the size of the pieces the file is read in (None: BATCH_BYTES)."""
    header = read_header(ctx.path)
    variant = match_variant(header, DATA_VARIANTS, "H-ARC data file")
    release = variant.release
    assert release is not None
    source = CsvSource(ctx.path, header, RAW, batch_bytes or _batch_bytes(ctx.path))
    out = ReaderOutput(detection_evidence=f"header is the {variant.name}",
                       pieces=_DataFile(ctx.file_id, header, release, source, _bucket_count(source)))
    return out.materialized() if source.single_batch else out


MAX_BATCH_ROWS = 50_000  # rows of a piece, at most: a file of short rows is pieced by its rows, not its bytes


def _batch_bytes(path) -> int:
    """The size of the pieces a data.csv is read in: BATCH_BYTES, or less for a file of short rows, so that a
    piece holds at most about MAX_BATCH_ROWS rows. Each row costs about 1 kB in memory whatever its length (its
    raw JSON names every column), so 12 MB of two-byte rows (6 million of them) would take gigabytes."""
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    n_lines = max(head.count(b"\n"), 1)
    return min(BATCH_BYTES, max(64 << 10, len(head) * MAX_BATCH_ROWS // n_lines))


def _bucket_count(source: CsvSource) -> int:
    """How many buckets a file's per-row state is split into (1: held in memory)."""
    size = source.version[0]
    if source.single_batch or size <= BOUNDED_BYTES:
        return 1
    return max(2, min(MAX_BUCKETS, -(-size // BUCKET_BYTES)))


class _DataFile:
    """One data.csv, called: the first pass (`event_order` of each batch), then its tables batch by batch
    and the participant tasks at the end. `buckets` > 1: the per-row state of both passes is kept on disk in
    that many buckets by task (`bucketed`), else in memory (`in_memory`)."""

    def __init__(self, file_id: str, header: list[str], release: str, source: CsvSource, buckets: int = 1) -> None:
        self.file_id, self.header, self.release, self.source = file_id, header, release, source
        self.buckets = buckets
        self.counter = "action_id" if release == "osf-current" else "num_actions"
        self.n_rows = 0  # the file's last row number, known after the first pass
        self._structural: dict[int, list[RowCheck]] = {}
        # per batch of the first pass: nothing in it but well-formed rows (`note_clean`), so that the second
        # pass may parse it for the columns its rules read only
        self.clean: list[bool] = []
        self.checked = [h for h in header if h not in _NOT_CHECKED]

    def structural(self) -> list[RowCheck]:
        """The cut-short-row rule (its reason names the file's last row, known after the first pass)."""
        if self.n_rows not in self._structural:  # a large expression: built once per pass, not per batch
            self._structural[self.n_rows] = _structural(self.n_rows, self.source.ends_with_newline, self.header, True)
        return self._structural[self.n_rows]

    def typed(self, df: pl.DataFrame, *, times: bool) -> pl.DataFrame:
        """The typed columns: in the first pass the event order and time, in the second the rest."""
        c = self.counter
        return typed(df, ints={
            "task_number": src("task_number"), "attempt_number": src("attempt_number"), "action_number": src(c),
            "test_input_height": src("test_input_size_x"), "test_input_width": src("test_input_size_y"),
            "test_output_height": src("test_output_size_x"), "test_output_width": src("test_output_size_y"),
            "action_row": src("action_x"), "action_col": src("action_y"), "selected_symbol": src("selected_symbol"),
        } if not times else {"attempt_number": src("attempt_number"), "action_number": src(c)}, bools={
            "is_solved": src("solved"), "is_done": src("done"), "__is_tutorial": src("is_tutorial"),
            "is_complete": src("complete"),
        } if not times else {}, times={"occurred_at": src("time")} if times else {})

    def event_order(self, loaded: LoadedCsv) -> pl.DataFrame:
        """First pass, one batch: the columns the task context is computed from, and the grids' shapes."""
        narrow = loaded.frame.select(ROW, UNSPLIT, *[pl.col(c).alias(src(c)) for c in self.header])  # (no copy)
        df = self.typed(narrow, times=True).with_columns(
            pl.col(src("joint_id_task")).alias("__joint"), pl.col(src("action")).alias("action"))
        grids = loaded.frame.select(*[c for c, _ in _GRIDS])
        for column, prefix in _GRIDS:
            grids = with_grid_columns(grids, column, prefix)
        # held for the whole file until the context is worked out: the texts that repeat on every row of a task
        # (joint id) or come from a short vocabulary (action) as categoricals, 4 bytes a row instead of ~60
        return df.select(ROW, *_EVENT_ORDER, broken(self.structural()).alias("__broken")).with_columns(
            pl.col("__joint", "action").cast(pl.Categorical), *grids.select(_GRID_FACTS).get_columns())

    def note_clean(self, loaded: LoadedCsv, order: pl.DataFrame) -> None:
        """Whether the first pass found the batch clean: no reject, flag or surplus field, every row split into
        the header's fields and none broken (cut short, the header again), the file read as UTF-8. Only such a
        batch is parsed narrow in the second pass, where the rules of every field (`_finish`, the structural
        checks) have nothing to find."""
        self.clean.append(not loaded.rejects and not loaded.flags and EXTRA not in loaded.frame.columns
                          and self.source.mode == "utf8" and not order["__broken"].any())

    def narrow(self, i: int) -> list[str] | None:
        """The columns batch i of the second pass is parsed for (None: all)."""
        return self.checked if i < len(self.clean) and self.clean[i] and self.checked != self.header else None

    def row_hashes(self, rows: pl.Series) -> pl.DataFrame:
        """ROW_HASH of the given rows (one more pass over the file: the first one leaves the hash out, since
        only rows sharing a key need it and most files have none)."""
        return pl.concat(self.source.scan(lambda b: b.frame.filter(pl.col(ROW).is_in(rows.implode())).select(ROW, ROW_HASH)))

    def __call__(self) -> Iterator[ReaderOutput]:
        if self.buckets == 1:
            yield from self.in_memory()
        else:
            with scratch_folder("arcstudy-harc-") as folder:
                yield from self.bucketed(folder)

    def raw_output(self, loaded: LoadedCsv) -> ReaderOutput:
        """A batch's raw rows, handed out in the first pass: they need nothing of the rest of the file, so the
        database writes them while the first pass goes on (its rejects and flags come with the second pass)."""
        return ReaderOutput(tables={RAW: raw_rows(loaded.frame, self.file_id, self.header)})

    def in_memory(self) -> Iterator[ReaderOutput]:
        """Both passes with the whole file's event order, task context and task facts in memory."""
        orders: list[pl.DataFrame] = []

        def start() -> None:
            orders.clear()
            self.clean.clear()

        for loaded in self.source.scan_iter(row_hash=False, on_start=start):
            orders.append(self.event_order(loaded))
            self.note_clean(loaded, orders[-1])
            yield self.raw_output(loaded)
        orders[:] = [pl.concat(orders)]
        self.n_rows = orders[0].height and int(orders[0][ROW].max())
        context = _task_context(orders.pop(), self.counter, self.row_hashes)  # (not held here meanwhile)
        done = 0
        facts: list[pl.DataFrame] = []

        def context_of(_: int, height: int) -> pl.DataFrame:
            nonlocal done
            done += height
            return context.slice(done - height, height)

        yield from self.second_pass(context_of, facts.append)
        context = context.clear()  # not needed any more: not held while the tasks are worked out
        good = pl.concat(facts)
        facts.clear()
        yield self.tasks_output(self.participant_tasks(good))

    def bucketed(self, folder: Path) -> Iterator[ReaderOutput]:
        """Both passes with the per-row state on disk in `self.buckets` buckets: the event order by joint id,
        the task context worked out one bucket at a time (one more pass for the hashes of the rows that share
        a key, as `in_memory`), and stored so that each batch of the second pass reads its own rows; the task
        facts by participant and task, turned into tasks one bucket at a time."""
        k = self.buckets
        orders = BucketFiles(folder, "order", k)
        empty_order: list[pl.DataFrame] = []

        def spill(loaded: LoadedCsv) -> int:
            df = self.event_order(loaded)
            self.note_clean(loaded, df)
            empty_order[:] = empty_order or [df.clear()]
            orders.add(df.with_columns(bucket_of(pl.col("__joint").to_physical(), k)))
            return df.height and int(df[ROW].max())

        last_rows: list[int] = []

        def start() -> None:
            orders.clear()
            empty_order.clear()
            last_rows.clear()
            self.clean.clear()

        for loaded in self.source.scan_iter(row_hash=False, on_start=start):
            last_rows.append(spill(loaded))
            yield self.raw_output(loaded)
        orders.flush()
        ends = list(accumulate(last_rows, max, initial=0))[1:]  # each batch's last row (an empty batch: the one before)
        self.n_rows = ends[-1] if ends else 0
        sorted_paths: dict[int, tuple[Path, int]] = {}
        shared: list[pl.Series] = []
        for b in range(k):
            order = orders.read(b)
            orders.remove(b)
            if order is None:
                continue
            order, rows = _sorted_events(order)
            sorted_paths[b] = (folder / f"sorted-{b:04d}.arrow", rows.len())
            order.write_ipc(sorted_paths[b][0], compression="uncompressed")
            shared.append(rows)
        rows = pl.concat(shared) if shared else pl.Series(ROW, [], pl.Int64)
        hashes = self.row_hashes(rows) if rows.len() else None  # one pass for every bucket's rows
        contexts = BatchSlices(folder, "context", ROW, ends)
        for b, (path, n_shared) in sorted_paths.items():
            order = read_ipc(path)
            path.unlink()
            contexts.write(b, _context_of_sorted(order, self.counter, hashes if n_shared else None))
        if not sorted_paths and empty_order:  # no row at all: batches of no rows, with the context's columns
            contexts.write(0, _task_context(empty_order[0], self.counter, self.row_hashes))
        del order, hashes
        facts = BucketFiles(folder, "facts", k)
        facts_key = bucket_of(pl.struct(pl.col("participant_id", "task_id").to_physical()), k)
        empty_facts: list[pl.DataFrame] = []

        def keep(df: pl.DataFrame) -> None:
            empty_facts[:] = empty_facts or [df.clear()]
            facts.add(df.with_columns(facts_key))

        def changed() -> Exception:
            return FileChangedError("the file changed while it was read (it has more batches than the first pass)")

        with contexts.reader(changed) as context_of:
            yield from self.second_pass(lambda j, _: context_of(j), keep)
        facts.flush()
        tasks = [self.participant_tasks(part) for b in range(k) if (part := facts.read(b)) is not None]
        if not tasks:  # no good row: no task, with the table's columns all the same
            yield self.tasks_output(self.participant_tasks(empty_facts[0]) if empty_facts else None)
            return
        # each bucket's tasks are in participant and task order: so are all of them once sorted by those texts
        yield self.tasks_output(pl.concat(tasks).sort("participant_id", "task_id"))

    def second_pass(self, context_of: Callable[[int, int], pl.DataFrame],
                    keep_facts: Callable[[pl.DataFrame], None]) -> Iterator[ReaderOutput]:
        """Every batch checked with its task context (`context_of(batch index, rows)`), its task facts handed
        to `keep_facts`."""
        structural, checks = self.structural(), _data_checks(self.counter)  # built once, used on every batch
        for j, loaded in enumerate(self.source.again(narrow=self.narrow)):
            out, good = self.check_batch(loaded, context_of(j, loaded.frame.height), structural, checks)
            keep_facts(good.select(_TASK_FACTS).with_columns(pl.col(_REPEATED_TEXT).cast(pl.Categorical)))
            yield out

    def participant_tasks(self, good: pl.DataFrame) -> pl.DataFrame:
        # the task order: the texts' sort order as integers (ranks of the few distinct values), since sorting
        # 600k rows by their texts costs ~10x more than by integers
        good = good.with_columns([_text_rank(good[c]).alias(f"__rank_{c}") for c in ("participant_id", "task_id")])
        return _participant_tasks(good, self.release, self.file_id)

    def tasks_output(self, tasks: pl.DataFrame | None) -> ReaderOutput:
        return ReaderOutput(tables={TASKS: tasks} if tasks is not None else {}, flags=self.source.flags)

    def check_batch(self, loaded: LoadedCsv, context: pl.DataFrame, structural: list[RowCheck],
                    checks: list[RowCheck]) -> tuple[ReaderOutput, pl.DataFrame]:
        """Second pass, one batch: every row rule, the loaded events."""
        if not context[ROW].equals(loaded.frame[ROW]):
            raise FileChangedError("the file changed while it was read (its rows differ from the first pass's)")
        if loaded.full is not None:  # parsed for the checked columns only: enough unless a row fails a rule
            done = self._check_batch(loaded, context, [], checks, self.checked)
            if not done[0].rejects:
                return done
            loaded = loaded.full()  # its rejects quote every field of the row: the batch again, whole
            if not context[ROW].equals(loaded.frame[ROW]):
                raise FileChangedError("the file changed while it was read (its rows differ from the first pass's)")
        return self._check_batch(loaded, context, structural, checks, self.header)

    def _check_batch(self, loaded: LoadedCsv, context: pl.DataFrame, structural: list[RowCheck],
                     checks: list[RowCheck], header: list[str]) -> tuple[ReaderOutput, pl.DataFrame]:
        """`check_batch` of a batch holding the columns `header` (every field of the file's header, or those
        the rules read: `checked`)."""
        out = ReaderOutput(rejects=Spool(loaded.rejects), flags=list(loaded.flags))  # (raw rows: `raw_output`)
        fields = LoadedCsv(loaded.frame.drop(EXTRA, strict=False), loaded.rejects, loaded.flags, loaded.ends_with_newline)
        df = self.typed(_source_frame(fields, header), times=False).with_columns(context.drop(ROW).get_columns()).with_columns(
            pl.lit(self.release).alias("release_generation"),
            *_participant_task_columns(),
            *_renamed({"action": "action", "test_input_grid": "test_input_grid",
                       "test_output_grid": "test_output_grid", "select_loc": "select_loc",
                       "selected_data": "selected_data_json", "selected_tool": "selected_tool",
                       "copy_paste_data": "copy_paste_data_json"}),
        )
        # (the grids' shapes came with the context: `_GRID_FACTS`)
        df = df.with_columns(json_list_ok_series(df[src(c)]).alias(_json_ok(c)) for c in _JSON_LISTS)
        # the rejects quote the row's fields as a JSON object, built for the failing rows only
        extra = [EXTRA] if EXTRA in loaded.frame.columns else []
        if extra:
            df = df.with_columns(loaded.frame[EXTRA])
        row_text = pl.struct([*[pl.col(src(h)).alias(h) for h in header], *extra]).struct.json_encode()
        rejects, bad = apply_checks(df, checks, ACTIONS, structural=structural, raw_text=row_text)
        out.rejects.extend_mapped(rejects)  # a flood of them is not copied
        good = df.filter(~bad)
        flags = flag_lists(good, [
            (_TUTORIAL, "tutorial"),
            (~pl.col("has_terminal_row"), "no_terminal_row"),
            (pl.col("__time_back"), "time_not_monotonic"),
            (~pl.col("is_complete"), "incomplete_participant"),
            (_SIZE_DIFFERS, "size_lags_undo"),
            (_INPUT_DIFFERS, "input_size_mismatch"),
            (pl.col("__first_event") & (pl.col("test_input_grid") == PLACEHOLDER), "input_placeholder"),
        ])
        good = good.with_columns(_TUTORIAL.alias("is_tutorial"), pl.lit(self.file_id).alias("file_id"), flags)
        # without the row texts (the raw table has them): less to hold while the piece waits for the runner
        out.tables[ACTIONS] = good.select(pl.exclude(EXTRA, f"^{SRC}.*$"))
        out.proven[ACTIONS] = _GRIDS_PROVEN
        return out, good


_JSON_LISTS = ("selected_data", "copy_paste_data")  # data.csv columns that must hold a JSON list (invalid_json)


def _json_ok(column: str) -> str:
    """The column `_check_batch` adds for `invalid_json`: the text is a JSON list (`json_list_ok_series`)."""
    return f"__json_ok_{column}"


# the grid texts of the rows a reader keeps passed `grid_check`, stricter than the schema's grid regex: the
# schema check is not made again on them (`ReaderOutput.proven`)
_GRIDS_PROVEN = frozenset({"test_input_grid", "test_output_grid"})
_TUTORIAL = (pl.col("task_number") == 0) | pl.col("__is_tutorial")
_SIZE_DIFFERS = (pl.col("test_output_height") != pl.col("__out_h")) | (pl.col("test_output_width") != pl.col("__out_w"))
_INPUT_DIFFERS = (pl.col("test_input_height") != pl.col("__in_h")) | (pl.col("test_input_width") != pl.col("__in_w"))


def _task_context(order: pl.DataFrame, counter: str,
                  row_hashes: Callable[[pl.Series], pl.DataFrame]) -> pl.DataFrame:
    """Whole-file facts per row (row_number order), computed sorted into each task's authoritative event
    order: undo since the last realignment, time going back, terminal row, first event, duplicates.
    `row_hashes(rows)`: ROW_HASH of those rows, asked for the rows that share their duplicate key only.
    Every rule looks within one task (joint id): the rows of any set of whole tasks get the same facts."""
    order, shared = _sorted_events(order)
    return _context_of_sorted(order, counter, row_hashes(shared) if shared.len() else None)


def _sorted_events(order: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """The rows in task and event order, and the row numbers of those that share their duplicate key."""
    # by the joint id's category code: a task's rows end up adjacent all the same, without comparing texts
    order = order.sort(pl.col("__joint").to_physical(), "action_number", ROW, nulls_last=True)
    key = list(_DATA_KEY)  # sorted by it, a key's rows are adjacent
    shared = order.filter(pl.all_horizontal([pl.col(k).is_not_null() for k in key])
                          & (pl.len().over(pl.struct(key).rle_id()) > 1))[ROW]
    return order, shared


def _context_of_sorted(order: pl.DataFrame, counter: str, hashes: pl.DataFrame | None) -> pl.DataFrame:
    """`_task_context` of rows in `_sorted_events` order; `hashes`: ROW_HASH of (at least) the rows that share
    their duplicate key (None: no row does)."""
    # the other rows' keys are unique: n_unique over their one null hash is 1, as over one real hash
    order = (order.join(hashes, on=ROW, how="left", maintain_order="left") if hashes is not None
             else order.with_columns(pl.lit(None, pl.UInt64).alias(ROW_HASH)))
    # sorted, a task's rows are one run: its windows group by the run id, not by hashing the task text
    task = pl.col("__joint").rle_id()
    is_undo = pl.col("action") == "undo"
    realigns = pl.col("action").is_in(REALIGNING_ACTIONS)
    last_undo = pl.when(is_undo).then(pl.col("action_number")).forward_fill().over(task)
    last_realign = pl.when(realigns).then(pl.col("action_number")).forward_fill().over(task)
    key_ok = pl.col("action_number").is_not_null() & pl.col("attempt_number").is_not_null()
    attempt_recoded = pl.when(pl.col("attempt_number") == 4).then(3).otherwise(pl.col("attempt_number"))
    order = order.with_columns(
        (last_undo.is_not_null() & (last_realign.is_null() | (last_undo > last_realign))).alias("__lag_ok"),
        (pl.col("occurred_at") < pl.col("occurred_at").shift(1).over(task)).alias("__time_back"),
        pl.col("action").filter(key_ok).sort_by([attempt_recoded.filter(key_ok), pl.col("action_number").filter(key_ok)])
        .last().over(task).is_in(HARC_TERMINAL_ACTIONS).fill_null(False).alias("has_terminal_row"),
        (pl.col("action_number") == pl.col("action_number").min().over(task)).alias("__first_event"),
    ).with_columns(
        pl.col("__time_back").fill_null(False).any().over(task).alias("__task_time_back"),
    )
    prep, _ = _data_duplicates(counter)
    order = prep(order.with_columns(pl.col("__broken").alias(UNSPLIT)), sorted_by_key=True)
    return order.select(ROW, *_TASK_CONTEXT).sort(ROW)


def _data_duplicates(counter: str) -> tuple[Callable[[pl.DataFrame], pl.DataFrame], list[RowCheck]]:
    # broken rows (unsplit or cut short) are marked in UNSPLIT for the context computation
    return duplicate_rules(list(_DATA_KEY), "duplicate_action", ["joint_id_task", counter])


def _data_checks(counter: str) -> list[RowCheck]:
    """The data.csv row rules (spec/formats.md §D.9), over a batch with its task context beside it."""
    return [
        *_common_who(),
        required("joint_id_task", "joint_id_task"), required("task_name", "the ARC task file name"),
        required("task_number", "the task position"), required("attempt_number", "the attempt number"),
        required(counter, "the per-task event counter"), required("action", "an event name"),
        required("time", "a time"), required("solved", "true/false"), required("done", "true/false"),
        required("is_tutorial", "true/false"),
        *[required(c, "a size 1-30") for c in ("test_input_size_x", "test_input_size_y", "test_output_size_x",
                                              "test_output_size_y")],
        *[check for c, t in (
            ("task_number", "task_number"), ("attempt_number", "attempt_number"), (counter, "action_number"),
            ("test_input_size_x", "test_input_height"), ("test_input_size_y", "test_input_width"),
            ("test_output_size_x", "test_output_height"), ("test_output_size_y", "test_output_width"),
            ("action_x", "action_row"), ("action_y", "action_col"), ("selected_symbol", "selected_symbol"))
          for check in int_parse_failed(c, pl.col(t), "an integer")],
        *[parse_failed(c, pl.col(t), "true or false", "not_a_boolean") for c, t in (
            ("solved", "is_solved"), ("done", "is_done"), ("is_tutorial", "__is_tutorial"),
            ("complete", "is_complete"))],
        out_of_range("task_number", pl.col("task_number"), 0, 10_000),
        out_of_range(counter, pl.col("action_number"), 1, 10_000_000),
        *[out_of_range(c, pl.col(t), 1, 30) for c, t in (
            ("test_input_size_x", "test_input_height"), ("test_input_size_y", "test_input_width"),
            ("test_output_size_x", "test_output_height"), ("test_output_size_y", "test_output_width"))],
        out_of_range("action_x", pl.col("action_row"), 0, 29), out_of_range("action_y", pl.col("action_col"), 0, 29),
        out_of_range("selected_symbol", pl.col("selected_symbol"), 0, 9),
        not_in("action", HARC_ACTIONS, "unknown_action"),
        not_in("select_loc", SELECT_LOCATIONS), not_in("selected_tool", HARC_TOOLS),
        RowCheck("attempt_out_of_range",
                 (pl.col("attempt_number") < 1) | (pl.col("attempt_number") > 4),
                 pl.format("attempt_number is {}, outside 1-4", pl.col("attempt_number")), "attempt_number"),
        RowCheck("attempt_out_of_range",
                 (pl.col("attempt_number") == 4) & (pl.col("action") != "write_last_description"),
                 pl.format("attempt_number 4 is only valid on the closing write_last_description row, but this "
                           "row is '{}'", pl.col("action")), "attempt_number"),
        RowCheck("time_unparsable", pl.col(src("time")).is_not_null() & pl.col("occurred_at").is_null(),
                 pl.format("time '{}' is not a valid time in a known format ({})", pl.col(src("time")),
                           pl.lit(TIME_HELP)), "time"),
        grid_check("test_input_grid", "__in"),
        grid_check("test_output_grid", "__out"),
        RowCheck("size_mismatch", _SIZE_DIFFERS & ~pl.col("__lag_ok"),
                 pl.format("test_output_size_x/_y say {} x {} but test_output_grid is {} x {}, and no undo since "
                           "the last resize/reset/copy explains the difference", pl.col("test_output_height"),
                           pl.col("test_output_width"), pl.col("__out_h"), pl.col("__out_w")),
                 "test_output_size_x",
                 value=pl.format("{}x{} vs grid {}x{}", pl.col("test_output_height"), pl.col("test_output_width"),
                                 pl.col("__out_h"), pl.col("__out_w"))),
        *[RowCheck("invalid_json", pl.col(src(c)).is_not_null() & ~pl.col(_json_ok(c)),
                   pl.lit(f"{c} is not a JSON list"), c, explain=json_explain(c))
          for c in _JSON_LISTS],
        _joint_id_check(),
        *_data_duplicates(counter)[1],
    ]


def _text_rank(values: pl.Series) -> pl.Series:
    """Integers that sort like the texts of the Categorical `values` (null stays null): the dense rank of each
    distinct text, looked up by the category's code."""
    distinct = values.unique()
    return values.to_physical().replace_strict(distinct.to_physical(), distinct.cast(pl.String).rank("dense"),
                                               default=None)


def _participant_tasks(good: pl.DataFrame, release: str, file_id: str) -> pl.DataFrame:
    """One row per task of the file's good rows (of one release generation and file), in participant and task
    order (`__rank_participant_id`, `__rank_task_id`: `_text_rank` of those columns). The texts of
    _REPEATED_TEXT come as Categorical and are turned back into texts once per task, not once per row (the
    rows' texts would take ~0.4 GB for a 1.2M-row file)."""
    keys = ["participant_id", "task_id"]
    ordered = good.select(*keys, "action_number", "exp_name", "task_split", "task_number",
                          "first_description", "last_description", "has_terminal_row", "is_tutorial",
                          "is_complete", "__task_time_back", "__rank_participant_id", "__rank_task_id").sort(
        "__rank_participant_id", "__rank_task_id", "action_number").drop("__rank_participant_id", "__rank_task_id")
    tasks = ordered.group_by(keys, maintain_order=True).agg(
        pl.col("exp_name").first(),
        pl.col("task_split").first(),
        pl.col("task_number").first(),
        pl.col("first_description").drop_nulls().last(),
        pl.col("last_description").drop_nulls().last(),
        (pl.col("first_description").drop_nulls().n_unique() > 1).alias("__first_varies"),
        (pl.col("last_description").drop_nulls().n_unique() > 1).alias("__last_varies"),
        pl.col("has_terminal_row").first(),
        pl.col("is_tutorial").any(),
        pl.col("is_complete").first(),
        pl.col("__task_time_back").first(),
    ).select(pl.lit(release).alias("release_generation"), *keys, pl.lit(file_id).alias("file_id"), pl.exclude(keys))
    tasks = tasks.with_columns(pl.col(c).cast(pl.String) for c in _REPEATED_TEXT)
    return tasks.with_columns(flag_lists(tasks, [
        (pl.col("is_tutorial"), "tutorial"),
        (~pl.col("has_terminal_row"), "no_terminal_row"),
        (pl.col("__task_time_back"), "time_not_monotonic"),
        (~pl.col("is_complete"), "incomplete_participant"),
        (pl.col("__first_varies") | pl.col("__last_varies"), "description_varies"),
    ]))


# --- summary_data.csv ----------------------------------------------------------------------------


def read_summary(ctx: FileContext) -> ReaderOutput:
    header, release, loaded, out = _open_release_file(
        ctx, SUMMARY_VARIANTS, "H-ARC summary file", evidence="header is the {variant} ({release} by file name)")
    df = _source_frame(loaded, header).with_columns(
        pl.lit(release).alias("release_generation"),
        *_participant_task_columns(),
        as_int(src("task_number")).alias("task_number"),
        as_int(src("attempt_number")).alias("attempt_number"),
        as_int(src("num_actions")).alias("last_action_number"),
        as_bool(src("solved")).alias("is_solved"),
        pl.col(src("test_output_grid")).alias("test_output_grid"),
        as_bool(src("complete")).alias("is_complete"),
    )
    df = with_grid_columns(df, "test_output_grid", "__out")
    structural = _loaded_structural(loaded, header, True)
    dup_prep, dup_checks = duplicate_rules(["__joint", "attempt_number"], "duplicate_attempt",
                                       ["joint_id_task", "attempt_number"], structural=structural)
    df = dup_prep(df)
    checks = [
        *_common_who(),
        required("joint_id_task", "joint_id_task"), required("task_name", "the ARC task file name"),
        required("task_number", "the task position"), required("attempt_number", "the attempt number"),
        required("num_actions", "the attempt's last event counter"), required("solved", "true/false"),
        *[check for c, t in (
            ("task_number", "task_number"), ("attempt_number", "attempt_number"), ("num_actions", "last_action_number"))
          for check in int_parse_failed(c, pl.col(t), "an integer")],
        *[parse_failed(c, pl.col(t), "true or false", "not_a_boolean") for c, t in (
            ("solved", "is_solved"), ("complete", "is_complete"))],
        out_of_range("task_number", pl.col("task_number"), 0, 10_000),
        out_of_range("num_actions", pl.col("last_action_number"), 1, 10_000_000),
        RowCheck("attempt_out_of_range", (pl.col("attempt_number") < 1) | (pl.col("attempt_number") > 3),
                 pl.format("attempt_number is {}, outside 1-3 (summaries recode the closing attempt 4 as 3)",
                           pl.col("attempt_number")), "attempt_number"),
        grid_check("test_output_grid", "__out"),
        _joint_id_check(),
        *dup_checks,
    ]
    rejects, bad = apply_checks(df, checks, ATTEMPTS, structural=structural)
    out.rejects += rejects
    good = df.filter(~bad)
    out.tables[ATTEMPTS] = good.with_columns(pl.lit(ctx.file_id).alias("file_id"), flag_lists(good, [
        (pl.col("task_number") == 0, "tutorial"), (~pl.col("is_complete"), "incomplete_participant")]))
    out.proven[ATTEMPTS] = _GRIDS_PROVEN
    return out


# --- incorrect_submissions.csv -------------------------------------------------------------------


def read_errors(ctx: FileContext) -> ReaderOutput:
    header, release, loaded, out = _open_release_file(ctx, ERROR_VARIANTS, "H-ARC incorrect-submissions file")
    has_md5 = "hashed_output_grid" in header
    df = _source_frame(loaded, header)
    df = df.with_columns(
        pl.lit(release).alias("release_generation"),
        pl.col(src("task_name")).str.strip_suffix(".json").alias("task_id"),
        pl.col(src("task_name")).alias("task_file_name"),
        pl.col(src("task_type")).alias("task_split"),
        pl.col(src("test_output_grid")).alias("test_output_grid"),
        as_int(src("count")).alias("n_submissions"),
        (pl.col(src("hashed_output_grid")).str.strip_chars().str.to_lowercase() if has_md5
         else pl.lit(None, pl.String)).alias("output_grid_md5"),
        md5_texts(df[src("test_output_grid")]).alias("__md5"),
    )
    df = with_grid_columns(df, "test_output_grid", "__out")
    structural = _loaded_structural(loaded, header, True)
    dup_prep, dup_checks = duplicate_rules(["task_file_name", "test_output_grid"], "duplicate_grid",
                                       ["task_name", "test_output_grid"], structural=structural)
    df = dup_prep(df)
    checks = [
        required("task_name", "the ARC task file name"), required("task_type", "the split"),
        not_in("task_type", HARC_SPLITS), required("count", "the number of submissions"),
        *int_parse_failed("count", pl.col("n_submissions"), "an integer"),
        out_of_range("count", pl.col("n_submissions"), 1, 10_000_000),
        grid_check("test_output_grid", "__out"),
        *dup_checks,
    ]
    if has_md5:
        checks.append(RowCheck(
            "invalid_md5", pl.col("output_grid_md5").is_not_null() & ~pl.col("output_grid_md5").str.contains(r"^[0-9a-f]{32}$"),
            pl.format("hashed_output_grid '{}' is not 32 hex characters", pl.col(src("hashed_output_grid"))),
            "hashed_output_grid"))
    rejects, bad = apply_checks(df, checks, ERRORS, structural=structural)
    out.rejects += rejects
    good = df.filter(~bad)
    out.tables[ERRORS] = good.with_columns(pl.lit(ctx.file_id).alias("file_id"), flag_lists(good, [
        (pl.col("output_grid_md5").is_not_null() & (pl.col("output_grid_md5") != pl.col("__md5")), "md5_mismatch")]))
    out.proven[ERRORS] = _GRIDS_PROVEN
    return out


# --- surveys --------------------------------------------------------------------------------------


def _survey_last_required(header: Sequence[str]) -> bool:
    """A survey file's last column may be empty (feedback, fluent_english, withdraw_comment) unless it is
    `complete`."""
    return header[-1] == "complete" if header else True


def read_survey(ctx: FileContext) -> ReaderOutput:
    header, release, loaded, out = _open_release_file(ctx, SURVEY_VARIANTS, "H-ARC survey file",
                                                      last_required=_survey_last_required)
    cols = set(header)
    if "feedback" in cols:
        target = FEEDBACK
    elif "age" in cols:
        target = DEMOGRAPHICS
    else:
        target = WITHDRAWALS
    df = _source_frame(loaded, header).with_columns(
        pl.lit(release).alias("release_generation"),
        pl.col(src("hashed_id")).alias("participant_id"),
        pl.col(src("exp_name")).alias("exp_name"),
        pl.col(src("task_type")).alias("task_split"),
    )
    checks = [*_common_who()]
    if target == FEEDBACK:
        df = df.with_columns(pl.col(src("feedback")).alias("feedback_text"))
    elif target == DEMOGRAPHICS:
        df = df.with_columns([pl.col(src(c)).alias(c) if c in cols else pl.lit(None, pl.String).alias(c)
                              for c in SURVEY_TAIL])
    else:
        df = df.with_columns(as_bool(src("withdraw")).alias("is_withdrawn"),
                             pl.col(src("withdraw_reason")).alias("withdraw_reason"),
                             pl.col(src("withdraw_comment")).alias("withdraw_comment"))
        checks += [required("withdraw", "true/false"),
                   parse_failed("withdraw", pl.col("is_withdrawn"), "true or false", "not_a_boolean")]
    if "complete" in cols:
        df = df.with_columns(as_bool(src("complete")).alias("is_complete"))
        checks.append(parse_failed("complete", pl.col("is_complete"), "true or false", "not_a_boolean"))
    else:
        df = df.with_columns(pl.lit(None, pl.Boolean).alias("is_complete"))
    structural = _loaded_structural(loaded, header, _survey_last_required(header))
    dup_prep, dup_checks = duplicate_rules(["participant_id"], "duplicate_participant", ["hashed_id"],
                                       structural=structural)
    df = dup_prep(df)
    checks += dup_checks
    rejects, bad = apply_checks(df, checks, target, structural=structural)
    out.rejects += rejects
    good = df.filter(~bad)
    out.tables[target] = good.with_columns(pl.lit(ctx.file_id).alias("file_id"), flag_lists(good, [
        (~pl.col("is_complete"), "incomplete_participant")]))
    return out


# --- sniffing -------------------------------------------------------------------------------------

_DATA_ONLY = {"action", "action_x", "action_y", "select_loc", "selected_data", "selected_symbol", "selected_tool",
              "copy_paste_data", "test_input_grid", "test_output_size_x", "test_output_size_y", "time"}
_HARC_IDS = {"hashed_id", "joint_id_task", "task_name", "exp_name", "task_type"}


def _name_hint(head: Head, pattern: str) -> str:
    return f"; file name {head.path.name} fits" if re.search(pattern, head.path.name.lower()) else ""


def sniff_data(head: Head) -> str | None:
    cols = header_columns(head)
    if not cols:
        return None
    data_cols = cols & _DATA_ONLY
    if len(data_cols) >= 4 and cols & _HARC_IDS:
        which = "action_id" if "action_id" in cols else "num_actions" if "num_actions" in cols else "no counter"
        return (f"CSV header has {len(cols & set(DATA_CURRENT + DATA_2024))} H-ARC data.csv columns "
                f"(event columns {', '.join(sorted(data_cols)[:4])}, ...; {which})"
                + _name_hint(head, r"^(clean_)?data.*\.csv$"))
    return None


def sniff_summary(head: Head) -> str | None:
    cols = header_columns(head)
    if not cols or cols & _DATA_ONLY:
        return None
    core = {"joint_id_task", "attempt_number", "num_actions", "test_output_grid", "solved"}
    if len(cols & core) >= 4:
        return (f"CSV header has the H-ARC summary columns {', '.join(sorted(cols & core))}"
                + _name_hint(head, r"summary.*\.csv$"))
    return None


def sniff_errors(head: Head) -> str | None:
    cols = header_columns(head)
    if not cols or cols & _DATA_ONLY or "hashed_id" in cols:
        return None
    if {"task_name", "test_output_grid", "count"} <= cols:
        return ("CSV header has task_name, test_output_grid and count (H-ARC incorrect submissions)"
                + _name_hint(head, r"(incorrect|error).*\.csv$"))
    return None


def sniff_survey(head: Head) -> str | None:
    cols = header_columns(head)
    if not cols or "hashed_id" not in cols or cols & (_DATA_ONLY | {"task_name", "joint_id_task"}):
        return None
    answers = cols & {"feedback", "age", "gender", "withdraw", "withdraw_reason", "education_level"}
    if answers:
        return (f"CSV header has hashed_id and the survey columns {', '.join(sorted(answers))}"
                + _name_hint(head, r"(feedback|demographics|withdraw)"))
    return None


def _register() -> None:
    harc_tables = (RAW,)
    register(InputFormat(
        "harc-data", "H-ARC event log: data.csv (current OSF release) or clean_data*.csv (2024 release)",
        read_data, sniff_data, (*harc_tables, ACTIONS, TASKS)))
    register(InputFormat(
        "harc-summary", "H-ARC attempts: summary_data.csv or clean_summary_data*.csv",
        read_summary, sniff_summary, (*harc_tables, ATTEMPTS)))
    register(InputFormat(
        "harc-errors", "H-ARC wrong grids per task: incorrect_submissions.csv or clean_errors*.csv",
        read_errors, sniff_errors, (*harc_tables, ERRORS)))
    register(InputFormat(
        "harc-survey", "H-ARC surveys: feedback, demographics, withdraw (current and 2024 column sets)",
        read_survey, sniff_survey, (*harc_tables, FEEDBACK, DEMOGRAPHICS, WITHDRAWALS)))
    register(InputFormat(
        "arc-tgi", "ARC-TGI task-generator export CSV (code stored, never executed)",
        harc_arc.read_tgi, harc_arc.sniff_tgi, harc_arc.TGI_TABLES))
    register(InputFormat(
        "arc-task", "ARC task JSON (ARC-AGI-1/2): one task per file, or a {task_id: task} collection",
        harc_arc.read_task_json, harc_arc.sniff_task_json, harc_arc.TASK_TABLES))


_register()
