"""The modules that define fields and tables, one per source, in dictionary order."""

from schemas import arc2, arc3, arctgi, harc, meta, outputs_arc3, outputs_harc, outputs_scoring, study

SOURCE_MODULES = [meta, arc3, study, harc, outputs_arc3, outputs_harc, outputs_scoring, arc2, arctgi]
