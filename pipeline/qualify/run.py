"""Qualify one game and write its report: the work behind ``arcstudy qualify``."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def qualify_game(info: Any, regime: str, *, seed: int, tutorial_levels: int, out_dir: Path | None,
                 recordings: list[Path] | None = None, progress: Any = None,
                 command: str, workers: int | None = None, scheduler: str | None = None
                 ) -> tuple[dict[str, Any], list[Path]]:
    """Run the checks of `regime` on one game; with `out_dir`, write DIR/<game_id>/qualification.json,
    qualification.md and a run manifest recording `command` (exit code 0 on pass, 1 on fail)."""
    report = qualification_report(info, regime, seed=seed, tutorial_levels=tutorial_levels, recordings=recordings,
                                  progress=progress)
    return report, write_qualification(info, report, regime, seed=seed, tutorial_levels=tutorial_levels,
                                       out_dir=out_dir, recordings=recordings, command=command, workers=workers,
                                       scheduler=scheduler)


def qualification_report(info: Any, regime: str, *, seed: int, tutorial_levels: int,
                         recordings: list[Path] | None = None, progress: Any = None) -> dict[str, Any]:
    """The checks of `regime` on one game, as the report dict (pure: nothing written)."""
    from .checks import REGIMES, run_checks
    from .report import report_dict

    results = run_checks(info, REGIMES[regime], seed=seed, tutorial_levels=tutorial_levels,
                         recordings=recordings, progress=progress)
    return report_dict(info.game_id, info.source_sha256(), regime, seed, results)


def qualify_on_worker(game_id: str, *, env_dir: Path, regime: str, seed: int, tutorial_levels: int,
                      recordings: list[Path] | None) -> dict[str, Any]:
    """`qualification_report` of one game as a worker's piece (the game resolved there: workers see the
    same paths)."""
    from pipeline.explore import resolve

    return qualification_report(resolve(game_id, env_dir), regime, seed=seed, tutorial_levels=tutorial_levels,
                                recordings=recordings)


def write_qualification(info: Any, report: dict[str, Any], regime: str, *, seed: int, tutorial_levels: int,
                        out_dir: Path | None, recordings: list[Path] | None, command: str,
                        workers: int | None = None, scheduler: str | None = None) -> list[Path]:
    """With `out_dir`, write the report and its run manifest (see `qualify_game`); the files written."""
    from pipeline.core.manifest import RunManifest

    from .report import write_report

    written: list[Path] = []
    if out_dir is not None:
        target = out_dir / info.game_id
        written = write_report(report, target)
        manifest = RunManifest(command=command,
                               config={"game_id": info.game_id, "regime": regime, "tutorial_levels": tutorial_levels,
                                       "workers": workers, "scheduler": scheduler},
                               seeds={"qualify": seed})
        manifest.add_input(info.source)
        for path in sorted((info.directory / "solutions").glob("*.jsonl")) + list(recordings or []):
            manifest.add_input(path)
        for path in written:
            manifest.add_output(path)
        manifest.notes["verdict"] = report["verdict"]
        manifest.finish(0 if report["verdict"] == "pass" else 1)  # the exit code of `arcstudy qualify`
        written.append(manifest.write_json(target))
    return written


def qualify_games_on_workers(infos: list[Any], env_dir: Path, regime: str, options: dict[str, Any], *,
                             out_dir: Path | None, command: str, workers: int | None, scheduler: str | None,
                             quiet: bool) -> list[dict[str, Any]]:
    """`qualify_game` of several games, one per worker (local processes or the Dask cluster at `scheduler`);
    the reports come back, and are written in this process, in game order. `options`: seed, tutorial_levels
    and recordings, as `qualify_game` takes them."""
    from functools import partial

    from pipeline.core.console import out
    from pipeline.core.executor import open_executor

    reports = []
    fn = partial(qualify_on_worker, env_dir=env_dir, regime=regime, **options)
    with open_executor(workers, scheduler, n_items=len(infos)) as ex:
        outcomes = ex.map_ordered(fn, [(i, info.game_id) for i, info in enumerate(infos)],
                                  progress=None if quiet else out.track,
                                  description=f"qualifying {len(infos)} games ({ex.n_workers} workers)")
        for key, report, error in outcomes:
            if error is not None:
                raise error
            info = infos[key]
            reports.append(report)
            written = write_qualification(info, report, regime, out_dir=out_dir, command=command,
                                          workers=workers, scheduler=scheduler, **options)
            if written and not quiet:
                out.info(f"{info.game_id}: {report['verdict']}; wrote {', '.join(str(p) for p in written)}")
    return reports
