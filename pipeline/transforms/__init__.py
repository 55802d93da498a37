"""Derived `out_*` tables: pure transforms (one module per concern), the `arcstudy build` orchestrator
(build.py), its configuration (pipeline/config.py) and the `build` / `baselines` commands (cli.py)."""
