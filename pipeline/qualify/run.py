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
    """The checks of `regime` on one game, as the report dict (pure: nothing written).

    The game's code runs in the sandbox (pipeline.core.game_code): the checks run there, and a game whose code
    ends abnormally (time, memory, exit, crash) gets one failing check `runs` saying how, and the report's
    `stopped_in_sandbox` says it too (`arcstudy qualify` then exits 3)."""
    from pipeline.core.game_code import (
        GameCodeError,
        SandboxFailure,
        describe_failure,
        game_key,
        portable_info,
        run_game_code,
    )
    from pipeline.core.result_shape import expect, list_of

    from .checks import REGIMES, CheckResult, check_hash_seeds
    from .report import report_dict

    def checks(value: Any) -> bool:  # what the sandbox answers: one result per check, at least one
        return bool(value) and list_of(lambda r: isinstance(r, CheckResult) and isinstance(r.name, str)
                                       and r.status in ("pass", "fail", "skip") and isinstance(r.summary, str)
                                       and isinstance(r.evidence, dict))(value)

    portable = portable_info(info)
    label = f"game {info.game_id} ({info.source})"
    stopped = None
    try:
        if REGIMES[regime].hash_seeds:  # its children (one per PYTHONHASHSEED) are sandboxes of their own
            results = expect(run_game_code(_loads_in_sandbox, portable, key=game_key(info), source=info.source),
                             checks, "a list of check results")
            if results[0].status != "fail":
                results = [check_hash_seeds(portable, REGIMES[regime], seed=seed, extra=recordings, progress=progress)]
        else:
            if progress is not None:
                progress(f"running the {regime} checks (in the sandbox)")
            results = expect(run_game_code(_checks_in_sandbox, (portable, regime, seed, tutorial_levels, recordings),
                                           key=game_key(info), source=info.source), checks, "a list of check results")
    except SandboxFailure as err:
        stopped = {"kind": err.kind, "detail": err.detail}
        results = [CheckResult("runs", "fail", describe_failure(err, label), dict(stopped))]
    except GameCodeError as err:  # the game's code raised past every check (a SystemExit, ...)
        results = [CheckResult("runs", "fail", f"{label}: its code raised {type(err).__name__}: {err}",
                               {"error": f"{type(err).__name__}: {err}"})]
    report = report_dict(info.game_id, info.source_sha256(), regime, seed, results)
    if stopped is not None:
        report["stopped_in_sandbox"] = stopped
    return report


def _loads_in_sandbox(info: Any) -> list[Any]:
    from .checks import check_loads

    return [check_loads(info)]


def _checks_in_sandbox(arg: tuple) -> list[Any]:
    from .checks import REGIMES, run_checks

    info, regime, seed, tutorial_levels, recordings = arg
    return run_checks(info, REGIMES[regime], seed=seed, tutorial_levels=tutorial_levels, recordings=recordings)


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
