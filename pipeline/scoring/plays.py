"""Plays to score, from recordings given on the command line or from the database, as toolkit card plays.

Both origins go through the same tables: a recording file is read once by `pipeline.recordings`
(`read_recording_file`, in memory, nothing written) into the ``core_arc3__steps`` / ``core_arc3__plays`` rows
`arcstudy ingest` would store, so scoring a file and scoring its ingested copy give the same cards, play ids
and numbers. The parsed file (with its frame pixels) is kept for the replay, which then needs no second read.

Every step's effect on the card was decided when the recording was read (the ``step_effect`` column, under
the counting rules of the recording variant); the ``Card`` is rebuilt from those effects. A recording showing
the benchmarking ``action_ids_lost`` defect cannot be counted: its plays are reported and left out, unless
the real actions are supplied (``recovered_actions``, keyed by file name, guid or file_id), in which case
``recover_action_ids`` puts them back and the recovered steps are classified afresh.

A playback file (action script) is read into the rows ingest stores for it (actions only, the play marked
``is_replay_needed``); `replay_scripts` then replaces them by the rows of its replay on the engine (the
toolkit recording the playback agent's session yields), from a file or from the database alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.special_files import NOT_UTF8_NAME, not_regular_file, undecodable
from pipeline.core.spool import Spool
from pipeline.core.textfiles import (
    DuplicateKeyError,
    bom_encoding,
    not_utf8_reason,
    read_text_document,
    read_text_head,
    unique_json,
)
from pipeline.recordings.counting import (
    RESET,
    Card,
    CardPlay,
    StepEffect,
    StepEffects,
    StepRecord,
    action_id_from,
    card_from_effects,
    classify_steps,
    live_step_indices,
    play_index_per_step,
    recover_action_ids,
)
from pipeline.recordings.lines import sniff_first_line
from pipeline.recordings.playback import (
    ScriptReplay,
    is_playback_file,
    read_playback_file,
    replay_script_tables,
    script_tables,
)
from pipeline.recordings.reader import (
    ParsedRecording,
    PlayIds,
    RecordingRejected,
    read_recording_file,
    recording_tables,
    step_frames,
)
from pipeline.recordings.variant import counting_options_for_variant

__all__ = [
    "FileRef",
    "RecordingInput",
    "RecordingReadError",
    "RECOVERY_KEY",
    "STEP_COLUMNS",
    "RecoveredSteps",
    "drop_duplicate_plays",
    "load_recovered_actions",
    "play_index_per_step",
    "read_recording_files",
    "recordings_from_tables",
    "recount_for_competition",
    "recovered_action",
    "replay_scripts",
    "steps_in_parts",
]

# What scoring reads of the steps (its cards, replay checks and duplicate checks): `score FILES` keeps no other.
STEP_COLUMNS = ("file_id", "line_number", "step_index", "play_id", "game_id", "guid", "action_id", "click_x",
                "click_y", "state", "levels_completed", "win_levels", "is_full_reset", "available_actions",
                "n_frames", "frame_sha256s", "last_frame_sha256", "step_effect")
PLAY_COLUMNS = ("play_id", "file_id", "guid", "game_id", "play_index", "recording_variant",
                "is_only_reset_levels", "is_action_ids_lost")


class FileRef(tuple):
    """``(file name, path)`` of a recording read from disk, as a 2-tuple (callers unpack it so), that also
    carries the parsed recording (``parsed``) so the replay does not read the file again."""

    parsed: ParsedRecording | None
    n_skipped_lines: int | None  # playback scripts: lines without `action_input`, skipped

    def __new__(cls, name: str | None, path: Path | None, parsed: ParsedRecording | None = None,
                n_skipped_lines: int | None = None) -> FileRef:
        ref = super().__new__(cls, (name, path))
        ref.parsed = parsed
        ref.n_skipped_lines = n_skipped_lines
        return ref


class RecordingReadError(ValueError):
    """A recording given on the command line could not be read (the reason is for a person)."""


@dataclass
class RecordingInput:
    """One recording file: its steps, how to count them, and the plays rebuilt from them."""

    file_id: str
    file_name: str | None
    path: Path | None
    game_id: str
    guid: str
    variant: str
    is_only_reset_levels: bool
    is_action_ids_lost: bool
    steps: pl.DataFrame | Any  # core_arc3__steps rows of the file, in line order (or a `StoredSteps`)
    records: Sequence[StepRecord]  # a list, or for a large recording a `StepRecordChunks`
    recovered: bool = False
    card: Card | None = None  # None when the actions are unknown (action_ids_lost, not recovered)
    play_ids: Sequence[str] = field(default_factory=list)
    step_play: Sequence[int] = field(default_factory=list)  # play index of every step (same order as steps)
    effects: tuple[StepEffect, ...] = ()  # every step's effect on the card: stored, or re-classified if recovered
    stored_play_ids: list[str] = field(default_factory=list)  # the play ids ingest cut
    parsed: ParsedRecording | None = None  # the file as read (score FILES): what the replay replays
    script: ScriptReplay | None = None  # a playback script: how it was replayed (its steps are the replay's)
    recovery_error: str | None = None  # why the recovered actions given for it were not used (rejected input)
    recovery: str | None = None  # recovered: where its actions come from (provenance, one line)
    recovered_clicks: dict[int, tuple[int, int]] = field(default_factory=dict)  # step index -> recovered click
    recovered_fits: dict[int, dict] = field(default_factory=dict)  # step index -> n_fit, ambiguous, alternatives
    recovered_full_resets: dict[int, bool] = field(default_factory=dict)  # step index -> a recovered RESET's kind

    @property
    def label(self) -> str:
        return self.file_name or self.file_id

    @property
    def actions_known(self) -> bool:
        """Its actions are known (its action ids were not lost, or were recovered): `recordings_from_tables`
        counted it (``card``, unless asked for none) and numbered its plays."""
        return not self.is_action_ids_lost or self.recovered

    def plays(self) -> list[tuple[str, CardPlay | None]]:
        """(play_id, card play) in play order; the card play is None when the actions are unknown."""
        if self.card is None:
            return [(pid, None) for pid in self.play_ids]
        return list(zip(self.play_ids, self.card.plays, strict=True))


RECORD_CHUNK_ROWS = 100_000
RECORDS_IN_CHUNKS_FROM = 200_000  # steps of one recording from which its records are made a chunk at a time
_RECORD_VALUES = ("action_id", "levels_completed", "is_full_reset", "win_levels", "n_frames", "last_frame_sha256",
                  "line_number")
_RECORD_TEXTS = ("state", "guid")  # few distinct values: one string object each
_RECORD_COLUMNS = (*_RECORD_VALUES, *_RECORD_TEXTS)  # what a step's record is made of


def _records(steps: pl.DataFrame, chunk_rows: int = RECORD_CHUNK_ROWS) -> list[StepRecord]:
    """One record per step. Read a chunk of rows at a time, each state and guid one string object: a column
    made into Python values at once takes a string object per step (a file may have millions of steps)."""
    out: list[StepRecord] = []
    held: dict[Any, Any] = {}
    for first in range(0, steps.height, chunk_rows):
        part = steps.slice(first, chunk_rows)
        cols = {c: part[c].to_list() for c in _RECORD_VALUES}
        for name in _RECORD_TEXTS:
            cols[name] = [held.setdefault(v, v) for v in part[name].to_list()]
            if len(held) > 4096:
                held.clear()
        out += [StepRecord(action_id=cols["action_id"][i], state=cols["state"][i],
                           levels_completed=cols["levels_completed"][i], full_reset=cols["is_full_reset"][i],
                           win_levels=cols["win_levels"][i], frame_count=cols["n_frames"][i], guid=cols["guid"][i],
                           frame_digest=cols["last_frame_sha256"][i], line_number=cols["line_number"][i])
                for i in range(part.height)]
    return out


class StepRecordChunks(Sequence):
    """The step records of a large recording's steps table, made a chunk of rows at a time as they are read
    (the chunk last indexed is kept, so reading in order makes each record once per pass). A list of them all
    would hold about 200 bytes a step beside the table, which already holds the same values: 400 MB for a
    2,000,000-step file. Equal, record by record, to `_records(steps)`."""

    def __init__(self, steps: pl.DataFrame, chunk_rows: int = RECORD_CHUNK_ROWS):
        self._steps = steps.select(_RECORD_COLUMNS)  # the table's own buffers, not a copy
        self._chunk_rows = chunk_rows
        self._at = -1
        self._chunk: list[StepRecord] = []

    def __len__(self) -> int:
        return self._steps.height

    def _chunk_of(self, k: int) -> list[StepRecord]:
        if k != self._at:
            self._chunk, self._at = _records(self._steps.slice(k * self._chunk_rows, self._chunk_rows)), k
        return self._chunk

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("step record index out of range")
        k, at = divmod(i, self._chunk_rows)
        return self._chunk_of(k)[at]

    def __iter__(self) -> Iterator[StepRecord]:
        for part in steps_in_parts(self._steps, self._chunk_rows):
            yield from _records(part)

    def __getstate__(self) -> dict:  # sent to a worker: the columns, not the chunk made last
        return {"_steps": self._steps, "_chunk_rows": self._chunk_rows, "_at": -1, "_chunk": []}


def step_records_of(steps: pl.DataFrame) -> Sequence[StepRecord]:
    """A steps table's records: a list, or for a large table (`RECORDS_IN_CHUNKS_FROM` steps on) a
    `StepRecordChunks`, which holds no record of every step."""
    return StepRecordChunks(steps) if steps.height >= RECORDS_IN_CHUNKS_FROM else _records(steps)


_EFFECTS = list(StepEffect)


def _effects(parts: Iterable[pl.Series]) -> StepEffects:
    """The stored effects (a column, in parts) as `StepEffect`s, through their codes (no string object per
    step, and no column of the codes' size beside the texts: a replace of a million steps' texts held 68 MB for
    a while)."""
    kinds = pl.Enum([e.value for e in _EFFECTS])
    return StepEffects.of_codes(b"".join(part.cast(kinds).to_physical().cast(pl.Int8).to_numpy().tobytes()
                                         for part in parts))


def steps_in_parts(steps: Any, rows: int = RECORD_CHUNK_ROWS) -> Iterable[pl.DataFrame]:
    """A pass over a steps table, ``rows`` steps at a time; or over one stored file's steps a block at a time
    (`scoring.storage.StoredSteps`), which reads only the columns selected."""
    if isinstance(steps, pl.DataFrame):
        return (steps.slice(first, rows) for first in range(0, steps.height, rows))
    return steps.parts()


def _column_parts(steps: Any, name: str) -> Iterable[pl.Series]:
    """Column ``name`` of a steps table (`steps_in_parts`), in parts."""
    return (part[name] for part in steps_in_parts(steps.select(name)))


class RecoveredSteps(list):
    """The recovered actions of one recording (ids, names or ``{"action", "x", "y", ...}`` objects, one per
    step that is not a post-terminal echo) and where they come from (``provenance``, one line)."""

    provenance: str | None = None

    def __init__(self, actions: Sequence[Any] = (), provenance: str | None = None) -> None:
        super().__init__(actions)
        self.provenance = provenance


def _recovered_for(keys: Sequence[str | None], recovered: Mapping[str, Sequence[Any]]) -> Sequence[Any] | None:
    for key in keys:
        if key is not None and key in recovered:
            return recovered[key]
    return None


def recovered_action(value: Any) -> tuple[int, tuple[int, int] | None]:
    """(action id, click or None) of one recovered action: an id, a name, or an object with ``action`` (or
    ``id``) and, for a click, integer ``x`` and ``y`` in 0-63. Raises ValueError saying what is wrong."""
    if not isinstance(value, dict):
        return action_id_from(value), None
    if "action" not in value and "id" not in value:
        raise ValueError(f"an action object needs `action` (or `id`): {json.dumps(value)[:80]}")
    aid = action_id_from(value.get("action", value.get("id")))
    x, y = value.get("x"), value.get("y")
    if x is None and y is None:
        return aid, None
    if aid != 6 or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 64 for v in (x, y)):
        raise ValueError(f"`x` and `y` must be integers 0-63 given with ACTION6: {json.dumps(value)[:80]}")
    return aid, (x, y)


def _apply_recovered(rec: RecordingInput, records: list[StepRecord], given: Sequence[Any]) -> list[StepRecord]:
    """``records`` with the recovered actions put back (raises ValueError when they do not fit); records the
    clicks and the provenance on ``rec``."""
    actions = [recovered_action(a) for a in given]
    out = recover_action_ids(records, [aid for aid, _ in actions])
    live = live_step_indices(records)
    rec.recovered_clicks = {i: click for i, (_, click) in zip(live, actions, strict=True) if click is not None}
    rec.recovery = getattr(given, "provenance", None) or "recovered actions supplied with --recovered-actions"
    rec.recovered_fits = {i: {k: a[k] for k in ("n_fit", "ambiguous", "alternatives") if k in a}
                          for i, a in zip(live, given, strict=True)
                          if isinstance(a, dict) and isinstance(a.get("n_fit"), int) and a["n_fit"] > 1}
    # a recovered RESET's kind as the engine decided it (lines made through the REST API always say false)
    rec.recovered_full_resets = {i: a["full_reset"] for i, a in zip(live, given, strict=True) if isinstance(a, dict)
                                 and isinstance(a.get("full_reset"), bool) and out[i].action_id == RESET}
    for i, full in rec.recovered_full_resets.items():
        out[i] = replace(out[i], full_reset=full)
    ids = [s.action_id for s in out]
    xs = [rec.recovered_clicks.get(i, (None, None))[0] for i in range(len(out))]
    ys = [rec.recovered_clicks.get(i, (None, None))[1] for i in range(len(out))]
    steps = rec.steps
    rec.steps = steps.with_columns(pl.Series("action_id", ids, dtype=steps["action_id"].dtype),
                                   pl.Series("click_x", xs, dtype=steps["click_x"].dtype),
                                   pl.Series("click_y", ys, dtype=steps["click_y"].dtype))
    return out


def _files_in_order(plays: pl.DataFrame) -> pl.DataFrame:
    """One row per file of `plays` with what its recording takes from its plays, in the order recordings are
    built: by (guid, file_id)."""
    return (plays.select(PLAY_COLUMNS).sort("file_id", "play_index")
            .group_by("file_id", maintain_order=True)
            .agg(pl.col("guid").first(), pl.col("game_id").first(), pl.col("recording_variant").first(),
                 pl.col("is_only_reset_levels").first(), pl.col("is_action_ids_lost").any(),
                 pl.col("play_id").alias("stored_play_ids"))
            .sort("guid", "file_id"))


def recording_order(steps: pl.DataFrame, plays: pl.DataFrame) -> list[str]:
    """The file ids of the recordings `recordings_from_tables(steps, plays)` returns, in its order, without
    building them (a file with no step makes no recording)."""
    with_steps = steps["file_id"].unique().implode()
    return _files_in_order(plays).filter(pl.col("file_id").is_in(with_steps))["file_id"].to_list()


def recordings_from_tables(steps: pl.DataFrame | Any, plays: pl.DataFrame, files: Mapping[str, tuple[str | None,
                           Path | None]] | None = None,
                           recovered_actions: Mapping[str, Sequence[int | str]] | None = None,
                           scripts: Mapping[str, ScriptReplay] | None = None, cards: bool = True
                           ) -> list[RecordingInput]:
    """Rebuild every recording of ``steps`` / ``plays`` (core_arc3__steps / core_arc3__plays rows) into cards.

    ``files`` maps file_id -> (file name, path) when known (a `FileRef` from `read_recording_files` also hands
    over the parsed file, for the replay; ``scripts`` says how playback scripts, already replayed by
    `replay_scripts`, were replayed). Every step's effect is its stored ``step_effect``; only recovered
    action ids are classified here. Recordings come back sorted by (guid, file_id). ``steps`` may also be one
    stored file's steps read a block at a time (`scoring.storage.StoredSteps`): its recording then holds them
    so (records and replay steps made from blocks as they are read), not as a table. Without ``cards`` no card is
    built (the transitions export needs each step's play and the play ids, not the card: about 0.4 KB a play, a
    recording of a million one-step plays 0.38 GB) and ``play_ids`` are made as asked for (`PlayIds`)."""
    files = files or {}
    recovered_actions = recovered_actions or {}
    if not isinstance(steps, pl.DataFrame):  # one stored file's steps, read a block at a time (`StoredSteps`)
        by_file = {steps.file_id: steps.select(STEP_COLUMNS)}
    elif (steps := steps.select(STEP_COLUMNS))["file_id"].n_unique() == 1 and steps["line_number"].is_sorted():
        by_file = {steps["file_id"][0]: steps}  # one file in line order (a large one): no sorted copy of it
    else:
        steps = steps.sort("file_id", "line_number")
        by_file = {fid: frame for (fid,), frame in steps.group_by("file_id", maintain_order=True)}
    out: list[RecordingInput] = []
    for row in _files_in_order(plays).iter_rows(named=True):
        fid = row["file_id"]
        file_steps = by_file.get(fid)
        if file_steps is None or file_steps.height == 0:
            continue
        ref = files.get(fid, (None, None))
        name, path = ref
        rec = RecordingInput(
            file_id=fid, file_name=name, path=path, game_id=row["game_id"], guid=row["guid"],
            variant=row["recording_variant"], is_only_reset_levels=bool(row["is_only_reset_levels"]),
            is_action_ids_lost=bool(row["is_action_ids_lost"]), steps=file_steps, records=step_records_of(file_steps),
            stored_play_ids=list(row["stored_play_ids"]), parsed=getattr(ref, "parsed", None),
            script=(scripts or {}).get(fid))
        records = rec.records
        if any(part.null_count() for part in _column_parts(file_steps, "step_effect")):
            raise ValueError(f"{rec.label}: a playback script's actions must be replayed first (replay_scripts)")
        effects = _effects(_column_parts(file_steps, "step_effect"))
        if rec.is_action_ids_lost:
            ids = _recovered_for((name, rec.guid, fid), recovered_actions)
            if ids is not None and not isinstance(file_steps, pl.DataFrame):  # recovered ids rewrite the table:
                rec.steps = file_steps = file_steps.whole()  # held whole, as the actions given are
                records = rec.records = step_records_of(file_steps)
            try:
                recovered = None if ids is None else _apply_recovered(rec, records, ids)
            except ValueError as err:  # not one action per step to recover: unusable, said, the run goes on
                rec.recovery_error = (f"--recovered-actions: the actions given for it do not fit ({err}): not "
                                      "used, its plays stay uncountable")
                recovered = None
            if recovered is None:
                rec.play_ids = list(rec.stored_play_ids)
                rec.step_play = [0] * file_steps.height
                rec.effects = effects
                out.append(rec)
                continue
            records = recovered
            rec.records, rec.recovered = records, True
            effects = classify_steps(records, counting_options_for_variant(rec.variant))
        rec.effects = effects
        rec.step_play = play_index_per_step(effects)
        if cards:
            rec.card = card_from_effects(records, effects, game_id=rec.game_id)
            rec.play_ids = [f"{rec.guid}/{i}" for i in range(rec.card.total_plays)]
        else:  # (a play's steps are consecutive: the last step's play is the last play)
            rec.play_ids = PlayIds(rec.guid, rec.step_play[-1] + 1 if len(rec.step_play) else 0)
        out.append(rec)
    return out


def recount_for_competition(recordings: Sequence[RecordingInput]) -> list[RecordingInput]:
    """The recordings counted by the competition rules (`CountingOptions.competition_mode`: a RESET is never a
    full reset, so a game reset is a level reset and each recording holds one play). Recordings whose actions
    are unknown, and scorecards, are left as they are; so is a recording whose engine really went back to
    level 1 at a game reset (a local play: the levels go down), which the competition server never does: what
    follows that reset is a second play, which competition scoring leaves out."""
    from dataclasses import replace

    out = []
    for rec in recordings:
        if rec.card is None or not rec.records:
            out.append(rec)
            continue
        opts = replace(counting_options_for_variant(rec.variant), competition_mode=True)
        effects = classify_steps(rec.records, opts)
        card = card_from_effects(rec.records, effects, game_id=rec.game_id)
        if any(b[0] <= a[0] for play in card.plays for a, b in zip(play.actions_by_level, play.actions_by_level[1:],
                                                                      strict=False)):
            out.append(_charged_swallowed_reset(rec))
            continue
        out.append(replace(rec, effects=effects, card=card, step_play=play_index_per_step(effects),
                           play_ids=[f"{rec.guid}/{i}" for i in range(card.total_plays)]))
    return out


def _charged_swallowed_reset(rec: RecordingInput) -> RecordingInput:
    """A local recording whose game reset went back to level 1, as the competition server would have counted its
    first play: the RESET that opened the second play is not executed there but costs exactly one action
    (spec/scoring.md §B.1: a reset when the response before it was a RESET's, else a plain action), charged to
    the level the first play was on. What follows it is the second play, which competition scoring leaves out."""
    from dataclasses import replace

    at = next((i for i, effect in enumerate(rec.effects) if effect is StepEffect.FULL_RESET), None)
    if at is None or rec.card is None or not rec.card.plays:
        return rec
    before = next((rec.records[i] for i in range(at - 1, -1, -1) if rec.effects[i] is not StepEffect.ECHO), None)
    first = rec.card.plays[0]
    first = replace(first, actions=first.actions + 1,
                    resets=first.resets + int(before is not None and before.is_reset))
    return replace(rec, card=replace(rec.card, plays=(first, *rec.card.plays[1:])))


def same_content_as(name: str | None) -> str:
    """Why a file is left out: its bytes are a file given before (its plays would otherwise count twice)."""
    return f"same content as {name} (given twice: read once)"


# What two recordings of one play are compared on: the step as the card and the replay see it (timestamps,
# reasoning and formatting are not the play). A frame hash is compared only where both files have frames.
_COMPARED_STEP_FIELDS = ("action_id", "click_x", "click_y", "state", "levels_completed", "win_levels",
                         "is_full_reset", "last_frame_sha256")


def _first_line(rec: RecordingInput) -> int | None:
    return rec.steps["line_number"][0] if rec.steps.height else None


def _where(rec: RecordingInput) -> str:
    """The file a recording came from, as a person finds it: its path when read from disk (two folders may
    hold files of the same name), else its file name or id."""
    return str(rec.path) if rec.path is not None else rec.label


def _how_they_compare(first: RecordingInput, later: RecordingInput) -> str:
    """Whether two recordings of one play agree, and if not where they first part (line numbers of each)."""
    if first.game_id != later.game_id:
        return (f"the two files DISAGREE: game {later.game_id} here, {first.game_id} there: check which one is "
                "right and score it alone")
    a = first.steps.select(_COMPARED_STEP_FIELDS).rows()
    b = later.steps.select(_COMPARED_STEP_FIELDS).rows()
    lines_a, lines_b = first.steps["line_number"].to_list(), later.steps["line_number"].to_list()
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        differ = [f"{name} {v!r} here, {u!r} there" if name != "last_frame_sha256" else "frame"
                  for name, u, v in zip(_COMPARED_STEP_FIELDS, x, y, strict=True)
                  if u != v and not (name == "last_frame_sha256" and (u is None or v is None))]
        if differ:
            return (f"the two files DISAGREE from step {i} (line {lines_b[i]} here, line {lines_a[i]} there: "
                    f"{'; '.join(differ)}): check which one is right and score it alone")
    if len(a) != len(b):
        return (f"the two files DISAGREE: {len(b)} steps here, {len(a)} there (the same up to step "
                f"{min(len(a), len(b)) - 1}): check which one is right and score it alone")
    return "the two files hold the same steps (timestamps or formatting aside)"


def drop_duplicate_plays(recordings: Sequence[RecordingInput], order: Sequence[str]
                         ) -> tuple[list[RecordingInput], list[tuple[Path, str]]]:
    """Keep one recording per play: of recordings holding the same play (the same guid, hence the same play
    ids), the first in ``order`` (file_ids as given: the command line's order) is kept, each later one is left
    out with a reason naming the first and saying whether the two agree. Returns (kept, [(file, reason)]).
    Byte-identical files never get here (read once, `same_content_as`)."""
    rank = {fid: i for i, fid in enumerate(order)}
    by_guid: dict[str, list[RecordingInput]] = {}
    for rec in recordings:
        by_guid.setdefault(rec.guid, []).append(rec)
    dropped: dict[str, tuple[Path, str]] = {}
    for same in by_guid.values():
        if len(same) < 2:
            continue
        first, *later = sorted(same, key=lambda r: (rank.get(r.file_id, len(rank)), r.file_id))
        for rec in later:
            line = _first_line(rec)
            dropped[rec.file_id] = (rec.path or Path(rec.label), (
                f"{'file' if line is None else f'line {line}'}: duplicate_play: the plays of guid {rec.guid} are also in "
                f"{_where(first)} (line {_first_line(first)}), given first and scored; this file is left out: "
                f"{_how_they_compare(first, rec)}"))
    kept = [rec for rec in recordings if rec.file_id not in dropped]
    problems = sorted(dropped.items(), key=lambda item: rank.get(item[0], len(rank)))
    return kept, [problem for _, problem in problems]


def _line_left_out(issue) -> str:
    return f"{issue.location}: {issue.check}: {issue.reason} ({issue.outcome})"


def read_recording_files(paths: Sequence[Path], run_id: str = "score", step_columns: Sequence[str] | None = None
                         ) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, tuple[str | None, Path | None]],
                                    list[tuple[Path, str]]]:
    """Read recordings once each, in memory: (steps, plays, files, problems), the rows ingest would store
    (of a recording's steps, only ``step_columns`` when given, kept a chunk of rows at a time as it is made,
    its small integer columns in the narrowest type their values fit: `score` reads `STEP_COLUMNS`, and a
    column costs 8 to 16 bytes a step; a playback script's keep every column, which its replay reads).

    ``files`` maps file_id -> `FileRef` (file name, resolved path, and the parsed recording with its frame
    pixels, for the replay). ``problems`` lists (path, reason) for files refused and for lines left out (the
    rest of such a file is still used, as ingest would load it). ``run_id`` is unused (kept for callers)."""
    steps_frames, plays_frames, files = [], [], {}
    problems: list[tuple[str, str]] = Spool()  # a flood of bad lines: their reasons wait on disk
    for path in map(Path, paths):
        shown = undecodable(str(path))
        if shown is not None:  # a name no table can hold: reported under its name as shown
            problems.append((Path(shown), f"bad_file_name: {NOT_UTF8_NAME}"))
            continue
        try:
            head = read_text_head(path)  # (ingest's head: past any blank lines the file starts with)
            if not head.first_line:  # as ingest says it (formats.detect)
                problems.append((path, "the file is empty"))
                continue
            if sniff_first_line(head.first_line) is None:
                problems.append((path, "not an ARC-AGI-3 recording (" + (
                    not_utf8_reason(None, head.start) if bom_encoding(head.start) else
                    "the first line is not a `{timestamp, data}` envelope") + ")"))
                continue
            if is_playback_file(path):  # actions only: stored as ingest stores them, replayed by replay_scripts
                script = read_playback_file(path, keep_lines=False)  # its raw lines are not scored
                if script.file_sha256 in files:
                    problems.append((path, same_content_as(files[script.file_sha256][0])))
                    continue
                problems += ((path, _line_left_out(issue)) for issue in script.issues)
                tables = script_tables(script, script.file_sha256, lines=False)  # its raw lines are not scored
                steps_frames.append(tables["core_arc3__steps"])  # every column: its replay reads them
                plays_frames.append(tables["core_arc3__plays"])
                files[script.file_sha256] = FileRef(path.name, path.resolve(), None, len(script.skipped_lines))
                continue
            parsed = read_recording_file(path, want_frames=True, keep_raw_json=False)  # its lines' text is not stored
        except RecordingRejected as err:
            problems.append((path, f"{err.check}: {err.reason}"))
            problems += ((path, _line_left_out(issue)) for issue in err.issues)  # why, line by line
            continue
        except (OSError, UnicodeDecodeError) as err:
            problems.append((path, f"unreadable: cannot read the file: {err}"))
            continue
        if parsed.file_sha256 in files:
            problems.append((path, same_content_as(files[parsed.file_sha256][0])))
            continue
        problems += ((path, _line_left_out(issue)) for issue in parsed.issues)
        # The steps without the lines' rows, which scoring never reads (a large file's would be 2 GB and more).
        tables = recording_tables(parsed, parsed.file_sha256, streamed=True)
        steps_frames.append(pl.concat([_narrowed(chunk, step_columns) for chunk in
                                       step_frames(parsed, parsed.file_sha256)], how="vertical_relaxed",
                                      rechunk=False))
        plays_frames.append(tables["core_arc3__plays"])
        files[parsed.file_sha256] = FileRef(path.name, path.resolve(), parsed)
    if not steps_frames:
        from schemas import empty_frame

        return empty_frame("core_arc3__steps"), empty_frame("core_arc3__plays"), files, problems
    # diagonal: a recording's steps may hold fewer columns than a playback script's (``step_columns``)
    return (pl.concat(steps_frames, how="diagonal_relaxed"), pl.concat(plays_frames, how="vertical_relaxed"),
            files, problems)


# Step counts and small codes: each in the narrowest integer type its values fit (a byte where a step's action,
# click or level fits one; 4 bytes for a line number) when a table is kept in memory only, read by value
# (`read_recording_files`' steps).
_SMALL_INT_STEP_COLUMNS = ("action_id", "click_x", "click_y", "levels_completed", "win_levels", "n_frames",
                           "line_number", "step_index")


def _narrowed(chunk: pl.DataFrame, columns: Sequence[str] | None) -> pl.DataFrame:
    """A chunk of steps with only `columns` (every column when None, types as stored), its small integer columns
    and the available actions' items in the narrowest integer type their values fit (of a table held for a whole
    score: about 148 bytes a step where the stored types take 191; its texts are string views, a text repeated
    on every step stored once)."""
    if columns is None:
        return chunk
    narrowed = [chunk[c].shrink_dtype() for c in _SMALL_INT_STEP_COLUMNS if c in columns]
    if "available_actions" in columns:
        items = chunk["available_actions"].explode(empty_as_null=False).shrink_dtype()
        narrowed.append(chunk["available_actions"].cast(pl.List(items.dtype)))
    return chunk.select(columns).with_columns(narrowed)


@dataclass
class ReplayedScripts:
    """`replay_scripts`' result: the rows with every playback script replaced by its replay."""

    steps: pl.DataFrame
    plays: pl.DataFrame
    files: dict[str, tuple[str | None, Path | None]]
    scripts: dict[str, ScriptReplay]  # file_id -> how it was replayed (game version used, lines skipped)
    failed: list[tuple[str, str]]  # (file name or id, why it could not be replayed): left out


def replay_scripts(steps: pl.DataFrame, plays: pl.DataFrame, files: Mapping[str, tuple[str | None, Path | None]],
                   game_dirs: Sequence[Path], *, version: str | None = None, frames: bool = False
                   ) -> ReplayedScripts:
    """Replay the playback scripts among the plays (``is_replay_needed``) the way the playback agent does, so
    their states, levels and plays come from the engine; other recordings pass through. ``version`` pins the
    game version (else the script's, else the latest of its game code). A script whose game cannot be loaded
    is left out, with the reason."""
    files = dict(files)
    paths = {fid: ref[1] for fid, ref in files.items()}
    skipped = {fid: n for fid, ref in files.items() if (n := getattr(ref, "n_skipped_lines", None)) is not None}
    steps, plays, parsed, how, failed = replay_script_tables(steps, plays, game_dirs, version=version, paths=paths,
                                                             skipped=skipped, frames=frames)
    for fid, rec in parsed.items():
        name, path = files.get(fid, (None, None))
        files[fid] = FileRef(name, path, rec, skipped.get(fid))
    labels = [((files.get(fid) or (None, None))[0] or fid, reason) for fid, reason in sorted(failed.items())]
    return ReplayedScripts(steps, plays, files, how, labels)


RECOVERY_KEY = "$recovery"  # the metadata `arcstudy recover-actions` writes beside the actions


def unmatched_recovered(recovered: Mapping[str, Any], *known: Iterable[str | None]) -> list[str]:
    """The keys of --recovered-actions that name none of the files read (their names, guids and file ids in
    `known`): a recording renamed since its actions were recovered is left uncounted, which must be said."""
    names = {str(k) for keys in known for k in keys if k is not None}
    return sorted(key for key in recovered if key not in names)


def unmatched_reason(key: str) -> str:
    """Why a --recovered-actions key is rejected input (`unmatched_recovered`)."""
    return (f"--recovered-actions: {key!r} names no file given (by file name, guid or file_id): its actions "
            "were not used (a recording renamed since they were recovered?)")


def load_recovered_actions(path: Path) -> dict[str, RecoveredSteps]:
    """``{key: [action, ...]}`` from a JSON file, a key being a recording's file name, guid or file_id and each
    action an id (0-7), a name (``"ACTION1"``) or an object ``{"action": "ACTION6", "x": 3, "y": 7, ...}`` (what
    `arcstudy recover-actions` writes: the click, and how many actions fitted), one per frame line that is not
    a post-terminal echo. Keys starting with ``$`` are metadata: ``$recovery.files.<key>.provenance`` says
    where a recording's actions come from (else: supplied with --recovered-actions and the file's name)."""
    if not_regular_file(path) is not None:
        raise RecordingReadError(f"cannot read recovered actions from {path}: not a regular file")
    try:
        doc = unique_json(read_text_document(path)[0])  # a BOM is not content
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, DuplicateKeyError) as err:
        raise RecordingReadError(f"cannot read recovered actions from {path}: {err}") from None
    except RecursionError:
        raise RecordingReadError(f"cannot read recovered actions from {path}: JSON nested too deeply") from None
    shape = (f"{path}: expected a JSON object mapping file name, guid or file_id to a list of actions")
    if not isinstance(doc, dict):
        raise RecordingReadError(shape)
    meta = doc.get(RECOVERY_KEY) or {}
    files_meta = meta.get("files") if isinstance(meta, dict) else None
    files_meta = files_meta if isinstance(files_meta, dict) else {}
    out: dict[str, RecoveredSteps] = {}
    for key, actions in doc.items():
        if str(key).startswith("$"):
            continue
        if not isinstance(actions, list):
            raise RecordingReadError(shape)
        for i, a in enumerate(actions):
            try:
                recovered_action(a)
            except ValueError as err:
                raise RecordingReadError(f"{path}: {key}: action {i}: {err}") from None
        about = files_meta.get(key)
        provenance = about.get("provenance") if isinstance(about, dict) else None
        out[str(key)] = RecoveredSteps(actions, str(provenance) if provenance else
                                       f"recovered actions supplied with --recovered-actions {path.name}")
    return out
