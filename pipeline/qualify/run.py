"""Qualify one game and write its report: the work behind ``arcstudy qualify``."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def qualify_game(info: Any, regime: str, *, seed: int, tutorial_levels: int, out_dir: Path | None,
                 recordings: list[Path] | None = None, progress: Any = None,
                 command: str) -> tuple[dict[str, Any], list[Path]]:
    """Run the checks of `regime` on one game; with `out_dir`, write DIR/<game_id>/qualification.json,
    qualification.md and a run manifest recording `command` (exit code 0 on pass, 1 on fail)."""
    from pipeline.core.manifest import RunManifest

    from .checks import REGIMES, run_checks
    from .report import report_dict, write_report

    results = run_checks(info, REGIMES[regime], seed=seed, tutorial_levels=tutorial_levels,
                         recordings=recordings, progress=progress)
    report = report_dict(info.game_id, info.source_sha256(), regime, seed, results)
    written: list[Path] = []
    if out_dir is not None:
        target = out_dir / info.game_id
        written = write_report(report, target)
        manifest = RunManifest(command=command,
                               config={"game_id": info.game_id, "regime": regime, "tutorial_levels": tutorial_levels},
                               seeds={"qualify": seed})
        manifest.add_input(info.source)
        for path in sorted((info.directory / "solutions").glob("*.jsonl")) + list(recordings or []):
            manifest.add_input(path)
        for path in written:
            manifest.add_output(path)
        manifest.notes["verdict"] = report["verdict"]
        manifest.finish(0 if report["verdict"] == "pass" else 1)  # the exit code of `arcstudy qualify`
        written.append(manifest.write_json(target))
    return report, written
