"""`arcstudy build`: read core tables, run the transforms, validate, replace out tables in one transaction.

Steps (each a pure function in its own module) and what they make:

    plays_levels     out_arc3__plays, out_arc3__levels, out_arc3__card_checks
    attempts         out_arc3__attempts, out_study__session_features, out_study__low_effort_exclusions
    baselines        out_arc3__baseline_costs, out_arc3__level_baselines
    solvability      out_arc3__game_solvability, out_arc3__level_completion
    durations        out_arc3__durations_summary
    reference_points out_arc3__level_reference_points
    arc2_calibration out_arc2__pair_calibration, out_arc2__task_calibration, out_arc2__session_accuracy,
                     out_arc2__set_durations, out_arc2__reproduction (ARC-AGI-2 human testing logs)
    arctgi_families  out_arctgi__family_diversity, out_arctgi__family_audits (ARC-TGI families and audits)
    baseline_intervals out_arc3__baseline_intervals (how sure each baseline is)
    figures          PNG/SVG/Vega-Lite files in the output folder

Incremental rebuilds (after owid/etl): every step has an input fingerprint, sha256 over
- the source of the modules it runs (and schemas/outputs_arc3.py),
- the resolved configuration keys it reads,
- its core inputs, each summarised as the (file_id, row count) pairs of the table,
- the fingerprints of the steps it reads from, and step-specific extras (optimal source, output folder).
The fingerprint and its parts are stored per target in the `build_state` meta table. A step reruns when
its fingerprint changed (the parts diff says why: code, config key, input table, upstream step), when it
was never built, when its table no longer holds the rows it wrote, or when forced; everything else is
read back from the database. Because upstream fingerprints are part of downstream ones, the plan is known
before anything runs, which is what `--dry-run` prints.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.config import BuildConfig
from pipeline.core.manifest import RunManifest
from pipeline.core.outputs import output_folder, public_path
from pipeline.core.workspace import Workspace
from pipeline.scoring.baseline_sources import known_level_counts
from pipeline.transforms import arc2 as arc2_mod
from pipeline.transforms import arctgi as arctgi_mod
from pipeline.transforms import attempts as attempts_mod
from pipeline.transforms import baseline_intervals as intervals_mod
from pipeline.transforms import baselines as baselines_mod
from pipeline.transforms import durations as durations_mod
from pipeline.transforms import low_effort as low_effort_mod
from pipeline.transforms import plays_levels as plays_levels_mod
from pipeline.transforms import reference_points as refpoints_mod
from pipeline.transforms import solvability as solvability_mod
from schemas import TABLES
from schemas.validate import conform

STATE_TABLE = "build_state"
FIGURES = "figures"


@dataclass(frozen=True)
class Step:
    name: str
    outputs: tuple[str, ...]
    core_inputs: tuple[str, ...] = ()
    upstream: tuple[str, ...] = ()
    config_keys: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()


STEPS: tuple[Step, ...] = (
    Step("plays_levels", ("out_arc3__plays", "out_arc3__levels", "out_arc3__card_checks"),
         core_inputs=("core_arc3__steps", "core_arc3__plays", "core_arc3__card_plays", "core_arc3__environments"),
         modules=("pipeline.transforms.plays_levels", "pipeline.recordings.counting")),
    Step("attempts", ("out_arc3__attempts", "out_study__session_features", "out_study__low_effort_exclusions"),
         core_inputs=("core_study__session_plays",), upstream=("plays_levels",),
         config_keys=("attempts", "low_effort"),
         modules=("pipeline.transforms.attempts", "pipeline.transforms.low_effort")),
    Step("baselines", ("out_arc3__baseline_costs", "out_arc3__level_baselines"),
         core_inputs=("core_arc3__card_plays", "core_arc3__environments", "raw_ingest__files"),
         upstream=("plays_levels", "attempts"),
         config_keys=("baselines", "attempts.actions_more_than", "attempts.unknown_duration"),
         modules=("pipeline.transforms.baselines", "pipeline.scoring.baselines")),
    Step("solvability", ("out_arc3__game_solvability", "out_arc3__level_completion"),
         upstream=("plays_levels", "attempts"), config_keys=("solvability",),
         modules=("pipeline.transforms.solvability",)),
    Step("durations", ("out_arc3__durations_summary",), upstream=("attempts",),
         config_keys=("attempts.soft_limit_s",), modules=("pipeline.transforms.durations",)),
    Step("reference_points", ("out_arc3__level_reference_points",), upstream=("baselines",),
         config_keys=("baselines.rule", "reference_points"), modules=("pipeline.transforms.reference_points",)),
    Step("arc2_calibration", ("out_arc2__pair_calibration", "out_arc2__task_calibration", "out_arc2__session_accuracy",
                              "out_arc2__set_durations", "out_arc2__reproduction"),
         core_inputs=("core_arc2__attempts", "core_arctgi__tasks"), config_keys=("solvability.confidence_level",),
         modules=("pipeline.transforms.arc2", "schemas.arc2")),
    Step("arctgi_families", ("out_arctgi__family_diversity", "out_arctgi__family_audits"),
         core_inputs=("core_arctgi__tasks", "core_arc__task_pairs", "core_arc2__attempts", "core_harc__attempts",
                      "core_harc__actions"),
         config_keys=("solvability.confidence_level",),
         modules=("pipeline.transforms.arctgi", "pipeline.transforms.arc2", "schemas.arctgi",
                  "pipeline.ingest.harc_arc")),  # tgi_task_copies: which rows are one task
    Step("baseline_intervals", ("out_arc3__baseline_intervals",), upstream=("baselines",),
         modules=("pipeline.transforms.baseline_intervals", "pipeline.scoring.baseline_intervals")),
    Step(FIGURES, (FIGURES,), upstream=("attempts", "solvability", "reference_points"),
         config_keys=("figures", "attempts.soft_limit_s", "attempts.duration_less_than_s"),
         modules=("pipeline.transforms.figures", "pipeline.core.figures")),
)
STEP_BY_NAME = {s.name: s for s in STEPS}
OUT_TABLES = tuple(t for s in STEPS for t in s.outputs if t != FIGURES)


class BuildError(RuntimeError):
    """A build that cannot run (missing inputs, bad optimal source), with a message for the user."""


@dataclass
class StepPlan:
    step: Step
    fingerprint: str
    parts: dict[str, Any]
    reasons: list[str]  # empty: up to date

    @property
    def needs_run(self) -> bool:
        return bool(self.reasons)


@dataclass
class BuildReport:
    plans: list[StepPlan]
    dry_run: bool
    rows: dict[str, int] = field(default_factory=dict)
    figures: dict[str, dict[str, Path]] = field(default_factory=dict)
    skipped_figures: list[str] = field(default_factory=list)
    manifest: RunManifest | None = None
    manifest_path: Path | None = None
    timings_s: dict[str, float] = field(default_factory=dict)  # plan, each step run, write, figures
    excluded: dict[str, str] = field(default_factory=dict)  # file_id -> why its rows were left out of out_*
    excluded_paths: dict[str, str] = field(default_factory=dict)  # file_id -> its path, for the message

    @property
    def rebuilt(self) -> list[str]:
        return [p.step.name for p in self.plans if p.needs_run]


# --------------------------------------------------------------------------------------------------
# fingerprints
# --------------------------------------------------------------------------------------------------
def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def module_digest(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise BuildError(f"cannot locate module {module}")
    return hashlib.sha256(Path(spec.origin).read_bytes()).hexdigest()


def core_digest(ws: Workspace, table: str) -> dict[str, Any]:
    """A core table summarised as its (file_id, row count) pairs: changes when a file is added, replaced,
    removed or loads a different number of rows."""
    if not ws.has_table(table):
        return {"sha256": _sha(""), "files": 0, "rows": 0}
    df = ws.read(f"SELECT file_id, count(*) AS n FROM {table} GROUP BY file_id ORDER BY file_id")
    text = "".join(f"{f}:{n}\n" for f, n in df.iter_rows())
    return {"sha256": _sha(text), "files": df.height, "rows": int(df["n"].sum()) if df.height else 0}


def frame_digest(df: pl.DataFrame) -> str:
    return _sha(df.sort(df.columns).write_csv())


def _load_state(ws: Workspace) -> dict[str, dict[str, Any]]:
    if not ws.has_table(STATE_TABLE):
        return {}
    df = ws.read(f"SELECT * FROM {STATE_TABLE}")
    return {r["build_target"]: r for r in df.iter_rows(named=True)}


def _diff_reasons(old: dict[str, Any], new: dict[str, Any], rebuilt_upstream: set[str]) -> list[str]:
    reasons = []
    for mod, digest in new["code"].items():
        if old.get("code", {}).get(mod) != digest:
            reasons.append(f"code changed: {mod}")
    for key, value in new["config"].items():
        before = old.get("config", {}).get(key, "<unset>")
        if before != value:
            reasons.append(f"config changed: {key} ({json.dumps(before)} -> {json.dumps(value)})")
    for table, digest in new["inputs"].items():
        before = old.get("inputs", {}).get(table)
        if before == digest:
            continue
        if isinstance(digest, dict):
            b = before or {"files": 0, "rows": 0}
            reasons.append(f"input changed: {table} ({b['files']} -> {digest['files']} files, "
                           f"{b['rows']} -> {digest['rows']} rows)")
        elif table in rebuilt_upstream:
            reasons.append(f"upstream rebuilt: {table}")
        else:
            reasons.append(f"upstream changed: {table}")
    for key, value in new["extra"].items():
        if old.get("extra", {}).get(key) != value:
            reasons.append(f"{key} changed")
    return reasons or ["fingerprint changed"]


def plan(ws: Workspace, config: BuildConfig, *, force: bool = False, out_dir: Path | None = None,
         optimal_identity: str | None = None, figures: bool = True) -> list[StepPlan]:
    """What would run and why, without running anything."""
    state = _load_state(ws)
    core_cache: dict[str, dict[str, Any]] = {}
    schema_digest = module_digest("schemas.outputs_arc3")
    fingerprints: dict[str, str] = {}
    rebuilt: set[str] = set()
    plans = []
    for step in STEPS:
        if step.name == FIGURES and (not figures or out_dir is None or not config.figures.enabled):
            continue
        inputs: dict[str, Any] = {}
        for t in step.core_inputs:
            if t not in core_cache:
                core_cache[t] = core_digest(ws, t)
            inputs[t] = core_cache[t]
        for up in step.upstream:
            inputs[up] = fingerprints[up]
        extra: dict[str, Any] = {}
        if step.name == "reference_points":
            extra["optimal source"] = optimal_identity
        if step.name == "baselines":  # the shipped and published games' level counts (not in the database)
            extra["known level counts"] = _sha(json.dumps(known_level_counts(), sort_keys=True))
        if step.name == FIGURES:
            extra["output folder"] = str(out_dir)
        parts = {
            "code": {m: module_digest(m) for m in (*step.modules, "schemas.outputs_arc3")},
            "config": config.section_hash(*step.config_keys),
            "inputs": inputs,
            "extra": extra,
        }
        parts["code"]["schemas.outputs_arc3"] = schema_digest
        fp = _sha(json.dumps(parts, sort_keys=True, default=str))
        fingerprints[step.name] = fp
        reasons: list[str] = []
        previous = [state.get(t) for t in step.outputs]
        if force:
            reasons.append("forced (--force)")
        elif any(p is None for p in previous):
            reasons.append("never built")
        else:
            if any(p["input_fingerprint"] != fp for p in previous):  # type: ignore[index]
                reasons.extend(_diff_reasons(json.loads(previous[0]["fingerprint_parts_json"]), parts, rebuilt))
            for t, p in zip(step.outputs, previous, strict=True):
                if t == FIGURES:
                    missing = [n for n in json.loads(p["fingerprint_parts_json"]).get("files", [])  # type: ignore[index]
                               if not Path(n).exists()]
                    if missing:
                        reasons.append(f"figure files missing ({len(missing)})")
                elif not ws.has_table(t) or ws.row_count(t) != p["n_rows"]:  # type: ignore[index]
                    reasons.append(f"{t} no longer holds the {p['n_rows']} rows the last build wrote")  # type: ignore[index]
                elif _columns_differ(ws, t):
                    reasons.append(f"{t} has an outdated column layout")
        if reasons:
            rebuilt.add(step.name)
        plans.append(StepPlan(step, fp, parts, reasons))
    return plans


def _columns_differ(ws: Workspace, table: str) -> bool:
    rows = ws.con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                          "AND table_schema = 'main' ORDER BY ordinal_position", [table]).fetchall()
    return tuple(r[0] for r in rows) != TABLES[table].columns


# --------------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------------
class _Frames:
    """Frames by table name: computed in this run, else read back from the database."""

    def __init__(self, ws: Workspace | None, frames: dict[str, pl.DataFrame] | None = None):
        self.ws = ws
        self.frames: dict[str, pl.DataFrame] = {n: conform(n, df) for n, df in (frames or {}).items()}

    def __getitem__(self, name: str) -> pl.DataFrame:
        if name not in self.frames:
            if self.ws is None:
                from schemas.validate import empty_frame

                return empty_frame(name)
            if not self.ws.has_table(name):
                raise BuildError(f"table {name} does not exist in {self.ws.path}")
            self.frames[name] = conform(name, self.ws.read(f"SELECT * FROM {name}"))
        return self.frames[name]

    def put(self, name: str, df: pl.DataFrame) -> None:
        self.frames[name] = conform(name, df)


def _games(plays: pl.DataFrame) -> pl.DataFrame:
    return plays.group_by("game_id").agg(pl.col("n_levels").max()).sort("game_id")


def _plays_levels_steps(f: _Frames) -> pl.DataFrame:
    """The steps `plays_levels` reads: from the database, only its columns, a slice at a time in narrow types
    (`read_narrow_steps`, as `score --db` reads them): every column of two million stored steps of one file,
    read whole, took `build` to 1.9 GB."""
    name = "core_arc3__steps"
    if f.ws is None or name in f.frames or not f.ws.has_table(name):
        return f[name]
    from pipeline.scoring.storage import read_narrow_steps

    ids = f.ws.read(f"SELECT DISTINCT file_id FROM {name}")["file_id"].to_list()
    return read_narrow_steps(f.ws, plays_levels_mod.READ_STEP_COLUMNS, ids)


def _tgi_harc_actions(f: _Frames) -> pl.DataFrame:
    """The H-ARC events of ARC-TGI tasks only (audits in the data.csv layout), read by column: a whole H-ARC
    release's events are not needed for a family audit."""
    if f.ws is None or not f.ws.has_table("core_harc__actions"):
        return f["core_harc__actions"].select(arctgi_mod.ACTION_COLUMNS)
    cols = ", ".join(arctgi_mod.ACTION_COLUMNS)
    return f.ws.read(f"SELECT {cols} FROM core_harc__actions WHERE task_id IN "
                     "(SELECT task_id FROM core_arctgi__tasks)")


def run_step(name: str, f: _Frames, config: BuildConfig, optimal: tuple[Any, str | None]) -> None:
    if name == "plays_levels":
        r = plays_levels_mod.build_plays_levels(_plays_levels_steps(f), f["core_arc3__plays"],
                                                f["core_arc3__card_plays"], f["core_arc3__environments"])
        f.put("out_arc3__plays", r.plays)
        f.put("out_arc3__levels", r.levels)
        f.put("out_arc3__card_checks", r.card_checks)
    elif name == "attempts":
        rec = attempts_mod.participant_recordings(f["out_arc3__plays"], f["core_study__session_plays"], config)
        rules = attempts_mod.apply_attempt_rules(rec, config)
        le = low_effort_mod.detect_low_effort(rules, config)
        f.put("out_arc3__attempts", attempts_mod.finalize_attempts(rules, le.excluded_guids))
        f.put("out_study__session_features", le.features)
        f.put("out_study__low_effort_exclusions", le.exclusions)
    elif name == "baselines":
        costs, levels = baselines_mod.study_level_baselines(
            f["out_arc3__attempts"], f["out_arc3__plays"], f["out_arc3__card_checks"], f["core_arc3__card_plays"],
            f["core_arc3__environments"], config, f["raw_ingest__files"], known_level_counts())
        f.put("out_arc3__baseline_costs", costs)
        f.put("out_arc3__level_baselines", levels)
    elif name == "baseline_intervals":
        f.put("out_arc3__baseline_intervals",
              intervals_mod.baseline_intervals(f["out_arc3__baseline_costs"], f["out_arc3__level_baselines"]))
    elif name == "solvability":
        games = _games(f["out_arc3__plays"])
        completion = solvability_mod.level_completion(f["out_arc3__attempts"], games, config)
        f.put("out_arc3__level_completion", completion)
        f.put("out_arc3__game_solvability",
              solvability_mod.game_solvability(f["out_arc3__attempts"], completion, games, config))
    elif name == "durations":
        f.put("out_arc3__durations_summary", durations_mod.durations_summary(f["out_arc3__attempts"], config))
    elif name == "reference_points":
        points = refpoints_mod.reference_points(f["out_arc3__level_baselines"], config.baselines.rule)
        source, source_name = optimal
        try:  # a provider's value is checked as it comes (it runs here, per level)
            filled = refpoints_mod.fill_optimal(points, source, source_name or "provider")
        except ValueError as err:
            raise BuildError(f"cannot use the optimal source: {err}") from err
        f.put("out_arc3__level_reference_points", filled)
    elif name == "arc2_calibration":
        for table, df in arc2_mod.build_arc2(f["core_arc2__attempts"], f["core_arctgi__tasks"],
                                             config.solvability.confidence_level).items():
            f.put(table, df)
    elif name == "arctgi_families":
        for table, df in arctgi_mod.build_arctgi(f["core_arctgi__tasks"], f["core_arc__task_pairs"],
                                                 f["core_arc2__attempts"], f["core_harc__attempts"],
                                                 config.solvability.confidence_level, _tgi_harc_actions(f)).items():
            f.put(table, df)
    else:  # pragma: no cover - STEPS and this dispatch are kept together
        raise BuildError(f"unknown step {name}")


def run_in_memory(core: dict[str, pl.DataFrame], config: BuildConfig, optimal_source: Any = None,
                  steps: Iterable[str] | None = None) -> dict[str, pl.DataFrame]:
    """Run the table steps on core frames held in memory (missing core tables are empty) and return every
    out table, conformed to its schema. No database, no fingerprints: for notebooks and tests."""
    frames = _Frames(None, core)
    source, name, _ = resolve_optimal(config, None, optimal_source)
    for step in STEPS:
        if step.name != FIGURES and (steps is None or step.name in steps):
            run_step(step.name, frames, config, (source, name))
    return {t: frames.frames[t] for t in OUT_TABLES if t in frames.frames}


def resolve_optimal(config: BuildConfig, optimal_path: Path | None = None,
                    optimal_source: Any = None) -> tuple[Any, str | None, str | None]:
    """(source, name, identity-for-the-fingerprint). Precedence: explicit source, --optimal FILE,
    reference_points.optimal_table, reference_points.optimal_provider."""
    from pipeline.core.manifest import sha256_file

    try:
        if optimal_source is not None:
            if isinstance(optimal_source, pl.DataFrame):
                return optimal_source, "table", "frame:" + frame_digest(optimal_source)
            name = getattr(optimal_source, "__qualname__", repr(optimal_source))
            return optimal_source, name, "callable:" + name
        table = optimal_path or (Path(config.reference_points.optimal_table)
                                 if config.reference_points.optimal_table else None)
        if table is not None:
            if not table.exists():
                raise BuildError(f"optimal table {table} does not exist")
            src, name = refpoints_mod.load_optimal_source(table=table)
            return src, name, "file:" + sha256_file(table)
        if config.reference_points.optimal_provider:
            src, name = refpoints_mod.load_optimal_source(provider=config.reference_points.optimal_provider)
            return src, name, "provider:" + config.reference_points.optimal_provider
    except (ImportError, AttributeError, ValueError, OSError, pl.exceptions.PolarsError) as err:
        raise BuildError(f"cannot use the optimal source: {err}") from err
    return None, None, None


def build(ws: Workspace, config: BuildConfig, *, out_dir: Path | None = None, dry_run: bool = False,
          force: bool = False, figures: bool = True, optimal_path: Path | None = None, optimal_source: Any = None,
          command: str = "arcstudy build",
          progress: Callable[[Iterable[Any], str, int], Iterable[Any]] | None = None) -> BuildReport:
    """Plan, then (unless dry_run) run what changed, replace the out tables in one transaction, write the
    figures and record the run (runs table + manifest.json in out_dir)."""
    t0 = time.perf_counter()
    source, source_name, identity = resolve_optimal(config, optimal_path, optimal_source)
    plans = plan(ws, config, force=force, out_dir=out_dir, optimal_identity=identity, figures=figures)
    report = BuildReport(plans=plans, dry_run=dry_run)
    report.timings_s["plan"] = time.perf_counter() - t0
    if dry_run:
        return report

    manifest = RunManifest(command=command, config={**config.to_dict(), "config_source": config.source,
                                                    "config_sha256": config.config_hash()})
    todo = [p for p in plans if p.needs_run]
    # Files an earlier build left out stay out (and said) while the tables it wrote are up to date.
    for p in plans:
        if not p.needs_run and p.step.name != FIGURES:
            for row in _load_state(ws).values():
                if row["build_step"] == p.step.name:
                    report.excluded.update(json.loads(row["fingerprint_parts_json"]).get("excluded_files", {}))
    if report.excluded:  # those still in the database (`arcstudy forget` removes a file for good)
        present = set(ws.read("SELECT file_id FROM raw_ingest__files WHERE file_id IN (SELECT unnest(?))",
                              [list(report.excluded)])["file_id"].to_list())
        report.excluded = {f: why for f, why in report.excluded.items() if f in present}
    frames = _Frames(ws)
    table_steps = [p for p in todo if p.step.name != FIGURES]
    for p in (progress(table_steps, "building", len(table_steps)) if progress else table_steps):
        t0 = time.perf_counter()
        run_step(p.step.name, frames, config, (source, source_name))
        report.timings_s[p.step.name] = time.perf_counter() - t0
    # One file's rows that make an out table invalid leave that file out, not the whole database: the files
    # are named, every table step runs again on the core tables without them, and the command exits 3.
    for _ in range(MAX_EXCLUSION_ROUNDS):
        bad = _invalid_rows_by_file(ws, frames, table_steps)
        if not bad:
            break
        report.excluded.update(bad)
        for p in plans:
            if p.step.name != FIGURES and not p.needs_run:
                p.reasons.append("rebuilt without the files left out")
        table_steps = [p for p in plans if p.step.name != FIGURES]
        todo = [p for p in plans if p.needs_run]
        frames = _Frames(ws, _core_without(ws, set(report.excluded)))
        for p in table_steps:
            run_step(p.step.name, frames, config, (source, source_name))
    else:
        raise BuildError("build: leaving out the files named so far did not make the out tables valid: "
                         + "; ".join(f"{f}: {why}" for f, why in report.excluded.items()))

    # The output folder (figures, manifest.json) is written whole: a failure or a full disk leaves the old one.
    # Its figures are staged before the tables are committed, so a folder that cannot be written leaves the database
    # as it was too (the tables once landed without their run's row in `runs`).
    with output_folder(out_dir) if out_dir is not None else nullcontext(None) as stage:
        fig_plan = next((p for p in todo if p.step.name == FIGURES), None)
        written: dict = {}
        if fig_plan is not None and stage is not None:
            t0 = time.perf_counter()
            from pipeline.transforms.figures import write_figures

            fig_dir = stage / "figures"
            written, skipped = write_figures(fig_dir, frames["out_arc3__attempts"], frames["out_arc3__level_completion"],
                                             frames["out_arc3__level_reference_points"], config)
            report.timings_s["figures"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        now = datetime.now(UTC)
        state_rows = []
        with ws.transaction() as con:
            for p in table_steps:
                for t in p.step.outputs:
                    if _columns_differ(ws, t):
                        ws.recreate_table(t, con=con)
                    ws.replace_table(t, frames[t], con=con)
                    report.rows[t] = frames[t].height
                    kept = StepPlan(p.step, p.fingerprint, {**p.parts, "excluded_files": report.excluded}, p.reasons)
                    state_rows.append(_state_row(t, kept, manifest.run_id, now, frames[t].height))
            if state_rows:
                targets = [r["build_target"] for r in state_rows]
                con.execute(f"DELETE FROM {STATE_TABLE} WHERE build_target IN ({', '.join('?' for _ in targets)})",
                            targets)
                ws.insert_frame(STATE_TABLE, pl.DataFrame(state_rows), con=con)
        report.timings_s["validate_and_write"] = time.perf_counter() - t0

        if fig_plan is not None and stage is not None:
            staged = sorted(path for paths in written.values() for path in paths.values())
            report.figures = {name: {kind: public_path(path) for kind, path in paths.items()}
                              for name, paths in written.items()}  # where they are once the folder is in place
            report.skipped_figures = skipped
            files = [str(public_path(path)) for path in staged]
            parts = {**fig_plan.parts, "files": files}
            row = _state_row(FIGURES, StepPlan(fig_plan.step, fig_plan.fingerprint, parts, []), manifest.run_id,
                             datetime.now(UTC), len(files))
            with ws.transaction() as con:
                con.execute(f"DELETE FROM {STATE_TABLE} WHERE build_target = ?", [FIGURES])
                ws.insert_frame(STATE_TABLE, pl.DataFrame([row]), con=con)
            for path in staged:
                manifest.add_output(path)  # hashed in the stage; the manifest names the final place

        for p in plans:
            for t, digest in p.parts["inputs"].items():
                if isinstance(digest, dict):
                    manifest.inputs[f"db:{ws.path}#{t}"] = digest["sha256"]
            for t in p.step.outputs:
                if t != FIGURES:
                    manifest.outputs[f"db:{ws.path}#{t}"] = p.fingerprint
        manifest.notes["steps"] = {p.step.name: {"rebuilt": p.needs_run, "reasons": p.reasons,
                                                 "fingerprint": p.fingerprint} for p in plans}
        manifest.notes["rows"] = {t: ws.row_count(t) for t in OUT_TABLES}
        manifest.notes["skipped_figures"] = report.skipped_figures
        manifest.notes["optimal_source"] = identity
        manifest.notes["timings_s"] = {k: round(v, 3) for k, v in report.timings_s.items()}
        if report.excluded:
            paths = ws.read("SELECT file_id, file_path FROM raw_ingest__files WHERE file_id IN (SELECT unnest(?))",
                            [list(report.excluded)])
            report.excluded_paths = dict(paths.iter_rows())
            manifest.notes["excluded_files"] = {report.excluded_paths.get(f, f): why
                                                for f, why in report.excluded.items()}
        manifest_path = ws.finish_run(manifest, stage, exit_code=3 if report.excluded else 0)
        report.manifest_path = public_path(manifest_path) if manifest_path is not None else None
    report.manifest = manifest
    return report


MAX_EXCLUSION_ROUNDS = 5


def _core_without(ws: Workspace, file_ids: set[str]) -> dict[str, pl.DataFrame]:
    """Every core input of the table steps, without the rows of `file_ids`."""
    names = dict.fromkeys(t for s in STEPS for t in s.core_inputs)
    out = {}
    for name in names:
        if not ws.has_table(name):
            continue
        df = ws.read(f"SELECT * FROM {name}")
        if "file_id" in df.columns:
            df = df.filter(~pl.col("file_id").is_in(list(file_ids)))
        out[name] = df
    return out


def _invalid_rows_by_file(ws: Workspace, frames: _Frames, table_steps: list[StepPlan]) -> dict[str, str]:
    """Files whose rows make a freshly built out table fail its schema: {file_id: why}. A failing row is traced
    to its file by its `file_id`, else its `play_id` or `guid` (through core_arc3__plays). A failure that no
    file explains raises BuildError with the schema's words."""
    from schemas import validate_frame

    bad: dict[str, str] = {}
    plays = None
    for p in table_steps:
        for t in p.step.outputs:
            result = validate_frame(t, frames[t])
            if result.ok:
                continue
            df = frames[t]
            for f in result.failures:
                ids: list[str] = []
                if f.row is not None:
                    row = df.row(f.row, named=True)
                    if row.get("file_id"):
                        ids = [row["file_id"]]
                    else:
                        if plays is None:
                            plays = frames["core_arc3__plays"].select("play_id", "guid", "file_id")
                            steps = frames["core_arc3__steps"].select("play_id", "file_id").unique()
                        if row.get("play_id") is not None:
                            # steps of the play from a file that does not hold the play's row (a copy of it that
                            # an older arcstudy let in) first; else the file that holds the play
                            owner = plays.filter(pl.col("play_id") == row["play_id"])["file_id"].to_list()
                            strays = steps.filter((pl.col("play_id") == row["play_id"])
                                                  & ~pl.col("file_id").is_in(owner))["file_id"].to_list()
                            ids = sorted(strays) or owner
                        elif row.get("guid") is not None:
                            ids = plays.filter(pl.col("guid") == row["guid"])["file_id"].unique().to_list()
                if not ids:
                    raise BuildError(f"{t} would hold invalid rows that no input file explains: {f.reason}")
                for i in ids:
                    bad.setdefault(i, f"{t}: {f.reason}")
    return bad


def _state_row(target: str, p: StepPlan, run_id: str, now: datetime, n_rows: int) -> dict[str, Any]:
    return {"build_target": target, "build_step": p.step.name, "input_fingerprint": p.fingerprint,
            "fingerprint_parts_json": json.dumps(p.parts, sort_keys=True, default=str), "run_id": run_id,
            "built_at": now, "n_rows": n_rows}
