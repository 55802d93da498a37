"""Plays to score, from recordings given on the command line or from the database, as toolkit card plays.

Both origins go through the same tables: a recording file is read by the ingest reader (in memory, nothing
written) into ``core_arc3__steps`` / ``core_arc3__plays`` rows, exactly as `arcstudy ingest` would store them,
so scoring a file and scoring its ingested copy give the same cards, play ids and numbers.

Per recording the steps are turned into ``StepRecord`` (the step columns map one to one), classified and
rebuilt into a ``Card`` with ``pipeline.recordings.counting`` under the counting options of the recording variant
(`counting_options_for_variant`). A recording showing the benchmarking ``action_ids_lost`` defect cannot be
counted: its plays are reported and left out, unless the real actions are supplied (``recovered_actions``,
keyed by file name, guid or file_id), in which case ``recover_action_ids`` puts them back first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from pipeline.recordings.counting import (
    Card,
    CardPlay,
    StepEffect,
    StepRecord,
    action_id_from,
    classify_steps,
    rebuild_card,
    recover_action_ids,
)
from pipeline.recordings.lines import counting_options_for_variant

__all__ = [
    "RecordingInput",
    "RecordingReadError",
    "load_recovered_actions",
    "play_index_per_step",
    "read_recording_files",
    "recordings_from_tables",
]

STEP_COLUMNS = ("file_id", "line_number", "step_index", "play_id", "game_id", "guid", "action_id", "click_x",
                "click_y", "state", "levels_completed", "win_levels", "is_full_reset", "available_actions",
                "n_frames", "frame_sha256s", "last_frame_sha256")
PLAY_COLUMNS = ("play_id", "file_id", "guid", "game_id", "play_index", "recording_variant",
                "is_only_reset_levels", "is_action_ids_lost")


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
    steps: pl.DataFrame  # core_arc3__steps rows of the file, in line order
    records: list[StepRecord]
    recovered: bool = False
    card: Card | None = None  # None when the actions are unknown (action_ids_lost, not recovered)
    play_ids: list[str] = field(default_factory=list)
    step_play: list[int] = field(default_factory=list)  # play index of every step (same order as steps)
    stored_play_ids: list[str] = field(default_factory=list)  # the play ids ingest cut

    @property
    def label(self) -> str:
        return self.file_name or self.file_id

    def plays(self) -> list[tuple[str, CardPlay | None]]:
        """(play_id, card play) in play order; the card play is None when the actions are unknown."""
        if self.card is None:
            return [(pid, None) for pid in self.play_ids]
        return list(zip(self.play_ids, self.card.plays, strict=True))


def play_index_per_step(effects: Sequence[StepEffect]) -> list[int]:
    """The play slot every step belongs to, with ``rebuild_card``'s rules: a play opens at the opening RESET,
    at every full reset, and implicitly before the first counted step of a file without its opening RESET;
    post-terminal echoes stay with the current play."""
    n = 0
    out = []
    for effect in effects:
        if effect is StepEffect.ECHO:
            out.append(max(n - 1, 0))
            continue
        if n == 0 and effect is not StepEffect.OPEN:
            n += 1
        if effect in (StepEffect.OPEN, StepEffect.FULL_RESET):
            n += 1
        out.append(n - 1)
    return out


def _records(steps: pl.DataFrame) -> list[StepRecord]:
    cols = {c: steps[c].to_list() for c in ("action_id", "state", "levels_completed", "is_full_reset",
                                             "win_levels", "n_frames", "guid", "last_frame_sha256",
                                             "line_number")}
    return [StepRecord(action_id=cols["action_id"][i], state=cols["state"][i],
                       levels_completed=cols["levels_completed"][i], full_reset=cols["is_full_reset"][i],
                       win_levels=cols["win_levels"][i], frame_count=cols["n_frames"][i], guid=cols["guid"][i],
                       frame_digest=cols["last_frame_sha256"][i], line_number=cols["line_number"][i])
            for i in range(steps.height)]


def _recovered_for(keys: Sequence[str | None], recovered: Mapping[str, Sequence[int | str]]
                   ) -> list[int | str] | None:
    for key in keys:
        if key is not None and key in recovered:
            return list(recovered[key])
    return None


def recordings_from_tables(steps: pl.DataFrame, plays: pl.DataFrame, files: Mapping[str, tuple[str | None,
                           Path | None]] | None = None,
                           recovered_actions: Mapping[str, Sequence[int | str]] | None = None
                           ) -> list[RecordingInput]:
    """Rebuild every recording of ``steps`` / ``plays`` (core_arc3__steps / core_arc3__plays rows) into cards.

    ``files`` maps file_id -> (file name, path) when known. Recordings come back sorted by (guid, file_id)."""
    files = files or {}
    recovered_actions = recovered_actions or {}
    steps = steps.select(STEP_COLUMNS).sort("file_id", "line_number")
    meta = (plays.select(PLAY_COLUMNS).sort("file_id", "play_index")
            .group_by("file_id", maintain_order=True)
            .agg(pl.col("guid").first(), pl.col("game_id").first(), pl.col("recording_variant").first(),
                 pl.col("is_only_reset_levels").first(), pl.col("is_action_ids_lost").any(),
                 pl.col("play_id").alias("stored_play_ids")))
    by_file = {fid: frame for (fid,), frame in steps.group_by("file_id", maintain_order=True)}
    out: list[RecordingInput] = []
    for row in meta.sort("guid", "file_id").iter_rows(named=True):
        fid = row["file_id"]
        file_steps = by_file.get(fid)
        if file_steps is None or file_steps.height == 0:
            continue
        name, path = files.get(fid, (None, None))
        rec = RecordingInput(
            file_id=fid, file_name=name, path=path, game_id=row["game_id"], guid=row["guid"],
            variant=row["recording_variant"], is_only_reset_levels=bool(row["is_only_reset_levels"]),
            is_action_ids_lost=bool(row["is_action_ids_lost"]), steps=file_steps, records=_records(file_steps),
            stored_play_ids=list(row["stored_play_ids"]))
        options = counting_options_for_variant(rec.variant)  # type: ignore[arg-type]
        records = rec.records
        if rec.is_action_ids_lost:
            ids = _recovered_for((name, rec.guid, fid), recovered_actions)
            if ids is None:
                rec.play_ids = list(rec.stored_play_ids)
                rec.step_play = [0] * file_steps.height
                out.append(rec)
                continue
            records = recover_action_ids(records, [action_id_from(a) for a in ids])
            rec.records, rec.recovered = records, True
        effects = classify_steps(records, options)
        rec.card = rebuild_card(records, options, game_id=rec.game_id)
        rec.step_play = play_index_per_step(effects)
        rec.play_ids = [f"{rec.guid}/{i}" for i in range(rec.card.total_plays)]
        out.append(rec)
    return out


def read_recording_files(paths: Sequence[Path], run_id: str = "score"
                         ) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, tuple[str | None, Path | None]],
                                    list[tuple[Path, str]]]:
    """Read recordings with the ingest reader, in memory: (steps, plays, files, problems).

    ``problems`` lists (path, reason) for files refused and for quarantined lines (the rest of such a file is
    still used, as ingest would load it)."""
    from pipeline.ingest.runner import prepare_file

    steps_frames, plays_frames, files, problems = [], [], {}, []
    for path in paths:
        prepared = prepare_file(Path(path), run_id=run_id)
        if prepared.failure is not None:
            _, check, reason, location, _ = prepared.failure
            problems.append((Path(path), f"{check}: {reason}"))
            continue
        if prepared.fmt_name != "arc3-recording":
            problems.append((Path(path), f"not an ARC-AGI-3 recording (detected {prepared.fmt_name})"))
            continue
        output = prepared.output
        assert output is not None
        for reject in output.rejects:
            problems.append((Path(path), f"{reject.location}: {reject.check}: {reject.reason} (line left out)"))
        steps_frames.append(output.tables["core_arc3__steps"])
        plays_frames.append(output.tables["core_arc3__plays"])
        files[prepared.ctx.file_id] = (Path(path).name, Path(path).resolve())
    if not steps_frames:
        from schemas import empty_frame

        return empty_frame("core_arc3__steps"), empty_frame("core_arc3__plays"), files, problems
    return pl.concat(steps_frames), pl.concat(plays_frames), files, problems


def load_recovered_actions(path: Path) -> dict[str, list[int | str]]:
    """``{key: [action, ...]}`` from a JSON file, a key being a recording's file name, guid or file_id and each
    action an id (0-7) or a name (``"ACTION1"``), one per frame line that is not a post-terminal echo."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise RecordingReadError(f"cannot read recovered actions from {path}: {err}") from None
    if not isinstance(doc, dict) or not all(isinstance(v, list) for v in doc.values()):
        raise RecordingReadError(f"{path}: expected a JSON object mapping file name, guid or file_id to a list "
                                 "of actions")
    for key, actions in doc.items():
        for a in actions:
            try:
                action_id_from(a)
            except ValueError as err:
                raise RecordingReadError(f"{path}: {key}: {err}") from None
    return {str(k): list(v) for k, v in doc.items()}
