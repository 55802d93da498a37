"""The core layer: what every other part of the pipeline stands on.

workspace (the DuckDB database), manifest (run provenance), console (output and progress), config (the
TOML build configuration) and figures (saving altair charts). Nothing here imports from the layers above.
"""
