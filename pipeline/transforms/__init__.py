"""Derived `out_*` tables: pure transforms (one module per concern), the `arcstudy build` orchestrator
(build.py) and its configuration (pipeline/core/config.py); the `build` / `baselines` commands are
pipeline/commands/build.py."""
