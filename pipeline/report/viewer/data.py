"""What the viewer shows, computed by the same functions as `arcstudy score`: nothing is counted here.

A recording file is read like `arcstudy score FILE` reads it (`scoring.plays.read_recording_files` then
`recordings_from_tables`); a database play like `arcstudy score` reads the database (`recordings_from_tables`
over the `core_arc3__steps` / `core_arc3__plays` rows of its file). Either gives a `RecordingInput`: the
recording variant, the steps, the toolkit card, the score's play ids and the play of every step. Replay status
comes from `scoring.verify.verify_recording`, baselines from `scoring.baseline_sources.resolve_baselines` with
`score`'s source order. The per-step bookkeeping of the page (which level a counted action is charged to) is
read off the card, so the page's per-level counts are the card's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.recordings.counting import ACTION_NAMES, Card, StepEffect
from pipeline.recordings.frames import kept_frames_path
from pipeline.scoring.plays import (
    STEP_COLUMNS,
    RecordingInput,
    read_recording_files,
    recordings_from_tables,
    replay_scripts,
)

from . import frames as fr

__all__ = [
    "Baseline",
    "Timeline",
    "Verification",
    "ViewerError",
    "ViewerRejected",
    "ViewerSource",
    "divergence_step",
    "find_baseline",
    "preview_reason",
    "unknown_game_reason",
    "game_dirs_for",
    "is_file_target",
    "load_database_source",
    "load_recording_source",
    "step_effects",
    "step_timeline",
    "verify_and_render",
]


class ViewerError(RuntimeError):
    """A problem preparing a viewer page, with a message meant for the user."""


class ViewerUsageError(ViewerError):
    """An option the user gave that cannot be read (the command exits with the usage code)."""


class ViewerRejected(ViewerError):
    """The recording is input `arcstudy score` rejects too (a playback script that cannot be replayed): no page,
    and the command exits with the score's code for rejected input."""


# --------------------------------------------------------------------------------------------------------
# Sources: a recording file, or a play in the database, both as scoring reads them
# --------------------------------------------------------------------------------------------------------
MAX_PAGE_STEPS = 20_000  # steps a page embeds: a longer recording's page shows its first ones (its plays and
#                          scores still count every step): each step costs the page about 40 bytes and the
#                          command about 400 while it builds it, plus 4 KB of frame where frames are shown, which
#                          the command holds twice while the sandbox's rendering arrives (200,000 frames rendered
#                          for a long playback script's page took the sandbox child over its memory limit;
#                          50,000 took the command to 1.1 GB)
VIEW_STEP_COLUMNS = (*STEP_COLUMNS, "reasoning_json")  # what the viewer reads of a recording file's steps


@dataclass
class ViewerSource:
    label: str  # what the user asked for (a path, a guid, a play_id)
    kind: str  # "file" or "database"
    recording: RecordingInput  # scoring's reading: variant, steps, card, play ids, play of every step
    reasoning: list[str | None]  # reasoning_json of every step the page shows
    recorded_frames: list[np.ndarray | None] | None = None  # settled frame per step shown, None = empty frame list
    frames_origin: str | None = None  # "recording" or "parquet"
    initial_step: int = 0
    inputs: dict[str, str] = field(default_factory=dict)  # path -> sha256, for the run manifest
    notes: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # what `score FILE` rejects too (lines left out): exit 3

    @property
    def game_id(self) -> str:
        return self.recording.game_id

    @property
    def guid(self) -> str:
        return self.recording.guid

    @property
    def variant(self) -> str:
        return self.recording.variant

    @property
    def is_action_ids_lost(self) -> bool:
        return self.recording.is_action_ids_lost and not self.recording.recovered

    @property
    def n_steps(self) -> int:
        """The steps the page shows: the first `MAX_PAGE_STEPS` of the recording's."""
        return min(self.recording.steps.height, MAX_PAGE_STEPS)

    @property
    def n_steps_total(self) -> int:
        return self.recording.steps.height

    @property
    def line_numbers(self) -> list[int]:
        """The line of each step the page shows."""
        return self.recording.steps["line_number"].head(self.n_steps).to_list()

    @property
    def n_frames(self) -> list[int | None]:
        return self.recording.steps["n_frames"].head(self.n_steps).to_list()

    def page_recording(self) -> RecordingInput:
        """The recording cut to the steps the page shows (its card and play ids whole: the page's scores count
        every step)."""
        rec, n = self.recording, self.n_steps
        if n == rec.steps.height:
            return rec
        return dataclasses.replace(rec, steps=rec.steps.head(n), records=list(itertools.islice(rec.records, n)),
                                   effects=tuple(rec.effects[:n]), step_play=list(rec.step_play[:n]))

    def note_cut(self) -> None:
        """Say on the page that it shows the first steps only, when it does."""
        if self.n_steps < self.n_steps_total:
            self.notes.append(f"this page shows the first {self.n_steps:,} of the recording's {self.n_steps_total:,} "
                              f"steps (a page holds at most {MAX_PAGE_STEPS:,}); its plays and scores count every "
                              "step. `arcstudy export-transitions` or `arcstudy query` reach the others")


def is_file_target(target: str | Path) -> bool:
    """Whether the viewer's TARGET names an existing file (else a guid or play_id): a name the OS refuses
    outright (too long, a NUL byte) is not a file rather than a traceback."""
    try:
        return Path(target).is_file()
    except (OSError, ValueError):
        return False


def _only(recordings: list[RecordingInput], what: str) -> RecordingInput:
    if len(recordings) != 1:
        raise ViewerError(f"{what}: expected one recording, scoring read {len(recordings)}")
    return recordings[0]


def _replay_scripts(steps: pl.DataFrame, plays: pl.DataFrame, files: dict, what: str,
                    game_dirs: Iterable[Path | str] | None, version: str | None, recovered: dict | None = None
                    ) -> tuple[pl.DataFrame, list[RecordingInput]]:
    """The recording of `steps`/`plays`, a playback script replayed first as `arcstudy score` replays it."""
    dirs = game_dirs_for(None) if game_dirs is None else [Path(g) for g in game_dirs]
    replayed = replay_scripts(steps, plays, files, dirs, version=version)
    if replayed.failed:
        raise ViewerRejected(f"{what}: cannot replay the playback script: {replayed.failed[0][1]}")
    return replayed.steps, recordings_from_tables(replayed.steps, replayed.plays, replayed.files, recovered,
                                                  scripts=replayed.scripts)


def _script_note(source: ViewerSource) -> None:
    if source.recording.script is not None:
        source.notes.append(source.recording.script.describe())


def load_recording_source(path: Path | str, game_dirs: Iterable[Path | str] | None = None,
                          game_version: str | None = None, *, recover_actions: bool = False) -> ViewerSource:
    """A recording file (any variant of spec/formats.md §A), read as `arcstudy score FILE` reads it; a playback
    script is replayed on its game (found in `game_dirs`, version pinned by `game_version`) first.
    ``recover_actions``: lost action ids are searched for from the frames first, as `score --recover-actions`
    does."""
    from pipeline.core.manifest import sha256_file

    path = Path(path)
    steps, plays, files, problems = read_recording_files([path], run_id="view", step_columns=VIEW_STEP_COLUMNS)
    if steps.height == 0:
        reason = "; ".join(reason for _, reason in itertools.islice(problems, MAX_NOTES)) or "no frame records"
        # as `score FILE` with no play to score: the file given is not one to view (usage)
        raise ViewerUsageError(f"cannot read recording {path}: {reason}")
    recovered = None
    if recover_actions and plays["is_action_ids_lost"].any():
        from pipeline.explore.recover import recover_lost_actions

        dirs = game_dirs_for(None) if game_dirs is None else [Path(g) for g in game_dirs]
        recovered, failed = recover_lost_actions([path], dirs)
        problems = [*problems, *failed]
    steps, recordings = _replay_scripts(steps, plays, files, str(path), game_dirs, game_version, recovered)
    rec = _only(recordings, str(path))
    has_frames = rec.steps["n_frames"].is_not_null().any()
    recorded = None
    if has_frames:
        try:
            recorded = fr.file_frames(path, rec.steps["line_number"].head(MAX_PAGE_STEPS).to_list())
        except (OSError, ValueError) as err:
            raise ViewerError(f"{path}: {err}") from err
    source = _source(str(path), "file", rec, steps, recorded_frames=recorded,
                     frames_origin="recording" if has_frames else None, inputs={str(path): sha256_file(path)})
    shown = [reason for _, reason in itertools.islice(problems, MAX_NOTES)]
    if len(problems) > MAX_NOTES:  # a flood of bad lines: the page names the first ones and counts the rest
        shown.append(f"... and {len(problems) - MAX_NOTES:,} more lines left out (the page lists the first "
                     f"{MAX_NOTES}; `arcstudy ingest` quarantines every one with its line)")
    source.notes.extend(shown)
    source.rejected.extend(shown)
    _script_note(source)
    return source


def _column(steps: pl.DataFrame, rec: RecordingInput, name: str, n: int | None = None) -> list[Any]:
    """Column `name` of the core_arc3__steps rows `steps` for every step of `rec` (the first `n` when given),
    which keeps only the columns counting needs."""
    lines = rec.steps["line_number"] if n is None else rec.steps["line_number"].head(n)
    by_line = dict(steps.filter((pl.col("file_id") == rec.file_id) & pl.col("line_number").is_in(lines.implode()))
                   .select("line_number", name).iter_rows())
    return [by_line.get(line) for line in lines.to_list()]


def _source(label: str, kind: str, rec: RecordingInput, steps: pl.DataFrame, **fields: Any) -> ViewerSource:
    """The source of `rec` read from the core_arc3__steps rows `steps`: their reasoning, and their stored step
    classification when they carry one and the recording's counting columns do not."""
    if "step_effect" in steps.columns and "step_effect" not in rec.steps.columns:
        rec.steps = rec.steps.with_columns(step_effect=pl.Series(_column(steps, rec, "step_effect"),
                                                                 dtype=pl.String))
    source = ViewerSource(label=label, kind=kind, recording=rec,
                          reasoning=_column(steps, rec, "reasoning_json", MAX_PAGE_STEPS), **fields)
    source.note_cut()
    if source.is_action_ids_lost:
        source.notes.append("every action id is 0 (the benchmarking recorder defect): the actions are unknown, so "
                            "nothing is counted (`arcstudy score` leaves these plays out unless given "
                            "--recover-actions or --recovered-actions)")
    elif rec.recovered:
        source.notes.append(f"actions recovered (every action id was recorded as 0): {rec.recovery}")
        lines = rec.steps["line_number"].to_list()
        names = rec.steps["action_id"].to_list()
        fits = sorted(rec.recovered_fits.items())
        ambiguous = [(i, f) for i, f in fits if f.get("ambiguous")]
        for i, f in (ambiguous or fits)[:5]:
            also = ", ".join(f.get("alternatives") or [])
            source.notes.append(f"step {i} (line {lines[i]}): {f['n_fit']} actions fit"
                                + (" (ambiguous: of different kinds)" if f.get("ambiguous") else "")
                                + f"; shown: {ACTION_NAMES[names[i]]}"
                                + (f"@{rec.recovered_clicks[i]}".replace(" ", "") if i in rec.recovered_clicks else "")
                                + (f", also: {also}" if also else ""))
        if len(ambiguous or fits) > 5:
            source.notes.append(f"... {len(ambiguous or fits) - 5} more steps where "
                                + ("actions of different kinds fit" if ambiguous else "several actions fit"))
    return source


DIGEST_ROWS = 10_000  # `_rows_digest`: rows made into Python objects at a time


def _rows_digest(frame: pl.DataFrame) -> str:
    """sha256 of the rows read (canonical JSON: `json.dumps(frame.to_dicts(), sort_keys=True, default=str,
    separators=(",", ":"))`), standing in for hashing a whole database file. Hashed DIGEST_ROWS rows at a time:
    the text of two million stored steps at once took `view --db` past 4 GB."""
    digest = hashlib.sha256(b"[")
    for first in range(0, frame.height, DIGEST_ROWS):
        rows = frame.slice(first, DIGEST_ROWS).to_dicts()
        text = ",".join(json.dumps(row, sort_keys=True, default=str, separators=(",", ":")) for row in rows)
        digest.update((b"," if first else b"") + text.encode("utf-8"))
    digest.update(b"]")
    return digest.hexdigest()


def load_database_source(db_path: Path | str, key: str, game_dirs: Iterable[Path | str] | None = None,
                         game_version: str | None = None, *, recover_actions: bool = False) -> ViewerSource:
    """A play guid or play_id found in `core_arc3__plays`; the whole recording file is loaded (a play_id
    only sets the step the page opens at). Frames come from the --keep-frames Parquet when present.
    ``recover_actions``: lost action ids are searched for from the stored frame hashes first, as
    `score --db --recover-actions` does."""
    from pipeline.core.manifest import sha256_file
    from pipeline.core.workspace import Workspace, WorkspaceError
    from pipeline.scoring.storage import read_narrow_steps
    from schemas import empty_frame

    db_path = Path(db_path)
    try:
        with Workspace(db_path, read_only=True) as ws:
            for table in ("core_arc3__plays", "core_arc3__steps"):
                if not ws.has_table(table):
                    raise ViewerError(f"database {db_path} has no {table} table (ingest recordings first)")
            found = ws.read(
                "SELECT p.file_id, f.file_name, f.file_path FROM core_arc3__plays p "
                "LEFT JOIN raw_ingest__files f USING (file_id) WHERE p.play_id = ? OR p.guid IN (?, ?) "
                "ORDER BY f.ingested_at DESC NULLS LAST, p.play_index", [key, key, key.rsplit("/", 1)[0]])
            if found.height == 0:
                raise ViewerError(f"no play with guid or play_id {key!r} in {db_path} (core_arc3__plays)")
            file_id, file_name, file_path = found.row(0)
            plays = ws.read("SELECT * FROM core_arc3__plays WHERE file_id = ?", [file_id])
            # (as `score --db` reads them: a slice at a time, narrow; two million steps read whole took 1.5 GB)
            steps = read_narrow_steps(ws, empty_frame("core_arc3__steps").columns, [file_id])
    except WorkspaceError as err:
        raise ViewerError(str(err)) from err
    recovered, failed = None, []
    if recover_actions and plays["is_action_ids_lost"].any():
        from pipeline.explore.recover import recover_lost_stored_actions

        dirs = game_dirs_for(None) if game_dirs is None else [Path(g) for g in game_dirs]
        recovered, failed = recover_lost_stored_actions(steps, plays, {file_id: (file_name, None)}, dirs)
    steps, recordings = _replay_scripts(steps, plays, {file_id: (file_name, None)}, key, game_dirs, game_version,
                                        recovered)
    if not recordings:
        raise ViewerError(f"play {key!r}: no steps in core_arc3__steps for file {file_id}")
    rec = _only(recordings, key)
    source = _source(key, "database", rec, steps,
                     inputs={f"db:{db_path}#core_arc3__steps[file_id={file_id}]": _rows_digest(steps)})
    source.initial_step = _first_step_of_play(source, steps, key)
    if source.initial_step >= source.n_steps:  # a play that starts past the steps the page shows
        source.notes.append(f"{key} starts at step {source.initial_step:,}, past the {source.n_steps:,} steps this "
                            "page shows: the page opens at step 0")
        source.initial_step = 0
    source.notes.extend(reason for _, reason in failed)
    source.rejected.extend(reason for _, reason in failed)
    _script_note(source)
    n_files = found["file_id"].n_unique()
    if n_files > 1:
        source.notes.append(f"{key} appears in {n_files} ingested files; showing the most recently ingested "
                            f"({file_path})")
    frames_files = sorted(set(steps["frames_file"].drop_nulls().to_list()))
    if frames_files:
        path = kept_frames_path(frames_files[0], db_path)
        if path is None:
            source.notes.append(f"frames file {frames_files[0]} (ingest --keep-frames) not found; frames "
                                "re-rendered if possible")
        else:
            try:
                source.recorded_frames = fr.parquet_frames(path, source.line_numbers)
                source.frames_origin = "parquet"
                source.inputs[str(path)] = sha256_file(path)
            except (OSError, ValueError, KeyError) as err:  # pyarrow's errors are these too (ArrowInvalid, ...)
                source.recorded_frames = None  # a damaged store is said, as a missing one is, not a traceback
                reason = (str(err).splitlines() or [""])[0]
                source.notes.append(f"frames file {path} (ingest --keep-frames) cannot be read "
                                    f"({type(err).__name__}: {reason}); frames re-rendered if possible")
    return source


def _first_step_of_play(source: ViewerSource, steps: pl.DataFrame, key: str) -> int:
    """The first step of play `key`: a play id of the score (`<guid>/<index>`, scoring's play cut), else of
    ingest (core_arc3__plays); 0 for a guid."""
    rec = source.recording
    if key == rec.guid:
        return 0
    if key in rec.play_ids and rec.card is not None:
        return rec.step_play.index(rec.play_ids.index(key))
    stored = dict(steps.select("line_number", "play_id").iter_rows())
    found = next((i for i, n in enumerate(source.line_numbers) if stored.get(n) == key), None)
    if found is None:
        raise ViewerError(f"recording {rec.guid} has no play {key!r} (its plays: {', '.join(rec.play_ids)})")
    return found


# --------------------------------------------------------------------------------------------------------
# Steps, plays and levels, as scoring counts them
# --------------------------------------------------------------------------------------------------------
def step_effects(rec: RecordingInput) -> list[StepEffect]:
    """Scoring's classification of every step (the stored `step_effect`, or the recovered actions'
    classification): the viewer never classifies steps itself."""
    return list(rec.effects)


MAX_NOTES = 200  # lines left out that a page names one by one (the rest are counted)


@dataclass
class Timeline:
    """Per-step play and level bookkeeping for the page; every count comes from scoring's card."""

    effects: list[StepEffect]
    play: list[int]  # score's play (index into RecordingInput.play_ids) of every step
    level: list[int]  # 1-based level being played after the step (the last level after a WIN)
    charged_level: list[int]  # 1-based level the step's action is charged to (by the card); 0 when not counted
    level_actions: list[int]  # counted actions charged so far, in this play, to `level`
    level_index: list[dict[str, int]]  # {"play", "level", "step"}: first step of each (play, level)


def _charged_levels(effects: Sequence[StepEffect], step_play: Sequence[int], card: Card | None) -> list[int]:
    """The level each counted step is charged to, read off the card: the j-th counted action of a play belongs
    to the first level whose cumulative count reaches j, pairs taken by position as the score does (§B.2), and
    actions after the last completed level to the next one."""
    if card is None:
        return [0] * len(effects)
    cumulative = [[c for _, c in play.actions_by_level] for play in card.plays]
    counted = [0] * len(card.plays)
    out = []
    for effect, play in zip(effects, step_play, strict=True):
        if not effect.is_counted:
            out.append(0)
            continue
        counted[play] += 1
        out.append(bisect_left(cumulative[play], counted[play]) + 1)
    return out


def step_timeline(rec: RecordingInput) -> Timeline:
    """The page's per-step columns: scoring's step classification and plays, levels charged by the card, and
    the level being played (from the step's own levels_completed) for the level table and jumps."""
    effects = step_effects(rec)
    charged = _charged_levels(effects, rec.step_play, rec.card)
    levels = rec.steps["levels_completed"].to_list()
    wins = rec.steps["win_levels"].to_list()
    timeline = Timeline(effects, list(rec.step_play), [], charged, [], [])
    level_now, current_play = 1, -1
    counts: dict[int, int] = {}
    seen: set[tuple[int, int]] = set()
    for index, (effect, play) in enumerate(zip(effects, rec.step_play, strict=True)):
        if play != current_play:
            current_play, counts = play, {}
        if charged[index]:
            counts[charged[index]] = counts.get(charged[index], 0) + 1
        if effect is not StepEffect.ECHO:
            level_now = levels[index] + 1
            if wins[index] and levels[index] >= wins[index]:
                level_now = wins[index]  # WIN: stay on the last level
        timeline.level.append(level_now)
        timeline.level_actions.append(counts.get(level_now, 0))
        if (play, level_now) not in seen:
            seen.add((play, level_now))
            timeline.level_index.append({"play": play, "level": level_now, "step": index})
    return timeline


def divergence_step(divergence: Any, line_numbers: Sequence[int]) -> int | None:
    """The viewer step of a replay divergence (matched by its line number; None if no step has it)."""
    if divergence is None:
        return None
    try:
        return list(line_numbers).index(int(divergence.line))
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------------------
# Verification (scoring's) and re-rendering through the engine
# --------------------------------------------------------------------------------------------------------
@dataclass
class Verification:
    status: str  # a scoring.verify status: verified, divergent, unverified, not_replayable
    detail: str
    divergence: Any = None  # engine.replay.Divergence
    step: int | None = None  # viewer step of the first divergence
    rendered: list[np.ndarray | None] | None = None  # settled frames from the engine, per replayed step
    game_source: str | None = None  # the game file replayed (for the manifest)
    game_sha256: str | None = None


def game_dirs_for(games: Iterable[Path | str] | None) -> list[Path]:
    """The game folders `arcstudy score` replays with: those given, then the repository's games/."""
    from engine.loader import default_environments_dir

    return [*(Path(g) for g in games or []), default_environments_dir()]


def verify_and_render(source: ViewerSource, games: Iterable[Path | str] | None, *, verify: bool = True,
                      only_reset_levels: bool | None = None,
                      on_step: Callable[[], None] | None = None) -> Verification:
    """Replay status by `scoring.verify.verify_recording` (the score's check) over the folders `games`; when the
    page has no recorded frames, or its frames come from the Parquet store, the engine also renders every step
    by `scoring.verify.render_steps` over the same steps the check replayed (the recording file's, else the
    stored ones), and the Parquet pixels are then compared with the engine's, a difference being a divergence."""
    if not verify:
        return Verification("unverified", "replay verification switched off (--no-verify)")
    from pipeline.core.game_code import SandboxFailure
    from pipeline.scoring.parallel import REPLAY_FAILED

    try:
        return _verify_and_render(source, games, only_reset_levels=only_reset_levels, on_step=on_step)
    except SandboxFailure as err:  # the game's code ended abnormally: the play's replay failed, as score says
        return Verification("not_replayable", f"{REPLAY_FAILED}stopped in the sandbox ({err.kind}): {err.detail}")


def _verify_and_render(source: ViewerSource, games: Iterable[Path | str] | None, *,
                       only_reset_levels: bool | None, on_step: Callable[[], None] | None) -> Verification:
    from engine.loader import resolve_game
    from engine.replay import Divergence
    from pipeline.scoring.verify import (
        describe,
        iter_steps_from_file,
        iter_steps_from_table,
        render_game,
        verify_recording,
    )

    dirs = [Path(g) for g in games or []]
    rec = source.recording
    if only_reset_levels is not None:
        rec = dataclasses.replace(rec, is_only_reset_levels=only_reset_levels)
    checks = verify_recording(rec, dirs, from_file=source.kind == "file")
    if not checks:
        return Verification("unverified", "the recording holds no play to replay")
    divergent = next((c for c in checks if c.status == "divergent"), None)
    if divergent is None and any(c.status != "verified" for c in checks):
        check = next(c for c in checks if c.status != "verified")
        return Verification(check.status, check.detail or check.status)
    info = resolve_game(rec.game_id, dirs)  # verify_recording loaded it: it resolves
    verification = Verification("verified", "", game_source=str(info.source) if info.source else None,
                                game_sha256=checks[0].game_source_sha256)
    if source.recorded_frames is None or source.frames_origin == "parquet":
        # the steps scoring replayed (a playback script's and recovered ids included), on a fresh instance
        steps = iter_steps_from_file(rec) if source.kind == "file" else iter_steps_from_table(rec)
        try:  # in the sandbox, as the check was (SandboxFailure: the game's code ended abnormally)
            shown = list(itertools.islice(steps, source.n_steps))  # only the page's steps are made
            rendered = render_game(info, shown, only_reset_levels=rec.is_only_reset_levels)
            if on_step is not None:
                for _ in rendered:
                    on_step()
            verification.rendered = [None if f is None else fr.as_grid(f) for f in rendered]
        except ValueError as err:  # the game drew a frame no viewer can show (not 64x64, colours outside 0-15)
            raise ViewerError(f"{info.game_id} ({info.source}) rendered a frame that cannot be shown: {err}") from err
    first = divergent.divergence if divergent is not None else None
    lines = source.line_numbers
    if source.frames_origin == "parquet" and source.recorded_frames is not None and verification.rendered:
        limit = divergence_step(first, lines) if first is not None else len(lines)
        found = fr.first_frame_difference(source.recorded_frames, verification.rendered,
                                          len(lines) if limit is None else limit)
        if found is not None:
            index, cells, box = found
            count = source.n_frames[index]
            action = rec.records[index].action_name
            first = Divergence(lines[index], index, action, "frame", None, None, frame_index=(count or 1) - 1,
                               cells_differing=cells, bbox=box)  # the Parquet holds pixels: a pixel comparison
    replayed = sum(c.n_steps_replayed for c in checks)
    if first is None:
        what = ["every field"]
        if any(n is not None for n in source.n_frames):
            what.append("frame" if source.kind == "file" else "frame hash")
        if source.frames_origin == "parquet":
            what.append("stored settled frame")
        verification.detail = (f"replayed {replayed} steps on {rec.game_id}: {', '.join(what[:-1])}"
                               f"{' and ' if len(what) > 1 else ''}{what[-1]} matches")
        notes = [c.frame_only_note() for c in checks if c.status == "verified" and c.n_frame_only_steps]
        if notes:  # frame-only divergences that reconverged (scoring.verify): verified, but say where
            verification.detail = (f"replayed {replayed} steps on {rec.game_id}: every field matches; "
                                   + "; ".join(notes))
        return verification
    verification.status, verification.divergence = "divergent", first
    verification.step = divergence_step(first, lines)
    verification.detail = f"first divergence: {describe(first)}"
    if source.recorded_frames is None:  # the page shows re-rendered frames
        verification.detail += "; frames after it show the engine's state, not necessarily the recorded one"
    return verification


# --------------------------------------------------------------------------------------------------------
# Baselines: the score's sources, in the score's order
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Baseline:
    """The baseline the score uses for a game: `actions` None when the source that knows the game has no
    usable baseline (the score then leaves the game unscored, with the toolkit's message)."""

    actions: list[int] | None
    source: str
    flags: tuple[str, ...] = ()


def _explicit_baseline(text: str) -> Baseline | None:
    """--baselines as the viewer alone takes it: comma-separated integers or one metadata.json; None for a
    folder or CSV (the score's --baselines, resolved as a source). Values are checked as the score checks a
    baseline (`baseline_sources.baseline_values`)."""
    from pipeline.scoring.baseline_sources import BaselineSourceError, baseline_values

    path = Path(text)
    if path.is_dir() or (path.is_file() and path.suffix.lower() == ".csv"):
        return None
    if path.is_file():
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            return Baseline(list(baseline_values(doc["baseline_actions"], str(path), json_integer=True)), str(path))
        except (OSError, ValueError, KeyError, TypeError) as err:  # BaselineSourceError is a ValueError
            raise ViewerUsageError(f"--baselines {text}: not a metadata.json with baseline_actions ({err})") from err
    parts = text.replace(" ", "").split(",")
    if parts and not parts[-1]:  # a trailing comma names no level
        parts.pop()
    try:
        # an empty item is refused, not dropped: dropped, it moved every later level's baseline down one
        values = [int(part) for part in parts]
    except ValueError as err:
        raise ViewerUsageError(f"--baselines {text!r}: give comma-separated integers, a metadata.json, or a folder or "
                          "CSV of baselines as for `arcstudy score`") from err
    if not values:
        raise ViewerUsageError(f"--baselines {text!r}: give per-level action counts >= 1")
    try:
        return Baseline(list(baseline_values(values, "--baselines")), "--baselines")
    except BaselineSourceError as err:
        raise ViewerUsageError(f"{err}; give per-level action counts >= 1") from err


def _describe_source(kind: str, location: str | None, db: Path | str | None) -> str:
    if kind in ("games-dir", "baselines-dir"):
        return f"metadata.json in {location}"
    if kind.startswith("db-"):
        return f"{location} in {db}"
    if kind == "reference-csv":
        return f"the published reference baselines ({location})"
    return str(location)


def _baseline_sources(explicit: str | None, games: Iterable[Path | str] | None, db: Path | str | None) -> list:
    """The score's baseline sources, in the score's order: --baselines (a folder or CSV), the database, the
    metadata.json of the game folders `games`, the published reference baselines."""
    from pipeline.scoring import baseline_sources as bs

    sources = [bs.source_from_path(Path(explicit))] if explicit else []
    if db is not None and Path(db).exists():
        from pipeline.core.workspace import Workspace

        with Workspace(Path(db), read_only=True) as ws:
            sources += bs.source_from_db(ws)
    return sources + [s for s in (bs.source_from_games_dirs([Path(g) for g in games or []]), bs.reference_source())
                      if s is not None]


def find_baseline(game_id: str | None, *, explicit: str | None = None, games: Iterable[Path | str] | None = None,
                  db: Path | str | None = None) -> Baseline | None:
    """Per-level baseline actions of `game_id` as `arcstudy score` resolves them under the default policy:
    --baselines, else the database (recomputed baselines, then core_arc3__environments), else the metadata.json
    of the game folders `games`, else the published reference baselines; the first source that knows the game
    decides (None when no source knows the game)."""
    from pipeline.scoring import baseline_sources as bs
    from pipeline.scoring.policies import DEFAULT_POLICY_ID, get_policy

    if explicit:
        direct = _explicit_baseline(explicit)
        if direct is not None:
            return direct
    if game_id is None:
        return None
    try:
        sources = _baseline_sources(explicit, games, db)
        resolved = bs.resolve_baselines([game_id], get_policy(DEFAULT_POLICY_ID), sources)[game_id]
    except bs.BaselineSourceError as err:  # as in score: the --baselines given cannot be used
        raise ViewerUsageError(str(err)) from err
    if not resolved.has_metadata:
        return None
    values = resolved.baseline_actions
    return Baseline(None if values is None else list(values),
                    _describe_source(resolved.source, resolved.location, db), resolved.flags)


def preview_reason(game_id: str | None, variant: str, *, explicit: str | None = None,
                   games: Iterable[Path | str] | None = None, db: Path | str | None = None) -> str | None:
    """Why `arcstudy score` leaves a 2025 preview play out under the default policy (formats.md A.4: scored only
    under arc-agi-3/2025-preview unless its game has a baseline from a later snapshot; `scoring.run.preview_only`,
    over the sources `find_baseline` reads), or None. Baselines given as numbers or one metadata.json name no
    snapshot."""
    from pipeline.scoring import baseline_sources as bs
    from pipeline.scoring.policies import DEFAULT_POLICY_ID, get_policy
    from pipeline.scoring.run import PREVIEW_POLICY_ID, PREVIEW_VARIANT, preview_only
    from pipeline.scoring.run import preview_reason as reason

    policy = get_policy(DEFAULT_POLICY_ID)
    if game_id is None or variant != PREVIEW_VARIANT or policy.policy_id == PREVIEW_POLICY_ID:
        return None
    if explicit and _explicit_baseline(explicit) is not None:
        resolved = bs.ResolvedBaseline(game_id, None, True, "--baselines", None, None, explicit)
    else:
        try:
            resolved = bs.resolve_baselines([game_id], policy, _baseline_sources(explicit, games, db))[game_id]
        except bs.BaselineSourceError as err:
            raise ViewerUsageError(str(err)) from err
    return reason(game_id, policy, resolved) if preview_only(resolved) else None


def unknown_game_reason(game_id: str | None, status: str, *, explicit: str | None = None,
                        games: Iterable[Path | str] | None = None, db: Path | str | None = None) -> str | None:
    """Why `arcstudy score` would leave this play out as of an unknown game (`scoring.run.unknown_games`, under
    the default policy, over the sources `find_baseline` reads), or None. `status` is the page's replay status;
    baselines given as numbers know the game."""
    from pipeline.scoring import baseline_sources as bs
    from pipeline.scoring.policies import DEFAULT_POLICY_ID, get_policy
    from pipeline.scoring.run import unknown_games, unknown_reason

    if game_id is None or (explicit and _explicit_baseline(explicit) is not None):
        return None
    try:
        sources = _baseline_sources(explicit, games, db)
        dirs, policies = [Path(g) for g in games or []], [get_policy(DEFAULT_POLICY_ID)]
        unknown = unknown_games([(game_id, status)], dirs, policies, sources)
        return unknown_reason(game_id, dirs, policies, sources) if unknown else None
    except bs.BaselineSourceError as err:
        raise ViewerUsageError(str(err)) from err
