"""Where `arcstudy score` reads plays from and writes results to: the plays in the database, the scorecard files
(scorecard__<policy>.json, replay_checks.csv, policy_sensitivity.csv, figures/) and the out_arc3__* score tables."""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from itertools import accumulate
from pathlib import Path

import duckdb
import polars as pl

from pipeline.core.console import out
from pipeline.core.outputs import write_csv, write_text
from pipeline.core.workspace import COMMIT_MEMORY, duckdb_bounds

SCORE_TABLES = ("out_arc3__replay_checks", "out_arc3__run_scores", "out_arc3__level_scores",
                "out_arc3__game_scores", "out_arc3__policy_sensitivity")
PER_POLICY_TABLES = ("out_arc3__run_scores", "out_arc3__level_scores", "out_arc3__game_scores")


# What `score --out` writes (write_score_files, write_comparison, the manifest): an earlier run's, left beside a new
# run's, would read as this run's (another policy's scorecard, a stale comparison), so each run clears them first.
SCORE_FILE_PATTERNS = ("scorecard__*.json", "replay_checks.csv", "policy_sensitivity.csv", "compare.md",
                       "compare.csv", "manifest.json", "figures/level_scores_heatmap__*.*",
                       "figures/policy_sensitivity.*")


def clear_score_files(out_dir: Path) -> None:
    """Remove an earlier score run's files from `out_dir` (a stage: a copy of --out); other files are kept."""
    for pattern in SCORE_FILE_PATTERNS:
        for path in out_dir.glob(pattern):
            if path.is_file() or path.is_symlink():
                path.unlink()


def write_score_files(result, out_dir: Path, *, figures: bool) -> list[Path]:
    """One scorecard per policy, replay_checks.csv, policy_sensitivity.csv (two or more policies) and the
    figures under `out_dir`; the paths written. Each file is written whole, never through a symlink; the CSVs
    through pipeline.core.outputs.csv_text (formula-like text neutralised unless --raw-csv)."""
    from .run import policy_slug

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for pr in result.policies:
        path = out_dir / f"scorecard__{policy_slug(pr.policy.policy_id)}.json"
        write_text(path, pr.scorecard_json)
        written.append(path)
    checks = result.tables["out_arc3__replay_checks"].drop("card_id")
    path = out_dir / "replay_checks.csv"
    write_csv(checks, path)
    written.append(path)
    sens = result.tables["out_arc3__policy_sensitivity"]
    if len(result.policies) > 1:
        path = out_dir / "policy_sensitivity.csv"
        write_csv(sens.drop("card_id"), path)
        written.append(path)
    if figures:
        from .figures import save_score_figures  # altair and vl-convert take seconds to import

        for paths in save_score_figures(result, out_dir / "figures").values():
            written.extend(paths.values())
    return written


# DuckDB's memory limit while the score tables are inserted. The rows of a flood of plays (100,000 one-step plays:
# 700,000 level rows) filled the workspace's 256 MB bound on top of everything `score` holds by then, for a peak
# of 1.04 GB; at 64 MB, 0.87 GB. A write refused for memory is rolled back and made again under the wider bound.
SCORE_TABLES_MEMORY = "64MB"


def write_score_tables(ws, result) -> None:
    """Replace this scorecard's rows (per policy where the table has one) in the out_arc3__* score tables."""
    from schemas import get_table

    card_id = result.card_id
    policy_ids = [pr.policy.policy_id for pr in result.policies]
    for name in SCORE_TABLES:
        # Derived tables: one written by an older arcstudy with other columns is rebuilt (its rows are lost and
        # come back by re-scoring; the source data is untouched).
        have = ws.read(f"SELECT * FROM {name} LIMIT 0").columns if ws.has_table(name) else None
        if have is not None and tuple(have) != get_table(name).columns:
            out.info(f"{name} had other columns (older arcstudy): recreated")
            ws.recreate_table(name)
    for memory in (SCORE_TABLES_MEMORY, None):
        try:
            with ws.transaction() as con:
                for name in SCORE_TABLES:
                    if name in PER_POLICY_TABLES:
                        con.execute(f"DELETE FROM {name} WHERE card_id = ? AND policy_id IN "
                                    "(SELECT unnest(?::VARCHAR[]))", [card_id, policy_ids])
                    else:
                        con.execute(f"DELETE FROM {name} WHERE card_id = ?", [card_id])
                    ws.insert_frame(name, result.tables[name], con=con, memory=memory)
            return
        except duckdb.OutOfMemoryException:
            if memory is None:
                raise
            # rolled back: made again under the workspace's own, wider bound (COMMIT_MEMORY)


# The texts every step of a play repeats (its play, file, guid and game ids): read as the play's place among the
# plays and stored once per play (polars string views over one buffer). Read as text, two million stored steps
# took about 0.5 KB a step.
_PLAY_TEXTS = ("play_id", "file_id", "guid", "game_id")


# One read of stored steps (`read_narrow_steps`): at most this many lines at a time, each slice narrowed before the
# next is read. Read whole, in the stored types, two million steps of one file took 0.59 GB of table and 1.03 GB at
# the read's peak (DuckDB's result beside polars' copy of it).
STEP_SLICE_ROWS = 250_000
_NARROW_CATEGORIES = ("file_id", "play_id", "guid", "game_id", "state", "step_effect")  # a few values each
_NARROW_INTEGERS = ("line_number", "step_index", "action_id", "click_x", "click_y", "levels_completed",
                    "win_levels", "n_frames")


def read_narrow_steps(ws, columns: Sequence[str], file_ids: Sequence[str]) -> pl.DataFrame:
    """`read_stored_steps` of ``file_ids`` (ordered by file and line), read a slice of at most STEP_SLICE_ROWS
    lines at a time (whole small files together; a larger file by ranges of its lines), each slice held in the
    narrowest types: the repeated texts as categories, the integers in the smallest type that holds every value
    read (and the lists of available actions likewise). The same values, about a fifth of the memory; no step:
    the stored types."""
    ids = sorted(set(file_ids))
    integers = [c for c in _NARROW_INTEGERS if c in columns]
    lists = [c for c in ("available_actions",) if c in columns]
    chosen = "file_id IN (SELECT unnest($1::VARCHAR[]))"
    bounds = ", ".join([f"min({c}), max({c})" for c in integers]
                       + [f"(SELECT min(v) FROM (SELECT unnest({c}) AS v FROM core_arc3__steps WHERE {chosen})), "
                          f"(SELECT max(v) FROM (SELECT unnest({c}) AS v FROM core_arc3__steps WHERE {chosen}))"
                          for c in lists])
    with duckdb_bounds(ws.con, memory=COMMIT_MEMORY, best_effort=True):
        counts = dict(ws.read(f"SELECT file_id, count(*) FROM core_arc3__steps WHERE {chosen} GROUP BY file_id",
                              [ids]).iter_rows())
        if not counts:
            return read_stored_steps(ws, columns, ids)
        found = ws.read(f"SELECT {bounds} FROM core_arc3__steps WHERE {chosen}", [ids]).row(0) if bounds else ()
        big = sorted(fid for fid, n in counts.items() if n > STEP_SLICE_ROWS)
        cuts = {fid: [first for first, _ in _line_ranges(ws, fid, STEP_SLICE_ROWS)] for fid in big}
    types = {}
    for i, c in enumerate([*integers, *lists]):
        small = _smallest_int(found[2 * i], found[2 * i + 1])
        types[c] = small if c in integers else pl.List(small)
    narrowed = ([pl.col(c).cast(pl.Categorical) for c in _NARROW_CATEGORIES if c in columns]
                + [pl.col(c).cast(t) for c, t in types.items()])
    slices = []
    for files, lines in _step_slices(ids, counts, cuts):
        part = read_stored_steps(ws, columns, files, lines=lines)
        # every column in buffers of its own (`shrink_to_fit` copies those it does not cast): a column kept as
        # DuckDB handed it over keeps the whole slice alive (Arrow's C interface frees a batch's columns
        # together), 0.5 GB of two million steps for a few null columns
        slices.append(part.with_columns(narrowed).shrink_to_fit())
        del part  # (its stored types let go before the next slice is read)
    return pl.concat(slices, rechunk=False)


def _line_ranges(ws, file_id: str, lines: int) -> list[tuple[int, int]]:
    """(first line number, steps) of every range of ``lines`` line numbers (0 to ``lines`` - 1, ...) that holds
    a step of the stored file, in line order: at most ``lines`` steps each. A grouping, not a sort: numbering the
    steps of six million of one file (a window in line order) left 0.1 GB in DuckDB's pool."""
    found = ws.read("SELECT line_number // ? AS k, count(*) AS n FROM core_arc3__steps WHERE file_id = ? "
                    "GROUP BY k ORDER BY k", [lines, file_id])
    return [(k * lines, n) for k, n in found.iter_rows()]


# DuckDB's memory limit for a connection that `StoredSteps` reads through while a file is exported: DuckDB keeps
# the table's blocks it has read up to its limit, and under COMMIT_MEMORY (256 MB) the export of six million
# stored steps of one file peaked at 0.79 GB against 0.56 GB for two million
STORED_READ_MEMORY = "64MB"

# `StoredSteps`: the steps of one stored file read a block of this many line numbers at a time (at most as many
# steps: about 12 MB of the export's columns, in the stored types)
STORED_BLOCK_ROWS = 50_000


class StoredSteps:
    """One stored file's steps (``columns`` of them, in line order) read from the database a block of
    STORED_BLOCK_ROWS lines at a time as they are asked for, the last few blocks kept: what a long recording's
    export reads of its steps, which held whole took about 185 bytes a step even narrowed (`read_narrow_steps`;
    0.62 GB for two million steps of one file). It answers the few questions the export and the scoring
    rebuild ask of a file's steps table (`height`, `slice`, `select`, and a pass over it a block at a
    time: `parts`), each with a `pl.DataFrame`'s meaning; ``ws`` must stay open while it is read
    (opened with STORED_READ_MEMORY for a long read)."""

    KEPT_BLOCKS = 3  # the block the replay feeds from, the one the rows are made from, and the records' one

    def __init__(self, ws, file_id: str, columns: Sequence[str], block_rows: int | None = None,
                 _shared: _StoredBlocks | None = None) -> None:
        self.file_id = file_id
        self.columns = tuple(columns)
        self._blocks = _shared or _StoredBlocks(ws, file_id, self.columns, block_rows or STORED_BLOCK_ROWS)

    @property
    def height(self) -> int:
        return self._blocks.height

    def __len__(self) -> int:
        return self.height

    def select(self, *columns: str | Sequence[str]) -> StoredSteps:
        """The same steps, only ``columns`` (read through the same kept blocks)."""
        names = [c for item in columns for c in ([item] if isinstance(item, str) else item)]
        return StoredSteps(None, self.file_id, names, _shared=self._blocks)

    def slice(self, offset: int, length: int | None = None) -> pl.DataFrame:
        """Steps ``offset`` to ``offset + length`` (to the end: None), as `pl.DataFrame.slice` gives them."""
        n = self.height
        start = min(max(0, offset + n if offset < 0 else offset), n)
        stop = n if length is None else min(n, start + max(0, length))
        return self._blocks.rows(start, stop).select(self.columns)

    def parts(self) -> Iterator[pl.DataFrame]:
        """Every step, a block at a time, in order: a pass over the file, which reads only these columns and
        keeps no block (a pass over one column of six million steps read with every column left 0.1 GB more
        in the allocators)."""
        for k in range(self._blocks.n_blocks):
            yield self._blocks.block(k, columns=self.columns)

    def whole(self) -> pl.DataFrame:
        """Every step at once (`read_narrow_steps`), for what rewrites the table (recovered action ids)."""
        return read_narrow_steps(self._blocks.ws, self.columns, [self.file_id])


class _StoredBlocks:
    """The blocks `StoredSteps` reads (every column any of its selections asks for), the last
    `StoredSteps.KEPT_BLOCKS` kept; a lock, as the export makes steps from a background thread too. A block is
    a range of ``block_rows`` line numbers (`_line_ranges`): at most as many steps."""

    def __init__(self, ws, file_id: str, columns: tuple[str, ...], block_rows: int) -> None:
        self.ws, self.file_id, self.columns, self.block_rows = ws, file_id, columns, block_rows
        with duckdb_bounds(ws.con, memory=COMMIT_MEMORY, best_effort=True):
            ranges = _line_ranges(ws, file_id, block_rows)
        self.first_lines = [first for first, _ in ranges]
        self.starts = list(accumulate((n for _, n in ranges), initial=0))  # each block's first step, then the end
        self.height = self.starts[-1]
        self.n_blocks = len(ranges)
        self._kept: dict[int, pl.DataFrame] = {}
        self._lock = threading.Lock()

    def block(self, k: int, columns: tuple[str, ...] | None = None) -> pl.DataFrame:
        """Block ``k``: every column, kept; or only ``columns``, read for a pass and not kept."""
        with self._lock:
            found = self._kept.get(k)
            if found is not None:
                return found if columns is None else found.select(columns)
            first = self.first_lines[k]
            found = read_stored_steps(self.ws, columns or self.columns, [self.file_id],
                                      lines=(first, first + self.block_rows - 1))
            if found.height != self.starts[k + 1] - self.starts[k]:
                raise ValueError(f"the stored steps of file {self.file_id} changed while they were read "
                                 f"(lines {first} on: {found.height} steps)")
            if columns is None:
                self._kept = dict([*list(self._kept.items())[1 - StoredSteps.KEPT_BLOCKS:], (k, found)])
            return found

    def rows(self, start: int, stop: int) -> pl.DataFrame:
        if start >= stop:  # no step: the columns, typed
            return (self.block(0) if self.n_blocks else read_stored_steps(self.ws, self.columns, [self.file_id])
                    ).clear()
        starts = self.starts
        parts = [self.block(k).slice(max(start - starts[k], 0), min(stop, starts[k + 1]) - max(start, starts[k]))
                 for k in range(bisect_right(starts, start) - 1, bisect_left(starts, stop))]
        return parts[0] if len(parts) == 1 else pl.concat(parts, rechunk=False)


def _step_slices(ids: list[str], counts: dict[str, int], cuts: dict[str, list[int]]
                 ) -> Iterator[tuple[list[str], tuple[int, int | None] | None]]:
    """The reads of `read_narrow_steps`, in file order: (files, None) for small files read together up to
    STEP_SLICE_ROWS steps, ([file], (first line, last line or None)) for each range of a larger file."""
    group: list[str] = []
    held = 0
    for fid in ids:
        n = counts.get(fid, 0)
        if fid in cuts:
            if group:
                yield group, None
                group, held = [], 0
            at = cuts[fid]
            for k, first in enumerate(at):
                yield [fid], (first, at[k + 1] - 1 if k + 1 < len(at) else None)
            continue
        if group and held + n > STEP_SLICE_ROWS:
            yield group, None
            group, held = [], 0
        if n:
            group.append(fid)
            held += n
    if group:
        yield group, None


def _smallest_int(low: int | None, high: int | None) -> pl.DataType:
    for dtype, bits in ((pl.Int8, 8), (pl.Int16, 16), (pl.Int32, 32)):
        if low is None or (-(1 << (bits - 1)) <= low and high < (1 << (bits - 1))):
            return dtype
    return pl.Int64


def read_stored_steps(ws, columns: Sequence[str], file_ids: Sequence[str],
                      lines: tuple[int, int | None] | None = None) -> pl.DataFrame:
    """The stored steps of ``file_ids`` (ordered by file and line), ``columns`` of them, under a bounded DuckDB
    memory limit where the connection allows one; the texts of `_PLAY_TEXTS` among them are read once per play
    when every step names a play of its file with the play's guid and game (else as text, row by row)."""
    ids = list(file_ids)
    texts = [c for c in columns if c in _PLAY_TEXTS]
    others = [c for c in columns if c not in _PLAY_TEXTS]
    where = "file_id IN (SELECT unnest(?::VARCHAR[]))"
    conditions = [where]  # of the steps (``lines``: only those of these line numbers, the last None for the end)
    if lines is not None:
        conditions.append(f"line_number >= {int(lines[0])}")
        if lines[1] is not None:
            conditions.append(f"line_number <= {int(lines[1])}")
    # the plays whose texts are read: the files' plays, or for a range of lines only those its steps name (a file
    # of a million one-step plays: each block read every play, past a 64 MB DuckDB limit and in time per play)
    plays = f"SELECT DISTINCT file_id, play_id, guid, game_id FROM core_arc3__plays WHERE {where}"
    params = [ids]
    if lines is not None:
        plays = (f"SELECT DISTINCT p.file_id, p.play_id, p.guid, p.game_id FROM core_arc3__plays p SEMI JOIN "
                 f"(SELECT DISTINCT file_id, play_id FROM core_arc3__steps WHERE {' AND '.join(conditions)}) s "
                 f"ON p.file_id = s.file_id AND p.play_id = s.play_id WHERE p.{where}")
        params = [ids, ids]
    with duckdb_bounds(ws.con, memory=COMMIT_MEMORY, best_effort=True):
        if texts:
            keys = ws.read(f"{plays} ORDER BY file_id, play_id, guid, game_id", params)
            if keys.height and not keys.select("file_id", "play_id").is_duplicated().any():
                rows = ws.read(
                    f"SELECT k.code AS __play, {', '.join(f's.{c}' for c in others)}, "
                    "(s.guid IS NOT DISTINCT FROM k.guid AND s.game_id IS NOT DISTINCT FROM k.game_id) AS __same "
                    f"FROM core_arc3__steps s LEFT JOIN (SELECT *, (row_number() OVER (ORDER BY file_id, play_id, "
                    f"guid, game_id) - 1)::UINTEGER AS code FROM ({plays})) k ON s.file_id = k.file_id AND "
                    f"s.play_id = k.play_id WHERE {' AND '.join('s.' + c for c in conditions)} "
                    "ORDER BY s.file_id, s.line_number", [*params, ids])
                if rows["__play"].null_count() == 0 and bool(rows["__same"].all()):
                    fresh = pl.DataFrame({c: keys[c].to_list() for c in texts}, schema={c: pl.String for c in texts})
                    return rows.with_columns([_gathered(fresh[c], rows["__play"]) for c in texts]).select(columns)
        return ws.read(f"SELECT {', '.join(columns)} FROM core_arc3__steps WHERE {' AND '.join(conditions)} "
                       "ORDER BY file_id, line_number", [ids])


def _gathered(values: pl.Series, codes: pl.Series) -> pl.Series:
    """``values`` at ``codes``, as string views over ``values``' one buffer, in the chunks ``codes`` has: a
    column chunked unlike the others made polars copy the whole table into one chunk (0.4 GB of two million
    steps)."""
    parts, start = [], 0
    for n in codes.chunk_lengths():
        parts.append(values.gather(codes.slice(start, n)))
        start += n
    return pl.concat(parts, rechunk=False) if parts else values.clear()


def read_db_plays(ws, games: list[str]) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """The steps, plays and file names of the plays in the database (only `games` when given), as
    plays.recordings_from_tables takes them."""
    where, params = "", []
    if games:
        where = f" WHERE game_id IN ({', '.join('?' for _ in games)})"
        params = list(games)
    plays = ws.read(f"SELECT * FROM core_arc3__plays{where}", params)
    if plays.height == 0:
        return ws.read("SELECT * FROM core_arc3__steps WHERE false"), plays, {}
    from .plays import STEP_COLUMNS

    ids = plays["file_id"].unique().sort().to_list()
    scripts: set[str] = set()  # playback scripts (actions only), replayed before scoring
    if "is_replay_needed" in plays.columns:
        scripts = set(plays.filter(pl.col("is_replay_needed").fill_null(False))["file_id"].to_list())
    # Under a bounded DuckDB memory limit (its sort of a million steps otherwise held 0.7 GB of its own), a slice
    # at a time, in narrow types (two million steps of one file read whole in the stored types held 0.75 GB and
    # kept `score --db` over 1 GB to its end). Of a recording's steps, the columns scoring reads; of a playback
    # script's, every column (its replay reads them).
    steps = read_narrow_steps(ws, STEP_COLUMNS, [fid for fid in ids if fid not in scripts])
    if scripts:
        from schemas import empty_frame

        script_steps = read_narrow_steps(ws, empty_frame("core_arc3__steps").columns, sorted(scripts))
        steps = pl.concat([steps, script_steps], how="diagonal_relaxed").sort("file_id", "line_number")
    # in ingestion order: of two files of one play, the first ingested is the one scored (drop_duplicate_plays)
    names = ws.read("SELECT file_id, file_name FROM raw_ingest__files WHERE file_id IN "
                    "(SELECT unnest(?::VARCHAR[])) ORDER BY ingested_at, file_id", [ids])
    files = {fid: (name, None) for fid, name in names.iter_rows()}
    for fid in ids:
        files.setdefault(fid, (None, None))
    if scripts:
        from .plays import FileRef

        # playback scripts: how many of their lines were not actions (stored raw, kind "other"), to report
        skipped = dict(ws.read("SELECT file_id, count(*) FILTER (WHERE line_kind = 'other') FROM "
                               "raw_arc3__recording_lines WHERE file_id IN (SELECT unnest(?::VARCHAR[])) "
                               "GROUP BY file_id", [sorted(scripts)]).iter_rows())
        for fid in sorted(scripts):
            files[fid] = FileRef(files[fid][0], None, None, skipped.get(fid, 0))
    return steps, plays, files
