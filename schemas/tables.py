"""The table registry: every table's layer, columns (names from the field registry), key and meaning.

Layers (CONVENTIONS.md): `raw_*` keeps what the file said plus provenance, `core_*` is validated and typed
with one fact per row, `out_*` is derived for people; `meta` tables (`runs`, `quarantine`) describe the
pipeline itself. Fields (name, type, checks, meaning) are Python objects in one module per source;
tables are declarations only, so they live as data in `schemas/tables.toml`, each naming its source module.
"""

from __future__ import annotations

import tomllib
from importlib.resources import files

from schemas.fields import FIELDS
from schemas.model import Table
from schemas.sources import SOURCE_MODULES

SOURCES = tuple(module.__name__.rsplit(".", 1)[-1] for module in SOURCE_MODULES)
_KEYS = {"source", "layer", "description", "columns", "primary_key", "nullable_here", "content_key"}


def _load() -> dict[str, Table]:
    declared = tomllib.loads(files("schemas").joinpath("tables.toml").read_text(encoding="utf-8"))
    tables: dict[str, Table] = {}
    for name, spec in declared.items():
        unknown_keys = sorted(set(spec) - _KEYS)
        if unknown_keys:
            raise ValueError(f"tables.toml: table {name!r} has unknown keys {unknown_keys}")
        if spec.get("source") not in SOURCES:
            raise ValueError(f"tables.toml: table {name!r} names source {spec.get('source')!r}, not one of {SOURCES}")
        table = Table(name=name, layer=spec["layer"], description=spec["description"],
                      columns=tuple(spec["columns"]), primary_key=tuple(spec["primary_key"]),
                      nullable_here=tuple(spec.get("nullable_here", ())),
                      content_key=tuple(spec.get("content_key", ())))
        undefined = [c for c in table.columns if c not in FIELDS]
        if undefined:
            raise ValueError(f"tables.toml: table {name!r} uses undefined fields {undefined}")
        tables[name] = table
    return tables


TABLES: dict[str, Table] = _load()
