"""pipeline/ingest/buckets.py: rows split by a hash of a key come back whole per key, in the order added; a
frame stored per batch of the file gives each batch exactly its rows, batches of no rows included."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.ingest.buckets import BUCKET, BatchSlices, BucketFiles, bucket_of, scratch_folder


def _frame(rows: range) -> pl.DataFrame:
    keys = [None if r % 11 == 0 else f"task{r % 7}" for r in rows]
    return pl.DataFrame({"row": list(rows), "key": keys}).with_columns(pl.col("key").cast(pl.Categorical))


def test_every_key_lands_whole_in_one_bucket_in_the_order_added(tmp_path):
    files = BucketFiles(tmp_path, "t", 3, flush_bytes=200)  # a file per bucket every few frames
    for start in range(0, 300, 25):
        df = _frame(range(start, start + 25))
        files.add(df.with_columns(bucket_of(pl.col("key").to_physical(), 3)))
    files.flush()
    assert max(len(parts) for parts in files.parts) > 1
    got = [df for b in range(3) if (df := files.read(b)) is not None]
    assert BUCKET not in got[0].columns and got[0]["key"].dtype == pl.Categorical
    for df in got:
        assert df["row"].is_sorted()
    owners = pl.concat([df.with_columns(pl.lit(i).alias("b")) for i, df in enumerate(got)])
    assert owners.height == 300
    assert owners.group_by("key").agg(pl.col("b").n_unique())["b"].max() == 1  # nulls included
    files.clear()
    assert all(files.read(b) is None for b in range(3)) and not list(tmp_path.iterdir())


def test_each_batch_reads_its_own_rows_of_every_bucket(tmp_path):
    df = _frame(range(1, 101))
    ends = [10, 10, 55, 55, 100, 100]  # batches 1, 3 and 5 have no rows
    slices = BatchSlices(tmp_path, "c", "row", ends)
    parts = df.with_columns((pl.col("row") % 3).alias("b")).partition_by("b", include_key=False, maintain_order=True)
    for b, part in enumerate(parts):
        slices.write(b, part.drop("key"))
    with slices.reader(lambda: LookupError("no such batch")) as read:
        got = [read(j)["row"].to_list() for j in range(len(ends))]
        with pytest.raises(LookupError):
            read(len(ends))
    starts = [0, *ends[:-1]]
    assert got == [list(range(s + 1, e + 1)) for s, e in zip(starts, ends, strict=True)]


def test_the_scratch_folder_goes_on_every_way_out():
    with scratch_folder("arcstudy-test-") as folder:
        (folder / "x.arrow").write_bytes(b"x")
    assert not folder.exists()
    with pytest.raises(KeyboardInterrupt), scratch_folder("arcstudy-test-") as folder:
        (folder / "x.arrow").write_bytes(b"x")
        raise KeyboardInterrupt
    assert not folder.exists()
