"""The single writer of a transitions dataset: Parquet shards of bounded size, written atomically, and the card.

Shards are `data/train-NNNNN.parquet` (zstd). Small batches (a short file's rows) are gathered into row groups
of about `ROW_GROUP_ROWS` rows or `ROW_GROUP_BYTES` bytes (never more than a shard) before they are written: one Parquet write per few
thousand rows, not per file. Each is written under a
temporary name (`.train-NNNNN.parquet.tmp`, which no Parquet loader picks up), flushed to disk and renamed when
it is complete, so a run that dies or a disk that fills mid-export leaves no half-written file that looks like
a shard. A shard is closed once its file reaches `max_bytes` (one batch may take it a little over) or holds
`MAX_SHARD_ROW_GROUPS` row groups: Parquet's writer holds every row group's metadata until the shard closes
(about 15 bytes a row), and replayed frames compress so well that a shard of millions of rows stayed under
`max_bytes`, so that memory grew with the export.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core import manifest
from pipeline.core.outputs import markdown_code, markdown_text
from pipeline.core.spool import Spool
from schemas.transitions import ARROW_SCHEMA, COLUMNS

from .transitions import FileExport, PlayExport, RowBlock, batches_from_bytes, build_batch

__all__ = ["DEFAULT_SHARD_BYTES", "PLAY_LISTINGS", "DatasetSummary", "ShardWriter", "dataset_card"]

DEFAULT_SHARD_BYTES = 256 << 20
ROW_GROUP_ROWS = 1024
ROW_GROUP_BYTES = 16 << 20
MAX_SHARD_ROW_GROUPS = 512  # row groups a shard holds at most (about 524,000 rows)
DATA_DIR = "data"


class ShardWriter:
    """Streams record batches into shards of at most about `max_bytes` each (the calling process only)."""

    def __init__(self, out_dir: Path, max_bytes: int = DEFAULT_SHARD_BYTES):
        self.dir = Path(out_dir) / DATA_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.shards: list[Path] = []
        self._writer: pq.ParquetWriter | None = None
        self._row_groups = 0  # in the shard being written
        self._tmp: Path | None = None
        self._final: Path | None = None
        self._pending: list[pa.RecordBatch] = []  # batches not written yet (one row group, once enough)
        self._pending_rows = self._pending_bytes = 0
        self._blocks: list[RowBlock] = []  # rows of files exported in this process, not yet a batch
        self._block_rows = self._block_bytes = 0

    def _open(self) -> None:
        name = f"train-{len(self.shards):05d}.parquet"
        self._final = self.dir / name
        self._tmp = self.dir / f".{name}.tmp"
        # statistics and dictionaries only where they help (the frames and hashes are unique values)
        self._writer = pq.ParquetWriter(self._tmp, ARROW_SCHEMA, compression="zstd", compression_level=3,
                                        write_statistics=["game_id", "play_id", "source", "step", "action",
                                                          "levels_completed", "state", "verified"],
                                        use_dictionary=["game_id", "play_id", "source", "action", "state",
                                                        "file_id"])

    def write(self, batch: pa.RecordBatch) -> None:
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self._pending_bytes += batch.nbytes
        if self._pending_rows >= ROW_GROUP_ROWS or self._pending_bytes >= min(ROW_GROUP_BYTES, self.max_bytes):
            self._write_pending()

    def _write_pending(self) -> None:
        if not self._pending:
            return
        if self._writer is None:
            self._open()
        assert self._writer is not None and self._tmp is not None
        table = pa.Table.from_batches(self._pending, schema=ARROW_SCHEMA)
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        self._writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self._row_groups += 1
        if os.path.getsize(self._tmp) >= self.max_bytes or self._row_groups >= MAX_SHARD_ROW_GROUPS:
            self._close()

    def write_export(self, export: FileExport) -> None:
        """Every batch of a file's export, decompressed one at a time. Row blocks (files exported in this process)
        are gathered, many files' at once, into one batch of about a row group."""
        for data in export.batches:
            if isinstance(data, RowBlock):
                self._blocks.append(data)
                self._block_rows += data.num_rows
                self._block_bytes += data.frame_bytes
                if self._block_rows >= ROW_GROUP_ROWS or self._block_bytes >= min(ROW_GROUP_BYTES, self.max_bytes):
                    self._write_blocks()
                continue
            self._write_blocks()  # rows stay in input order
            for batch in batches_from_bytes(data):
                self.write(batch)

    def _write_blocks(self) -> None:
        if self._blocks:
            blocks, self._blocks, self._block_rows, self._block_bytes = self._blocks, [], 0, 0
            self.write(build_batch(blocks))

    def _close(self) -> None:
        if self._writer is None:
            return
        assert self._tmp is not None and self._final is not None
        self._writer.close()
        with open(self._tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(self._tmp, self._final)
        self.shards.append(self._final)
        self._writer = self._tmp = self._final = None
        self._row_groups = 0

    def close(self) -> list[Path]:
        """Close the last shard; the shards written, in order."""
        self._write_blocks()
        self._write_pending()
        self._close()
        return list(self.shards)

    def abort(self) -> None:
        """Drop the shard being written (after an error): nothing half-written stays."""
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        self._blocks, self._block_rows, self._block_bytes = [], 0, 0
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # a full disk may fail the close too: the temp file goes anyway
                pass
            if self._tmp is not None:
                self._tmp.unlink(missing_ok=True)
            self._writer = self._tmp = self._final = None
            self._row_groups = 0


# The plays the card and the manifest name (cut, unverified, not confirmed, left out): each kind's first
# `pipeline.core.manifest.LISTED_PROBLEMS` one by one, and past that every one in a JSON-lines file of the
# dataset (`RunManifest.listed_problems`): a recording of a million one-step plays whose game is not found once
# made a 197 MB card and a 277 MB manifest, and took the export to 2.1 GB.
PLAY_LISTINGS = {"plays_cut": "plays_cut.jsonl", "plays_unverified": "plays_unverified.jsonl",
                 "rows_not_confirmed": "rows_not_confirmed.jsonl", "plays_not_exported": "plays_not_exported.jsonl"}


@dataclass
class DatasetSummary:
    """What the card reports, gathered as the files' exports come in. The plays it names wait on disk past a
    few thousand (`Spool`): a flood of plays is counted, its entries never all in memory."""

    rows_by_game_source: Counter = field(default_factory=Counter)
    plays_by_game_source: Counter = field(default_factory=Counter)
    game_sources: dict[str, str | None] = field(default_factory=dict)  # game_id -> sha256 of its source file
    cut: list[PlayExport] = field(default_factory=Spool)
    unverified: list[PlayExport] = field(default_factory=Spool)
    unconfirmed: list[PlayExport] = field(default_factory=Spool)  # replayed plays with rows the replay did not confirm
    not_exported: list[tuple[str, PlayExport]] = field(default_factory=Spool)
    rejected: list[tuple[str, str]] = field(default_factory=Spool)  # (file, reason)
    n_files: int = 0
    n_rows: int = 0
    n_unverified_rows: int = 0  # rows of the unverified plays
    n_replayed_unconfirmed_rows: int = 0  # rows of replayed plays whose frames the replay did not confirm

    @property
    def n_unconfirmed_rows(self) -> int:
        """Rows with `verified` false: every row of an unverified play, and the unconfirmed rows of replayed ones."""
        return self.n_unverified_rows + self.n_replayed_unconfirmed_rows

    def add(self, export: FileExport) -> None:
        self.n_files += 1
        if export.rejected:
            self.rejected += [(export.label, p) for p in export.problems[:1]]
        for play in export.plays:
            if play.n_rows:
                self.plays_by_game_source[(play.game_id, play.source)] += 1
                self.rows_by_game_source[(play.game_id, play.source)] += play.n_rows
            if play.status == "cut":
                self.cut.append(play)
            elif play.status == "unverified":
                self.unverified.append(play)
                self.n_unverified_rows += play.n_rows
            if play.status != "unverified" and play.n_unconfirmed_rows:
                self.unconfirmed.append(play)
                self.n_replayed_unconfirmed_rows += play.n_unconfirmed_rows
            elif play.status == "not_exported":
                self.not_exported.append((export.label, play))
        if export.game_id is not None and export.n_rows:
            known = self.game_sources.get(export.game_id)
            self.game_sources[export.game_id] = known or export.game_source_sha256
        self.n_rows += export.n_rows

    def listings(self) -> dict[str, Iterator[Any]]:
        """Each kind of play the card names (`PLAY_LISTINGS`), as the manifest lists it: JSON objects, in order."""
        return {
            "plays_cut": ({"play_id": p.play_id, "rows": p.n_rows, "detail": p.detail} for p in self.cut),
            "plays_unverified": (p.play_id for p in self.unverified),
            "rows_not_confirmed": ({"play_id": p.play_id, "rows": p.n_unconfirmed_rows} for p in self.unconfirmed),
            "plays_not_exported": ({"file": f, "play_id": p.play_id, "detail": p.detail}
                                   for f, p in self.not_exported),
        }


def _cell(text: object) -> str:
    return markdown_text(text)  # names, ids and reasons from input files: one line of text, never Markdown or HTML


def _listed(head: list[str], rows: Iterable[str], n: int, where: str) -> list[str]:
    """A card's table of ``n`` rows: the first LISTED_PROBLEMS of them, then how many more and where each is."""
    limit = manifest.LISTED_PROBLEMS
    lines = [*head, *islice(rows, limit)] if n else []
    if n > limit:
        lines += ["", f"The first {limit:,} of {n:,}: every one is in `{where}`."]
    return lines


def dataset_card(summary: DatasetSummary, shards: Sequence[Path], *, licence: str, command: str,
                 created_at: str) -> str:
    """The dataset card (README.md): Hugging Face front matter (licence, the Parquet files), then sources,
    game versions, counts, the plays cut at a divergence or left out, and every column."""
    lines = ["---", f"license: {licence}", "configs:", "- config_name: default", "  data_files:",
             "  - split: train", f"    path: {DATA_DIR}/*.parquet", "tags:", "- arc-agi-3", "- world-models",
             "- transitions", "---", "", "# ARC-AGI-3 transitions", "",
             "One row per engine response of every play: the action sent, the frames the game answered with, "
             "the state and level counts, and how the toolkit's card counts the step. Consecutive rows of a "
             "`play_id` (ordered by `step`) are the transitions (frames[t-1], action[t]) -> frames[t]. Written "
             f"by arcstudy ({markdown_code(command)}) on {created_at}.", "",
             "Every play was replayed on the engine where its game could be loaded: rows whose replay "
             "disagreed with the recording are not here (a divergent play is cut before its divergence, listed "
             "below), and `verified` says which rows the engine confirmed"
             + (" (all of them)." if not summary.unverified and not summary.unconfirmed else
                f" (not {summary.n_unconfirmed_rows:,} row(s): "
                + "; ".join(part for part in (
                    f"{len(summary.unverified)} play(s) of games that could not be loaded are from their "
                    "recordings' frames, unchecked" if summary.unverified else "",
                    f"{summary.n_replayed_unconfirmed_rows:,} row(s) of "
                    f"{len(summary.unconfirmed)} replayed play(s) keep the recording's frames where they differed "
                    "from the replay's and the replay matched again later" if summary.unconfirmed else "")
                    if part) + ", listed below)."), "",
             "## Sources", ""]
    sources = Counter()
    for (_game, source), n in summary.rows_by_game_source.items():
        sources[source] += n
    plays_per_source = Counter()
    for (_game, source), n in summary.plays_by_game_source.items():
        plays_per_source[source] += n
    lines += ["| source | plays | rows |", "|---|---:|---:|"]
    lines += [f"| {s} | {plays_per_source[s]:,} | {sources[s]:,} |" for s in sorted(sources)]
    lines += ["", f"{summary.n_files:,} input files, {summary.n_rows:,} rows in {len(shards)} shard(s) under "
              f"`{DATA_DIR}/`.", "", "## Games and versions", "",
              "| game_id | source file sha256 | plays | rows |", "|---|---|---:|---:|"]
    by_game: dict[str, list[int]] = {}
    for (game, source), n in summary.rows_by_game_source.items():
        entry = by_game.setdefault(game, [0, 0])
        entry[1] += n
        entry[0] += summary.plays_by_game_source[(game, source)]
    for game in sorted(by_game):
        sha = summary.game_sources.get(game)
        lines.append(f"| {_cell(game)} | {sha or 'not loadable: frames from the recording, unverified'} | "
                     f"{by_game[game][0]:,} | {by_game[game][1]:,} |")
    lines += ["", "## Counts per game and source", "", "| game_id | source | plays | rows |", "|---|---|---:|---:|"]
    for game, source in sorted(summary.rows_by_game_source):
        lines.append(f"| {_cell(game)} | {source} | {summary.plays_by_game_source[(game, source)]:,} | "
                     f"{summary.rows_by_game_source[(game, source)]:,} |")
    lines += ["", "## Plays cut at a divergence", ""]
    if summary.cut:
        lines += _listed(["| play_id | game_id | rows kept | divergence |", "|---|---|---:|---|"],
                         (f"| {_cell(p.play_id)} | {_cell(p.game_id)} | {p.n_rows:,} | {_cell(p.detail)} |"
                          for p in summary.cut), len(summary.cut), PLAY_LISTINGS["plays_cut"])
    else:
        lines.append("None: every replayed play agreed with its recording to the end.")
    lines += ["", "## Plays not verified", ""]
    if summary.unverified:
        lines += ["Their games could not be loaded: the frames are the recording's, unchecked (`verified` "
                  "false).", ""]
        lines += _listed(["| play_id | game_id | rows | why |", "|---|---|---:|---|"],
                         (f"| {_cell(p.play_id)} | {_cell(p.game_id)} | {p.n_rows:,} | {_cell(p.detail)} |"
                          for p in summary.unverified), len(summary.unverified), PLAY_LISTINGS["plays_unverified"])
    else:
        lines.append("None.")
    lines += ["", "## Rows whose frames the replay did not confirm", ""]
    if summary.unconfirmed:
        lines += ["Replayed plays whose frames differed from the replay's at these rows while every other field "
                  "agreed, the replay matching again later: the rows keep the recording's frames (`verified` "
                  "false).", ""]
        lines += _listed(["| play_id | game_id | rows | of which not confirmed |", "|---|---|---:|---:|"],
                         (f"| {_cell(p.play_id)} | {_cell(p.game_id)} | {p.n_rows:,} | {p.n_unconfirmed_rows:,} |"
                          for p in summary.unconfirmed), len(summary.unconfirmed),
                         PLAY_LISTINGS["rows_not_confirmed"])
    else:
        lines.append("None.")
    lines += ["", "## Left out", ""]
    if summary.not_exported or summary.rejected:
        lines += _listed(["| file | play_id | why |", "|---|---|---|"],
                         (f"| {_cell(f)} | {_cell(p.play_id)} | {_cell(p.detail)} |" for f, p in summary.not_exported),
                         len(summary.not_exported), PLAY_LISTINGS["plays_not_exported"])
        if summary.rejected:
            lines += _listed(["", "| file rejected | why |", "|---|---|"],
                             (f"| {_cell(f)} | {_cell(why)} |" for f, why in summary.rejected),
                             len(summary.rejected), "problems.jsonl")  # (each file has a problem)
    else:
        lines.append("Nothing.")
    lines += ["", "## Columns", "", "| column | type | meaning |", "|---|---|---|"]
    types = {f.name: str(f.type) for f in ARROW_SCHEMA}
    lines += [f"| `{c.name}` | `{types[c.name]}` | {_cell(c.description)} |" for c in COLUMNS]
    lines += ["", "## Loading", "", "```python", "import polars as pl",
              f'df = pl.read_parquet("{DATA_DIR}/*.parquet")', "", "import duckdb",
              f"duckdb.sql(\"SELECT game_id, count(*) FROM '{DATA_DIR}/*.parquet' GROUP BY ALL\")", "",
              "from datasets import load_dataset",
              f'ds = load_dataset("parquet", data_files="{DATA_DIR}/*.parquet", split="train")', "```", "",
              "## Licence", "", f"`{licence}`: the licence of the recordings and games the rows come from is "
              "the data owner's; check it before sharing this dataset.", ""]
    return "\n".join(lines)
