"""Minimal normalizer from parsed recording lines (shared/spec/formats.md §A) to ``StepRecord``.

Accepts the toolkit recorder, human-dataset (REST) and agents/benchmarking shapes: ``{timestamp, data}``
envelopes or bare ``data`` objects; integer or enum-name action ids; frames present or absent; the 2025
``score``/``win_score`` field names. Usage lines (LLM tokens) and trailing scorecard lines are skipped.
Pure: the caller reads the file (``json.loads`` per line) and passes the dicts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from .counting import CountingOptions, StepRecord, action_id_from

__all__ = [
    "RecordingVariant",
    "counting_options_for_variant",
    "detect_recording_variant",
    "frame_digest",
    "is_frame_record",
    "steps_from_recording_lines",
    "trailing_scorecard",
]

RecordingVariant = Literal["toolkit", "human-dataset", "benchmarking", "preview-2025"]


def _data(line: Mapping[str, Any]) -> Mapping[str, Any]:
    data = line.get("data", line) if isinstance(line, Mapping) else None
    if not isinstance(data, Mapping):
        raise ValueError(f"recording line is not an object: {line!r:.200}")
    return data


def is_frame_record(data: Mapping[str, Any]) -> bool:
    """A frame record carries ``action_input`` and ``state`` (usage and scorecard records do not)."""
    return "action_input" in data and "state" in data


def frame_digest(frame: Sequence[Sequence[Sequence[int]]]) -> str | None:
    """sha256 of the int8 bytes of the settled (last) grid, as formats.md A.6 suggests; None for no frame."""
    if not frame:
        return None
    grid = frame[-1]
    return hashlib.sha256(bytes(v & 0xFF for row in grid for v in row)).hexdigest()


def steps_from_recording_lines(lines: Iterable[Mapping[str, Any]], *, with_frame_digest: bool = True
                               ) -> list[StepRecord]:
    """One ``StepRecord`` per frame record, in file order (``line_number`` is the 1-based line index)."""
    steps: list[StepRecord] = []
    for number, line in enumerate(lines, start=1):
        data = _data(line)
        if not is_frame_record(data):
            continue
        action_input = data.get("action_input") or {}
        levels = data.get("levels_completed", data.get("score"))
        if levels is None:
            raise ValueError(f"line {number}: frame record without levels_completed/score")
        win_levels = data.get("win_levels", data.get("win_score"))
        frame = data.get("frame")
        full_reset = data.get("full_reset")
        steps.append(StepRecord(
            action_id=action_id_from(action_input.get("id")),
            state=str(data["state"]),
            levels_completed=int(levels),
            full_reset=None if full_reset is None else bool(full_reset),
            win_levels=None if win_levels is None else int(win_levels),
            frame_count=None if frame is None else len(frame),
            guid=data.get("guid"),
            frame_digest=frame_digest(frame) if (with_frame_digest and frame) else None,
            line_number=number,
        ))
    return steps


def trailing_scorecard(lines: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The ``{won, played, total_actions, levels_completed, cards}`` summary of a human/REST file, if any."""
    for line in reversed(lines):
        data = _data(line)
        if "cards" in data:
            return data
        if is_frame_record(data):
            return None
    return None


def detect_recording_variant(lines: Sequence[Mapping[str, Any]]) -> RecordingVariant:
    """Variant detection from the lines alone (formats.md A.0, simplified to what counting needs)."""
    datas = [_data(line) for line in lines]
    if datas and "cards" in datas[-1]:
        return "human-dataset"
    if any(("tokens" in d or "total_tokens" in d) and "game_id" not in d for d in datas):
        return "benchmarking"
    frames = [d for d in datas if is_frame_record(d)]
    if frames and all("levels_completed" not in d and "score" in d for d in frames):
        return "preview-2025"
    return "toolkit"


def counting_options_for_variant(variant: RecordingVariant) -> CountingOptions:
    """Counting options implied by the file variant: the toolkit recorder always starts with the opening RESET
    and records ``full_reset``; human/REST files never set ``full_reset`` and were played with level-only
    resets; the benchmarking recorder does not record the opening RESET."""
    if variant == "toolkit":
        return CountingOptions.toolkit()
    if variant == "human-dataset":
        return CountingOptions.human_dataset()
    if variant == "benchmarking":
        return CountingOptions.benchmarking()
    # preview-2025: no sample to verify against; use the recorded flag and accept a missing leading RESET.
    return CountingOptions(full_reset_rule="recorded", leading_reset="auto")
