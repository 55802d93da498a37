"""`arcstudy score`: RHAE scorecards under versioned policies, each play replay-verified first."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table as RichTable

from pipeline.core.console import out
from pipeline.scoring.policies import DEFAULT_POLICY_ID, POLICIES, ScoringPolicy, get_policy

from .common import (
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    DbOption,
    GameVersionOption,
    LockTimeoutOption,
    SchedulerOption,
    WorkersOption,
    command_line,
    fail,
    open_workspace,
)


def default_out_dir(db_path: Path, card_id: str) -> Path:
    """Scorecards, CSVs, figures and manifest live beside the database: `<db>.score/<card_id>/`."""
    return db_path.parent / (db_path.stem + ".score") / card_id


def parse_policies(value: str) -> list[ScoringPolicy]:
    if value.strip() == "all":
        return list(POLICIES.values())
    return [get_policy(v.strip()) for v in value.split(",") if v.strip()]


def expand_recordings(paths: list[Path]) -> list[Path]:
    """Files as given; folders searched recursively for `*.jsonl`; sorted, without duplicates. A `*.jsonl` that
    is not a regular file (a FIFO, a dangling symlink, a symlink loop) is kept, so that it is reported as
    rejected input rather than vanishing silently."""
    found: list[Path] = []
    for p in paths:
        found.extend(sorted(q for q in p.rglob("*.jsonl") if not q.is_dir()) if p.is_dir() else [p])
    seen, unique = set(), []
    for p in found:
        key = os.path.realpath(p)  # Path.resolve raises on a symlink loop
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def score_command(
    ctx: typer.Context,
    recordings: Annotated[list[Path] | None, typer.Argument(
        help="Recording files (JSONL) or folders searched for *.jsonl. Without any, the plays already in the "
             "database are scored.", exists=True, show_default=False)] = None,
    policy: Annotated[str, typer.Option("--policy", help=f"Scoring policy id, several separated by commas, or "
                                        f"`all` ({', '.join(POLICIES)}).")] = DEFAULT_POLICY_ID,
    baselines: Annotated[Path | None, typer.Option("--baselines", help="Baselines to score against: a folder of "
                                                   "metadata.json files (searched recursively) or a CSV (the shape "
                                                   "of pipeline/scoring/reference/arc-agi-3-public-games.csv, or "
                                                   "the long CSV of `arcstudy baselines --out`).", exists=True,
                                                   show_default=False)] = None,
    games: Annotated[list[Path] | None, typer.Option("--games", help="Folder of game files laid out like the "
                                                     "official environment_files (repeatable): plays of these games "
                                                     "are replay-verified, their metadata is a baseline source. "
                                                     "Their Python code is run (in the sandbox, docs/security.md).",
                                                     exists=True, file_okay=False, show_default=False)] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Folder for the scorecards, CSVs, figures and "
                                                 "manifest.json (default: <db>.score/<card_id>/).", file_okay=False,
                                                 show_default=False)] = None,
    db: DbOption = None,
    trust_recordings: Annotated[bool, typer.Option("--trust-recordings", help="Score plays whose replay diverges "
                                                   "(still reported as divergent).")] = False,
    recovered_actions: Annotated[Path | None, typer.Option("--recovered-actions", help="JSON object mapping a "
                                                           "recording's file name, guid or file_id to its real "
                                                           "actions, for recordings whose action ids were lost.",
                                                           exists=True, dir_okay=False, show_default=False)] = None,
    game: Annotated[list[str] | None, typer.Option("--game", help="Database plays: only this game id "
                                                   "(repeatable).", show_default=False)] = None,
    include_unknown_games: Annotated[bool, typer.Option("--include-unknown-games", help="Score plays of a game that "
                                                 "has no game files under --games and no baseline anywhere "
                                                 "(left out by default: most likely a wrong folder or a "
                                                 "mistyped game id).")] = False,
    no_figures: Annotated[bool, typer.Option("--no-figures", help="Skip the figures.")] = False,
    game_version: GameVersionOption = None,
    lock_timeout: LockTimeoutOption = 30.0,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
) -> None:
    """Score plays with RHAE under versioned policies, each play replay-verified through the engine first.

    Reads: the recordings given (nothing is ingested), or without any the plays in the database
    (core_arc3__plays, core_arc3__steps, raw_ingest__files); the game files of --games (replay) and the
    baselines: --baselines DIR|CSV, else the database (out_arc3__level_baselines under the policy's rule when a
    study was built, else core_arc3__environments), else --games metadata, else the published reference
    baselines shipped in pipeline/scoring/reference/ (the first source that knows a game is used, and recorded).

    Writes: under --out, one scorecard per policy (scorecard__<policy>.json, the toolkit's scored-summary shape
    plus a `verification` key; byte-identical when re-run), replay_checks.csv, policy_sensitivity.csv (two or
    more policies), figures/ (level-score heatmaps, policy sensitivity) and manifest.json; in the database
    out_arc3__replay_checks, out_arc3__run_scores, out_arc3__level_scores, out_arc3__game_scores and
    out_arc3__policy_sensitivity (rows of this scorecard id replaced), and a row in `runs`.

    A play whose replay diverges is reported with its first divergence and left out of the score unless
    --trust-recordings; a play whose game cannot be loaded is scored unverified, unless no baseline source
    knows the game either (left out, unless --include-unknown-games); a recording whose replay raises has its
    plays left out, with the error as reason. Playback files (action scripts, no engine output) are replayed
    like the official playback agent (make(), then each action) on their game, resolved by its code when the
    version named is absent (or --game-version); without a loadable game they cannot be scored. The replays run
    on --workers processes (or on the cluster at --scheduler); the scorecards do not depend on it. Of two files
    holding the same play (same guid), the first given is scored and the later one rejected, naming the first and
    saying whether they agree (a byte-identical copy is read once). Exit code 3 when plays were left out or
    input lines or files were rejected.
    """
    import duckdb

    from engine.loader import default_environments_dir
    from pipeline.core.manifest import RunManifest
    from pipeline.core.special_files import not_regular_file
    from pipeline.core.workspace import WorkspaceError, default_db_path
    from pipeline.scoring import baseline_sources as bs
    from pipeline.scoring.parallel import read_and_verify
    from pipeline.scoring.plays import (
        RecordingReadError,
        drop_duplicate_plays,
        load_recovered_actions,
        recordings_from_tables,
        replay_scripts,
    )
    from pipeline.scoring.run import ScoreInputError, ScoreRequest, score_recordings
    from pipeline.scoring.storage import read_db_plays, write_score_files, write_score_tables

    try:
        policies = parse_policies(policy)
    except KeyError as err:
        raise fail(str(err.args[0]), EXIT_USAGE) from err
    if not policies:
        raise fail("--policy names no policy", EXIT_USAGE)
    explicit = None
    try:
        explicit = bs.source_from_path(baselines) if baselines is not None else None
        recovered = load_recovered_actions(recovered_actions) if recovered_actions is not None else {}
    except (bs.BaselineSourceError, RecordingReadError) as err:
        raise fail(str(err), EXIT_USAGE) from err
    db_path = db or default_db_path()
    from_files = bool(recordings)
    if from_files and game:
        raise fail("--game selects database plays; give the recordings to score instead", EXIT_USAGE)
    if not from_files and not db_path.exists():
        raise fail(f"database {db_path} does not exist: give recordings to score, or run `arcstudy ingest` "
                       "first (or pass --db)")
    game_dirs = [*(games or []), default_environments_dir()]
    command = command_line(ctx)
    if games:
        from pipeline.core.game_code import announce

        announce(games)
    manifest = RunManifest(command=command, policy_ids=[p.policy_id for p in policies], config={
        "recordings": [str(p) for p in recordings or []], "policy": policy, "baselines": str(baselines)
        if baselines else None, "games": [str(g) for g in games or []], "trust_recordings": trust_recordings,
        "recovered_actions": str(recovered_actions) if recovered_actions else None, "game": game or [],
        "db": str(db_path), "figures": not no_figures, "game_version": game_version, "workers": workers,
        "scheduler": scheduler})
    problems: list[tuple[Path, str]] = []
    with open_workspace(db_path, lock_timeout_s=lock_timeout) as ws:
        if from_files:
            paths = expand_recordings(list(recordings or []))
            if not paths:
                raise fail("no *.jsonl recording found in " + ", ".join(str(p) for p in recordings or []), EXIT_USAGE)
            # A FIFO blocks until a writer comes and /dev/zero never ends: only regular files are read.
            special = [(p, f"{kind}, not a regular file: only regular files are read") for p in paths
                       if (kind := not_regular_file(p)) is not None]
            paths = [p for p in paths if p not in {q for q, _ in special}]
            # Read and replayed at once, on the workers when there are several (scoring/parallel.py).
            steps, plays, files, problems, checks = read_and_verify(paths, game_dirs, recovered, workers=workers,
                                                                    scheduler=scheduler, progress=out.track)
            problems = special + problems
            for p in paths:
                try:
                    manifest.add_input(p)
                except OSError:
                    pass  # a file that cannot be read is among the rejected inputs already
        else:
            steps, plays, files = read_db_plays(ws, game or [])
            checks = None
            digest = _digest(sorted(files))
            manifest.add_input(f"{db_path}#core_arc3__steps", digest)
        replayed = replay_scripts(steps, plays, files, game_dirs, version=game_version)
        problems += [(Path(label), f"not scored: cannot replay the playback script: {reason}")
                     for label, reason in replayed.failed]
        recs = recordings_from_tables(replayed.steps, replayed.plays, replayed.files, recovered, replayed.scripts)
        # Two files of one play: the first given is scored, each later one is rejected input naming it.
        recs, duplicates = drop_duplicate_plays(recs, order=list(replayed.files))
        problems += duplicates
        problems += [(rec.path or Path(rec.label), rec.recovery_error) for rec in recs if rec.recovery_error]
        if checks is not None and duplicates:
            kept = {rec.file_id for rec in recs}
            checks = [c for c in checks if c.file_id in kept]
        if not recs and replayed.failed:
            for label, reason in replayed.failed:
                out.error(f"{label}: cannot replay the playback script: {reason}")
            raise fail("no plays to score: the playback scripts given cannot be replayed", EXIT_REJECTED)
        if not recs and from_files:
            raise fail("no plays to score in the recordings given:\n" + _why_no_plays(problems, files),
                       EXIT_USAGE)
        if not recs and game:
            raise fail(f"no plays of {', '.join(game)} in the database {db_path} (its games: `arcstudy query "
                       f"\"SELECT DISTINCT game_id FROM core_arc3__plays\" --db {db_path}`)")
        if not recs:
            raise fail(f"no plays to score in the database {db_path}: ingest recordings first (`arcstudy ingest "
                       "FILES --db ...`), or give the recordings to score")
        try:  # metadata.json baselines are read here: a value that is not an action count names its file
            sources = [s for s in [explicit, *bs.source_from_db(ws), bs.source_from_games_dirs(game_dirs),
                                   bs.reference_source()] if s is not None]
        except bs.BaselineSourceError as err:
            raise fail(str(err), EXIT_USAGE) from err
        request = ScoreRequest(policies=policies, baseline_sources=sources, game_dirs=game_dirs,
                               trust_recordings=trust_recordings, from_files=from_files,
                               include_unknown_games=include_unknown_games, workers=workers, scheduler=scheduler)
        try:
            result = score_recordings(recs, request, progress=out.track, checks=checks)
        except (ScoreInputError, bs.BaselineSourceError) as err:  # baselines files are read lazily, per rule
            raise fail(str(err), EXIT_USAGE) from err
        out_dir = out_dir or default_out_dir(db_path, result.card_id)
        try:
            written = write_score_files(result, out_dir, figures=not no_figures)
        except OSError as err:  # --out a missing or read-only place, a full disk: said, nothing in the database
            raise fail(f"cannot write the score files under {out_dir}: {err.strerror or err}"
                       + (f" ({err.filename})" if err.filename else "")) from err
        for path in written:
            manifest.add_output(path)
        _add_baseline_inputs(manifest, result)
        try:
            write_score_tables(ws, result)
        except (WorkspaceError, duckdb.Error) as err:
            raise fail(f"cannot write the score tables: {err}") from err
        code = EXIT_REJECTED if (result.excluded or problems) else EXIT_OK
        manifest.notes.update(_notes(result, problems))
        manifest.finish(code)
        ws.record_run(manifest)
    try:
        manifest_path = manifest.write_json(out_dir)
    except OSError as err:
        raise fail(f"cannot write the run manifest under {out_dir}: {err.strerror or err}") from err
    _print_summary(result, problems, out_dir, manifest_path)
    for rec in recs:
        if rec.script is not None:
            out.console.print(f"playback script {rec.label}: {rec.script.describe()}", markup=False)
    raise typer.Exit(code)


def _why_no_plays(problems: list[tuple[Path, str]], files: dict) -> str:
    """One line per file given: why it holds no play to score."""
    lines = [f"  {path}: {reason}" for path, reason in problems]
    lines += [f"  {ref[1] or ref[0]}: no frame line (a recording without steps has nothing to score)"
              for ref in files.values()]
    return "\n".join(lines) or "  (no file was read)"


def _digest(items: list[str]) -> str:
    import hashlib

    return hashlib.sha256("\n".join(items).encode()).hexdigest()


def _add_baseline_inputs(manifest, result) -> None:
    seen = set()
    for pr in result.policies:
        for b in pr.baselines.values():
            if b.location and b.sha256 and (b.location, b.sha256) not in seen:
                seen.add((b.location, b.sha256))
                manifest.add_input(b.location, b.sha256)


def _notes(result, problems) -> dict:
    return {
        "card_id": result.card_id,
        "verification": result.status_counts(),
        "excluded_plays": dict(sorted(result.excluded.items())),
        "rejected_input": [f"{p}: {reason}" for p, reason in problems],
        "scores": {pr.policy.policy_id: pr.scorecard.score for pr in result.policies},
        "baseline_sources": {
            pr.policy.policy_id: {g: {"source": b.source, "location": b.location, "rule": b.rule,
                                      "flags": list(b.flags)} for g, b in sorted(pr.baselines.items())}
            for pr in result.policies
        },
    }


def _plays(n: int) -> str:
    return f"{n} play" if n == 1 else f"{n} plays"


def _fmt(v: float) -> str:
    return f"{v:.3f}"


def _print_summary(result, problems, out_dir: Path, manifest_path: Path) -> None:
    policies = [pr.policy.policy_id for pr in result.policies]
    table = RichTable(title=f"scorecard {result.card_id}")
    for col in ("game", "runs", *policies, "baseline source"):
        table.add_column(col, justify="right" if col in policies or col == "runs" else "left")
    first = result.policies[0]
    for game in first.scorecard.environments:
        scores = [_fmt(pr.scorecard.suite.game_scores[game.game_id]) for pr in result.policies]
        b = first.baselines[game.game_id]
        source = b.source + (f" ({b.rule})" if b.rule else "") + (f" [{', '.join(b.flags)}]" if b.flags else "")
        note = f"  {game.message}" if game.message else ""
        table.add_row(game.game_id, str(len(game.plays)), *scores, source + note)
    table.add_row("total", "", *[_fmt(pr.scorecard.score) for pr in result.policies], "")
    out.console.print(table)
    counts = ", ".join(f"{n} {s}" for s, n in result.status_counts().items())
    out.console.print(f"replay: {_plays(len(result.checks))}: {counts}")
    if result.excluded:
        out.console.print(f"left out of the score: {_plays(len(result.excluded))}")
        details = {c.play_id: c.detail for c in result.checks}
        for pid, reason in list(sorted(result.excluded.items()))[:10]:
            out.console.print(f"  {pid}: {reason}" + (f": {details[pid]}" if details.get(pid) else ""))
        if len(result.excluded) > 10:
            out.console.print(f"  ... and {len(result.excluded) - 10} more (see out_arc3__replay_checks)")
    for path, reason in problems[:10]:
        out.console.print(f"rejected input: {path.name}: {reason}")
    if len(problems) > 10:
        out.console.print(f"... and {len(problems) - 10} more rejected inputs (see manifest.json)")
    out.console.print(f"wrote {out_dir} (manifest: {manifest_path.name})")
