"""Toolkit `Card`s (per-game scorecard slots) into `core_arc3__card_plays` rows (spec/formats.md §A.3, §C.1).

Cards come as a recording's trailing summary line (`reader.read_recording_file`) or as a card file (ingest). Slots are kept as the card says them
(normalised empty forms); the slot that belongs to a recording is chosen by the filename guid, never by
position. Impossible slots (cumulative counts going down, or above the slot's actions) are quarantined.
"""

from __future__ import annotations

from typing import Any

from schemas.validate import type_problem

from .counting import Card, play_flags
from .lines import LineIssue, clip

QUARANTINE_PLAY_FLAGS = {"cumulative_decreasing": "cumulative actions_by_level values decrease",
                         "cumulative_exceeds_actions": "the last cumulative actions_by_level value exceeds the "
                                                       "slot's actions"}


def _file_slots(card: Card, guid: str | None, n_file_plays: int) -> list[int] | None:
    """Slots belonging to the file: by guid; with empty guids and one play, slot 0; otherwise the single
    slot with non-zero actions. None when no rule resolves it."""
    if guid is not None and guid in card.guids:
        return [i for i, g in enumerate(card.guids) if g == guid][-max(n_file_plays, 1):]
    if not any(card.guids):
        if card.total_plays == 1:
            return [0]
        nonzero = [i for i, p in enumerate(card.plays) if p.actions > 0]
        if len(nonzero) == 1:
            return nonzero
    return None


def card_rows(file_id: str | None, cards: dict[str, Any], line_number: int | None, file_guid: str | None,
              play_ids: list[str]) -> tuple[list[dict], list[LineIssue], list[str]]:
    """(rows, slots or cards left out, file flags). ``play_ids``: the file's plays, in order (none for a card
    file); ``file_guid`` picks the slots that are the file's plays."""
    rows: list[dict] = []
    issues: list[LineIssue] = []
    flags: set[str] = set()
    where = f"line {line_number}" if line_number else "file"
    for game_id, raw in cards.items():
        if not isinstance(raw, dict):
            issues.append(LineIssue(where, "bad_card", f"card for {game_id} is not an object", clip(str(raw))))
            continue
        preview = "scores" in raw and "actions_by_level" not in raw
        try:
            if preview:
                card = Card.from_dict({**raw, "levels_completed": raw.get("scores"),
                                       "resets": raw.get("resets") or [0] * len(raw.get("actions") or [])})
            else:
                card = Card.from_dict(raw)
        except (ValueError, TypeError, KeyError, OverflowError) as err:  # Overflow: int(1e999)
            issues.append(LineIssue(where, "bad_card", f"card for {game_id} cannot be read: {err}",
                                  clip(str(raw)), "core_arc3__card_plays"))
            continue
        if not any(card.guids):
            flags.add("empty_guids")
        if "actions_by_level" in raw and len(raw.get("actions_by_level") or []) < card.total_plays \
                and raw.get("actions_by_level") not in (None, [[]]):
            flags.add("actions_by_level_short")
        slots = _file_slots(card, file_guid, len(play_ids)) if play_ids else []
        if play_ids and slots is None:
            issues.append(LineIssue(where, "unresolved_card_slot",
                                  f"cannot tell which of the {card.total_plays} card slots is this file's play "
                                  f"(guid {file_guid} not in guids {card.guids})", None, "core_arc3__card_plays"))
            slots = []
        slot_to_play = dict(zip(slots, play_ids[-len(slots):] if slots else [], strict=False))
        for i, play in enumerate(card.plays):
            pflags = list(play_flags(play)) if not preview else []
            bad = [QUARANTINE_PLAY_FLAGS[f] for f in pflags if f in QUARANTINE_PLAY_FLAGS]
            if bad:
                issues.append(LineIssue(f"{where} slot {i}", "impossible_card_slot",
                                      f"card slot {i} of {game_id}: " + "; ".join(bad),
                                      clip(str(play)), "core_arc3__card_plays"))
                continue
            if play.actions == 0 and i not in slot_to_play and play_ids:
                flags.add("stub_plays_in_card")
            row = {
                "file_id": file_id, "line_number": line_number, "game_id": game_id, "slot_index": i,
                "guid": play.guid, "play_id": slot_to_play.get(i), "is_file_play": i in slot_to_play,
                "card_actions": play.actions, "card_resets": play.resets,
                "levels_completed": play.levels_completed, "card_state": play.state,
                "card_actions_by_level": [list(p) for p in play.actions_by_level],
                "card_score": raw["scores"][i] if preview else None, "flags": pflags,
            }
            wrong = type_problem("core_arc3__card_plays", row)  # e.g. 2**70 actions: would fail the whole file
            if wrong is not None:
                issues.append(LineIssue(f"{where} slot {i}", "bad_type", f"card slot {i} of {game_id}: {wrong[1]}",
                                        clip(str(play)), "core_arc3__card_plays", wrong[0]))
                continue
            rows.append(row)
    return rows, issues, sorted(flags)
