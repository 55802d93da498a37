"""`arcstudy demo`: the whole pipeline on the embedded demo study, in the order a user would run it.

Every step is the public command a user would type (run in-process, so the demo shows exactly what the
commands do); the demo adds only the order, the paths and a closing summary. Steps:

1. simulate the demo study into data/demo (or reuse it when data/demo holds the same scale and seed);
2. ingest the human recordings, the session manifest and the H-ARC release into reports/demo/demo.duckdb;
3. build the analysis tables (attempts, low-effort exclusions, baselines, solvability, durations);
4. recompute baselines and compare them with the games' metadata;
5. score the simulated agents under every policy, replay-verifying each run through the engine;
6. replay every H-ARC trace and run the paper's analyses;
7. write the calibration, scores and H-ARC reports and reports/demo/index.html linking everything;
8. ingest the static-task study (ARC-TGI families audited by people, an ARC-AGI-2 attempt log) into its own
   database, build it and write its calibration report under reports/demo/static/.

Each figure has one home: the reports draw them (figures/<report>/), so the steps before them run with
--no-figures instead of writing the same charts into demo.build/figures, harc/figures and scores/<agent>/figures.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.text import Text

from pipeline.core.console import out

from .common import EXIT_ERROR, EXIT_USAGE, command_line, fail

if TYPE_CHECKING:
    import click  # typer's command classes


def default_base(package_parent: Path = Path(__file__).resolve().parents[2]) -> Path:
    """Where data/demo and reports/demo go by default: the repository when running from a source checkout
    (`make demo` and the README rely on it), else the current folder; never an installed package's
    site-packages. A checkout is the folder holding the `pipeline` package with a pyproject.toml beside it."""
    return package_parent if (package_parent / "pyproject.toml").is_file() else Path.cwd()


DEFAULT_BASE = default_base()
DEFAULT_DATA = DEFAULT_BASE / "data" / "demo"
DEFAULT_OUT = DEFAULT_BASE / "reports" / "demo"
OK_CODES = {0}


@dataclass
class DemoStep:
    name: str
    args: list[str]
    seconds: float = 0.0
    exit_code: int = 0
    outputs: list[Path] = field(default_factory=list)


def run_command(root: click.Command, args: list[str]) -> int:
    """Run one arcstudy command in this process through the root command (the whole app); its exit code."""
    try:
        code = root.main(args=args, prog_name="arcstudy", standalone_mode=False)
    except typer.TyperException as err:  # usage errors: the message, then their exit code (2)
        out.error(str(err))
        return int(getattr(err, "exit_code", 2))
    return int(code or 0)


def _reusable(data_dir: Path, scale: str, seed: int) -> bool:
    meta = data_dir / "SIMULATION.json"
    if not meta.exists():
        return False
    try:
        info = json.loads(meta.read_text())
    except json.JSONDecodeError:
        return False
    import pipeline

    return (info.get("scale"), info.get("seed"), info.get("arcstudy_version")) == (scale, seed, pipeline.__version__)


def simulate_step(data_dir: Path, games_dir: Path, seed: int) -> DemoStep:
    return DemoStep("simulate the demo study", ["simulate", "--scale", "demo", "--seed", str(seed), "--out",
                                                 str(data_dir), "--environments", str(games_dir), "--overwrite"])


def demo_steps(data_dir: Path, out_dir: Path, games_dir: Path) -> list[DemoStep]:
    """The steps after simulation (they look at what the simulation wrote)."""
    db = out_dir / "demo.duckdb"
    steps = []
    inputs = [data_dir / "arc3" / "human", data_dir / "arc3" / "study.json", data_dir / "harc" / "current",
              data_dir / "harc" / "tasks"]
    steps += [
        DemoStep("ingest recordings, sessions and H-ARC files", ["ingest", *map(str, inputs), "--db", str(db)]),
        DemoStep("build the analysis tables", ["build", "--db", str(db), "--no-figures"]),
        DemoStep("recompute baselines and compare with the games' metadata",
                 ["baselines", "--db", str(db), "--compare", str(games_dir), "--out",
                  str(out_dir / "baselines.csv")]),
    ]
    # One scorecard per agent, as an organizer scores each submission on its own.
    for agent_dir in sorted(p for p in (data_dir / "arc3" / "agents").iterdir() if p.is_dir()):
        steps.append(DemoStep(f"score agent '{agent_dir.name}' under every policy, replay-verified",
                              ["score", str(agent_dir), "--policy", "all", "--games", str(games_dir),
                               "--db", str(db), "--out", str(out_dir / "scores" / agent_dir.name), "--no-figures"]))
    steps += [
        DemoStep("replay every H-ARC trace", ["replay-harc", "--db", str(db)]),
        DemoStep("run the H-ARC paper's analyses", ["harc-analyses", "--db", str(db), "--out", str(out_dir / "harc"),
                                                     "--no-figures"]),
        DemoStep("write the reports",
                 ["report", "all", "--db", str(db), "--out", str(out_dir), "--ground-truth",
                  str(data_dir / "ground_truth" / "arc3_participants.csv")]),
    ]
    static = data_dir / "static"
    if static.is_dir():  # its own database: the H-ARC-layout audit must not join the H-ARC study's analyses
        static_db = out_dir / "static" / "static.duckdb"
        steps += [
            DemoStep("ingest the static-task study (ARC-TGI export, audits, ARC-AGI-2 log)",
                     ["ingest", str(static / "arc_tgi"), str(static / "audit"), str(static / "arc2"), "--db",
                      str(static_db)]),
            DemoStep("build the static-task tables", ["build", "--db", str(static_db), "--no-figures"]),
            DemoStep("write the static-task calibration report (task families, ARC-AGI-2)",
                     ["report", "calibration", "--db", str(static_db), "--out", str(out_dir / "static")]),
        ]
    return steps


def run_demo(root: click.Command, *, data_dir: Path = DEFAULT_DATA, out_dir: Path = DEFAULT_OUT,
             games_dir: Path | None = None, seed: int = 0, fresh: bool = False,
             on_step: Callable[[DemoStep], None] | None = None) -> list[DemoStep]:
    if games_dir is None:
        from games import GAMES_DIR

        games_dir = GAMES_DIR
    _refuse_unsafe_out(out_dir, data_dir)
    reuse = not fresh and _reusable(data_dir, "demo", seed)
    if out_dir.exists():
        shutil.rmtree(out_dir)  # the demo database and reports are rebuilt from scratch every time
    out_dir.mkdir(parents=True)
    done: list[DemoStep] = []
    if not reuse:
        _run_step(root, simulate_step(data_dir, games_dir, seed), done, on_step)
    for step in demo_steps(data_dir, out_dir, games_dir):
        _run_step(root, step, done, on_step)
    return done


class DemoUsageError(ValueError):
    """--out or --data that the demo must not use (it replaces --out on every run)."""


def _refuse_unsafe_out(out_dir: Path, data_dir: Path) -> None:
    """The demo deletes --out before each run: only a new or empty folder or an earlier demo's (it holds
    demo.duckdb) may be replaced, and --out must not hold --data or sit inside it."""
    out_real, data_real = Path(os.path.realpath(out_dir)), Path(os.path.realpath(data_dir))
    if out_real == data_real or out_real in data_real.parents or data_real in out_real.parents:
        raise DemoUsageError(f"--out {out_dir} and --data {data_dir} overlap: the demo replaces --out on every "
                             "run; give them separate folders")
    if out_dir.exists() and not out_dir.is_dir():
        raise DemoUsageError(f"--out {out_dir} is a file, not a folder; choose a new folder for the demo")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / "demo.duckdb").is_file():
        raise DemoUsageError(f"--out {out_dir} is not empty and holds no earlier demo (no demo.duckdb): the demo "
                             "replaces --out on every run; choose a new or empty folder")


def _run_step(root: click.Command, step: DemoStep, done: list[DemoStep],
              on_step: Callable[[DemoStep], None] | None) -> None:
    """Run one step as its command line, stopping the demo if it fails."""
    out.console.rule(Text(step.name, style="bold") if not out.plain else step.name)
    out.console.print("$ arcstudy " + " ".join(step.args), highlight=False)
    started = time.perf_counter()
    step.exit_code = run_command(root, ["--plain", *step.args] if out.plain else step.args)
    step.seconds = time.perf_counter() - started
    done.append(step)
    if on_step:
        on_step(step)
    if step.exit_code not in OK_CODES:
        raise DemoFailed(step)


class DemoFailed(RuntimeError):
    def __init__(self, step: DemoStep):
        super().__init__(f"demo step '{step.name}' exited with {step.exit_code}: arcstudy {' '.join(step.args)}")
        self.step = step


def write_index(out_dir: Path, steps: list[DemoStep], command: str = "arcstudy demo") -> Path:
    """reports/demo/index.html: the reports by audience with their headline numbers, and every figure, table,
    scorecard and manifest the demo produced under the audience it serves (pipeline.report.reports.index)."""
    from pipeline.core.manifest import RunManifest
    from pipeline.report.reports import write_index as write_reports_index

    manifest = RunManifest(command=command, config={"out": str(out_dir)})
    manifest.notes["steps"] = [{"step": s.name, "command": shlex.join(["arcstudy", *s.args]),
                                "seconds": round(s.seconds, 1), "exit_code": s.exit_code} for s in steps]
    manifest.finish(0)
    intro = ("What `arcstudy demo` produced from the simulated demo study, by who would read it. Steps: "
             + "; ".join(f"{s.name} ({s.seconds:.0f} s)" for s in steps) + ".")
    return write_reports_index(out_dir, title="arcstudy demo", intro=intro, manifest=manifest)


def demo_command(
    ctx: typer.Context,
    seed: int = typer.Option(0, help="Seed of the demo study (data/demo is reused when it matches)."),
    fresh: bool = typer.Option(False, "--fresh", help="Regenerate data/demo even when it matches."),
    out_dir: Path = typer.Option(DEFAULT_OUT, "--out", help="Where the database and reports go."),
    data_dir: Path = typer.Option(DEFAULT_DATA, "--data", help="Where the demo study lives."),
) -> None:
    """Run the whole pipeline on the demo study and write reports/demo/index.html.

    Reads: the shipped games and data/demo (generated on first use). Writes: data/demo (when generating),
    reports/demo/ (demo.duckdb, reports, figures, tables, scorecards, manifests), replaced on every run.
    From a source checkout data/demo and reports/demo are the repository's; from an installed package they
    are ./data/demo and ./reports/demo in the current folder.
    """
    started = time.perf_counter()
    root = ctx.find_root().command  # the whole app, found at run time: this module never imports pipeline.cli
    try:
        steps = run_demo(root, data_dir=data_dir, out_dir=out_dir, seed=seed, fresh=fresh)
    except DemoFailed as err:
        out.error(str(err))
        raise typer.Exit(EXIT_ERROR) from err
    except DemoUsageError as err:
        raise fail(str(err), EXIT_USAGE) from err
    index = write_index(out_dir, steps, command_line(ctx))
    out.console.rule("done" if out.plain else Text("done", style="bold green"))
    for s in steps:
        out.console.print(f"{s.seconds:6.1f} s  {s.name}")
    out.console.print(f"{time.perf_counter() - started:6.1f} s  in all")
    out.console.print(f"Open {index} to see every report, table and figure; the database is "
                      f"{out_dir / 'demo.duckdb'} (try `arcstudy tables --db {out_dir / 'demo.duckdb'}`).")
