"""The table registry: every table's layer, columns (names from the field registry), key and meaning.

Layers (CONVENTIONS.md): `raw_*` keeps what the file said plus provenance, `core_*` is validated and typed
with one fact per row, `out_*` is derived for people; `meta` tables (`runs`, `quarantine`) describe the
pipeline itself. Tables are defined beside their fields in one module per source.
"""

from __future__ import annotations

from schemas.fields import FIELDS
from schemas.model import Table
from schemas.sources import SOURCE_MODULES

TABLES: dict[str, Table] = {}
for _module in SOURCE_MODULES:
    for _t in _module.TABLES:
        if _t.name in TABLES:
            raise ValueError(f"table {_t.name!r} defined twice")
        _unknown = [c for c in _t.columns if c not in FIELDS]
        if _unknown:
            raise ValueError(f"table {_t.name!r} uses undefined fields {_unknown}")
        TABLES[_t.name] = _t
