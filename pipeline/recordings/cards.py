"""Toolkit `Card`s (per-game scorecard slots) into `core_arc3__card_plays` rows (spec/formats.md §A.3, §C.1), and
the one rule for the values of every scorecard shape (§C: card, card wrapper, scored-summary run).

Cards come as a recording's trailing summary line (`reader.read_recording_file`) or as a card file (ingest). Slots are kept as the card says them
(normalised empty forms); the slot that belongs to a recording is chosen by the filename guid, never by
position. Impossible slots (cumulative counts going down, or above the slot's actions) are quarantined, and so is a
card filed under a key (a wrapper's `cards: {game_id: Card}`) that is not its own game_id (`card_key_problem`).

A value that is not what the format says is refused, never coerced: a count (actions, resets, levels
completed, per-level actions) is a JSON integer from 0 within 64 bits (not `1.5`, `5.0` or `"87"`), a guid a
string of at most a UUID's bytes, a state one of the game states, a game id `<code>-<version>`. `arcstudy
ingest` quarantines what these rules refuse and `arcstudy score FILE` refuses the same with the same reason
(both read through `pipeline.ingest.arc3_json.read_scorecard`, which applies them); `score --db` applies them
again to what is stored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from schemas import FIELDS
from schemas.arc3 import MAX_BASELINE_ACTIONS
from schemas.validate import type_problem, value_problem
from schemas.vocabulary import GAME_STATES

from .counting import Card, play_flags
from .lines import GAME_ID_RE, INT64_LIMIT, LineIssue, clip, guid_problem

QUARANTINE_PLAY_FLAGS = {"cumulative_decreasing": "cumulative actions_by_level values decrease",
                         "cumulative_exceeds_actions": "the last cumulative actions_by_level value exceeds the "
                                                       "slot's actions"}
MAX_LEVELS = FIELDS["levels_completed"].le  # 254: the engine's levels counter (spec/formats.md §A.4)
CARD_LISTS = ("actions", "resets", "levels_completed", "states")  # one entry per slot, required
# A 2025 preview card (formats.md A.4): `scores`, no `actions_by_level`; its runs have no per-level costs.
PREVIEW_CARD_FLAG = "preview_card_no_level_costs"
PREVIEW_CARD_REASON = ("a 2025 preview card (`scores`, no `actions_by_level`) holds no per-level costs: they must be "
                       "derived from the recording's `score` transitions (formats.md A.4), so this run cannot be "
                       "scored from the card; score its recording instead")
CARD_OPTIONAL_LISTS = ("guids", "actions_by_level")  # may be null, empty (human data) or short (actions_by_level)


def shown(value: Any) -> str:
    """A value as reasons show it (repr, cut at 80 characters as `schemas.validate.type_problem` does)."""
    if isinstance(value, str) and len(value) > 80:
        return repr(value[:80]) + f"... ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + f"... ({len(text)} characters)"


def count_problem(value: Any, most: int | None = None) -> str | None:
    """Why a value is not a count as the formats write one (a JSON integer, 0 or more, within 64 bits, and at most
    ``most`` when given), else None. A float is refused even when whole, as ingest's typed columns refuse it:
    `5.0` is not how a count is written."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{shown(value)} is a string, not an integer" if isinstance(value, str) else \
            f"{shown(value)} is not an integer"
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value):
            return f"{value!r} is not an integer (written with a decimal point)"
        return f"{value!r} is not a whole number"
    if value < 0:
        return f"{value} is negative"
    if value >= INT64_LIMIT:
        return f"{shown(value)} does not fit a 64-bit integer"
    if most is not None and value > most:
        return f"{value} is over {most}, the most levels a game can have"
    return None


def count_check(value: Any) -> str:
    """The rule id of a refused count: `bad_type` when it is not an integer a column holds, `bad_count` when it is
    one but negative."""
    return "bad_count" if isinstance(value, int) and not isinstance(value, bool) and value < 0 else "bad_type"


def game_id_problem(game_id: Any) -> str | None:
    """Why a scorecard's game id (a card's, a wrapper's key, a summary environment's `id`) is refused: no table
    holds it, and a run of it would stop the scorer's writing of every run."""
    if game_id is None or game_id == "":
        return "it names no game_id, so its game cannot be scored"
    if not isinstance(game_id, str):
        return f"game id {shown(game_id)} is not a string"
    if GAME_ID_RE.fullmatch(game_id):
        return None
    size = f" ({len(game_id.encode('utf-8', 'surrogatepass'))} bytes)" if len(game_id) > 40 else ""
    return f"game id {shown(game_id)}{size} is not of the form <code>-<version> (4 lowercase letters or digits, " \
           "then - and 8 or 12 lowercase hex digits; the version may be left out)"


def card_key_problem(key: Any, card: Mapping[str, Any]) -> str | None:
    """Why a card filed under ``key`` (a wrapper's ``cards: {game_id: Card}``, a recording's trailing card line)
    cannot be trusted: its own ``game_id`` names another game, so which game was played cannot be known
    (formats.md C.1), else None. A card without its own game_id is the key's game."""
    own = card.get("game_id")
    if own is None or own == key:
        return None
    return (f"the card filed under {shown(key)} names game_id {shown(own)}: which game was played cannot be known, "
            "so the card is left out (make the wrapper's key and the card's game_id agree)")


def state_problem(state: Any) -> str | None:
    if isinstance(state, str) and state in GAME_STATES:
        return None
    return f"state {shown(state)} is not one of {', '.join(GAME_STATES)}"


def card_shape_problem(raw: Mapping[str, Any]) -> str | None:
    """Why a card's parallel lists cannot be read as slots (the whole card is refused), else None."""
    for key in CARD_LISTS:
        if not isinstance(raw.get(key), list):
            return f"{key} is {shown(raw.get(key))}, not a list (one entry per play)"
    for key in CARD_OPTIONAL_LISTS:
        if raw.get(key) is not None and not isinstance(raw.get(key), list):
            return f"{key} is {shown(raw.get(key))}, not a list"
    # the card's own count of slots (spec/formats.md §C.1): a card that contradicts it was altered, and which side
    # is right cannot be known
    plays = raw.get("total_plays")
    if isinstance(plays, int) and not isinstance(plays, bool) and plays != len(raw["actions"]):
        return f"total_plays is {plays} but the card has {len(raw['actions'])} slot(s) (one per play)"
    return None


def card_total_problem(raw: Mapping[str, Any]) -> str | None:
    """Why a card whose every slot is readable contradicts its own total_actions (the sum of its actions,
    spec/formats.md §C.1), else None: the whole card is refused."""
    total = raw.get("total_actions")
    if isinstance(total, int) and not isinstance(total, bool) and total != sum(raw["actions"]):
        return f"total_actions is {total} but its actions add up to {sum(raw['actions'])}"
    return None


def slot_problem(values: Mapping[str, Any], i: int) -> tuple[str, str, str] | None:
    """(rule id, column, reason) for the first value of card slot ``i`` that is not what the format says, else None.
    ``values``: the slot's entries under the card's JSON names (actions, resets, levels_completed or the
    preview's scores, states, guids, actions_by_level; a missing name is not checked)."""
    for key, column, most in (("actions", "card_actions", None), ("resets", "card_resets", None),
                              ("levels_completed", "levels_completed", MAX_LEVELS),
                              ("scores", "levels_completed", MAX_LEVELS)):
        if key in values and (why := count_problem(values[key], most)) is not None:
            return count_check(values[key]), column, f"{key}[{i}] = {why}"
    if "states" in values and (why := state_problem(values["states"])) is not None:
        return "bad_state", "card_state", f"states[{i}]: {why}"
    if "guids" in values and (problem := guid_problem(values["guids"])) is not None:
        return problem[0], "guid", f"guids[{i}]: {problem[1]}"
    pairs = values.get("actions_by_level")
    if pairs is not None:
        if not isinstance(pairs, list | tuple):
            return "bad_type", "card_actions_by_level", f"actions_by_level[{i}] = {shown(pairs)} is not a list of " \
                                                        "pairs"
        if all(isinstance(pair, list | tuple) and len(pair) == 0 for pair in pairs):
            pairs = ()  # [] and [[]]: no pairs (human data)
        for pair in pairs:
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                return "bad_type", "card_actions_by_level", f"actions_by_level[{i}] entry {shown(pair)} is " \
                                                            "not a [level, cumulative actions] pair"
            for v in pair:
                if (why := count_problem(v)) is not None:
                    return count_check(v), "card_actions_by_level", f"actions_by_level[{i}] value {why}"
    return None


def _slot_values(raw: Mapping[str, Any], i: int, preview: bool) -> dict[str, Any]:
    keys = ("actions", "states", "guids", "actions_by_level", "scores" if preview else "levels_completed",
            *(("resets",) if not preview or raw.get("resets") is not None else ()))
    out = {}
    for key in keys:
        items = raw.get(key)
        if isinstance(items, list) and i < len(items):
            out[key] = items[i]
    return out


def run_problem(run: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(rule id, column, reason) for the first value of a scored-summary run (``environments[].runs[]``, under its
    JSON names) that is not what the format says or leaves the run unscorable, else None. A run whose counts are
    wrong is refused whole: it cannot be scored from them."""
    if (problem := guid_problem(run.get("guid"))) is not None:
        return problem[0], "guid", problem[1]
    for key in ("actions", "resets", "levels_completed"):  # absent actions and resets: added up from the levels, 0
        if run.get(key) is None:
            if key == "levels_completed":
                return "missing_value", key, "missing levels_completed: which levels were completed is unknown"
            continue
        if (why := count_problem(run[key], MAX_LEVELS if key == "levels_completed" else None)) is not None:
            return count_check(run[key]), key, f"{key} = {why}"
    la = run.get("level_actions")
    if la is None:
        return "missing_value", "level_actions", "missing level_actions: a run cannot be scored without its " \
                                                 "per-level actions"
    if not isinstance(la, list | tuple):
        return "bad_type", "level_actions", f"level_actions = {shown(la)} is not a list"
    for key in ("level_actions", "level_scores", "level_baseline_actions"):  # one value per level
        values = run.get(key)
        if isinstance(values, list | tuple) and len(values) > MAX_LEVELS:
            return "out_of_range", key, f"{key} has {len(values):,} values, one per level, and a game has at most " \
                f"{MAX_LEVELS} levels"
    for i, v in enumerate(la):
        if (why := count_problem(v)) is not None:
            return count_check(v), "level_actions", f"level_actions[{i}] = {why}"
    base = run.get("level_baseline_actions")
    if base is not None:
        if not isinstance(base, list | tuple):
            return "bad_type", "level_baseline_actions", f"level_baseline_actions = {shown(base)} is not a list"
        for i, v in enumerate(base):
            if v != -1 and (why := count_problem(v)) is not None:
                return count_check(v), "level_baseline_actions", f"level_baseline_actions[{i}] = {why} (a " \
                                                              "baseline is a count, or -1 when not scorable)"
            if v != -1 and v > MAX_BASELINE_ACTIONS:
                return "out_of_range", "level_baseline_actions", f"level_baseline_actions[{i}] = {v} is above " \
                    f"{MAX_BASELINE_ACTIONS:,} actions, the largest baseline accepted (as for a metadata.json)"
    scores = run.get("level_scores")
    if isinstance(base, list | tuple) and len(la) > len(base):
        return "parallel_lists_differ", "level_baseline_actions", \
            f"more levels ({len(la)} level_actions) than baselines ({len(base)} level_baseline_actions)"
    lengths = {k: len(v) for k, v in (("level_scores", scores), ("level_actions", la),
                                      ("level_baseline_actions", base)) if isinstance(v, list | tuple)}
    if len(set(lengths.values())) > 1:
        return "parallel_lists_differ", "level_scores", \
            "level_scores, level_actions and level_baseline_actions differ in length (" + \
            ", ".join(f"{n} {k}" for k, n in lengths.items()) + ")"
    k = run["levels_completed"]
    if k > len(la):
        return "levels_exceed_levels", "levels_completed", \
            f"levels_completed {k} is more than its {len(la)} levels (level_actions)"
    if isinstance(base, list | tuple) and -1 not in base and len(base) < k:
        return "levels_exceed_levels", "levels_completed", f"more completed levels ({k}) than baselines ({len(base)})"
    if run.get("state") is not None and (why := state_problem(run["state"])) is not None:
        return "bad_state", "state", why
    return None


def _neutral(raw: Mapping[str, Any], bad_slots: Mapping[int, Any]) -> dict[str, Any]:
    """The card with the refused slots' counts and pairs made neutral (0, no pairs), so that reading it casts no
    refused value; the slots stay in place (slot indices and guids unchanged)."""
    if not bad_slots:
        return dict(raw)
    out = dict(raw)
    for key in ("actions", "resets", "levels_completed"):
        out[key] = [0 if i in bad_slots else v for i, v in enumerate(raw[key])]
    out["states"] = ["NOT_FINISHED" if i in bad_slots else v for i, v in enumerate(raw["states"])]
    if isinstance(raw.get("guids"), list):
        out["guids"] = [None if i in bad_slots and guid_problem(g) else g for i, g in enumerate(raw["guids"])]
    if isinstance(raw.get("actions_by_level"), list):
        out["actions_by_level"] = [[] if i in bad_slots else v for i, v in enumerate(raw["actions_by_level"])]
    return out


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
        if (why := game_id_problem(game_id)) is not None:
            issues.append(LineIssue(where, "bad_game_id", why, clip(str(raw)),
                                    "core_arc3__card_plays", "game_id"))
            continue
        if (why := card_key_problem(game_id, raw)) is not None:
            issues.append(LineIssue(where, "card_game_id_mismatch", why, clip(str(raw)),
                                    "core_arc3__card_plays", "game_id"))
            continue
        preview = "scores" in raw and "actions_by_level" not in raw
        shaped = raw
        if preview:
            shaped = {**raw, "levels_completed": raw.get("scores"),
                      "resets": raw.get("resets") or [0] * len(raw.get("actions") or [])}
        if (why := card_shape_problem(shaped)) is not None:
            issues.append(LineIssue(where, "bad_card", f"card for {game_id} cannot be read: {why}",
                                    clip(str(raw)), "core_arc3__card_plays"))
            continue
        # A slot whose value is not what the format says is refused (never cast: 1.5 is not 1, "87" not 87);
        # its values are neutral in the card read below, which only places the other slots.
        bad_slots = {i: p for i in range(len(shaped["actions"]))
                     if (p := slot_problem(_slot_values(raw, i, preview), i)) is not None}
        if not bad_slots and (why := card_total_problem(shaped)) is not None:
            issues.append(LineIssue(where, "bad_card", f"card for {game_id} cannot be read: {why}",
                                    clip(str(raw)), "core_arc3__card_plays"))
            continue
        try:
            card = Card.from_dict(_neutral(shaped, bad_slots))
        except (ValueError, TypeError, KeyError, OverflowError) as err:  # Overflow: int(1e999)
            issues.append(LineIssue(where, "bad_card", f"card for {game_id} cannot be read: {err}",
                                  clip(str(raw)), "core_arc3__card_plays"))
            continue
        if not any(card.guids):
            flags.add("empty_guids")
        if preview:
            flags.add(PREVIEW_CARD_FLAG)
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
            if i in bad_slots:
                check, column, why = bad_slots[i]
                issues.append(LineIssue(f"{where} slot {i}", check, f"card slot {i} of {game_id}: {why}",
                                        clip(repr(_slot_values(raw, i, preview))), "core_arc3__card_plays", column))
                continue
            pflags = list(play_flags(play)) if not preview else [PREVIEW_CARD_FLAG]
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
            check = "bad_type"
            if wrong is None:  # refused here, for score FILE too, rather than by ingest's validation alone
                wrong = value_problem("core_arc3__card_plays", {k: v for k, v in row.items() if k != "file_id"})
                check = "bad_value"  # (a recording's file id is set later)
            if wrong is not None:
                issues.append(LineIssue(f"{where} slot {i}", check, f"card slot {i} of {game_id}: {wrong[1]}",
                                        clip(str(play)), "core_arc3__card_plays", wrong[0]))
                continue
            rows.append(row)
    return rows, issues, sorted(flags)
