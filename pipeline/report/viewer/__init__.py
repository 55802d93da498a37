"""The replay viewer behind `arcstudy view`: one self-contained HTML page per recording.

    result = write_viewer("rec.jsonl", "view.html", games=["environment_files"])
    result = write_viewer("<guid or play_id>", "view.html", db="arcstudy.duckdb")

The page (`templates/viewer.html.j2`) has no network access: inline CSS and JS, the data embedded as JSON. It
plays a recording step by step (one step = one frame line = one engine response; the settled, i.e. last,
frame of each response is shown).

- `data`: what is shown, computed by `arcstudy score`'s own functions (the recording read by scoring's reader,
  the card, play ids and play of every step from `recordings_from_tables`, replay status from
  `verify_recording`, baselines from `resolve_baselines`), so `view` and `score` report the same counts;
- `frames`: the pixels shown, from the recording, the `ingest --keep-frames` Parquet, or re-rendered by
  replaying through the engine (`--games`); without any of these the page shows the timeline only;
- `render`: the palette, the compact frame encoding, the page data and the HTML.
"""

from .data import (
    Baseline,
    Timeline,
    Verification,
    ViewerError,
    ViewerRejected,
    ViewerSource,
    ViewerUsageError,
    divergence_step,
    find_baseline,
    is_file_target,
    load_database_source,
    load_recording_source,
    step_timeline,
    verify_and_render,
)
from .frames import display_frames
from .render import (
    KEYFRAME_INTERVAL,
    PALETTE,
    ViewerResult,
    build_viewer_data,
    decode_frames,
    encode_frames,
    pack_frame,
    render_viewer_html,
    script_json,
    unpack_frame,
    write_viewer,
)

__all__ = [
    "KEYFRAME_INTERVAL",
    "PALETTE",
    "Baseline",
    "Timeline",
    "Verification",
    "ViewerError",
    "ViewerRejected",
    "ViewerUsageError",
    "ViewerResult",
    "ViewerSource",
    "build_viewer_data",
    "decode_frames",
    "display_frames",
    "divergence_step",
    "encode_frames",
    "find_baseline",
    "is_file_target",
    "load_database_source",
    "load_recording_source",
    "pack_frame",
    "render_viewer_html",
    "script_json",
    "step_timeline",
    "unpack_frame",
    "verify_and_render",
    "write_viewer",
]
