"""Research datasets made from recordings: verified transition rows (`transitions`), written as Parquet
shards with a dataset card (`shards`)."""
