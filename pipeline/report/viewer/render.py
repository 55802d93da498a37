"""The viewer page: the palette, the compact frame encoding, the page data and the HTML (templates/viewer.*.j2).

Frames are sent compactly and decoded lazily by the page (`decodeFrame` in viewer.js.j2 mirrors
`decode_frames`):

- each 64x64 grid of colour indices 0-15 is *packed* two cells per byte (high nibble = even cell, row-major),
  2048 bytes;
- the per-step list holds one string per step: ``"K" + base64(packed)`` (a keyframe), ``"D" + base64(runs)``
  (a delta against the previous step's frame) or ``"N"`` (no frame for this step). A delta is a sequence of
  runs ``start (uint16 big-endian), length (uint8, 1-255), length bytes of colour``; unchanged steps are an
  empty delta (``"D"``). A keyframe is forced every ``keyframe_interval`` steps (so jumping anywhere decodes
  at most that many deltas), after an ``"N"``, and whenever the delta would be larger than the keyframe.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.outputs import write_text
from pipeline.recordings.counting import StepEffect
from pipeline.recordings.variant import counting_options_for_variant
from pipeline.scoring.parallel import REPLAY_FAILED
from pipeline.scoring.policies import DEFAULT_POLICY_ID
from pipeline.scoring.rhae import score_play
from pipeline.scoring.scorecard import run_to_dict
from schemas.vocabulary import ACTION_NAMES, GAME_STATES

from .data import (
    Baseline,
    Verification,
    ViewerError,
    ViewerSource,
    find_baseline,
    game_dirs_for,
    is_file_target,
    load_database_source,
    load_recording_source,
    preview_reason,
    step_timeline,
    unknown_game_reason,
    verify_and_render,
)
from .frames import GRID, as_grid, display_frames

__all__ = ["KEYFRAME_INTERVAL", "PALETTE", "ViewerResult", "build_viewer_data", "decode_frames", "encode_frames",
           "pack_frame", "render_viewer_html", "script_json", "unpack_frame", "write_viewer"]

CELLS = GRID * GRID
PACKED_BYTES = CELLS // 2
KEYFRAME_INTERVAL = 64
REASONING_CHARS = 400

# The official ARC-AGI-3 16-colour palette, index -> sRGB hex, as the public ARC-AGI-3 docs and web player show
# it (the engine works in indices and defines no colours). Unlike ARC-AGI-1/2 (where 0 is black), colour 0 is
# white and 5 is black; games commonly paint their backgrounds with the greys 3-5. The page takes its colours
# from here (the data's "palette"), nowhere else.
PALETTE: tuple[str, ...] = (
    "#FFFFFF",  # 0  white
    "#CCCCCC",  # 1  light grey
    "#999999",  # 2  grey
    "#666666",  # 3  dark grey
    "#333333",  # 4  charcoal
    "#000000",  # 5  black
    "#E53AA3",  # 6  magenta
    "#FF7BCC",  # 7  pink
    "#F93C31",  # 8  red
    "#1E93FF",  # 9  blue
    "#88D8F1",  # 10 light blue
    "#FFDC00",  # 11 yellow
    "#FF851B",  # 12 orange
    "#921231",  # 13 maroon
    "#4FCC30",  # 14 green
    "#A356D6",  # 15 purple
)

EFFECT_NAMES: tuple[str, ...] = tuple(effect.value for effect in StepEffect)


# Palette indices light enough to be labelled in black on the page's colour legend (white on the others).
LIGHT_COLOURS = frozenset({0, 1, 2, 7, 10, 11, 14})


# --------------------------------------------------------------------------------------------------------
# Frame encoding (mirrored by `decodeFrame` in the page's script)
# --------------------------------------------------------------------------------------------------------
def pack_frame(frame: Any) -> bytes:
    """64x64 colour indices -> 2048 bytes, two cells per byte (high nibble = even cell, row-major)."""
    flat = as_grid(frame).reshape(-1)
    return ((flat[0::2] << 4) | flat[1::2]).astype(np.uint8).tobytes()


def unpack_frame(data: bytes) -> np.ndarray:
    if len(data) != PACKED_BYTES:
        raise ValueError(f"a packed frame has {PACKED_BYTES} bytes, got {len(data)}")
    packed = np.frombuffer(data, dtype=np.uint8)
    flat = np.empty(CELLS, dtype=np.uint8)
    flat[0::2] = packed >> 4
    flat[1::2] = packed & 0x0F
    return flat.reshape(GRID, GRID)


def _delta(previous: np.ndarray, current: np.ndarray) -> bytes:
    """Runs covering every changed cell; unchanged gaps shorter than a run header are merged in."""
    prev, cur = previous.reshape(-1), current.reshape(-1)
    changed = np.flatnonzero(prev != cur)
    if changed.size == 0:
        return b""
    out = bytearray()
    breaks = np.flatnonzero(np.diff(changed) > 3) + 1  # a gap of >= 3 unchanged cells starts a new run
    for group in np.split(changed, breaks):
        start, stop = int(group[0]), int(group[-1]) + 1
        while start < stop:
            length = min(255, stop - start)
            out += start.to_bytes(2, "big") + bytes([length]) + cur[start:start + length].tobytes()
            start += length
    return bytes(out)


def _apply_delta(previous: np.ndarray, delta: bytes) -> np.ndarray:
    flat = previous.reshape(-1).copy()
    pos = 0
    while pos < len(delta):
        if pos + 3 > len(delta):
            raise ValueError("truncated delta run header")
        start = int.from_bytes(delta[pos:pos + 2], "big")
        length = delta[pos + 2]
        values = np.frombuffer(delta[pos + 3:pos + 3 + length], dtype=np.uint8)
        if length == 0 or len(values) != length or start + length > CELLS or (values > 15).any():
            raise ValueError(f"invalid delta run at byte {pos}")
        flat[start:start + length] = values
        pos += 3 + length
    return flat.reshape(GRID, GRID)


def encode_frames(frames: Sequence[Any], *, keyframe_interval: int = KEYFRAME_INTERVAL) -> list[str]:
    """One string per entry of `frames` (a 64x64 grid, or None for "no frame"); see the module docstring."""
    if keyframe_interval < 1:
        raise ValueError("keyframe_interval must be >= 1")
    encoded: list[str] = []
    previous: np.ndarray | None = None
    since_key = 0
    for frame in frames:
        if frame is None:
            encoded.append("N")
            previous = None
            continue
        grid = as_grid(frame)
        delta = _delta(previous, grid) if previous is not None and since_key < keyframe_interval else None
        if delta is None or len(delta) >= PACKED_BYTES:
            encoded.append("K" + base64.b64encode(pack_frame(grid)).decode("ascii"))
            since_key = 1
        else:
            encoded.append("D" + base64.b64encode(delta).decode("ascii"))
            since_key += 1
        previous = grid
    return encoded


def decode_frames(encoded: Sequence[str]) -> list[np.ndarray | None]:
    """The inverse of `encode_frames` (the page does the same, lazily)."""
    out: list[np.ndarray | None] = []
    previous: np.ndarray | None = None
    for index, item in enumerate(encoded):
        kind, payload = item[:1], base64.b64decode(item[1:])
        if kind == "N":
            previous = None
        elif kind == "K":
            previous = unpack_frame(payload)
        elif kind == "D":
            if previous is None:
                raise ValueError(f"frame {index}: a delta with no frame before it")
            previous = _apply_delta(previous, payload)
        else:
            raise ValueError(f"frame {index}: unknown kind {kind!r}")
        out.append(previous)
    return out


# --------------------------------------------------------------------------------------------------------
# The page data
# --------------------------------------------------------------------------------------------------------
def _reasoning_text(value: str | None) -> str | None:
    """A step's reasoning (stored as JSON text), shortened for the page."""
    if value is None:
        return None
    parsed = json.loads(value)
    if parsed is None or parsed == "" or parsed == {}:
        return None
    text = parsed if isinstance(parsed, str) else json.dumps(parsed, default=str)
    return text if len(text) <= REASONING_CHARS else text[:REASONING_CHARS] + "…"


def _minus_one(values: Sequence[Any]) -> list[int]:
    return [-1 if v is None else int(v) for v in values]


def _plays(source: ViewerSource, baseline: Baseline | None) -> list[dict[str, Any]]:
    """The score's plays of the recording: play id, card counts and the run the scorecard shows for it under
    the default policy (both None when the actions are unknown)."""
    out = []
    for play_id, play in source.recording.plays():
        if play is None:
            out.append({"play_id": play_id, "card": None, "run": None})
            continue
        run = score_play(play, baseline.actions if baseline else None, DEFAULT_POLICY_ID, game_id=source.game_id,
                         has_metadata=baseline is not None)
        out.append({"play_id": play_id, "run": run_to_dict(run), "card": {
            "actions": play.actions, "resets": play.resets, "levels_completed": play.levels_completed,
            "state": play.state, "actions_by_level": [list(pair) for pair in play.actions_by_level]}})
    return out


def build_viewer_data(source: ViewerSource, verification: Verification, baseline: Baseline | None, *,
                      keyframe_interval: int = KEYFRAME_INTERVAL) -> dict[str, Any]:
    """Everything the page needs, as JSON-ready columns (one entry per step) plus the score's plays."""
    rec = source.page_recording()  # the steps the page shows (`MAX_PAGE_STEPS`), the card whole
    steps = rec.steps
    n = steps.height
    timeline = step_timeline(rec)
    if source.recorded_frames is not None:
        frames_origin, per_step = source.frames_origin, source.recorded_frames
    elif verification.rendered is not None:
        frames_origin, per_step = "engine", verification.rendered
    else:
        frames_origin, per_step = "none", []
    states = list(GAME_STATES)
    for state in steps["state"].to_list():
        if state not in states:
            states.append(state)
    divergence = None
    if verification.divergence is not None:
        d = verification.divergence
        divergence = {"step": verification.step, "line": d.line, "field": d.field, "text": d.describe(),
                      "bbox": list(d.bbox) if d.bbox else None}
    reasoning = {str(i): text for i, value in enumerate(source.reasoning) if (text := _reasoning_text(value))}
    options = counting_options_for_variant(rec.variant)  # type: ignore[arg-type]
    return {
        "format": "arcstudy-viewer",
        "version": 2,
        "label": source.label,
        "kind": source.kind,
        "game_id": source.game_id,
        "guid": source.guid,
        "variant": source.variant,
        "n_steps": n,
        "initial_step": source.initial_step,
        "palette": list(PALETTE),
        "actions": list(ACTION_NAMES),
        "states": states,
        "effects": list(EFFECT_NAMES),
        "frames_origin": frames_origin,
        "keyframe_interval": keyframe_interval,
        "frames": (encode_frames(display_frames(per_step, n), keyframe_interval=keyframe_interval)
                   if frames_origin != "none" else []),
        "steps": {
            "line": steps["line_number"].to_list(),
            "action": [r.action_id for r in rec.records],
            "x": _minus_one(steps["click_x"].to_list()),
            "y": _minus_one(steps["click_y"].to_list()),
            "state": [states.index(s) for s in steps["state"].to_list()],
            "levels": steps["levels_completed"].to_list(),
            "win": _minus_one(steps["win_levels"].to_list()),
            "full_reset": _minus_one(steps["is_full_reset"].to_list()),
            "n_frames": _minus_one(steps["n_frames"].to_list()),
            "effect": [EFFECT_NAMES.index(e.value) for e in timeline.effects],
            "play": timeline.play,
            "level": timeline.level,
            "charged": timeline.charged_level,
            "level_actions": timeline.level_actions,
        },
        "reasoning": reasoning,
        "level_index": timeline.level_index,
        "n_plays": len(rec.play_ids),
        "plays": _plays(source, baseline),
        "policy": DEFAULT_POLICY_ID,
        "baseline": baseline.actions if baseline else None,
        "baseline_source": baseline.source if baseline else None,
        "baseline_flags": list(baseline.flags) if baseline else [],
        "verification": {"status": verification.status, "detail": verification.detail, "divergence": divergence},
        "notes": list(source.notes),
        "counting": {"full_reset_rule": options.full_reset_rule, "leading_reset": options.leading_reset},
        "is_action_ids_lost": source.is_action_ids_lost,
        "recovered": rec.recovery if rec.recovered else None,
    }


def script_json(data: Any) -> str:
    """JSON safe inside a <script> element: no `<`, `>`, `&` or line separators can end or confuse it."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                         ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def render_viewer_html(data: Mapping[str, Any], manifest: Mapping[str, Any] | None = None) -> str:
    from markupsafe import Markup

    from pipeline.report.html import manifest_context, template_environment

    template = template_environment().get_template("viewer.html.j2")
    return template.render(
        data=data,
        data_json=Markup(script_json(data)),  # escaped for a <script> element by script_json
        verification=data["verification"],
        manifest=manifest_context(manifest),
        palette=[(colour, "#000" if index in LIGHT_COLOURS else "#fff") for index, colour in enumerate(data["palette"])],
    )


# --------------------------------------------------------------------------------------------------------
# End to end
# --------------------------------------------------------------------------------------------------------
@dataclass
class ViewerResult:
    out_path: Path
    data: dict[str, Any]
    source: ViewerSource
    verification: Verification
    n_bytes: int = 0
    left_out: str | None = None  # why `arcstudy score` leaves this play out (an unknown game), else None

    @property
    def rejected(self) -> list[str]:
        """What `arcstudy score` would report as rejected or left out (lines of the file, an unknown game): the
        page is written, and the command exits with the score's code for rejected input."""
        return [*self.source.rejected, *([self.left_out] if self.left_out else [])]


def write_viewer(target: str | Path, out_path: Path | str, *, db: Path | str | None = None,
                 games: Sequence[Path | str] | None = None, baselines: str | None = None, verify: bool = True,
                 only_reset_levels: bool | None = None, manifest: Any = None,
                 on_step: Callable[[], None] | None = None, game_version: str | None = None,
                 include_unknown_games: bool = False, recover_actions: bool = False) -> ViewerResult:
    """Build one viewer page for a recording file or a database guid/play_id and write it atomically.

    Games are looked up where `arcstudy score` looks: `games`, then the repository's games/. A play of a game
    nothing knows (no game files, no baseline: `scoring.run.unknown_games`) is still shown, with the score's
    reason for leaving it out as a note and in `ViewerResult.left_out` (unless `include_unknown_games`, as for
    the score). `manifest` (a pipeline.core.manifest.RunManifest) receives the inputs (recording or database,
    frames file, game source) and the page's sha256 as an output; its content at render time is embedded in
    the page.
    """
    out = Path(out_path)
    path = Path(target)
    game_dirs = game_dirs_for(games)  # also where a playback script's game is found, to replay it
    if is_file_target(path):
        source = load_recording_source(path, game_dirs, game_version, recover_actions=recover_actions)
    elif db is not None and Path(db).exists():
        source = load_database_source(db, str(target), game_dirs, game_version, recover_actions=recover_actions)
    elif db is not None:
        raise ViewerError(f"{target} is not a file, and database {db} does not exist")
    else:
        raise ViewerError(f"{target} is not a recording file (pass --db to look up a guid or play_id)")
    verification = verify_and_render(source, game_dirs, verify=verify, only_reset_levels=only_reset_levels,
                                     on_step=on_step)
    baseline = find_baseline(source.game_id, explicit=baselines, games=game_dirs, db=db)
    left_out = None
    if baseline is None and not include_unknown_games:  # a baseline known: the game is known
        left_out = unknown_game_reason(source.game_id, verification.status, explicit=baselines, games=game_dirs,
                                       db=db)
        if left_out is not None:
            source.notes.append(f"left out of the score: {left_out}")
    if left_out is None:  # a 2025 preview play under the default policy (formats.md A.4), as the score says
        left_out = preview_reason(source.game_id, source.variant, explicit=baselines, games=game_dirs, db=db)
        if left_out is not None:
            source.notes.append(f"left out of the score: {left_out}")
    if left_out is None and verification.status == "not_replayable" and verification.detail.startswith(
            REPLAY_FAILED):  # the game's code ended abnormally: the score leaves the play out, and says so
        left_out = verification.detail
        source.notes.append(f"left out of the score: {left_out}")
    data = build_viewer_data(source, verification, baseline)
    manifest_dict = None
    if manifest is not None:
        for name, digest in source.inputs.items():
            manifest.add_input(name, digest)
        if verification.game_source and verification.game_sha256:
            manifest.add_input(verification.game_source, verification.game_sha256)
        manifest.notes["viewer"] = {"n_steps": data["n_steps"], "frames_origin": data["frames_origin"],
                                    "verification": verification.status, "baseline_source": data["baseline_source"],
                                    "left_out_of_score": left_out, "rejected_input": list(source.rejected)}
        manifest_dict = manifest.to_dict()
    html = render_viewer_html(data, manifest_dict)
    write_text(out, html)  # whole, never through a symlink; OutputError (one line, exit 1) when it cannot be
    if manifest is not None:
        manifest.add_output(out)
    return ViewerResult(out, data, source, verification, n_bytes=out.stat().st_size, left_out=left_out)
