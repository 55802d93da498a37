"""Synthetic studies: generators of ARC-format tasks and simulated participants whose traces are written in
the released file formats (H-ARC, ...), deterministic per seed, so that ingest, replay and analyses can be
exercised end to end on data with known generating parameters."""
