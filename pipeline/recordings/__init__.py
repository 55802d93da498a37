"""The one model of an ARC-AGI-3 recording: read a line of any variant, decide the recording type once,
classify each step, hash frames and write recordings. Ingest, scoring, the viewer, qualify and simulate
all read recordings through this package.

- ``lines``: one line (streaming parser `parse_line`, `Line`, `LineError`; file sniffing and file-name guid)
  (every reader in the project goes through it).
- ``variant``: `detect_variant`, the single rule of spec/formats.md §A.0, and the counting options of a variant.
- ``reader``: `read_recording_file` (one pass: issues, variant, kept steps, step effects, plays) and
  `recording_tables` (the rows ingest stores and `score FILES` scores).
- ``counting``: the toolkit's counting rules (`classify_steps`, `StepEffect`, `Card`, per-level actions).
- ``frames``: fast frame decoding and sha256 hashing.
- ``toolkit_writer``: the toolkit-format writer/reader/replayer of shipped solutions and qualification.
- ``playback``: playback files (action scripts, formats.md §A.7): read, stored as actions, replayed the
  playback agent's way into the toolkit recording they yield.

Imports only ``pipeline.core``, ``schemas`` and ``engine``.
"""
