"""The field registry: every column of every table, defined exactly once.

Definitions live beside their tables in one module per source (`schemas.meta`, `schemas.arc3`, ...);
this module gathers them and refuses a name defined twice.

Naming (CONVENTIONS.md): ids end in `_id`; booleans start with `is_`/`has_`; timestamps end in `_at`;
durations carry their unit (`_s`, `_ms`); counts start with `n_`. A column with the same name means the
same thing in every table.
"""

from __future__ import annotations

from schemas.model import Field
from schemas.sources import SOURCE_MODULES

FIELDS: dict[str, Field] = {}
for _module in SOURCE_MODULES:
    for _f in _module.FIELDS:
        if _f.name in FIELDS:
            raise ValueError(f"field {_f.name!r} defined twice ({_module.__name__} and an earlier module)")
        FIELDS[_f.name] = _f
