"""The modules that define fields and tables, one per source, in dictionary order."""

from schemas import arc3, meta, study

SOURCE_MODULES = [meta, arc3, study]
