"""Peak memory of `arcstudy ingest` (and `view`, `score`) on floods of bad or many lines (issue 29, finding 3).

Generates each flood into a temporary folder (never into the repository), runs `arcstudy ingest` on it in a
subprocess with a fresh database, and prints the child's peak RSS against the input's size. The bound is
1 GB for every case ("memory bounded by the chunk"); the last line is the headline: the largest peak.

Cases (full size as in the issue; `--scale 0.1` runs a tenth of each, for a quick look):
- `braces-3mb`: a recording line, then 1,000,000 `{}` lines (3 MB), each quarantined;
- `braces-36mb`: the same with 12,000,000 `{}` lines (36 MB, a streamed file);
- `harc-short-rows`: an H-ARC data.csv header and 392,000 one-field rows (784 KB), each quarantined;
- `dense-lines`: three recording lines of 60 MB (under the 64 MB line limit) whose frame is `[[0]],` repeated, a
  JSON array per 3 bytes (refused from their bracket count: parsed, they took 2.7 GB);
- `frameless-steps`: 2,000,000 valid frameless steps of one play (about 600 MB, streamed);
- `agent-steps`: 1,000,000 valid steps of one play, each with its own reasoning and action (about 360 MB; no two
  lines' `data` alike, so none is shared: held as objects, they took 1.26 GB);
- `task-collection`: an ARC task collection of about 400 MB (one JSON object of tasks);
- `task-giant`: one ARC task of about 300 MB of 2x2 grids (refused unparsed: parsed, it took 17.5 GB);
- `task-giant-entry`: a collection of 100,000 small tasks with one such task among them (the tasks before it load);
- `tgi-short-rows`: an ARC-TGI export of 600,000 short valid rows (168 MB), read in pieces;
- `arc2-surplus`: an ARC-AGI-2 attempt log of 1,000,000 rows, one with a surplus field (read by the csv module,
  in batches: read whole, it took 1.0 GB);
- `view-bad-lines`: `arcstudy view` of a recording with 2,000,000 bad lines (the page must stay small);
- `score-frameless-steps`: `arcstudy score` of the `frameless-steps` file (issue 29: "under 1 GB ... for the
  2-million-step file"; its game is not shipped, so it is read and counted, not replayed).
- `score-long-script`: `arcstudy score` of a playback script of 500,000 actions (a shipped game's winning
  actions, each run followed by a RESET, repeated: 38 MB of actions, replayed in the sandbox);
- `view-long-script`: `arcstudy view` of the same script (its page holds at most 200,000 steps);
- `replay-long-script`: `arcstudy replay` of a script of 100,000 such actions into a recording with every frame
  (about 2 GB of JSON lines written).
- `score-bad-lines`, `export-bad-lines`: `arcstudy score` and `arcstudy export-transitions` of a recording line
  and 3,000,000 `{}` lines (9 MB; the eighteenth sitting: 4.7 GB and exit 1, 2.6 GB and a 470 MB manifest,
  every reason held and listed; now on disk, the manifest lists 1,000 and names the file of every one);
- `script-bad-lines`: `arcstudy ingest` of a playback script of one action and 1,000,000 action lines with an
  id no game has (each quarantined; the script reader held their reasons in a list);
- `export-long-script`: `arcstudy export-transitions` of the 500,000-action script (every response's frames).
- `export-played-steps`: `arcstudy export-transitions` of a frameless recording of 2,000,000 steps made by the
  engine (as `score-db-steps`'s, from the file; every frame rendered by the replay). What stays per step is the
  file's parsed lines as columns (before the twentieth sitting 0.56 GB, about 200 bytes a step; 0.42 GB after,
  about 116; since the twenty-fourth, past a million lines every per-line column keeps its older items on disk
  (`SpillArray`) and a shard closes at 512 row groups: 0.33 GB, and 0.31 GB for 6,000,000 steps: flat);
- `score-played-steps`: `arcstudy score` of that file (about 21,000 plays, each replayed and verified; before the
  twentieth sitting 1.06 GB, over the bound; 0.95 GB after; 0.86-0.91 GB after the twenty-first, which lets the
  recordings go before the outputs are written and keeps line numbers and available actions in narrow types);
- `export-framed-steps`, `score-framed-steps`: `arcstudy export-transitions` and `arcstudy score` of a toolkit
  recording with every frame, of 300,000 steps made by the engine (about 2.8 GB; one run of a shipped game's winning
  actions and a RESET, replayed, then repeated). Before the twenty-third sitting each framed line's pixels were held
  as read: 1.81 GB and 2.02 GB (0.75 GB and 0.88 GB at 100,000 steps); past 64 MB they now wait on disk
  (`export-framed-steps` 0.40 GB; 0.32 GB since the twenty-fourth sitting holds each frame's hash as 32 bytes);
- `recover-lost-steps`: `arcstudy recover-actions` of the framed recording of 20,000 steps with every action id
  written as RESET (before the twenty-third sitting 1.09 GB, about 48 KB a step: each step's frames held as pixels
  in both processes, and the search kept the state every step left; now 0.16 GB);
- `export-db-framed-steps`, `view-db-framed-steps`: `arcstudy export-transitions --db` and `arcstudy view --db` (of
  one play) of a database holding that file with its frames (`ingest --keep-frames`; the ingest is not measured).
  Before the twenty-third sitting the kept frames were read whole: 3.8 GB and 3.6 GB; now a row group at a time;
- `score-db-steps`: `arcstudy score --db` of a database holding one frameless recording of 2,000,000 steps made by
  the engine (a shipped game's winning actions and a RESET, repeated: about 21,000 plays, each replayed and
  verified); the ingest before it is not measured (the nineteenth sitting: 1.29 GB, the steps read whole in their
  stored types);
- `export-db-steps`: `arcstudy export-transitions --db` of the same database (before the twenty-fifth sitting
  0.61 GB, the file's stored steps held whole in narrow types, about 185 bytes a step; now read a block of 50,000
  lines at a time, `StoredSteps`, through a 64 MB DuckDB limit: 0.49 GB, and 0.60 GB for 6,000,000 steps);
- `build-db-steps`: `arcstudy build` of the same database (the nineteenth sitting: 1.92 GB, every column of the
  steps read whole);
- `export-reset-plays`, `export-reset-plays-shipped`: `arcstudy export-transitions` of a frameless recording of
  1,000,000 one-step plays (every line a RESET with `full_reset` true, about 320 MB), for a game that is not found
  (every play left out) and for a shipped game (every play replayed and exported). Before the twenty-sixth
  sitting each play's entry was held to the end and listed in the card, the manifest and the console: 2.13 GB, a
  197 MB card and a 277 MB manifest for the first, 0.57 GB for the second; now the entries wait on disk and the
  lists name the first 1,000 (a file holds every one): 0.24 GB and 0.27 GB;
- `reset-plays`: `arcstudy ingest` of the shipped-game file of `export-reset-plays-shipped` (before the
  twenty-seventh sitting 2.09 GB, each play's row made as a dict and the plays' table inserted whole; now built as
  columns and written a chunk of 100,000 plays at a time, as the steps are);
- `copy-reset-plays`: `arcstudy ingest` of a changed copy of that file (its last line written twice) into a
  database holding it: every play a duplicate of one another file loaded, quarantined with its step (the
  twenty-seventh sitting: first an out-of-memory failure, then 2.76 GB and 0.87 GB, the duplicate plays held in a
  dict and their steps quarantined by an unbounded statement; now listed in a scratch Parquet file, under the
  bound: 0.56-0.60 GB);
- `score-reset-plays`: `arcstudy score` of that file (every play replayed, scored and listed: the scorecard
  holds a run per play, 1.09 GB of JSON). Over the bound, left open: 9.18 GB before the twenty-seventh sitting,
  7.38 GB after it (the scorecard's text written a piece at a time, its card inputs not parsed back), 5.9 GB after
  the twenty-eighth (the tables built a column at a time, the texts let go and written in slices, the key test
  hashed, a 64 MB bound on the tables' insert; at `--scale 0.1`, 100,000 plays, 1.15 GB -> 897 MB); every stage
  of `score` holds each play (checks, card plays, both scorers, the scorecard dict, the out tables);
- `export-many-files`: `arcstudy export-transitions` of 100,000 two-line recordings of a game not found, in
  folders of a thousand (a flood of files: 0.31 GB, 23 s in the twenty-seventh sitting, 74 s before the game was
  looked for once; it grew about 2 KB a file: the paths, the jobs, the manifest's inputs; 0.16 GB in the
  twenty-eighth (0.14 GB in its run of this script), the files walked, checked and grouped as they are
  exported, the inputs listed in a file);
- `export-many-files-shipped`: the same of 100,000 one-line recordings of the first shipped game, each its own
  guid (every play replayed and exported: what each file leaves behind is the first file of its play, for the
  duplicate check; the twenty-eighth sitting: 0.38 GB before, 0.20 GB; 1,000,000 such files by hand 0.51 GB);
- `export-db-reset-plays`: `arcstudy export-transitions --db` of a database holding that file (the ingest is not
  measured; the twenty-sixth sitting: 0.81 GB, the file's plays table and its play ids read whole);
- `view-db-steps`: `arcstudy view` of one play of that file from the database (the nineteenth sitting: 7.9 GB, the
  file's steps read whole and the text of every row made at once for their digest).

    PYTHONPATH=. .venv/bin/python benchmarks/flood_memory.py                 # every case, full size
    PYTHONPATH=. .venv/bin/python benchmarks/flood_memory.py --scale 0.1 --case braces-3mb
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.ingest.harc import DATA_CURRENT  # noqa: E402

BOUND_BYTES = 1 << 30
GUID = "9064696e-1bf8-40f1-8b96-607f92b98787"
GAME = "bt11-fd9df0622a1a"


def _step(i: int, action: str = "ACTION3", full_reset: bool = False) -> bytes:
    ts = f"2026-11-22T03:{(i // 60_000_000) % 60:02d}:{(i // 1_000_000) % 60:02d}.{i % 1_000_000:06d}+00:00"
    return (json.dumps({"timestamp": ts, "data": {
        "game_id": GAME, "state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 5,
        "action_input": {"id": action, "data": {}, "reasoning": None}, "guid": GUID, "full_reset": full_reset,
        "available_actions": [3, 4]}}) + "\n").encode()


def _agent_step(i: int) -> bytes:
    """A step as an LLM agent's recorder writes it: its own reasoning, a click or a key, so that no two lines'
    `data` are alike (nothing for the reader to share)."""
    action = ("ACTION1", "ACTION2", "ACTION3", "ACTION4", "ACTION6")[i % 5]
    ts = f"2026-11-22T03:{(i // 60_000_000) % 60:02d}:{(i // 1_000_000) % 60:02d}.{i % 1_000_000:06d}+00:00"
    return (json.dumps({"timestamp": ts, "data": {
        "game_id": GAME, "state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 5,
        "action_input": {"id": action, "data": {"x": i % 64, "y": (i // 64) % 64} if action == "ACTION6" else {},
                         "reasoning": f"step {i}: try the next cell"}, "guid": GUID, "full_reset": False,
        "available_actions": [1, 2, 3, 4, 6]}}) + "\n").encode()


def _write_lines(path: Path, head: list[bytes], line: bytes, n: int) -> None:
    with path.open("wb") as f:
        f.writelines(head)
        block = line * 100_000
        for _ in range(n // 100_000):
            f.write(block)
        f.write(line * (n % 100_000))


def braces(folder: Path, n: int) -> Path:
    path = folder / "braces.recording.jsonl"
    _write_lines(path, [_step(0, "RESET", True)], b"{}\n", n)
    return path


def dense_lines(folder: Path, n_bytes: int, n_lines: int = 3) -> Path:
    """Lines just under the 64 MB line limit whose frame is `[[0]],` repeated: a JSON array per 3 bytes."""
    path = folder / "dense.recording.jsonl"
    step = _step(1)
    head, tail = step[:step.rindex(b"}}")], b"}}\n"
    n = max(1, (n_bytes - len(step)) // 6)
    line = head + b', "frame": [' + b"[[0]]," * n + b"[[0]]]" + tail
    with path.open("wb") as f:
        f.write(_step(0, "RESET", True))
        for _ in range(n_lines):
            f.write(line)
    return path


def harc_short_rows(folder: Path, n: int) -> Path:
    path = folder / "harc" / "data.csv"
    path.parent.mkdir()
    _write_lines(path, [(",".join(DATA_CURRENT) + "\n").encode()], b"1\n", n)
    return path


def frameless_steps(folder: Path, n: int) -> Path:
    path = folder / "steps.recording.jsonl"
    with path.open("wb") as f:
        f.write(_step(0, "RESET", True))
        batch = []
        for i in range(1, n + 1):
            batch.append(_step(i))
            if len(batch) == 50_000:
                f.writelines(batch)
                batch.clear()
        f.writelines(batch)
    return path


def agent_steps(folder: Path, n: int) -> Path:
    path = folder / "agent.recording.jsonl"
    with path.open("wb") as f:
        f.write(_step(0, "RESET", True))
        for start in range(1, n + 1, 50_000):
            f.writelines(_agent_step(i) for i in range(start, min(n + 1, start + 50_000)))
    return path


def task_collection(folder: Path, n_bytes: int) -> Path:
    path = folder / "tasks.json"
    grid = [[(r * 7 + c) % 10 for c in range(30)] for r in range(30)]
    task = json.dumps({"train": [{"input": grid, "output": grid}] * 3, "test": [{"input": grid, "output": grid}]})
    with path.open("w") as f:
        f.write("{")
        written, i = 1, 0
        while written < n_bytes:
            piece = ("," if i else "") + f'"{i:08x}": ' + task
            f.write(piece)
            written += len(piece)
            i += 1
        f.write("}")
    return path


_PAIR = '{"input": [[1, 2], [3, 4]], "output": [[4, 3], [2, 1]]}'
_SMALL_TASK = '{"train": [' + _PAIR + '], "test": [' + _PAIR + ']}'


def _giant_task(f, n_bytes: int) -> None:
    f.write('{"train": [')
    f.writelines((", " if i else "") + _PAIR for i in range(max(1, n_bytes // (len(_PAIR) + 2))))
    f.write('], "test": [' + _PAIR + ']}')


def task_giant(folder: Path, n_bytes: int) -> Path:
    path = folder / "giant.json"
    with path.open("w") as f:
        _giant_task(f, n_bytes)
    return path


def task_giant_entry(folder: Path, n_bytes: int, n_tasks: int = 100_000) -> Path:
    path = folder / "tasks.json"
    with path.open("w") as f:
        f.write("{" + ", ".join(f'"t{i:07d}": {_SMALL_TASK}' for i in range(n_tasks)) + ', "giant": ')
        _giant_task(f, n_bytes)
        f.write(', "after": ' + _SMALL_TASK + "}")
    return path


def arc2_surplus(folder: Path, n: int) -> Path:
    from benchmarks.arc2_memory import write_log

    path = folder / "arc2.csv"
    write_log(path, n)
    with path.open("a") as f:  # the surplus field in the last row: the reader starts over with the csv module
        f.write("abcd1234,Public Eval,0,s1,1.0,2,1,1,surplus\n")
    return path


def tgi_short_rows(folder: Path, n: int) -> Path:
    path = folder / "ARC-AGI-1-Train.csv"
    task = '{""train"": [{""input"": [[1]], ""output"": [[1]]}], ""test"": [{""input"": [[2]], ""output"": [[2]]}]}'
    code = "def transform_input(self, grid: np.ndarray) -> np.ndarray:\n    return grid[::2, ::2]\n"
    with path.open("w") as f:
        f.write("task_id,created_at,generator_name,input_reasoning_chain,transformation_reasoning_chain,"
                "task_variables,code,data\n")
        for start in range(0, n, 50_000):
            f.writelines(f'r{i},2026-11-29T10:00:00.000000,taskabc{i % 1000:05d},"[""in""]","[""tr""]",'
                         f'"{{""rows"": 5}}","{code}","{task}"\n' for i in range(start, min(n, start + 50_000)))
    return path


def _winning_run() -> tuple[Any, list[tuple[str, dict]]]:
    """The first shipped game with a winning solution, and one run of it: its winning actions, then a RESET."""
    from engine.loader import find_games

    info = next(i for i in find_games([ROOT / "games"]) if (i.directory / "solutions" / "win.jsonl").is_file())
    lines = [json.loads(x) for x in (info.directory / "solutions" / "win.jsonl").read_text().splitlines() if x]
    run_actions = [(a["id"], {k: v for k, v in (a.get("data") or {}).items() if k in ("x", "y")})
                   for a in (line["data"]["action_input"] for line in lines[1:])] + [("RESET", {})]
    return info, run_actions


def long_script(folder: Path, n: int) -> Path:
    """A playback script of `n` actions: the first shipped game's winning actions, then a RESET, repeated."""
    info, run_actions = _winning_run()
    encoded = [json.dumps({"data": {"action_input": {"id": name, "data": {"game_id": info.game_id, **data}}}}) + "\n"
               for name, data in run_actions]
    path = folder / f"{info.short_id}_long.playback.jsonl"
    with open(path, "w") as f:
        for start in range(0, n, 50_000):
            f.writelines(encoded[i % len(encoded)] for i in range(start, min(n, start + 50_000)))
    return path


def framed_steps(folder: Path, n: int) -> Path:
    """A toolkit recording with every frame, of about `n` steps (about 9 KB a step): `arcstudy replay` of one run
    of `long_script` (the engine's frames), its lines then repeated with their times moved on an hour a copy (each
    copy starts with make()'s RESET, after the run's own RESET: one valid session)."""
    from datetime import datetime, timedelta

    _, run_actions = _winning_run()
    script = long_script(folder, len(run_actions))
    run_file = folder / "one_run.jsonl"
    subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", "replay", str(script), "--out", str(run_file)],
                   cwd=folder, check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    run = [line for line in run_file.read_bytes().splitlines(keepends=True) if line.strip()]
    prefix = b'{"timestamp":"'
    if not all(line.startswith(prefix) for line in run):
        raise SystemExit("framed-steps: `arcstudy replay` no longer writes the timestamp first")
    path = folder / f"{run_file.stem}-{GUID}.jsonl"
    with path.open("wb") as f:
        for copy in range(-(-n // len(run))):
            for line in run:
                end = line.index(b'"', len(prefix))
                at = datetime.fromisoformat(line[len(prefix):end].decode()) + timedelta(hours=copy)
                f.write(prefix + at.isoformat(timespec="microseconds").encode() + line[end:])
    for made in (script, run_file, run_file.with_suffix(".manifest.json")):
        made.unlink(missing_ok=True)
    return path


def lost_steps(folder: Path, n: int) -> Path:
    """`framed_steps` with every action id written as RESET (the agents recorder's defect, ARC-AGI-3-Agents #91)."""
    framed = framed_steps(folder, n)
    path = folder / f"lost-{GUID}.jsonl"
    with framed.open("rb") as src, path.open("wb") as out:
        for line in src:
            start = line.index(b'"action_input":{"id":') + len(b'"action_input":{"id":')
            end = line.index(b",", start)
            out.write(line[:start] + b'"RESET"' + line[end:])
    framed.unlink()
    return path


def played_steps(folder: Path, n: int) -> Path:
    """A frameless toolkit recording of `n` steps, as the engine answers them: the first shipped game's winning
    actions, then a RESET, repeated (one play per run, so `score` replays and verifies every play)."""
    from engine.base_game import FRAMES_NONE
    from engine.enums import ActionInput, GameAction
    from engine.env import GameEnv

    info, run_actions = _winning_run()
    env = GameEnv(info)
    path = folder / f"{info.game_id}-{GUID}.jsonl"
    with path.open("w") as f:
        response, name, data = env.reset(frames=FRAMES_NONE), "RESET", {}
        for i in range(n + 1):
            if i:
                name, data = run_actions[(i - 1) % len(run_actions)]
                action = GameAction[name] if isinstance(name, str) else GameAction.from_id(name)
                response = env.step(ActionInput(id=action, data=dict(data)), frames=FRAMES_NONE)
                name = action.name
            ts = f"2026-11-22T03:{(i // 60_000_000) % 60:02d}:{(i // 1_000_000) % 60:02d}.{i % 1_000_000:06d}+00:00"
            f.write(json.dumps({"timestamp": ts, "data": {
                "game_id": info.game_id, "state": response.state.name, "levels_completed": response.levels_completed,
                "win_levels": response.win_levels, "full_reset": bool(response.full_reset),
                "available_actions": [int(a) for a in response.available_actions],
                "action_input": {"id": name, "data": data, "reasoning": None}, "guid": GUID}}) + "\n")
    return path


def many_files(folder: Path, n: int, shipped: bool = False) -> Path:
    """`n` frameless two-line recordings (a RESET and an action, each file its own guid) of a game that is not
    found, a thousand to a folder: a flood of files rather than of lines. With ``shipped``, `n` one-line
    recordings of the first shipped game instead (its RESET answer, each file its own guid: every play replayed
    and exported). Returns the folder that holds them."""
    root = folder / "recordings"
    if shipped:
        from engine.base_game import FRAMES_NONE
        from engine.env import GameEnv

        info, _ = _winning_run()
        response = GameEnv(info).reset(frames=FRAMES_NONE)
        answer = {"game_id": info.game_id, "state": response.state.name,
                  "levels_completed": response.levels_completed, "win_levels": response.win_levels,
                  "full_reset": True, "available_actions": [int(a) for a in response.available_actions],
                  "action_input": {"id": "RESET", "data": {}, "reasoning": None}}
    for i in range(n):
        guid = f"00000000-0000-4000-8000-{i:012d}"
        sub = root / f"d{i // 1000:04d}"
        if i % 1000 == 0:
            sub.mkdir(parents=True)
        if shipped:
            lines = [json.dumps({"timestamp": "2026-11-22T03:00:00.000000+00:00", "data": {**answer, "guid": guid}})]
            (sub / f"{answer['game_id']}-{guid}.jsonl").write_text(lines[0] + "\n")
            continue
        lines = [json.dumps({"timestamp": f"2026-11-22T03:00:00.{k:06d}+00:00", "data": {
            "game_id": GAME, "state": "NOT_FINISHED", "levels_completed": 0, "win_levels": 5,
            "action_input": {"id": action, "data": {}, "reasoning": None}, "guid": guid, "full_reset": k == 0,
            "available_actions": [3, 4]}}) for k, action in enumerate(("RESET", "ACTION3"))]
        (sub / f"{GAME}-{guid}.jsonl").write_text("\n".join(lines) + "\n")
    return root


def reset_plays(folder: Path, n: int, shipped: bool) -> Path:
    """A frameless recording of `n` one-step plays: every line a RESET with `full_reset` true (a recorder that
    restarts on each step), for a game that is not found (every play left out: no frames to export) or, with
    ``shipped``, the first shipped game, whose RESET answer each line records (every play replayed and exported)."""
    if not shipped:
        path = folder / f"{GAME}-{GUID}.jsonl"
        with path.open("wb") as f:
            f.writelines(_step(i, "RESET", True) for i in range(n))
        return path
    from engine.base_game import FRAMES_NONE
    from engine.env import GameEnv

    info, _ = _winning_run()
    response = GameEnv(info).reset(frames=FRAMES_NONE)
    path = folder / f"{info.game_id}-{GUID}.jsonl"
    data = {"game_id": info.game_id, "state": response.state.name, "levels_completed": response.levels_completed,
            "win_levels": response.win_levels, "full_reset": True,
            "available_actions": [int(a) for a in response.available_actions],
            "action_input": {"id": "RESET", "data": {}, "reasoning": None}, "guid": GUID}
    tail = json.dumps(data)
    with path.open("w") as f:
        for i in range(n):
            ts = f"2026-11-22T03:{(i // 60_000_000) % 60:02d}:{(i // 1_000_000) % 60:02d}.{i % 1_000_000:06d}+00:00"
            f.write(f'{{"timestamp": "{ts}", "data": {tail}}}\n')
    return path


def bad_script(folder: Path, n: int) -> Path:
    path = folder / "bt11_bad.playback.jsonl"
    good = json.dumps({"data": {"action_input": {"id": 1, "data": {"game_id": GAME}}}}) + "\n"
    _write_lines(path, [good.encode()], b'{"data": {"action_input": {"id": 99, "data": {}}}}\n', n)
    return path


def run(args: list[str], cwd: Path) -> tuple[int, int, float]:
    """(exit code, peak RSS of the child in bytes, seconds) of one arcstudy command in its own process.
    A fresh `python -c` wrapper runs it so that RUSAGE_CHILDREN holds that command alone."""
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]).returncode; "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r)")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "pipeline.cli", "--plain", *args],
                          cwd=cwd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - t0
    peak_kb = int(proc.stdout.strip().splitlines()[-1])
    return proc.returncode, peak_kb * 1024, seconds


CASES = {
    "braces-3mb": lambda d, s: braces(d, int(1_000_000 * s)),
    "braces-36mb": lambda d, s: braces(d, int(12_000_000 * s)),
    "harc-short-rows": lambda d, s: harc_short_rows(d, int(392_000 * s)),
    "dense-lines": lambda d, s: dense_lines(d, int(60_000_000 * s)),
    "frameless-steps": lambda d, s: frameless_steps(d, int(2_000_000 * s)),
    "agent-steps": lambda d, s: agent_steps(d, int(1_000_000 * s)),
    "task-collection": lambda d, s: task_collection(d, int(400_000_000 * s)),
    "task-giant": lambda d, s: task_giant(d, int(300_000_000 * s)),
    "task-giant-entry": lambda d, s: task_giant_entry(d, int(300_000_000 * s), int(100_000 * s)),
    "tgi-short-rows": lambda d, s: tgi_short_rows(d, int(600_000 * s)),
    "arc2-surplus": lambda d, s: arc2_surplus(d, int(1_000_000 * s)),
    "view-bad-lines": lambda d, s: braces(d, int(2_000_000 * s)),
    "score-frameless-steps": lambda d, s: frameless_steps(d, int(2_000_000 * s)),
    "score-long-script": lambda d, s: long_script(d, int(500_000 * s)),
    "view-long-script": lambda d, s: long_script(d, int(500_000 * s)),
    "replay-long-script": lambda d, s: long_script(d, int(100_000 * s)),
    "score-bad-lines": lambda d, s: braces(d, int(3_000_000 * s)),
    "export-bad-lines": lambda d, s: braces(d, int(3_000_000 * s)),
    "script-bad-lines": lambda d, s: bad_script(d, int(1_000_000 * s)),
    "export-long-script": lambda d, s: long_script(d, int(500_000 * s)),
    "export-played-steps": lambda d, s: played_steps(d, int(2_000_000 * s)),
    "export-framed-steps": lambda d, s: framed_steps(d, int(300_000 * s)),
    "score-framed-steps": lambda d, s: framed_steps(d, int(300_000 * s)),
    "export-db-framed-steps": lambda d, s: framed_steps(d, int(300_000 * s)),
    "recover-lost-steps": lambda d, s: lost_steps(d, int(20_000 * s)),
    "view-db-framed-steps": lambda d, s: framed_steps(d, int(300_000 * s)),
    "score-played-steps": lambda d, s: played_steps(d, int(2_000_000 * s)),
    "score-db-steps": lambda d, s: played_steps(d, int(2_000_000 * s)),
    "export-db-steps": lambda d, s: played_steps(d, int(2_000_000 * s)),
    "build-db-steps": lambda d, s: played_steps(d, int(2_000_000 * s)),
    "view-db-steps": lambda d, s: played_steps(d, int(2_000_000 * s)),
    "export-reset-plays": lambda d, s: reset_plays(d, int(1_000_000 * s), shipped=False),
    "export-reset-plays-shipped": lambda d, s: reset_plays(d, int(1_000_000 * s), shipped=True),
    "reset-plays": lambda d, s: reset_plays(d, int(1_000_000 * s), shipped=True),
    "export-db-reset-plays": lambda d, s: reset_plays(d, int(1_000_000 * s), shipped=True),
    "copy-reset-plays": lambda d, s: reset_plays(d, int(1_000_000 * s), shipped=True),
    "score-reset-plays": lambda d, s: reset_plays(d, int(1_000_000 * s), shipped=True),
    "export-many-files": lambda d, s: many_files(d, int(100_000 * s)),
    "export-many-files-shipped": lambda d, s: many_files(d, int(100_000 * s), shipped=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each case's full size")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="run only these cases")
    opts = parser.parse_args()
    peaks = []
    print(f"{'case':<27}{'input MB':>10}{'peak RSS MB':>13}{'seconds':>9}  exit  output")
    for name in opts.case or list(CASES):
        with tempfile.TemporaryDirectory(prefix="arcstudy-flood-") as tmp:
            folder = Path(tmp)
            path = CASES[name](folder, opts.scale)
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
            if name in ("view-bad-lines", "view-long-script"):
                page = folder / "view.html"
                code, peak, seconds = run(["view", str(path), "--out", str(page)], folder)
                note = f"page {page.stat().st_size / 1e6:.1f} MB" if page.exists() else "no page"
            elif name == "replay-long-script":
                out = folder / "replayed.jsonl"
                code, peak, seconds = run(["replay", str(path), "--out", str(out)], folder)
                note = f"recording {out.stat().st_size / 1e6:.0f} MB" if out.exists() else "no recording"
            elif name in ("export-bad-lines", "export-long-script", "export-played-steps", "export-framed-steps",
                          "export-reset-plays", "export-reset-plays-shipped", "export-many-files",
                          "export-many-files-shipped"):
                out = folder / "dataset"
                code, peak, seconds = run(["export-transitions", str(path), "--out", str(out)], folder)
                manifest = out / "manifest.json"
                note = (f"manifest {manifest.stat().st_size / 1e6:.1f} MB" if manifest.exists() else "no dataset")
            elif name == "recover-lost-steps":
                out = folder / "recovered.json"
                code, peak, seconds = run(["recover-actions", str(path), "--out", str(out)], folder)
                note = "actions recovered" if code == 0 and out.exists() else "not recovered"
            elif name in ("export-db-framed-steps", "view-db-framed-steps"):  # ingested first (not measured)
                db = folder / "framed.duckdb"
                code, _, _ = run(["ingest", str(path), "--keep-frames", "--db", str(db)], folder)
                if code != 0:
                    raise SystemExit(f"{name}: the ingest failed with exit code {code}")
                if name == "view-db-framed-steps":  # one play of the file: the page of its file
                    import duckdb

                    with duckdb.connect(str(db), read_only=True) as con:
                        play = con.execute("SELECT play_id FROM core_arc3__plays ORDER BY play_index LIMIT 1 "
                                           "OFFSET 5").fetchall()[0][0]
                    page = folder / "view.html"
                    code, peak, seconds = run(["view", play, "--db", str(db), "--out", str(page)], folder)
                    note = f"page {page.stat().st_size / 1e6:.1f} MB" if page.exists() else "no page"
                else:
                    out = folder / "dataset"
                    code, peak, seconds = run(["export-transitions", "--db", str(db), "--out", str(out)], folder)
                    note = "dataset written" if (out / "manifest.json").exists() else "no dataset"
            elif name in ("score-db-steps", "build-db-steps", "view-db-steps", "export-db-steps",
                          "export-db-reset-plays"):  # ingested first
                db = folder / "steps.duckdb"
                code, _, _ = run(["ingest", str(path), "--db", str(db)], folder)
                if code != 0:
                    raise SystemExit(f"{name}: the ingest failed with exit code {code}")
                if name == "build-db-steps":
                    code, peak, seconds = run(["build", "--db", str(db)], folder)
                    note = "tables built" if code == 0 else "build failed"
                elif name in ("export-db-steps", "export-db-reset-plays"):
                    out = folder / "dataset"
                    code, peak, seconds = run(["export-transitions", "--db", str(db), "--out", str(out)], folder)
                    note = "dataset written" if (out / "manifest.json").exists() else "no dataset"
                elif name == "view-db-steps":  # one play of the file: the page of its file
                    page = folder / "view.html"
                    code, peak, seconds = run(["view", f"{GUID}/5", "--db", str(db), "--out", str(page)], folder)
                    note = f"page {page.stat().st_size / 1e6:.1f} MB" if page.exists() else "no page"
                else:
                    code, peak, seconds = run(["score", "--db", str(db), "--out", str(folder / "scored")], folder)
                    note = "scorecard written" if any((folder / "scored").glob("scorecard__*.json")) else "no scorecard"
            elif name == "copy-reset-plays":  # the file ingested first (not measured), then a changed copy of it
                db = folder / "plays.duckdb"
                code, _, _ = run(["ingest", str(path), "--db", str(db)], folder)
                if code != 0:
                    raise SystemExit(f"{name}: the ingest failed with exit code {code}")
                copy = folder / "copy" / path.name
                copy.parent.mkdir()
                import shutil

                shutil.copyfile(path, copy)
                with path.open("rb") as f:
                    f.seek(-4096, os.SEEK_END)
                    last = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
                with copy.open("ab") as f:
                    f.write(last + b"\n")
                code, peak, seconds = run(["ingest", str(copy), "--db", str(db)], folder)
                note = "copy quarantined" if code == 3 else "not quarantined"
            elif name in ("score-frameless-steps", "score-long-script", "score-bad-lines", "score-played-steps",
                          "score-framed-steps", "score-reset-plays"):
                code, peak, seconds = run(["score", str(path), "--out", str(folder / "scored")], folder)
                note = "scorecard written" if any((folder / "scored").glob("scorecard__*.json")) else "no scorecard"
            else:
                code, peak, seconds = run(["ingest", str(path), "--db", str(folder / "flood.duckdb")], folder)
                note = ""
            peaks.append(peak)
            print(f"{name:<27}{size / 1e6:>10.1f}{peak / 1e6:>13.0f}{seconds:>9.1f}  {code:>4}  {note}", flush=True)
    largest = max(peaks)
    print(f"flood peak RSS max {largest / BOUND_BYTES:.2f} GB of {BOUND_BYTES / BOUND_BYTES:.2f} GB"
          + ("" if largest < BOUND_BYTES else "  (over the bound)"))


if __name__ == "__main__":
    main()
