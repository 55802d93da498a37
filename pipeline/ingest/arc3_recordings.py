"""ARC-AGI-3 recordings (JSONL), every variant of spec/formats.md §A: the ingest adapter.

Reading, variant detection, step classification and the table rows all come from `pipeline.recordings`
(`read_recording_file`, `recording_tables`), the model `score FILES` uses too. This module only turns that
model into a reader's output: the rows (card slots of a trailing scorecard line included), quarantine
`Reject`s for the lines and slots left out, the file's flags, and (with --keep-frames) the frame pixels
streamed to Parquet while the file is read.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pipeline.core.outputs import OutputError, as_output_error, current_umask
from pipeline.ingest.base import FileContext, FileRejected, ReaderOutput, Reject
from pipeline.ingest.formats import Head, InputFormat, register
from pipeline.recordings.lines import Line, LineIssue, sniff_first_line
from pipeline.recordings.playback import is_playback_file, read_playback_file, script_tables
from pipeline.recordings.reader import (
    CHUNK_BYTES,
    LINES,
    PLAYS,
    STEPS,
    RecordingRejected,
    line_rows,
    play_frames,
    read_recording_file,
    recording_tables,
    step_frames,
)

FRAME_BATCH = 2048  # frames buffered before a Parquet row group is written


def sniff(head: Head) -> str | None:
    return sniff_first_line(head.first_line)


class _FrameSink:
    """Streams kept frames to `<frames_dir>/<file_id>.parquet` (zstd), a row group at a time, into a fresh
    temporary file renamed over it at the end (a crash never leaves a half-written frames file; a symlink there is
    replaced, never written through). A failure to write (a full disk, a frames folder that cannot be one) is the
    output's, not the recording's: raised as OutputError, which stops the run (exit 1) and quarantines nothing."""

    def __init__(self, ctx: FileContext):
        self.path = (ctx.frames_dir or ctx.path.parent) / f"{ctx.file_id}.parquet"
        self.rows: dict[str, list] = {"line_number": [], "frame_index": [], "frame_sha256": [], "pixels": []}
        self.writer = None
        self.tmp: Path | None = None

    def add(self, line: Line) -> None:
        try:
            self._add(line)
        except OSError as err:
            raise self._failed(err) from err

    def _failed(self, err: OSError) -> OutputError:
        self.abort()
        return as_output_error(err, self.path)

    def _add(self, line: Line) -> None:
        assert line.frames is not None and line.hashes is not None
        for i, (grid, digest) in enumerate(zip(line.frames, line.hashes, strict=True)):
            self.rows["line_number"].append(line.number)
            self.rows["frame_index"].append(i)
            self.rows["frame_sha256"].append(digest)
            self.rows["pixels"].append(grid.tobytes())
        if len(self.rows["pixels"]) >= FRAME_BATCH:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self.rows["pixels"]:
            return
        table = pa.table({
            "line_number": pa.array(self.rows["line_number"], pa.int64()),
            "frame_index": pa.array(self.rows["frame_index"], pa.int16()),
            "frame_sha256": pa.array(self.rows["frame_sha256"], pa.string()),
            "pixels": pa.array(self.rows["pixels"], pa.binary(4096)),
        })
        if self.writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
            os.close(fd)
            self.tmp = Path(tmp)
            self.writer = pq.ParquetWriter(self.tmp, table.schema, compression="zstd")
        self.writer.write_table(table)
        for v in self.rows.values():
            v.clear()

    def close(self) -> Path | None:
        try:
            self.flush()
            if self.writer is None:
                return None
            self.writer.close()
            self.writer = None
            assert self.tmp is not None
            os.chmod(self.tmp, 0o666 & ~current_umask())
            self.tmp.replace(self.path)  # atomic: a crash never leaves a half-written frames file
            self.tmp = None
        except OSError as err:
            raise self._failed(err) from err
        return self.path

    def abort(self) -> None:
        if self.writer is not None:
            with contextlib.suppress(OSError):
                self.writer.close()
            self.writer = None
        if self.tmp is not None:
            with contextlib.suppress(OSError):
                self.tmp.unlink(missing_ok=True)
            self.tmp = None


def _reject(i: LineIssue) -> Reject:
    return Reject(i.location, i.check, i.reason, i.raw_text, i.target_table, i.column, i.value, i.n_raw_bytes,
                  i.raw_sha256)


def _rejects(issues: list[LineIssue]) -> Iterator[Reject]:
    """The quarantine records of a recording's issues, made as they are consumed (a flood waits on disk)."""
    return map(_reject, issues)



def read_playback(ctx: FileContext) -> ReaderOutput:
    """A playback script (formats.md §A.7) is stored as its actions, its play marked ``is_replay_needed``:
    `score` and `view` replay it through the engine (the game may not be at hand now)."""
    out = ReaderOutput()
    try:
        script = read_playback_file(ctx.path)
    except RecordingRejected as err:
        raise FileRejected(err.reason, err.check, err.location) from None
    skipped = len(script.skipped_lines)
    out.detection_evidence = (f"playback: lines hold an `action_input` and no engine output (action script, "
                              f"{len(script.actions)} actions; {skipped} line(s) without action_input skipped)")
    out.rejects.extend_mapped(script.issues, _reject)
    out.flags.extend(["needs_replay", *(["non_action_lines_skipped"] if skipped else []),
                      *(["utf8_bom"] if script.has_bom else [])])
    out.tables.update(script_tables(script, ctx.file_id))
    return out


def read_recording(ctx: FileContext) -> ReaderOutput:
    if is_playback_file(ctx.path):
        return read_playback(ctx)
    out = ReaderOutput()
    sink = _FrameSink(ctx) if ctx.keep_frames else None
    on_chunk = None
    if ctx.write_chunk is not None:
        write = ctx.write_chunk

        def on_chunk(lines: list[Line]) -> None:  # the raw lines are written as read, then let go
            write(LINES, line_rows(lines, ctx.file_id))
            for ln in lines:
                ln.raw_json = ""
    try:
        try:
            # A streamed file (a large one) holds its lines as columns until its steps are counted.
            rec = read_recording_file(ctx.path, on_frames=sink.add if sink is not None else None, on_chunk=on_chunk,
                                      chunk_bytes=ctx.chunk_bytes or CHUNK_BYTES, file_sha256=ctx.file_id,
                                      columns=ctx.write_chunk is not None)
        except RecordingRejected as err:
            raise FileRejected(err.reason, err.check, err.location, rejects=_rejects(err.issues)) from None
        frames_file = None
        if sink is not None:
            path = sink.close()
            if path is not None:
                out.written_files.append(path)
                frames_file = str(path)
    except BaseException:
        if sink is not None:
            sink.abort()
        raise
    out.detection_evidence = f"{rec.variant}: {rec.evidence}"
    out.rejects.extend_mapped(rec.issues, _reject)  # a spool of them (a flood) is not copied
    out.flags.extend([*rec.flags, *rec.card_flags])
    streamed = ctx.write_chunk is not None
    if streamed:
        for steps in step_frames(rec, ctx.file_id, frames_file):
            ctx.write_chunk(STEPS, steps)
        for plays in play_frames(rec, ctx.file_id):  # (a file of a million plays held them all: 0.4 GB)
            ctx.write_chunk(PLAYS, plays)
    out.tables.update(recording_tables(rec, ctx.file_id, frames_file, streamed=streamed, plays=not streamed))
    return out


RECORDING_TABLES = ("raw_arc3__recording_lines", "core_arc3__steps", "core_arc3__plays", "core_arc3__usage",
                    "core_arc3__card_plays")

register(InputFormat(
    name="arc3-recording",
    description="ARC-AGI-3 recording JSONL: toolkit, official human dataset, agents/benchmarking, 2025 preview, or "
                "a playback file (action script, replayed when scored or viewed)",
    reader=read_recording,
    sniff=sniff,
    tables=RECORDING_TABLES,
    streams=True,
))
