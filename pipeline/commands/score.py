"""`arcstudy score`: RHAE scorecards under versioned policies, each play replay-verified first."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table as RichTable

from pipeline.core.console import out
from pipeline.core.memory import give_back_freed_memory
from pipeline.core.special_files import iter_tree_files
from pipeline.scoring.policies import DEFAULT_POLICY_ID, POLICIES, ScoringPolicy, get_policy

from .common import (
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    SCORES,
    DbOption,
    GameVersionOption,
    LockTimeoutOption,
    RawCsvOption,
    SchedulerOption,
    WorkersOption,
    beside_database,
    command_line,
    fail,
    open_workspace,
    refuse_overwriting_database,
)


def default_out_dir(db_path: Path, card_id: str) -> Path:
    """Scorecards, CSVs, figures and manifest live beside the database: `<db>.score/<card_id>/`."""
    return beside_database(db_path, SCORES) / card_id


def parse_policies(value: str) -> list[ScoringPolicy]:
    """--policy's ids (or `all`), each once, in the order given: a policy named twice is scored once (twice, its
    rows collided in the score tables after all the work, exit 1)."""
    if value.strip() == "all":
        return list(POLICIES.values())
    return [get_policy(v) for v in dict.fromkeys(v.strip() for v in value.split(",") if v.strip())]


def expand_recordings(paths: list[Path]) -> list[Path]:
    """`iter_recordings`, as a list of paths."""
    return [Path(p) for p in iter_recordings(paths)]


def iter_recordings(paths: Iterable[Path]) -> Iterator[str]:
    """Files as given; folders searched recursively for `*.jsonl`, in sorted order; each file once (by its real
    path). A `*.jsonl` that is not a regular file (a FIFO, a dangling symlink, a symlink loop) is kept, so that
    it is reported as rejected input rather than vanishing silently. Lazy: what it keeps per file is a 16-byte
    digest of the real path (a flood of files is a flood of paths; a set of the paths took about 150 bytes a
    file more)."""
    seen: set[bytes] = set()
    for p in paths:
        for name in (q for q in iter_tree_files(p) if q.endswith(".jsonl")) if p.is_dir() else [str(p)]:
            key = hashlib.blake2b(os.fsencode(os.path.realpath(name)), digest_size=16).digest()  # (never raises on
            if key not in seen:  # a symlink loop, as Path.resolve does)
                seen.add(key)
                yield name


def score_command(
    ctx: typer.Context,
    recordings: Annotated[list[Path] | None, typer.Argument(
        help="Recording files (JSONL), scorecard files (JSON: official or arcstudy scorecards, card wrappers, "
             "bare cards; scored summary only, not replay-verified) or folders searched for *.jsonl. Without any, "
             "the plays and scorecard runs already in the database are scored.", exists=True,
        show_default=False)] = None,
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
    recover_actions: Annotated[bool, typer.Option("--recover-actions", help="Recover the actions of recordings "
                                                  "whose action ids were lost (action_ids_lost) from their frames, "
                                                  "as `arcstudy recover-actions` does, then verify and score them "
                                                  "(database plays: from their stored frame hashes; "
                                                  "--recovered-actions given for a file wins).")] = False,
    game: Annotated[list[str] | None, typer.Option("--game", help="Database plays: only this game id "
                                                   "(repeatable).", show_default=False)] = None,
    include_unknown_games: Annotated[bool, typer.Option("--include-unknown-games", help="Score plays of a game that "
                                                 "has no game files under --games and no baseline anywhere "
                                                 "(left out by default: most likely a wrong folder or a "
                                                 "mistyped game id).")] = False,
    no_figures: Annotated[bool, typer.Option("--no-figures", help="Skip the figures.")] = False,
    competition: Annotated[bool, typer.Option("--competition", help="Competition mode (the toolkit's COMPETITION "
                                              "rules, policies that define it): every environment of the --games "
                                              "folders is in the mean, an unplayed one scores 0; game resets count "
                                              "as level resets; a second play of one environment is left out.")
                           ] = False,
    compare_with: Annotated[Path | None, typer.Option("--compare-with", help="A scorecard to explain the score "
                                                      "against (an official card, e.g. Kaggle's, or an earlier "
                                                      "arcstudy scorecard): the difference broken down per "
                                                      "environment and level into its causes (compare.md, "
                                                      "compare.csv).", exists=True, dir_okay=False,
                                                      show_default=False)] = None,
    no_card_baselines: Annotated[bool, typer.Option("--no-card-baselines", help="Scorecard runs: ignore the "
                                                    "cards' own level_baseline_actions and take each game's "
                                                    "baseline from the sources recordings use (--baselines, the "
                                                    "database, --games, the published baselines), under each "
                                                    "policy's rule.")] = False,
    game_version: GameVersionOption = None,
    lock_timeout: LockTimeoutOption = 30.0,
    workers: WorkersOption = None,
    scheduler: SchedulerOption = None,
    raw_csv: RawCsvOption = False,
) -> None:
    """Score plays with RHAE under versioned policies, each play replay-verified through the engine first.

    Reads: the recordings and scorecards given (nothing is ingested), or without any the plays and scorecard runs
    in the database (core_arc3__plays, core_arc3__steps, core_arc3__scorecard_runs, core_arc3__card_plays of card
    files, raw_ingest__files); the game files of --games (replay; the checkout's games/ only when no --games is
    given) and the baselines: --baselines DIR|CSV, else the database (out_arc3__level_baselines under the
    policy's rule when a study was built, else core_arc3__environments), else --games metadata, else the
    published reference baselines shipped in pipeline/scoring/reference/ (the first source that knows a game is
    used, and recorded). A scorecard's runs use the card's own level_baseline_actions unless --baselines or
    --games know the game or --no-card-baselines is given (said when the card was scored under a policy of
    another baseline rule); the runs are scored from their per-level actions and marked summary only (not
    replay-verified), and each value the card states is compared with the recomputed one. A --baselines that has
    no baseline for a scored game is said, per game.

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
    saying whether they agree (a byte-identical copy is read once). Without --db (or $ARCSTUDY_DB), scoring
    files keeps no database: a temporary workspace is removed at the end and the files go to --out, else
    ./arcstudy-score/<card_id>/; the last line names everything written. --competition: every environment of the
    --games folders is in the mean (unplayed: 0), game resets count as level resets, one play per environment.
    --compare-with CARD: compare.md and compare.csv break the difference of the totals down into causes. Exit code
    3 when plays were left out, input lines or files were rejected, or nothing could be replay-verified.

    The --out folder is replaced as a whole once everything is written (a failure or Ctrl-C leaves the previous
    one as it was); CSV text cells that a spreadsheet would run as a formula get a leading ' unless --raw-csv.
    """
    import contextlib
    import json
    import tempfile

    import duckdb

    from engine.loader import default_environments_dir, find_games
    from pipeline.core.manifest import RunManifest
    from pipeline.core.outputs import named, output_folder, public_path
    from pipeline.core.outputs import raw_csv as csv_as_is
    from pipeline.core.special_files import not_regular_file
    from pipeline.core.workspace import WorkspaceError, default_db_path
    from pipeline.scoring import baseline_sources as bs
    from pipeline.scoring.card_input import (
        CardInputs,
        card_baseline_source,
        card_recordings,
        is_scorecard_file,
        read_card_files,
        read_db_cards,
    )
    from pipeline.scoring.parallel import open_read_executor, read_and_verify
    from pipeline.scoring.plays import (
        RecordingReadError,
        drop_duplicate_plays,
        load_recovered_actions,
        recordings_from_tables,
        recount_for_competition,
        replay_scripts,
        unmatched_reason,
        unmatched_recovered,
    )
    from pipeline.scoring.run import ScoreInputError, ScoreRequest, score_recordings
    from pipeline.scoring.storage import (
        clear_score_files,
        read_db_plays,
        write_score_files,
        write_score_tables,
    )

    try:
        policies = parse_policies(policy)
    except KeyError as err:
        raise fail(str(err.args[0]), EXIT_USAGE) from err
    if not policies:
        raise fail("--policy names no policy", EXIT_USAGE)
    if competition:
        refusing = [p.policy_id for p in policies if p.unplayed_games != "excluded-except-competition-mode-zero"]
        if refusing:
            raise fail(f"--competition: policy {', '.join(refusing)} defines no competition mode (only "
                       f"{', '.join(p.policy_id for p in POLICIES.values() if p.unplayed_games != 'excluded')} "
                       "does)", EXIT_USAGE)
        if not games:
            raise fail("--competition needs --games: the environment set is every environment of those folders",
                       EXIT_USAGE)
    explicit = None
    compare_doc = None
    compare_runs = None  # --compare-with a card wrapper or bare card: its runs, scored here like ours
    try:
        explicit = bs.source_from_path(baselines) if baselines is not None else None
        recovered = load_recovered_actions(recovered_actions) if recovered_actions is not None else {}
    except (bs.BaselineSourceError, RecordingReadError) as err:
        raise fail(str(err), EXIT_USAGE) from err
    if compare_with is not None:
        from pipeline.scoring.compare import CompareError, read_comparison_card

        try:
            compare_doc = read_comparison_card(compare_with)
        except CompareError as err:
            found = read_card_files([compare_with]) if is_scorecard_file(compare_with) else None
            if found is not None and found.problems:  # a card wrapper or bare card, refused: say why
                why = "; ".join(problem for _, problem in found.problems)
                raise fail(f"--compare-with {compare_with}: {why}", EXIT_USAGE) from err
            if found is None or not found.runs:
                raise fail(f"--compare-with {compare_with}: {err}", EXIT_USAGE) from err
            compare_runs = found.runs
    from_files = bool(recordings)
    if from_files and game:
        raise fail("--game selects database plays; give the recordings to score instead", EXIT_USAGE)
    # Without --db (and without $ARCSTUDY_DB), scoring files needs no database the user keeps: a temporary
    # workspace holds the tables and is removed at the end; the files go to --out or ./arcstudy-score/<card>/.
    temporary = None
    if db is None and not (os.environ.get("ARCSTUDY_DB") or "").strip() and from_files:
        temporary = tempfile.TemporaryDirectory(prefix="arcstudy-score-")
        db_path = Path(temporary.name) / "score.duckdb"
    else:
        db_path = db or default_db_path()
    if temporary is None:
        refuse_overwriting_database(out_dir, db_path)
    if not from_files and not db_path.exists():
        raise fail(f"database {db_path} does not exist: give recordings to score, or run `arcstudy ingest` "
                       "first (or pass --db)")
    # The checkout's games/ is searched only when no --games is given (a wrong --games must not verify against it).
    game_dirs = list(games) if games else [default_environments_dir()]
    games_note = (f"games: {', '.join(str(g) for g in games)}" if games else
                  f"games: none given (--games): the checkout's {default_environments_dir()} was searched")
    environments = sorted({info.game_id for info in find_games(list(games or []))}) if competition else []
    if competition and not environments:
        raise fail(f"--competition: no game under {', '.join(str(g) for g in games or [])}", EXIT_USAGE)
    command = command_line(ctx)
    if games:
        from pipeline.core.game_code import announce

        announce(games)
    manifest = RunManifest(command=command, policy_ids=[p.policy_id for p in policies], config={
        "recordings": [str(p) for p in recordings or []], "policy": policy, "baselines": str(baselines)
        if baselines else None, "games": [str(g) for g in games or []], "trust_recordings": trust_recordings,
        "recovered_actions": str(recovered_actions) if recovered_actions else None, "game": game or [],
        "recover_actions": recover_actions,
        "db": None if temporary else str(db_path), "figures": not no_figures, "game_version": game_version,
        "workers": workers, "scheduler": scheduler, "competition": competition,
        **({"no_card_baselines": True} if no_card_baselines else {}),
        "compare_with": str(compare_with) if compare_with else None})
    problems: list[tuple[Path, str]] = []
    cards_found = CardInputs()
    # A temporary workspace (score FILES without --db) is removed when the workspace is closed.
    paths: list[Path] = []
    card_paths: list[Path] = []
    special: list[tuple[Path, str]] = []
    if from_files:
        given = list(recordings or [])
        card_paths = [p for p in given if not p.is_dir() and not_regular_file(p) is None and is_scorecard_file(p)]
        paths = expand_recordings([p for p in given if p not in card_paths])
        if not paths and not card_paths:
            raise fail("no *.jsonl recording found in " + ", ".join(str(p) for p in recordings or []), EXIT_USAGE)
        # A FIFO blocks until a writer comes and /dev/zero never ends: only regular files are read.
        special = [(p, f"{kind}, not a regular file: only regular files are read") for p in paths
                   if (kind := not_regular_file(p)) is not None]
        paths = [p for p in paths if p not in {q for q, _ in special}]
    # The workers (when there are several) start now, while the workspace opens (scoring/parallel.py).
    with temporary or contextlib.nullcontext(), open_read_executor(paths, workers, scheduler) as executor, \
            open_workspace(db_path, lock_timeout_s=lock_timeout) as ws:
        if from_files:
            if recover_actions:  # lost action ids searched for from the frames (pipeline/explore/recover.py)
                from pipeline.explore.recover import recover_lost_actions

                recovered, unrecovered = recover_lost_actions(paths, game_dirs, recovered, workers=workers,
                                                              scheduler=scheduler, progress=out.track)
                special += unrecovered
            # Read and replayed at once, on the workers when there are several (scoring/parallel.py).
            steps, plays, files, problems, checks = read_and_verify(paths, game_dirs, recovered, executor=executor,
                                                                    progress=out.track)
            problems = special + problems
            if recovered:  # said, not ignored: the file's plays would stay uncounted without a word
                problems += [(recovered_actions, unmatched_reason(key)) for key in unmatched_recovered(
                    recovered, (name for name, _ in files.values()), plays["guid"].to_list(), files)]
            cards_found = read_card_files(card_paths)
            problems += cards_found.problems
            # A file read is hashed as it is read (its file_id): its digest is that of the bytes scored.
            read_digests = {str(ref[1]): fid for fid, ref in files.items() if ref[1] is not None}
            for p in [*paths, *card_paths]:
                try:
                    manifest.add_input(p, read_digests.get(os.path.realpath(p)))  # a symlink loop: no error
                except OSError:
                    pass  # a file that cannot be read is among the rejected inputs already
        else:
            steps, plays, files = read_db_plays(ws, game or [])
            if recover_actions:  # from the stored steps: frames compared by sha256 (pipeline/explore/recover.py)
                from pipeline.explore.recover import recover_lost_stored_actions

                recovered, problems = recover_lost_stored_actions(steps, plays, files, game_dirs, recovered,
                                                                  workers=workers, scheduler=scheduler,
                                                                  progress=out.track)
            checks = None
            cards_found = read_db_cards(ws)
            if game:
                cards_found.runs = [r for r in cards_found.runs if r.game_id in set(game)]
            problems += cards_found.problems
            digest = _digest(sorted(files) + sorted(cards_found.files))
            manifest.add_input(f"{db_path}#core_arc3__steps", digest)
        replayed = replay_scripts(steps, plays, files, game_dirs, version=game_version)
        del steps  # (a script's rows, every column: its replay's rows replace them; 0.26 KB a step held to the end)
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
        if competition:  # counted by the competition rules; the first given of an environment is its play
            rank = {fid: i for i, fid in enumerate(replayed.files)}
            recs = sorted(recount_for_competition(recs), key=lambda r: rank.get(r.file_id, len(rank)))
        card_runs, same_play, recorded = _cards_without_recorded_plays(cards_found.runs, recs)
        problems += same_play
        card_levels = _card_game_levels(card_runs, recs, game_dirs)
        recs = recs + card_recordings(card_runs)
        if not recs and replayed.failed:
            for label, reason in replayed.failed:
                out.error(f"{label}: cannot replay the playback script: {reason}")
            raise fail("no plays to score: the playback scripts given cannot be replayed", EXIT_REJECTED)
        if not recs and from_files:
            code = EXIT_REJECTED if cards_found.problems else EXIT_USAGE
            what = "files" if cards_found.files or cards_found.problems else "recordings"
            raise fail(f"no plays to score in the {what} given:\n" + _why_no_plays(problems, files), code)
        if not recs and game:
            raise fail(f"no plays of {', '.join(game)} in the database {db_path} (its games: `arcstudy query "
                       f"\"SELECT DISTINCT game_id FROM core_arc3__plays\" --db {db_path}`)")
        if not recs and cards_found.problems:  # card runs stored but refused (e.g. a 2025 preview card)
            raise fail(f"no plays to score in the database {db_path}:\n" + _why_no_plays(cards_found.problems, {}),
                       EXIT_REJECTED)
        if not recs:
            raise fail(f"no plays to score in the database {db_path}: ingest recordings or scorecards first "
                       "(`arcstudy ingest FILES --db ...`), or give the files to score")
        try:  # metadata.json baselines are read here: a value that is not an action count names its file
            # Recordings: --baselines, the database, --games (else the checkout's games/), the reference.
            # Scorecard runs: --baselines or --games give other baselines than the card's own.
            games_source = bs.source_from_games_dirs(game_dirs)
            card_games_first = _only_games(games_source, {r.game_id for r in card_runs}) if games else None
            card_source = None if no_card_baselines else card_baseline_source(card_runs)
            sources = [s for s in [explicit, card_games_first, card_source,
                                   *bs.source_from_db(ws), games_source, bs.reference_source()] if s is not None]
        except bs.BaselineSourceError as err:
            raise fail(str(err), EXIT_USAGE) from err
        request = ScoreRequest(policies=policies, baseline_sources=sources, game_dirs=game_dirs,
                               trust_recordings=trust_recordings, from_files=from_files,
                               include_unknown_games=include_unknown_games, workers=workers,
                               scheduler=scheduler, competition_mode=competition, environments=environments,
                               card_runs=card_runs, level_counts=card_levels)
        try:
            result = score_recordings(recs, request, progress=out.track, checks=checks)
        except (ScoreInputError, bs.BaselineSourceError) as err:  # baselines files are read lazily, per rule
            raise fail(str(err), EXIT_USAGE) from err
        # The recordings (every step of every file) are let go before the files and tables are written, which
        # need only the result: their memory is reused there rather than added to (a 2,000,000-step file's
        # steps are a few hundred MB).
        scripts_replayed = [(rec.label, rec.script.describe()) for rec in recs if rec.script is not None]
        del recs, replayed
        give_back_freed_memory()
        out_dir = out_dir or (default_out_dir(db_path, result.card_id) if temporary is None
                              else Path("arcstudy-score") / result.card_id)
        # The folder is written whole (pipeline.core.outputs): files that cannot be written (a missing or
        # read-only place, a full disk) end the command in one line, nothing in the database, the old folder kept.
        with named("--out"), output_folder(out_dir) as stage, csv_as_is(raw_csv):
            clear_score_files(stage)  # an earlier run's scorecards and comparison would read as this run's
            written = write_score_files(result, stage, figures=not no_figures)
            if compare_runs is not None:  # cards without scores: scored here under our first policy
                other = score_recordings(card_recordings(compare_runs), ScoreRequest(
                    policies=policies[:1], baseline_sources=sources, card_runs=compare_runs,
                    include_unknown_games=True))
                compare_doc = json.loads(other.policies[0].scorecard_json)
            if compare_doc is not None:
                from pipeline.scoring.compare import compare_scorecards, write_comparison

                label = compare_with.name + (" (its cards scored here)" if compare_runs is not None else "")
                comparison = compare_scorecards(compare_doc, _policy_to_compare(result, compare_doc),
                                                other_label=label)
                written += write_comparison(comparison, stage)
            result.let_go_of_scorecard_texts()  # written and compared (a flood of plays: 100 MB or more each)
            give_back_freed_memory()
            for path in written:
                manifest.add_output(path)
            _add_baseline_inputs(manifest, result)
            try:
                write_score_tables(ws, result)
            except (WorkspaceError, duckdb.Error) as err:
                raise fail(f"cannot write the score tables: {err}") from err
            nothing_verified = bool(result.checks) and not any(
                c.status in ("verified", "divergent", "summary_only") for c in result.checks)
            code = EXIT_REJECTED if (result.excluded or result.policy_excluded or problems or nothing_verified) \
                else EXIT_OK
            manifest.notes.update(_notes(result))
            manifest.notes.update(manifest.listed_problems("rejected_input", (f"{p}: {reason}" for p, reason in problems),
                                                           stage / "rejected_input.jsonl"))
            manifest.finish(code)
            ws.record_run(manifest)
            manifest_path = public_path(manifest.write_json(stage))
            written = [public_path(path) for path in written]  # where they are once the folder is swapped in
    out.console.print(games_note, markup=False, soft_wrap=True)
    _print_summary(result, problems, out_dir, manifest_path)
    if explicit is not None:
        _print_baselines_not_covering(explicit, baselines, result)
    _print_recorded_card_runs(recorded, result)
    _print_card_baselines_of_other_rule(card_runs, result, sources)
    if compare_doc is not None:
        out.console.print(comparison.summary_text(), markup=False, soft_wrap=True)
    for label, how in scripts_replayed:
        out.console.print(f"playback script {label}: {how}", markup=False, soft_wrap=True)
    if nothing_verified:
        out.console.print("nothing could be verified: no play replayed through the engine (see the reasons above)",
                          markup=False, soft_wrap=True)
    _print_written(written, manifest_path, out_dir, None if temporary else db_path)
    raise typer.Exit(code)


def _only_games(source, game_ids: set[str]):
    """``source`` restricted to ``game_ids`` (None when there are none)."""
    if source is None or not game_ids:
        return None
    from pipeline.scoring.baseline_sources import BaselineSource

    return BaselineSource(source.kind, source.location, source.sha256,
                          lambda rule: {g: v for g, v in source.games(rule).items() if g in game_ids})


def _policy_to_compare(result, doc: dict) -> str:
    """The scorecard to compare with ``doc``: the one under the card's own policy when it was scored (a toolkit card
    names none: the current toolkit's), else the first."""
    wanted = doc.get("scoring_policy") or DEFAULT_POLICY_ID
    for pr in result.policies:
        if pr.policy.policy_id == wanted:
            return pr.scorecard_json
    return result.policies[0].scorecard_json


def _card_game_levels(card_runs, recs, game_dirs: list[Path]) -> dict[str, int]:
    """The number of levels of each card run's game where nothing given says it (no recording given plays the game:
    its steps say it; no scored summary states it: its runs' levels). A card slot states none, and a baseline of
    another length is flagged by it (formats.md B). The shipped and published games' counts are known without
    running anything (`baseline_sources.known_level_counts`); any other game that loads from the game folders is
    counted by the engine, its code run in the sandbox as for a replay (about half a second a game). A game that
    cannot be loaded or started gives none (its card runs are scored as they are, summary only)."""
    from engine.loader import GameNotFoundError, find_games, resolve_game
    from pipeline.core.game_code import GameCodeError, SandboxFailure
    from pipeline.explore.confined import levels_in_sandbox
    from pipeline.scoring.baseline_sources import known_level_counts

    said = {rec.game_id for rec in recs} | {run.game_id for run in card_runs if run.stated_level_count is not None}
    games = {run.game_id for run in card_runs} - said
    known = known_level_counts() if games else {}
    counts: dict[str, int] = {g: known[g] for g in games if g in known}
    wanted = sorted((games - set(counts)) & {info.game_id for info in find_games(game_dirs)}) if games else []
    for game_id in out.track(wanted, "counting the levels of the cards' games") if len(wanted) > 1 else wanted:
        try:
            counts[game_id] = levels_in_sandbox(resolve_game(game_id, game_dirs, loadable=True), "frame")
        except (GameNotFoundError, GameCodeError, SandboxFailure):
            continue
    return counts


def _cards_without_recorded_plays(runs, recs) -> tuple[list, list[tuple[Path, str]], list]:
    """Card runs, without those whose guid is a recording's given too (the recording is scored instead: returned
    as (card run, recording) pairs, said once scored with what became of the play, not an error) and without a
    second card's statement of a run already given (same guid and counts, rejected input naming the first
    card)."""
    by_guid = {rec.guid: rec for rec in recs if rec.guid}
    kept, problems, seen, recorded = [], [], {}, []
    for run in runs:
        guid = run.play.guid
        where = run.path or Path(run.file_name)
        if guid and guid in by_guid:  # not an error: the recording is the better evidence of the same play
            recorded.append((run, by_guid[guid]))
            continue
        key = (run.game_id, guid, run.run_index, run.play)
        if guid and key in seen:
            problems.append((where, f"card run {run.game_id} run {run.run_index} (guid {guid}) left out: the same "
                                    f"run as in {seen[key]} (read once)"))
            continue
        seen[key] = run.file_name
        kept.append(run)
    return kept, problems, recorded


def _recording_outcome(rec, result) -> str:
    """What scoring did with the plays of recording ``rec``: replay-verified, unverified and why, divergent and
    scored anyway, or left out and why (each distinct outcome of its plays, in order)."""
    checks = {c.play_id: c for c in result.checks}
    said: list[str] = []
    for pid in rec.play_ids:
        left_out = result.excluded.get(pid)
        under = [policy_id for policy_id, here in sorted(result.policy_excluded.items()) if pid in here]
        c = checks.get(pid)
        if left_out:
            what = f"left out of the score: {_reason_group(left_out)}"
        elif c is None:
            what = "scored"
        elif c.status == "verified":
            what = "replay-verified"
        elif c.status == "unverified":
            what = f"scored unverified ({c.detail or 'game not loadable'})"
        elif c.status == "divergent":
            what = "its replay diverged, scored anyway (--trust-recordings)"
        else:
            what = f"scored ({c.status.replace('_', ' ')})"
        if under and not left_out:
            what += f", left out under {', '.join(under)}"
        if what not in said:
            said.append(what)
    return "; ".join(said) or "scored"


def _print_baselines_not_covering(explicit, given: Path, result, limit: int = 10) -> None:
    """--baselines given, yet a scored game is not in it: one line per game (the versions of its game code that
    the folder or CSV has, and the source used instead), and one more when it covers none of the scored games.
    Not an error: the next source that knows the game is used, as documented."""
    from pipeline.scoring import baseline_sources as bs

    used: dict[str, dict[str, str]] = {}  # game -> policy -> the source used instead
    versions: dict[str, list[str]] = {}
    scored: set[str] = set()
    for pr in result.policies:
        scored |= set(pr.baselines)
        for g, others in bs.not_covered(explicit, pr.baselines, pr.policy.baseline_rule).items():
            b = pr.baselines[g]
            used.setdefault(g, {})[pr.policy.policy_id] = (
                "no other source knows it either (not scored)" if b.source == "none"
                else f"scored against {_source_label(b)} instead")
            versions.setdefault(g, others)
    if not used:
        return
    listed = sorted({g for pr in result.policies for g in explicit.games(pr.policy.baseline_rule)})
    if set(used) == scored:
        shown = ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
        which = "the game scored" if len(scored) == 1 else f"any of the {len(scored)} games scored"
        has = f"it has {_plural(len(listed), 'game')}: {shown}" if listed else "it has no game"
        out.console.print(f"--baselines {given}: no baseline for {which} ({has}), so it was not used: give "
                          "baselines for the versions scored", markup=False, soft_wrap=True)
    for g in sorted(used)[:limit]:
        code = g.split("-", 1)[0]
        has = f"it has {', '.join(versions[g])}" if versions[g] else f"nor any other {code} version"
        outcomes = used[g]
        if len(set(outcomes.values())) == 1 and len(outcomes) == len(result.policies):
            how = next(iter(outcomes.values()))
        else:
            how = ", ".join(f"under {pid}: {what}" for pid, what in outcomes.items())
        out.console.print(f"--baselines {given}: no baseline for {g} ({has}); {how}", markup=False, soft_wrap=True)
    if len(used) > limit:
        out.console.print(f"--baselines {given}: ... and {len(used) - limit} more games it has no baseline for "
                          "(baseline_sources in the scorecard's verification)", markup=False, soft_wrap=True)


def _print_card_baselines_of_other_rule(card_runs, result, sources, limit: int = 3) -> None:
    """A card's own baselines used under a policy whose baseline rule is not the one the card was scored under (the
    card names its policy): one line per policy and card, with the games whose score that changes and what
    --no-card-baselines would score them against."""
    from pipeline.scoring import baseline_sources as bs

    first_stated: dict[str, object] = {}  # game -> the card run whose baselines the card source took (the first)
    for run in card_runs:
        if run.stated is not None and run.stated.level_baseline_actions is not None:
            first_stated.setdefault(run.game_id, run)
    others = [s for s in sources if s.kind != "scorecard"]
    for pr in result.policies:
        rule = pr.policy.baseline_rule
        groups: dict[tuple[str, str], list[str]] = {}  # (card file, its policy) -> games
        instead: dict[tuple[str, str], set[str]] = {}
        for g, b in sorted(pr.baselines.items()):
            run = first_stated.get(g)
            if b.source != "scorecard" or run is None or run.stated.policy_assumed:
                continue
            stated = POLICIES.get(run.stated.policy_id)
            if stated is None or stated.baseline_rule == rule:
                continue
            alt = bs.resolve_baselines([g], pr.policy, others)[g]
            if alt.baseline_actions is not None and alt.baseline_actions == b.baseline_actions:
                continue  # the same values either way: nothing to change
            key = (run.file_name, stated.policy_id)
            groups.setdefault(key, []).append(g)
            instead.setdefault(key, set()).add(_source_label(alt) if alt.source != "none" else "")
        for (name, stated_id), games in groups.items():
            shown = ", ".join(games[:limit]) + (f" and {len(games) - limit} more" if len(games) > limit else "")
            labels = sorted(x for x in instead[(name, stated_id)] if x)
            them = "it" if len(games) == 1 else "them"
            if not labels:
                how = f"no other source knows {them}: give their {rule} baselines with --baselines DIR|CSV"
            else:
                unknown = " (some: no other source knows them)" if "" in instead[(name, stated_id)] else ""
                how = f"pass --no-card-baselines to score {them} against {', '.join(labels)}{unknown}"
            out.console.print(f"{pr.policy.policy_id}: {shown} scored against the baselines of {name}, made under "
                              f"{stated_id} (rule {POLICIES[stated_id].baseline_rule}, not {rule}); {how}",
                              markup=False, soft_wrap=True)


def _plural(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _print_recorded_card_runs(recorded, result) -> None:
    """Card runs given with their recording (same guid): one line per outcome of the recording's play, naming
    the first such card run and how many more had that outcome."""
    by_outcome: dict[str, list[str]] = {}
    for run, rec in recorded:
        by_outcome.setdefault(_recording_outcome(rec, result), []).append(
            f"{run.file_name}: card run {run.game_id} run {run.run_index} (guid {run.play.guid}) is the play of the "
            f"recording {rec.label}, which is used instead of the card")
    for outcome, runs in by_outcome.items():
        more = f" (so are {len(runs) - 1} more card runs)" if len(runs) > 1 else ""
        out.console.print(f"{runs[0]}{more}: {outcome}", markup=False, soft_wrap=True)


def _print_written(written: list[Path], manifest_path: Path, out_dir: Path, db_path: Path | None) -> None:
    """The last line: everything this run wrote."""
    top = out_dir.absolute()
    paths = [Path(p).absolute() for p in [*written, manifest_path]]
    names = sorted({p.name for p in paths if p.parent == top})
    figures = sum(1 for p in paths if p.parent != top)
    what = ", ".join(names) + (f", figures/ ({figures} files)" if figures else "")
    where = (f"; database {db_path} (out_arc3__* score tables)" if db_path is not None
             else "; no database kept (pass --db to keep the out_arc3__* tables)")
    out.console.print(f"wrote {out_dir}/: {what}{where}", markup=False, soft_wrap=True)


LISTED_REASONS = 50  # reasons an error message lists (a flood of bad lines has millions)


def _why_no_plays(problems: list[tuple[Path, str]], files: dict) -> str:
    """One line per file given: why it holds no play to score."""
    lines = [f"  {path}: {reason}" for path, reason in problems[:LISTED_REASONS]]
    if len(problems) > LISTED_REASONS:
        lines.append(f"  ... and {len(problems) - LISTED_REASONS:,} more")
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


def _notes(result) -> dict:
    return {
        "card_id": result.card_id,
        "verification": result.status_counts(),
        "excluded_plays": dict(sorted(result.excluded.items())),
        **({"excluded_plays_by_policy": {p: dict(sorted(e.items())) for p, e in sorted(result.policy_excluded.items())}}
           if result.policy_excluded else {}),
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


def _source_label(b) -> str:
    """The baseline source as the table shows it (the console prints text as written: no markup to escape)."""
    where = ""
    if b.source == "scorecard" and b.location:  # which card's own level_baseline_actions
        where = " " + (b.location if len(b.location) <= 40 else b.location[:37] + "...")
    return (b.source + where + (f" ({b.rule})" if b.rule else "")
            + (f" [{', '.join(b.flags)}]" if b.flags else ""))


def _game_message(pr, game_id: str) -> str | None:
    """The toolkit's message for ``game_id`` on this policy's scorecard (None: scored, or not on it)."""
    game = next((g for g in pr.scorecard.environments if g.game_id == game_id), None)
    return game.message if game is not None and game.message else None


def _print_summary(result, problems, out_dir: Path, manifest_path: Path) -> None:
    policies = [pr.policy.policy_id for pr in result.policies]
    table = RichTable(title=f"scorecard {result.card_id}" + (" (competition mode)" if result.competition else ""))
    # The baseline source is each policy's: policies with different baseline rules may resolve differently.
    sources_differ = len({tuple(_source_label(b) for _, b in sorted(pr.baselines.items()))
                          for pr in result.policies}) > 1
    source_cols = [f"baseline source {pid}" for pid in policies] if sources_differ else ["baseline source"]
    for col in ("game", "runs", *policies, *source_cols):
        table.add_column(col, justify="right" if col in policies or col == "runs" else "left")
    first = result.policies[0]
    seen_games: dict = {}  # a game whose plays one policy left out is missing from that policy's card
    for pr in result.policies:
        for game in pr.scorecard.environments:
            seen_games.setdefault(game.game_id, game)
    for game in seen_games.values():
        scores = [_fmt(pr.scorecard.suite.game_scores[game.game_id]) if game.game_id in pr.baselines
                  else "left out" for pr in result.policies]
        labels = [_source_label(pr.baselines[game.game_id]) if game.game_id in pr.baselines else "-"
                  for pr in (result.policies if sources_differ else [first])]
        # Each policy's own outcome: its message in its own column (with one shared column, named by policy
        # when the policies' messages differ).
        messages = [_game_message(pr, game.game_id) for pr in result.policies]
        if sources_differ:
            labels = [label + (f"  {m}" if m else "") for label, m in zip(labels, messages, strict=True)]
        elif len(set(messages)) == 1:
            labels[-1] += f"  {messages[0]}" if messages[0] else ""
        else:
            labels[-1] += "".join(f"  {pid}: {m}" for pid, m in zip(policies, messages, strict=True) if m)
        runs = "0 (unplayed)" if game.plays and all(p.guid is None and p.actions == 0 for p in game.plays) \
            and result.competition and game.game_id in result.competition["unplayed"] else str(len(game.plays))
        table.add_row(game.game_id, runs, *scores, *labels)
    # no environment: every play was left out (the reasons follow), and the toolkit's 0.0 of an empty card is no score
    table.add_row("total", "", *[_fmt(pr.scorecard.score) if pr.scorecard.environments else "nothing scored"
                                 for pr in result.policies], *["" for _ in source_cols])
    out.console.print(table)
    counts = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in result.status_counts().items())
    out.console.print(f"replay: {_plays(len(result.checks))}: {counts}", markup=False, soft_wrap=True)
    n_cards = result.status_counts().get("summary_only", 0)
    if n_cards:
        out.console.print(f"scorecard runs: {_plays(n_cards)} summary only: not replay-verified (scored from the "
                          "cards' per-level actions)", markup=False, soft_wrap=True)
    if result.competition:
        comp = result.competition
        idle = [g for g in comp["played"] if g in seen_games and seen_games[g].plays
                and all(p.actions == 0 for p in seen_games[g].plays)]  # opened, never acted in (the toolkit's close)
        played = f"{len(comp['played']) - len(idle)} played" + (f", {len(idle)} opened without an action (score 0)"
                                                                 if idle else "")
        out.console.print(f"competition mode: {comp['n_environments']} environments in the set, {played}, "
                          f"{len(comp['unplayed'])} unplayed (score 0)", markup=False, soft_wrap=True)
        for g, pids in comp["outside_set"].items():
            out.console.print(f"  played but not in the environment set: {g} ({_plays(len(pids))}, left out)",
                              markup=False, soft_wrap=True)
    if result.excluded:
        out.console.print(f"left out of the score: {_plays(len(result.excluded))}", markup=False, soft_wrap=True)
    for pid, here in sorted(result.policy_excluded.items()):
        out.console.print(f"left out of the score under {pid}: {_plays(len(here))}", markup=False, soft_wrap=True)
    _print_grouped_reasons(result)
    from pipeline.core.manifest import LISTED_ON_SCREEN, unlisted_note

    for path, reason in problems[:LISTED_ON_SCREEN]:
        out.console.print(f"rejected input: {path.name}: {reason}", markup=False, soft_wrap=True)
    if (more := unlisted_note(len(problems), "rejected inputs", "rejected_input.jsonl")) is not None:
        out.console.print(more, markup=False, soft_wrap=True)
    _print_card_differences(result)


def _reason_group(reason: str) -> str:
    """The reason without what is particular to one play (a divergence's line, a game id), for grouping."""
    if reason.startswith("replay diverged"):
        return "replay diverged (pass --trust-recordings to score it anyway)"
    if reason.startswith("2025 preview recording"):
        return ("2025 preview recording: scored only under arc-agi-3/2025-preview, its game has no baseline from a "
                "later snapshot (formats.md A.4; give one with --baselines CSV: game_id, baseline_actions, snapshot)")
    if reason.startswith("competition mode: a second play"):
        return ("competition mode: a second play opened by a game reset (the competition server never resets a "
                "game)" if "game reset" in reason else
                "competition mode: a second play of an environment (`make` is called once per environment)")
    if reason.startswith("competition mode:") and "not in the environment set" in reason:
        return "competition mode: the game is not in the environment set (--games)"
    return reason


def _print_grouped_reasons(result) -> None:
    """Every play left out or not verified, grouped by reason, with up to 5 plays (file name and guid) each."""
    names = result.file_names
    by_id = {c.play_id: c for c in result.checks}
    groups: dict[str, list[str]] = {}
    for pid, reason in sorted(result.excluded.items()):
        c = by_id.get(pid)
        label = f"{names.get(c.file_id, c.file_id)} ({pid})" if c else pid
        detail = f": {c.detail}" if c is not None and c.detail and c.status != "summary_only" else ""
        groups.setdefault(f"left out: {_reason_group(reason)}", []).append(label + detail)
    for policy_id, here in sorted(result.policy_excluded.items()):
        for pid, reason in sorted(here.items()):
            c = by_id.get(pid)
            label = f"{names.get(c.file_id, c.file_id)} ({pid})" if c else pid
            groups.setdefault(f"left out under {policy_id}: {_reason_group(reason)}", []).append(label)
    for c in result.checks:
        if c.play_id in result.excluded or c.status not in ("unverified",):
            continue
        groups.setdefault(f"scored unverified: {c.detail or 'game not loadable'}", []).append(
            f"{names.get(c.file_id, c.file_id)} ({c.play_id})")
    for reason, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out.console.print(f"{_plays(len(members))} {reason}", markup=False, soft_wrap=True)
        for m in members[:5]:
            out.console.print(f"  {m}", markup=False, soft_wrap=True)
        if len(members) > 5:
            out.console.print(f"  ... and {len(members) - 5} more (replay_checks.csv)", markup=False, soft_wrap=True)


def _print_card_differences(result) -> None:
    """Card runs whose stated values differ from the recomputed ones: level by level, except where the only cause
    is that the card was scored under another policy (one line per policy; the scorecard's card_inputs has all)."""
    import json

    for k, pr in enumerate(result.policies):
        if not pr.card_inputs:  # (the scorecard's text parsed again: a card of a million runs took 5 GB more)
            continue
        doc = json.loads(json.dumps(pr.card_inputs))  # as the scorecard holds it
        stated = sorted(name for name, card in (doc.get("cards") or {}).items() if card.get("competition_mode"))
        if k == 0 and stated and not result.competition:  # once: the cards, not the policies
            more = f" and {len(stated) - 3} more" if len(stated) > 3 else ""
            out.console.print(f"{', '.join(stated[:3])}{more}: competition mode, as the card says; rescored as "
                              "given (its environments and plays; competition_mode false in the new scorecard): "
                              "pass --competition --games DIR to apply the competition rules (the environment set, "
                              "game resets as level resets, one play per environment)", markup=False, soft_wrap=True)
        by_policy: dict[str, int] = {}
        shown = 0
        flagged = [run for run in doc["runs"] if run.get("flags")] if k == 0 else []  # once, as for the mode
        for run in flagged[:20]:
            out.console.print(f"card {run['file_name']} {run['game_id']} run {run['run_index']}: flagged "
                              f"{', '.join(run['flags'])} (scored by the toolkit's positional rule, the flag kept: "
                              "formats.md C)", markup=False, soft_wrap=True)
        if len(flagged) > 20:
            out.console.print(f"... and {len(flagged) - 20} more flagged runs (card_inputs in the scorecard)",
                              markup=False, soft_wrap=True)
        for run in doc["runs"]:
            diffs = run.get("differences") or []
            if diffs and all(d["cause"].startswith("policy:") for d in diffs):
                by_policy[run.get("stated_policy", "?")] = by_policy.get(run.get("stated_policy", "?"), 0) + 1
                continue
            for d in diffs:
                shown += 1
                if shown > 20:
                    continue
                where = f"level {d['level_index']}" if d["level_index"] else "run score"
                out.console.print(f"card {run['file_name']} {run['game_id']} run {run['run_index']} {where} "
                                  f"({pr.policy.policy_id}): stated {_fmt(d['stated'])}, recomputed "
                                  f"{_fmt(d['recomputed'])}: {d['cause']}", markup=False, soft_wrap=True)
        for env in doc.get("environments") or []:  # a stated environments[].score
            if env["cause"].startswith("policy:"):
                continue  # said with the runs' policy line below
            shown += 1
            if shown <= 20:
                out.console.print(f"card {env['file_name']} {env['game_id']} environment score ({pr.policy.policy_id})"
                                  f": stated {_fmt(env['stated'])}, recomputed {_fmt(env['recomputed'])}: "
                                  f"{env['cause']}", markup=False, soft_wrap=True)
        if shown > 20:
            out.console.print(f"... and {shown - 20} more differences (card_inputs in the scorecard)", markup=False, soft_wrap=True)
        for stated, n in sorted(by_policy.items()):
            out.console.print(f"{pr.policy.policy_id}: {_plays(n)} of cards scored under {stated} differ only by "
                              "policy (card_inputs in the scorecard)", markup=False, soft_wrap=True)
        for line in _stated_total_lines(result, pr, doc):
            out.console.print(line, markup=False, soft_wrap=True)


def _stated_total_lines(result, pr, doc: dict) -> list[str]:
    """One line per card that states a total (a scored summary's `score`): the stated and the recomputed total
    and what makes them differ. The recomputed total is this card's when it is the only input; a run of it left
    out here is named, with the total the card's own mean gives once such runs count with the scores it states
    for them (the toolkit counts an environment it could not score as 0); with other inputs the total is theirs
    too, which is said."""
    from pipeline.scoring.card_input import integer_typing

    cards = {name: card for name, card in (doc.get("cards") or {}).items() if card.get("stated_total") is not None}
    pid = pr.policy.policy_id
    total = pr.scorecard.score
    scored = pr.scorecard.environments
    shown = _fmt(total) if scored else "nothing (every run left out)"
    alone = len(cards) == 1 and all(c.status == "summary_only" for c in result.checks) and \
        len({r["file_name"] for r in doc["runs"]}) == 1
    lines = []
    for name, card in sorted(cards.items()):
        stated = card["stated_total"]
        head = f"{pid}: {name} states a total of {_fmt(stated)}; recomputed {shown}"
        if not alone:
            lines.append(f"{head} over every input given ({_plays(len(result.checks))}), not this card's alone: "
                         "score the card by itself to compare its total")
            continue
        left = [r for r in doc["runs"] if r.get("excluded")]
        same = bool(scored) and abs(stated - total) <= 1e-9 * max(1.0, abs(total))
        if not left:
            typed = None if same else integer_typing(stated, total)
            lines.append(head + (" (the same)" if same else f" ({typed})" if typed else
                                 " (see the differences above, or --compare-with for the totals)"))
            continue
        # the card's mean over its environments, the games left out here counted with the score the card states
        scores = {g.game_id: g.score for g in scored}
        best: dict[str, float] = {}  # games left out whole: the best score the card states for them
        for r in left:
            if r["game_id"] not in scores:
                best[r["game_id"]] = max(best.get(r["game_id"], 0.0), float(r.get("stated_score") or 0.0))
        games = sorted({r["game_id"] for r in left})
        named = ", ".join(games[:3]) + (f" and {len(games) - 3} more" if len(games) > 3 else "")
        runs = f"{len(left)} run{'s' if len(left) > 1 else ''} of {named} left out here (see above)"
        if not best:  # its games still have scored runs here: the card's best runs may be the left-out ones
            lines.append(f"{head}: {runs}, which the card's total includes; see the differences above, or "
                         "--compare-with for the totals")
            continue
        counted = "as 0" if not any(best.values()) else "with the scores it states for them"
        mean = (sum(scores.values()) + sum(best.values())) / (len(scores) + len(best))
        rest = (" (the same)" if abs(stated - mean) <= 1e-9 * max(1.0, abs(mean)) else
                "; the rest differs as above, or see --compare-with for the totals")
        lines.append(f"{head}: {runs}, which the card's total counts {counted}; counted so, the recomputed total "
                     f"is {_fmt(mean)}{rest}")
    return lines
