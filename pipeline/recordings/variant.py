"""Which writer produced a recording (shared/spec/formats.md §A.0), decided once, by one rule, for ingest,
scoring and the viewer; and the counting options that follow from it (spec/scoring.md §B).

The signals are applied in the order of the spec's table: the trailing scorecard summary, LLM usage lines,
enum-name action ids, the 2025 `score` fields, then the file-name conventions. A file
none of them decides (integer ids, no summary, no usage line, a name of no known convention) is judged by its
first frame line: the toolkit recorder always writes the RESET that `make()` performs (a full reset), the
agents/benchmarking recorder never does. Before this rule existed, ingest called a toolkit recording with
integer ids "benchmarking" and the viewer called it "toolkit", so the two counted it differently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from schemas.vocabulary import RecordingVariant

from .counting import CountingOptions
from .lines import classify_record, filename_guid

__all__ = ["RecordingVariant", "counting_options_for_variant", "detect_variant", "is_action_script_record"]

# What the engine returns on every line of a recording; an action script (formats.md §A.7) has none of it.
ENGINE_OUTPUT_KEYS = ("state", "frame", "levels_completed", "score", "guid", "win_levels")


def is_action_script_record(data: Mapping[str, Any]) -> bool:
    """A playback file's line: an `action_input` and nothing the engine returned."""
    return "action_input" in data and not any(key in data for key in ENGINE_OUTPUT_KEYS)



def _data(line: Mapping[str, Any]) -> Mapping[str, Any]:
    data = line.get("data", line)
    return data if isinstance(data, Mapping) else {}


def detect_variant(lines: Iterable[Mapping[str, Any]], path: Path | str | None = None
                   ) -> tuple[RecordingVariant, str]:
    """(variant, evidence) of a recording, from its lines (envelopes or bare `data` objects, in file order)
    and, when known, its file name. One pass that holds no line: a large file's lines may wait on disk."""
    first_frame: Mapping[str, Any] | None = None
    last_summary: Mapping[str, Any] | None = None
    has_script_record = has_usage = has_name_id = has_preview_field = False
    for line in lines:
        d = _data(line)
        kind = classify_record(d)
        if kind == "frame":
            first_frame = d if first_frame is None else first_frame
            has_name_id = has_name_id or isinstance((d.get("action_input") or {}).get("id"), str)
            has_preview_field = has_preview_field or ("score" in d and "levels_completed" not in d)
        elif kind == "scorecard":
            last_summary = d
        elif kind == "usage":
            has_usage = True
        if first_frame is None and not has_script_record:
            has_script_record = is_action_script_record(d)
    first_action = (first_frame.get("action_input") or {}).get("id") if first_frame is not None else None

    if first_frame is None and has_script_record:
        return "playback", "lines hold an `action_input` and no state, frame or levels (action script)"
    if last_summary is not None and "cards" in last_summary:
        return "human-dataset", "last line is a scorecard summary with `cards`"
    if has_usage:
        return "benchmarking", "LLM usage lines without game fields are interleaved"
    if has_name_id:
        # Only the toolkit recorder writes names (and starts with the opening RESET; a file without that line
        # has a recorder defect: it loads flagged `no_opening_reset_line`, see reader.read_recording_file).
        return "toolkit", "action ids are enum names and there is no trailing summary line"
    if has_preview_field:
        return "preview-2025", "frame records carry `score` instead of `levels_completed`"
    naming = filename_guid(Path(path))[1] if path is not None else "other"
    if naming == "benchmarking":
        return "benchmarking", "integer action ids and an agents-recorder file name"
    if naming == "human-dataset":
        return "human-dataset", "file named <guid>.recording.jsonl (no trailing summary line)"
    if naming == "toolkit":
        return "toolkit", "file named <game_id>-<guid>.jsonl (toolkit recorder naming)"
    if first_frame is not None and first_action in (0, "RESET") and first_frame.get("full_reset") is True:
        return "toolkit", "the first line is the opening full RESET the toolkit recorder writes"
    return "benchmarking", "no opening RESET line, no trailing summary (agents recorder)"


def counting_options_for_variant(variant: RecordingVariant | str) -> CountingOptions:
    """Counting options implied by the file variant: the toolkit recorder always starts with the opening RESET
    and records ``full_reset``; human/REST files never set ``full_reset`` and were played with level-only
    resets; the benchmarking recorder does not record the opening RESET."""
    if variant == "toolkit":
        return CountingOptions.toolkit()
    if variant == "human-dataset":
        return CountingOptions.human_dataset()
    if variant == "benchmarking":
        return CountingOptions.benchmarking()
    if variant == "playback":  # replayed like the playback agent: the recording it yields is a toolkit one
        return CountingOptions.toolkit()
    # preview-2025: no sample to verify against; use the recorded flag and accept a missing leading RESET.
    return CountingOptions(full_reset_rule="recorded", leading_reset="auto")
