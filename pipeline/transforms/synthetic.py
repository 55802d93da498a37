"""Hand-built studies as `core_*` tables, for fixtures with known answers and for benchmarks.

A recording is written as a script of one-character steps, each one engine response:

    R  RESET (``r`` is the same): the opening RESET when first; otherwise the engine decides: a full reset
       (new play, progress lost) after WIN or when the level has no action yet, else a level reset. Human-
       dataset lines never record `full_reset` (level-only resets: only a RESET after WIN is full).
    F  RESET forced to be recorded as a full reset
    a  ACTION1 that changes nothing          c  ACTION6 (click)          u  ACTION7 (undo)
    L  ACTION1 that completes the current level (WIN on the last level)
    G  ACTION1 that ends in GAME_OVER
    e  an action echoed without effect (empty frame, win_levels 0); any action sent while the game is
       won or over is such an echo automatically

Plays, echoes and the trailing card are derived with the same counting code ingest uses
(`pipeline.recordings.counting`), so the tables look exactly like what `arcstudy ingest` would load from the
equivalent recording files. Nothing here is random: callers pass explicit scripts and times.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl

from pipeline.recordings.counting import (
    CountingOptions,
    StepEffect,
    StepRecord,
    classify_steps,
    level_changes,
    rebuild_card,
)
from pipeline.recordings.variant import counting_options_for_variant
from schemas.validate import conform
from schemas.vocabulary import ACTION_NAMES

EPOCH = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
STUDY_ID = "synthetic"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class SyntheticStudy:
    """Accumulates core rows; `tables()` returns conformed frames, `load(ws)` writes them."""

    steps: list[dict] = field(default_factory=list)
    plays: list[dict] = field(default_factory=list)
    cards: list[dict] = field(default_factory=list)
    participants: dict[str, dict] = field(default_factory=dict)
    sessions: dict[str, dict] = field(default_factory=dict)
    session_plays: list[dict] = field(default_factory=list)
    environments: list[dict] = field(default_factory=list)
    namespace: str = "8000"  # 4 hex digits in generated guids: studies loaded together need distinct ones
    manifest_file_id: str = field(default_factory=lambda: _sha("synthetic-manifest"))
    _counter: int = 0

    # -- study manifest ---------------------------------------------------------------------------------
    def add_session(self, session_id: str, participant_id: str, started_at: datetime | None = None) -> str:
        if participant_id not in self.participants:
            self.participants[participant_id] = {
                "participant_id": participant_id, "file_id": self.manifest_file_id, "study_id": STUDY_ID,
                "cohort": None, "site": None, "attributes_json": None}
        self.sessions[session_id] = {
            "session_id": session_id, "file_id": self.manifest_file_id, "study_id": STUDY_ID,
            "participant_id": participant_id, "started_at": started_at, "ended_at": None, "site": None,
            "cohort": None, "protocol": "arc-agi-3-2026"}
        return session_id

    def add_environment(self, game_id: str, baseline_actions: list[int] | None) -> None:
        code, _, version = game_id.partition("-")
        doc = {"game_id": game_id, "baseline_actions": baseline_actions}
        self.environments.append({
            "game_id": game_id, "file_id": _sha("env:" + game_id), "game_code": code, "version": version or None,
            "title": code.upper(), "default_fps": None, "tags": None, "baseline_actions": baseline_actions,
            "date_downloaded": None, "class_name": None, "metadata_json": json.dumps(doc), "flags": []})

    # -- recordings --------------------------------------------------------------------------------------
    def add_recording(self, game_id: str, script: str, *, n_levels: int, guid: str | None = None,
                      variant: str = "human-dataset", start: datetime | None = None,
                      duration_s: float | None = None, step_s: float = 2.0, times: list[float] | None = None,
                      session_id: str | None = None, is_first_run: bool = True,
                      order_in_session: int | None = None, card: str | dict[int, dict] | None = "auto",
                      timestamps: bool = True) -> str:
        """Add one recording. Times: `times` (seconds from `start`, one per step), else the steps spread
        evenly over `duration_s` (first step at 0, last at exactly `duration_s`), else `step_s` apart.
        `card`: "auto" gives human-dataset recordings a trailing card the way the released human cards count
        (undo not counted); "toolkit" counts undo; a dict {play_index: slot fields} overrides slots; None = no
        card. With `session_id` the recording is listed in the session manifest."""
        script = script.replace(" ", "")
        self._counter += 1
        guid = guid or f"00000000-0000-4000-{self.namespace}-{self._counter:012d}"
        file_id = _sha("file:" + guid)
        start = start or EPOCH + timedelta(hours=self._counter)
        n = len(script)
        if times is None:
            if duration_s is not None:
                times = [duration_s * i / (n - 1) if n > 1 else 0.0 for i in range(n)]
            else:
                times = [step_s * i for i in range(n)]
        if len(times) != n:
            raise ValueError(f"{len(times)} times for {n} steps")
        records, rows = self._script_rows(script, n_levels, variant, guid, game_id, file_id, start, times,
                                          timestamps)
        opts = counting_options_for_variant(variant)  # type: ignore[arg-type]
        effects = classify_steps(records, opts)
        play_index, plays_lines = 0, [[]]
        for row, effect in zip(rows, effects, strict=True):
            if effect is StepEffect.FULL_RESET:
                play_index += 1
                plays_lines.append([])
            row["play_id"] = f"{guid}/{play_index}"
            row["is_post_terminal"] = effect is StepEffect.ECHO
            row["step_effect"], row["is_counted"] = effect.value, effect.is_counted
            row["flags"] = ["post_terminal"] if effect is StepEffect.ECHO else []
            plays_lines[-1].append(row)
        play_of = [int(row["play_id"].rsplit("/", 1)[1]) for row in rows]
        for row, change in zip(rows, level_changes(records, effects, play_of), strict=True):
            row["is_level_change"] = bool(change)
        self.steps.extend(rows)
        has_leading_reset = script[0] in "RrF"
        for idx, plines in enumerate(plays_lines):
            if not plines:
                continue
            self.plays.append({
                "play_id": f"{guid}/{idx}", "file_id": file_id, "guid": guid, "game_id": game_id,
                "play_index": idx, "recording_variant": variant, "schema_generation": "2026",
                "first_line_number": plines[0]["line_number"], "last_line_number": plines[-1]["line_number"],
                "n_steps": len(plines), "started_at": plines[0]["recorded_at"], "ended_at": plines[-1]["recorded_at"],
                "has_frames": False, "is_only_reset_levels": variant == "human-dataset",
                "is_action_ids_lost": False, "is_replay_needed": False, "has_leading_reset": has_leading_reset if idx == 0 else True,
                "flags": [] if has_leading_reset else ["no_leading_reset"]})
        if card == "auto":
            card = "human" if variant == "human-dataset" else None
        if card is not None:
            self._add_card(card, records, opts, guid, game_id, file_id, n + 1,
                           [i for i, p in enumerate(plays_lines) if p])
        if session_id is not None:
            session = self.sessions[session_id]
            self.session_plays.append({
                "guid": guid, "file_id": self.manifest_file_id, "study_id": STUDY_ID, "session_id": session_id,
                "participant_id": session["participant_id"], "game_id": game_id,
                "order_in_session": order_in_session, "is_first_run": is_first_run})
        return guid

    def _script_rows(self, script: str, n_levels: int, variant: str, guid: str, game_id: str, file_id: str,
                     start: datetime, times: list[float], timestamps: bool) -> tuple[list[StepRecord], list[dict]]:
        levels, state = 0, "NOT_FINISHED"
        level_counter = 0  # the engine's action counter on the current level
        records, rows = [], []
        for i, (tok, t) in enumerate(zip(script, times, strict=True)):
            if tok not in "RrFeaLGcu":
                raise ValueError(f"unknown script step {tok!r} in {script!r}")
            # Any non-RESET action while the game is over or won is echoed by the engine (empty frame).
            echo = tok == "e" or (tok not in "RrF" and state in ("WIN", "GAME_OVER"))
            full: bool | None = False
            if tok in "RrF":
                action = 0
                # The engine's rule: a RESET is full when the game is won or the level has no actions yet.
                engine_full = i == 0 or tok == "F" or state == "WIN" or level_counter == 0
                full = engine_full if variant != "human-dataset" else False  # REST lines never say full
                if tok == "F" or state == "WIN" or (engine_full and variant != "human-dataset"):
                    levels = 0
                state, level_counter = "NOT_FINISHED", 0
            elif echo:
                action = 1
            else:
                action = {"a": 1, "L": 1, "G": 1, "c": 6, "u": 7}[tok]
                level_counter += 1
                if tok == "L":
                    levels += 1
                    level_counter = 0
                    state = "WIN" if levels >= n_levels else "NOT_FINISHED"
                elif tok == "G":
                    state = "GAME_OVER"
            rec_levels = 0 if echo else levels
            win_levels = 0 if echo else n_levels
            records.append(StepRecord(action_id=action, state=state, levels_completed=rec_levels,
                                      full_reset=full, win_levels=win_levels, frame_count=0 if echo else 1,
                                      guid=guid, line_number=i + 1))
            rows.append({
                "file_id": file_id, "line_number": i + 1, "step_index": i, "game_id": game_id, "guid": guid,
                "recorded_at": start + timedelta(seconds=t) if timestamps else None, "action_id": action,
                "action_name": ACTION_NAMES[action], "click_x": 1 if action == 6 else None,
                "click_y": 2 if action == 6 else None, "state": state, "levels_completed": rec_levels,
                "win_levels": win_levels, "is_full_reset": full, "available_actions": None,
                "n_frames": 0 if echo else 1, "frame_sha256s": None, "last_frame_sha256": None,
                "frames_file": None, "reasoning_json": None})
        return records, rows

    def _add_card(self, card: str | dict[int, dict], records: list[StepRecord], opts: CountingOptions, guid: str,
                  game_id: str, file_id: str, line_number: int, play_indexes: list[int]) -> None:
        if isinstance(card, str):
            count_undo = card != "human"
            built = rebuild_card(records, CountingOptions(opts.full_reset_rule, opts.leading_reset,
                                                          opts.competition_mode, count_undo), game_id)
            slots = {idx: {"card_actions": p.actions, "card_resets": p.resets,
                           "levels_completed": p.levels_completed, "card_state": p.state,
                           "card_actions_by_level": [list(x) for x in p.actions_by_level]}
                     for idx, p in zip(play_indexes, built.plays, strict=False)}
        else:
            slots = card
        for slot, (idx, values) in enumerate(sorted(slots.items())):
            self.cards.append({
                "file_id": file_id, "line_number": line_number, "game_id": game_id, "slot_index": slot,
                "guid": guid, "play_id": f"{guid}/{idx}", "is_file_play": True, "card_score": None, "flags": [],
                **values})

    # -- output ------------------------------------------------------------------------------------------
    def tables(self) -> dict[str, pl.DataFrame]:
        return {
            "core_arc3__steps": conform("core_arc3__steps", self.steps),
            "core_arc3__plays": conform("core_arc3__plays", self.plays),
            "core_arc3__card_plays": conform("core_arc3__card_plays", self.cards),
            "core_arc3__environments": conform("core_arc3__environments", self.environments),
            "core_study__participants": conform("core_study__participants", list(self.participants.values())),
            "core_study__sessions": conform("core_study__sessions", list(self.sessions.values())),
            "core_study__session_plays": conform("core_study__session_plays", self.session_plays),
        }

    def load(self, ws: Any, *, validate: bool = True) -> None:
        """Append every table to a workspace in one transaction (what ingest would have written)."""
        with ws.transaction() as con:
            for name, df in self.tables().items():
                ws.insert_frame(name, df, con=con, validate=validate)
