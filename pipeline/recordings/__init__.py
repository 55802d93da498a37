"""The one model of an ARC-AGI-3 recording: read a line of any variant, decide the recording type once,
classify each step, hash frames and write recordings. Ingest, scoring, the viewer, qualify and simulate
all read recordings through this package."""
