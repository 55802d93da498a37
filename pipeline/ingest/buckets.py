"""Per-row state of a big file held on disk instead of in memory, split into buckets by a hash of a key.

A whole-file rule that only compares rows sharing a key (H-ARC data.csv: the rows of one task) can then be
worked out one bucket at a time, with memory bounded by the biggest bucket rather than by the file
(pipeline/ingest/harc.py `_DataFile`). Rows land in Arrow IPC files under a scratch folder (`scratch_folder`),
removed on every way out.

- `bucket_of(key, n)`: the bucket column, by a hash of `key`.
- `BucketFiles`: frames of many batches added with that column, read back one bucket at a time.
- `BatchSlices`: per bucket, a frame ordered by the file's row number, stored as one record batch per batch
  of the file, so that a later pass over the batches reads batch j's rows of every bucket and nothing else.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import polars as pl

from pipeline.core.outputs import as_output_error

BUCKET = "__bucket"
FLUSH_BYTES = 32 << 20  # rows held before they are written out (fewer, bigger files than one per batch)


@contextmanager
def scratch_folder(prefix: str) -> Iterator[Path]:
    """A temporary folder, removed on every way out (a generator holding it removes it when it is closed)."""
    try:
        path = Path(tempfile.mkdtemp(prefix=prefix))
    except OSError as err:  # $TMPDIR full or unwritable: the environment's fault, not an input's
        raise as_output_error(err, tempfile.gettempdir()) from err
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def read_ipc(path: Path) -> pl.DataFrame:
    """An Arrow IPC file read into memory (not mapped: the mapped pages would count in the process's resident
    memory for as long as a frame holds them)."""
    with open(path, "rb") as fh:
        return pl.read_ipc(fh)


def bucket_of(key: pl.Expr, n: int) -> pl.Expr:
    """Bucket 0..n-1 of each row, by a hash of `key` (rows with a null key share one bucket). The hash only
    needs to be the same for equal keys within this process: a Categorical's physical code will do."""
    return pl.when(key.is_null()).then(0).otherwise(key.hash(seed=0) % n).cast(pl.UInt32).alias(BUCKET)


class BucketFiles:
    """Frames carrying a BUCKET column, written to `folder` a few batches at a time, one file per bucket each
    time; `read(b)` gives bucket b's rows (without the column) in the order they were added."""

    def __init__(self, folder: Path, name: str, n: int, flush_bytes: int | None = None) -> None:
        self.folder, self.name, self.n = folder, name, n
        self.flush_bytes = FLUSH_BYTES if flush_bytes is None else flush_bytes
        self.parts: list[list[Path]] = [[] for _ in range(n)]
        self._held: list[pl.DataFrame] = []
        self._held_bytes = 0

    def add(self, df: pl.DataFrame) -> None:
        self._held.append(df)
        self._held_bytes += df.estimated_size()
        if self._held_bytes >= self.flush_bytes:
            self.flush()

    def flush(self) -> None:
        if not self._held:
            return
        df = pl.concat(self._held)
        self._held, self._held_bytes = [], 0
        for (b,), part in df.partition_by(BUCKET, as_dict=True, include_key=False, maintain_order=True).items():
            path = self.folder / f"{self.name}-{b:04d}-{len(self.parts[b]):05d}.arrow"
            part.write_ipc(path, compression="uncompressed")
            self.parts[b].append(path)

    def read(self, b: int) -> pl.DataFrame | None:
        """Bucket b's rows (None: it has none)."""
        if not self.parts[b]:
            return None
        return pl.concat([read_ipc(path) for path in self.parts[b]])

    def remove(self, b: int) -> None:
        for path in self.parts[b]:
            path.unlink(missing_ok=True)
        self.parts[b] = []

    def clear(self) -> None:
        """Forget everything added (a pass that starts over)."""
        self._held, self._held_bytes = [], 0
        for b in range(self.n):
            self.remove(b)


class BatchSlices:
    """Per bucket, a frame sorted by `order` (the file's row number), written as one record batch per batch of
    the file: batch j holds the rows up to `ends[j]`, the last row number of the file's batch j."""

    def __init__(self, folder: Path, name: str, order: str, ends: Sequence[int]) -> None:
        self.folder, self.name, self.order, self.ends = folder, name, order, list(ends)
        self.paths: list[Path] = []

    def write(self, b: int, df: pl.DataFrame) -> None:
        import pyarrow as pa

        cuts = df[self.order].search_sorted(pl.Series(self.ends, dtype=df[self.order].dtype), side="right")
        table = df.to_arrow()
        path = self.folder / f"{self.name}-{b:04d}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            start = 0
            for end in cuts.to_list():
                part = table.slice(start, end - start)
                writer.write_batch(pa.record_batch([c.combine_chunks() for c in part.columns], schema=table.schema))
                start = end
        self.paths.append(path)

    @contextmanager
    def reader(self, changed: Callable[[], Exception]) -> Iterator[Callable[[int], pl.DataFrame]]:
        """`read(j)`: batch j's rows of every bucket, sorted by `order`; `changed()` is raised for a batch the
        first pass did not have."""
        import pyarrow as pa

        files = [pa.OSFile(str(path)) for path in self.paths]
        try:
            readers = [pa.ipc.open_file(f) for f in files]

            def read(j: int) -> pl.DataFrame:
                if j >= len(self.ends):
                    raise changed()
                parts = [pl.from_arrow(r.get_batch(j)) for r in readers]
                return pl.concat(parts).sort(self.order)  # type: ignore[arg-type]

            yield read
        finally:
            for f in files:
                f.close()
