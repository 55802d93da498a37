"""Official action counting (shared/spec/scoring.md §B): steps -> toolkit ``Card`` -> per-level actions.

The input is a sequence of normalized ``StepRecord`` (one per engine response, in file order). The rules are
the toolkit's ``Scorecard.update_scorecard`` (arc-agi 0.9.8):

- the RESET that opens the session opens play 1 and is free; a file without it (older human client,
  benchmarking recorder) opens play 1 implicitly and its first line is counted normally;
- a level RESET costs 1 action and 1 reset, charged to the current play; a full RESET opens a new play slot;
- ACTION1-ACTION7 cost 1 each (optionally not ACTION7, to mimic released human cards, §B.5);
- post-terminal echoes (empty frame, or ``win_levels == 0`` without frames, or any non-RESET action after a
  terminal state) are ignored;
- GAME_OVER / WIN set the play state (sticky); each change of ``levels_completed`` appends
  ``[levels_completed, actions so far]`` (cumulative pairs).
"""

from __future__ import annotations

import enum
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pipeline.core.spill import SpillArray, growing
from schemas.vocabulary import ACTION_NAMES, GAME_STATES

__all__ = [
    "ACTION_NAMES",
    "Card",
    "CardPlay",
    "CountingOptions",
    "LevelCounts",
    "StepEffect",
    "StepRecord",
    "TERMINAL_STATES",
    "action_id_from",
    "card_from_effects",
    "classify_steps",
    "detect_action_ids_lost",
    "live_step_indices",
    "is_post_terminal_echo",
    "level_changes",
    "normalize_actions_by_level",
    "per_level_actions",
    "play_flags",
    "play_index_per_step",
    "raw_level_actions",
    "rebuild_card",
    "recover_action_ids",
]

RESET = 0
UNDO = 7
NOT_FINISHED = "NOT_FINISHED"
WIN = "WIN"
GAME_OVER = "GAME_OVER"
TERMINAL_STATES = frozenset({WIN, GAME_OVER})
STATES = frozenset(GAME_STATES)


def action_id_from(value: int | str) -> int:
    """Normalize an action id given as int (0-7), numeric string or enum name (``"ACTION6"``, ``"RESET"``)."""
    if isinstance(value, bool):
        raise ValueError(f"invalid action id {value!r}")
    if isinstance(value, int):
        if 0 <= value < len(ACTION_NAMES):
            return value
        raise ValueError(f"action id out of range: {value!r}")
    if isinstance(value, str):
        name = value.strip().upper()
        if name.startswith("GAMEACTION."):
            name = name.split(".", 1)[1]
        if name in ACTION_NAMES:
            return ACTION_NAMES.index(name)
        if name.isdigit():
            return action_id_from(int(name))
    raise ValueError(f"invalid action id {value!r}")


@dataclass(frozen=True, slots=True)  # one per step of a file, whole files at a time
class StepRecord:
    """One engine response, normalized from a recording line (or produced by a replay).

    ``full_reset`` None = not recorded; ``win_levels`` None = absent (never 0 for "unknown");
    ``frame_count`` None = frames not recorded, 0 = empty frame list (post-terminal echo).
    """

    action_id: int
    state: str
    levels_completed: int
    full_reset: bool | None = None
    win_levels: int | None = None
    frame_count: int | None = None
    guid: str | None = None
    frame_digest: str | None = None
    line_number: int | None = None

    @property
    def action_name(self) -> str:
        return ACTION_NAMES[self.action_id]

    @property
    def is_reset(self) -> bool:
        return self.action_id == RESET


class StepEffect(enum.StrEnum):
    """What a step does to the card."""

    OPEN = "open"  # the opening RESET: opens play 1, not counted
    FULL_RESET = "full_reset"  # opens a new play slot, not counted
    LEVEL_RESET = "level_reset"  # actions += 1, resets += 1
    ACTION = "action"  # actions += 1
    UNCOUNTED_UNDO = "uncounted_undo"  # ACTION7 when count_undo is False (human-card convention)
    ECHO = "post_terminal_echo"  # ignored entirely

    @property
    def is_counted(self) -> bool:
        return self in (StepEffect.LEVEL_RESET, StepEffect.ACTION)


_EFFECT_MEMBERS = tuple(StepEffect)
_EFFECT_CODE = {e: i for i, e in enumerate(_EFFECT_MEMBERS)}


class StepEffects(Sequence):
    """One `StepEffect` per step, held as a one-byte code (a tuple took 8 bytes a step, and a long file's codes
    wait on disk past `HELD_ITEMS`: `growing`). Indexing and iterating give the members; a slice is a tuple; it
    equals any sequence of the same members."""

    __slots__ = ("codes",)

    def __init__(self, effects: Iterable[StepEffect] = ()) -> None:
        self.codes = growing("b", map(_EFFECT_CODE.__getitem__, effects))

    @classmethod
    def of_codes(cls, codes: bytes) -> StepEffects:
        """From one byte per step, each its member's place in `StepEffect`'s order."""
        column = array("b")
        column.frombytes(codes)
        out = cls.__new__(cls)
        out.codes = growing("b", column)
        return out

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return tuple(map(_EFFECT_MEMBERS.__getitem__, self.codes[i]))
        return _EFFECT_MEMBERS[self.codes[i]]

    def __iter__(self) -> Iterator[StepEffect]:
        return map(_EFFECT_MEMBERS.__getitem__, self.codes)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (StepEffects, tuple, list)):
            return len(self) == len(other) and all(a is b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StepEffects({len(self)} steps)"


FullResetRule = Literal["recorded", "after-win", "engine"]
LeadingReset = Literal["auto", "present", "absent"]


@dataclass(frozen=True)
class CountingOptions:
    """How to read RESETs and the first line.

    full_reset_rule:
      ``recorded``  use the step's ``full_reset`` flag (toolkit recorder); when it is None fall back to ``engine``.
      ``after-win`` a RESET is a full reset only right after a WIN (``ONLY_RESET_LEVELS=true``, and REST-produced
                    lines, which never set ``full_reset``: the human dataset).
      ``engine``    infer the engine's rule: full reset when the state is WIN or the current level's action
                    counter is 0 (after the opening, after any RESET, or right after a level was completed).
    leading_reset:
      ``auto``      the first non-echo step opens play 1 if it is a RESET, otherwise play 1 opens implicitly and
                    the step is counted normally (older human client).
      ``present``   the first step is the opening RESET (toolkit recorder, REST human files).
      ``absent``    the opening RESET was not recorded (agents/benchmarking recorder): play 1 opens implicitly
                    and every line, RESET or not, is counted by the usual rules.
    competition_mode: toolkit 0.9.8 REST server; a RESET is never a full reset: the server re-applies the
      previous response, whose echoed ``action_input`` is what the line shows, so a line showing RESET after
      the opening counts as a level reset (1 action, 1 reset) and a line echoing another action counts 1.
    count_undo: False mimics the released human cards, which mostly did not count ACTION7 (§B.5).
    """

    full_reset_rule: FullResetRule = "recorded"
    leading_reset: LeadingReset = "auto"
    competition_mode: bool = False
    count_undo: bool = True

    @classmethod
    def toolkit(cls) -> CountingOptions:
        return cls(full_reset_rule="recorded", leading_reset="present")

    @classmethod
    def human_dataset(cls) -> CountingOptions:
        return cls(full_reset_rule="after-win", leading_reset="auto")

    @classmethod
    def benchmarking(cls) -> CountingOptions:
        return cls(full_reset_rule="recorded", leading_reset="absent")


def is_post_terminal_echo(step: StepRecord, previous_state: str | None) -> bool:
    """§B.4.1: empty frame, or ``win_levels == 0`` when frames are absent, or a non-RESET action sent while the
    engine state (of the last non-echo step) is GAME_OVER or WIN (the toolkit ignores those since 0.9.6)."""
    if step.frame_count is not None:
        if step.frame_count == 0:
            return True
    elif step.win_levels == 0:
        return True
    return step.action_id != RESET and previous_state in TERMINAL_STATES


def classify_steps(steps: Sequence[StepRecord], options: CountingOptions | None = None) -> tuple[StepEffect, ...]:
    """The effect of every step on the card (same length and order as ``steps``)."""
    return tuple(iter_step_effects(steps, options))


def iter_step_effects(steps: Iterable[StepRecord], options: CountingOptions | None = None) -> Iterator[StepEffect]:
    """`classify_steps` one step at a time (its rules look only backwards). A step is taken from ``steps`` only
    when its effect is asked for, so a long replay can be classified as its responses come."""
    opts = options or CountingOptions()
    opened = False
    prev_state: str | None = None
    prev_levels = 0
    level_counter = 0  # the engine's action counter on the current level (for the "engine" rule)
    for step in steps:
        if is_post_terminal_echo(step, prev_state):
            yield StepEffect.ECHO
            continue
        if not opened:
            opened = True
            if step.is_reset and opts.leading_reset != "absent":
                prev_state, prev_levels, level_counter = step.state, step.levels_completed, 0
                yield StepEffect.OPEN
                continue
            if opts.leading_reset == "present":
                raise ValueError("first step is not the opening RESET (leading_reset='present')")
            # implicit opening: fall through and count this step normally
        if step.is_reset:
            if opts.competition_mode:
                full = False
            elif opts.full_reset_rule == "after-win":
                full = prev_state == WIN
            elif opts.full_reset_rule == "recorded" and step.full_reset is not None:
                full = step.full_reset
            else:  # engine rule (or recorded flag missing)
                full = prev_state == WIN or level_counter == 0
            effect = StepEffect.FULL_RESET if full else StepEffect.LEVEL_RESET
            level_counter = 0
        else:
            if step.action_id == UNDO and not opts.count_undo:
                effect = StepEffect.UNCOUNTED_UNDO
            else:
                effect = StepEffect.ACTION
            level_counter = 0 if step.levels_completed > prev_levels else level_counter + 1
        prev_state, prev_levels = step.state, step.levels_completed
        yield effect


# ----------------------------------------------------------------------------------------------------------
# Card


Pair = tuple[int, int]


@dataclass(frozen=True)
class CardPlay:
    """One play slot of a toolkit ``Card``: the span between full resets."""

    guid: str | None
    actions: int
    resets: int
    state: str
    levels_completed: int
    actions_by_level: tuple[Pair, ...] = ()

    @property
    def completed(self) -> bool:
        return self.state == WIN

    @property
    def n_pairs(self) -> int:
        return len(self.actions_by_level)


@dataclass(frozen=True)
class Card:
    """The toolkit's per-game ``Card`` (parallel lists in the JSON, one ``CardPlay`` per slot here)."""

    game_id: str | None
    plays: tuple[CardPlay, ...] = field(default_factory=tuple)

    @property
    def total_plays(self) -> int:
        return len(self.plays)

    @property
    def guids(self) -> list[str | None]:
        return [p.guid for p in self.plays]

    @property
    def levels_completed(self) -> list[int]:
        return [p.levels_completed for p in self.plays]

    @property
    def states(self) -> list[str]:
        return [p.state for p in self.plays]

    @property
    def actions(self) -> list[int]:
        return [p.actions for p in self.plays]

    @property
    def resets(self) -> list[int]:
        return [p.resets for p in self.plays]

    @property
    def actions_by_level(self) -> list[list[list[int]]]:
        return [[list(pair) for pair in p.actions_by_level] for p in self.plays]

    @property
    def total_actions(self) -> int:
        return sum(p.actions for p in self.plays)

    def play_for_guid(self, guid: str) -> CardPlay:
        """Select a play slot by session guid (formats.md A.3): the slot whose guid matches; if ``guids`` is
        empty and there is one play, slot 0; otherwise the single slot with non-zero actions."""
        matches = [p for p in self.plays if p.guid == guid]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise ValueError(f"guid {guid} owns {len(matches)} slots (full resets); select by index instead")
        if all(p.guid is None for p in self.plays):
            if len(self.plays) == 1:
                return self.plays[0]
            active = [p for p in self.plays if p.actions > 0]
            if len(active) == 1:
                return active[0]
        raise LookupError(f"no play slot for guid {guid} in card {self.game_id}")

    def to_dict(self) -> dict[str, Any]:
        """The toolkit's ``Card.model_dump()`` shape. ``guids`` is empty when no play has a guid."""
        guids = self.guids
        return {
            "game_id": self.game_id,
            "total_plays": self.total_plays,
            "guids": [] if all(g is None for g in guids) else guids,
            "levels_completed": self.levels_completed,
            "states": self.states,
            "actions": self.actions,
            "actions_by_level": self.actions_by_level,
            "resets": self.resets,
            "total_actions": self.total_actions,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Card:
        """Load a toolkit/human card. Normalizes ``actions_by_level`` per play (None, [], [[]] -> no pairs),
        tolerates an ``actions_by_level`` list shorter than its siblings and empty ``guids`` (human data)."""
        actions = list(data.get("actions") or [])
        n = len(actions)
        for key in ("levels_completed", "states", "resets"):
            if len(data.get(key) or []) != n:
                raise ValueError(f"card {data.get('game_id')}: {key} has {len(data.get(key) or [])} slots, "
                                 f"actions has {n}")
        guids = list(data.get("guids") or [])
        if guids and len(guids) != n:
            raise ValueError(f"card {data.get('game_id')}: {len(guids)} guids for {n} plays")
        abl = list(data.get("actions_by_level") or [])
        if len(abl) > n:
            raise ValueError(f"card {data.get('game_id')}: actions_by_level longer than actions")
        plays = []
        for i in range(n):
            plays.append(CardPlay(
                guid=guids[i] if guids else None,
                actions=int(actions[i]),
                resets=int(data["resets"][i]),
                state=str(data["states"][i]),
                levels_completed=int(data["levels_completed"][i]),
                actions_by_level=normalize_actions_by_level(abl[i] if i < len(abl) else None),
            ))
        return cls(game_id=data.get("game_id"), plays=tuple(plays))


def normalize_actions_by_level(value: Any) -> tuple[Pair, ...]:
    """``None``, ``[]`` and ``[[]]`` mean "no pairs"; otherwise a list of ``[level, cumulative]`` pairs."""
    if value is None:
        return ()
    items = list(value)
    if all(isinstance(it, (list, tuple)) and len(it) == 0 for it in items):
        return ()
    pairs = []
    for it in items:
        if not isinstance(it, (list, tuple)) or len(it) != 2:
            raise ValueError(f"malformed actions_by_level entry {it!r}")
        pairs.append((int(it[0]), int(it[1])))
    return tuple(pairs)


@dataclass
class _PlayBuilder:
    guid: str | None
    actions: int = 0
    resets: int = 0
    state: str = NOT_FINISHED
    levels_completed: int = 0
    pairs: list[Pair] = field(default_factory=list)

    def observe(self, step: StepRecord) -> None:
        if step.state in TERMINAL_STATES:
            self.state = step.state
        if step.levels_completed != self.levels_completed:
            self.pairs.append((step.levels_completed, self.actions))
            self.levels_completed = step.levels_completed

    def freeze(self) -> CardPlay:
        return CardPlay(self.guid, self.actions, self.resets, self.state, self.levels_completed, tuple(self.pairs))


def rebuild_card(steps: Sequence[StepRecord], options: CountingOptions | None = None,
                 game_id: str | None = None) -> Card:
    """Rebuild the toolkit ``Card`` from normalized steps (§B.4)."""
    return card_from_effects(steps, classify_steps(steps, options), game_id)


def card_from_effects(steps: Sequence[StepRecord], effects: Sequence[StepEffect], game_id: str | None = None
                      ) -> Card:
    """The toolkit ``Card`` of steps whose effects are already known (e.g. stored by ingest)."""
    plays: list[_PlayBuilder] = []
    for step, effect in zip(steps, effects, strict=True):
        if effect is StepEffect.ECHO:
            continue
        if not plays and effect is not StepEffect.OPEN:  # implicit opening (no leading RESET recorded)
            plays.append(_PlayBuilder(guid=step.guid))
        if effect in (StepEffect.OPEN, StepEffect.FULL_RESET):
            plays.append(_PlayBuilder(guid=step.guid))
            plays[-1].observe(step)
            continue
        play = plays[-1]
        if effect is StepEffect.LEVEL_RESET:
            play.actions += 1
            play.resets += 1
        elif effect is StepEffect.ACTION:
            play.actions += 1
        play.observe(step)
    return Card(game_id=game_id, plays=tuple(p.freeze() for p in plays))


def level_changes(steps: Sequence[StepRecord], effects: Sequence[StepEffect], play_index: Sequence[int]
                  ) -> array | SpillArray:
    """Per step: does the card append a ``[levels_completed, actions]`` pair here? (``levels_completed``
    differs from the previous non-echo step of the same play, 0 before the first; echoes never do.) As bytes,
    1 for yes (a list took 8 bytes a step), on disk but for the newest past `HELD_ITEMS` (`growing`)."""
    return growing("B", iter_level_changes(zip(steps, effects, play_index, strict=True)))


def iter_level_changes(triples: Iterable[tuple[StepRecord, StepEffect, int]]) -> Iterator[bool]:
    """`level_changes` one (step, effect, play index) at a time, taken only when asked for."""
    play, levels = None, 0
    for step, effect, index in triples:
        if index != play:
            play, levels = index, 0
        if effect is StepEffect.ECHO:
            yield False
            continue
        changed = step.levels_completed != levels
        levels = step.levels_completed
        yield changed


def play_index_per_step(effects: Sequence[StepEffect]) -> array | SpillArray:
    """The play slot every step belongs to, with ``card_from_effects``'s rules: a play opens at the opening
    RESET, at every full reset, and implicitly before the first counted step of a file without its opening
    RESET; post-terminal echoes stay with the current play. An array of int64 (8 bytes a step; a list of ints
    took 40 for the millions of steps of a long recording), on disk but for its newest items past
    `HELD_ITEMS` (`growing`)."""
    return growing("q", iter_play_index(effects))


def iter_play_index(effects: Iterable[StepEffect]) -> Iterator[int]:
    """`play_index_per_step` one effect at a time, taken only when asked for."""
    n = 0
    for effect in effects:
        if effect is StepEffect.ECHO:
            yield max(n - 1, 0)
            continue
        if n == 0 and effect is not StepEffect.OPEN:
            n += 1
        if effect in (StepEffect.OPEN, StepEffect.FULL_RESET):
            n += 1
        yield n - 1


# ----------------------------------------------------------------------------------------------------------
# Per-level actions (§B.2)


@dataclass(frozen=True)
class LevelCounts:
    """Per-level charged actions over ``n`` baseline levels and which of them were completed."""

    actions: tuple[int, ...]
    completed: tuple[bool, ...]

    @property
    def n_completed(self) -> int:
        return sum(self.completed)


def _differences(pairs: Sequence[Pair]) -> list[int]:
    out, prev = [], 0
    for _, cumulative in pairs:
        out.append(cumulative - prev)
        prev = cumulative
    return out


def per_level_actions(play: CardPlay, n_levels: int) -> LevelCounts:
    """§B.2: pairs matched to levels **by position**; level ``i <= k`` costs ``c_i - c_{i-1}`` (completed), level
    ``k+1`` gets the remainder ``A - c_k`` (not completed), later levels 0. When ``k == n_levels`` there is no
    level left to charge the remainder to and it is dropped (a play that completed every baseline level of a
    game with more levels than baseline values, without a WIN). Raises ValueError when the play has more pairs
    than ``n_levels`` (the toolkit's "size mismatch")."""
    pairs = play.actions_by_level
    k = len(pairs)
    if k > n_levels:
        raise ValueError(f"play has {k} completed-level entries but only {n_levels} levels")
    actions = _differences(pairs)
    if k < n_levels:
        actions.append(play.actions - (pairs[-1][1] if pairs else 0))
        actions.extend([0] * (n_levels - k - 1))
    return LevelCounts(tuple(actions), tuple(i < k for i in range(n_levels)))


def raw_level_actions(play: CardPlay) -> tuple[int, ...]:
    """The toolkit's ``level_actions`` for an unscorable play: differences of the pairs, plus the remainder
    when the play did not WIN."""
    actions = _differences(play.actions_by_level)
    if play.state != WIN:
        actions.append(play.actions - (play.actions_by_level[-1][1] if play.actions_by_level else 0))
    return tuple(actions)


def play_flags(play: CardPlay) -> tuple[str, ...]:
    """Quality flags for a card play (formats.md A.3/C): the toolkit still scores such plays positionally."""
    flags = []
    pairs = play.actions_by_level
    if [lvl for lvl, _ in pairs] != list(range(1, len(pairs) + 1)):
        flags.append("pair_levels_not_1_to_k")
    cumulative = [c for _, c in pairs]
    if any(b < a for a, b in zip(cumulative, cumulative[1:], strict=False)):
        flags.append("cumulative_decreasing")
    if any(b == a for a, b in zip([0, *cumulative], cumulative, strict=False)):
        flags.append("completed_level_zero_actions")
    if cumulative and cumulative[-1] > play.actions:
        flags.append("cumulative_exceeds_actions")
    if play.levels_completed != len(pairs):
        flags.append("levels_completed_ne_pairs")
    return tuple(flags)


# ----------------------------------------------------------------------------------------------------------
# The benchmarking "every action id is 0" defect (formats.md A.2)


def detect_action_ids_lost(steps: Iterable[StepRecord]) -> bool:
    """True when the lines show the ``action_ids_lost`` pattern: at least two non-echo steps, every one with
    action id 0 (RESET), and evidence that they were not RESETs: ``levels_completed`` changes between
    consecutive steps (a RESET cannot advance levels), or the settled frame changes between consecutive
    steps (repeated RESETs show the same level start), or, without frame digests, no step after the first
    is a full reset (in the toolkit a RESET right after a RESET is always a full reset).

    One pass over ``steps`` (a generator will do: a file's records need not be held), which stops at the
    first step that is not a RESET."""
    n_live, prev = 0, None
    levels_change = full_after_first = False
    all_digests, digests = True, set()
    for s in steps:
        if s.frame_count == 0 or (s.frame_count is None and s.win_levels == 0):
            continue
        if s.action_id != RESET:
            return False
        if prev is not None:
            levels_change = levels_change or prev.levels_completed != s.levels_completed
            full_after_first = full_after_first or bool(s.full_reset)
        if s.frame_digest is None:
            all_digests = False
        elif len(digests) < 2:
            digests.add(s.frame_digest)
        n_live, prev = n_live + 1, s
    if n_live < 2:
        return False
    if levels_change:
        return True
    if all_digests:
        return len(digests) > 1
    return not full_after_first


def live_step_indices(steps: Sequence[StepRecord]) -> list[int]:
    """Indices of the steps that are not post-terminal echoes: the steps recovered actions are given for."""
    return [i for i, s in enumerate(steps) if not (s.frame_count == 0 or (s.frame_count is None
                                                                           and s.win_levels == 0))]


def recover_action_ids(steps: Sequence[StepRecord], action_ids: Iterable[int | str]) -> list[StepRecord]:
    """Replace the action ids of the non-echo steps, in order, by recovered ones (e.g. the harness's
    ``step_NNN.json`` ``parsed_action``). Raises if the counts differ. An echo step keeps its id, unless that id
    is RESET (the lost id, never a real echo: the engine answers a RESET with frames), which becomes ACTION1:
    any other action gets the same echo, and echoes are never counted."""
    ids = [action_id_from(a) for a in action_ids]
    live_idx = live_step_indices(steps)
    if len(ids) != len(live_idx):
        raise ValueError(f"{len(ids)} recovered ids for {len(live_idx)} frame steps")
    out = [replace(s, action_id=1) if s.action_id == RESET else s for s in steps]
    for i, aid in zip(live_idx, ids, strict=True):
        out[i] = replace(out[i], action_id=aid, full_reset=False if aid != RESET else out[i].full_reset)
    return out
