"""Saving altair figures the house way (CONVENTIONS.md, "Interfaces"): PNG and SVG rendered with
vl-convert, plus the Vega-Lite JSON spec that produced them, side by side.

    paths = save_figure(chart, out_dir, "durations_by_outcome")
    # {"png": out_dir/durations_by_outcome.png, "svg": ....svg, "json": ....vl.json}

Files are written to a temporary name and renamed, so a crash never leaves a half-written figure. The
spec is written with sorted keys, so the same chart gives the same JSON bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import vl_convert as vlc

from pipeline.core.outputs import write_bytes


def _import_altair():
    """altair, imported without the optional rfc3987-syntax package: jsonschema (which altair imports) builds
    about 40 lark parsers at import time when that package is installed (jupyterlab's dependencies bring
    it), some 2 s of CPU per process, for the "iri" formats altair never checks. Hidden only while
    importing, and only if jsonschema is not loaded yet; jsonschema then behaves as without the package."""
    if "jsonschema" in sys.modules or "rfc3987_syntax" in sys.modules:
        import altair
        return altair
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # makes `import rfc3987_syntax` fail
    try:
        import altair
    finally:
        del sys.modules["rfc3987_syntax"]
    return altair


alt = _import_altair()  # every figure module imports altair from here (`from pipeline.core.figures import alt`)

PNG_SCALE = 2.0


def _write_atomic(path: Path, data: bytes) -> None:
    write_bytes(path, data)  # whole, never through a symlink, OutputError on failure (pipeline.core.outputs)


def save_figure(chart: Any, out_dir: Path | str, name: str, *, png_scale: float = PNG_SCALE) -> dict[str, Path]:
    """Render `chart` (an altair chart, or a Vega-Lite spec as a dict) to `<out_dir>/<name>.png`, `.svg` and
    `.vl.json`; returns {"png": path, "svg": path, "json": path}."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"figure name {name!r} must be a plain file stem")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    spec_json = json.dumps(spec, sort_keys=True, indent=1, default=str)
    paths = {"png": out / f"{name}.png", "svg": out / f"{name}.svg", "json": out / f"{name}.vl.json"}
    _write_atomic(paths["json"], (spec_json + "\n").encode())
    svg = vlc.vegalite_to_svg(spec_json)
    _write_atomic(paths["svg"], svg.encode())
    # The PNG is rasterised from that SVG: the same bytes as vegalite_to_png (checked on every figure kind
    # arcstudy draws) without laying the chart out a second time.
    _write_atomic(paths["png"], vlc.svg_to_png(svg, scale=png_scale))
    return paths
