"""Ingest: readers per format -> validated frames -> DuckDB, with quarantine for what does not fit.

Importing this package registers every input format (each reader module calls `formats.register`).
"""

from importlib import import_module

from pipeline.ingest.formats import FORMATS, detect
from pipeline.ingest.runner import FileReport, IngestReport, expand_paths, ingest_file, ingest_paths

# Order matters for auto-detection: the most specific sniffers first.
READER_MODULES = (
    "pipeline.ingest.arc3_recordings",
    "pipeline.ingest.study_manifest",
    "pipeline.ingest.arc3_json",
    "pipeline.ingest.harc",
    "pipeline.ingest.arc2",
)
for _name in READER_MODULES:
    import_module(_name)

__all__ = ["FORMATS", "FileReport", "IngestReport", "detect", "expand_paths", "ingest_file", "ingest_paths"]
