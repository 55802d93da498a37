"""Running the Python code of game folders: always in the sandbox (pipeline.core.sandbox), never in arcstudy.

    from pipeline.core.game_code import run_game_code, announce

    announce(game_dirs)                                   # once per run: which folders' code runs, and how
    result = run_game_code(replay_fn, (portable_info(info), steps), key=game_key(info), source=info.source)
    # GameCodeError: the game raised (named like the original, with its line); SandboxFailure: its code ended
    # abnormally (timeout, cpu, memory, crashed, exited, output_too_large, refused)

Every command that loads a game file (score, view, replay, qualify, explore, simulate, report's explorer) hands the
work that touches the game -- loading it, constructing it, stepping it -- to a module-level function run by
`run_game_code` in a confined child (docs/security.md). Reading a folder's metadata.json is not running code
and stays in this process.

Limits (each can be changed in the environment, see `game_limits`):
- no progress: a call is killed when one piece of game code (an action, executing the game file, constructing
  the game) has run for the engine's step time limit (ARCSTUDY_STEP_TIMEOUT_S, default 60 s) plus a grace
  (`grace_s`; ARCSTUDY_SANDBOX_IDLE_S sets the total) without finishing (`prepare_child`): the engine's own
  watchdog raises StepTimeout inside the step first, and the sandbox ends what that cannot stop (a game that
  swallows StepTimeout and retries, a regular expression that never returns, a sleep in C);
- wall clock per call (ARCSTUDY_SANDBOX_WALL_S, default 1 h), CPU per call (ARCSTUDY_SANDBOX_CPU_S, 1 h),
  memory (ARCSTUDY_SANDBOX_MEMORY_MB, 2048), result size (ARCSTUDY_SANDBOX_OUTPUT_MB, 256).

One child per game from outside (`game_key`), at most `sandbox.MAX_CACHED` kept alive in a process: a game cannot
change what another game's replay sees (each runs in its own process), and imports are paid once per game;
arcstudy's own shipped games share one child (an export may ask for a second child of a game, a key of its own:
`pipeline.datasets.transitions.replay_lanes`). A child started before any game ran (`start_game_sandbox_early`, as
the program starts) is taken by the first game that needs one, and by no other.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pipeline.core.result_shape import wrong_shape
from pipeline.core.sandbox import (
    Limits,
    SandboxFailure,
    confined,
    describe_layers,
    hold,
    limits_from_env,
    start_spare,
)
from pipeline.core.textfiles import visible

__all__ = ["GameCodeError", "SandboxFailure", "announce", "describe_failure", "game_key", "game_limits",
           "hold_game_child", "layers_text", "portable_info", "record_stopped", "run_game_code", "stopped_in_run"]

GRACE_MAX_S = 10.0
DEFAULT_WALL_S = 3600.0
DEFAULT_OUTPUT_BYTES = 256 << 20
PRELOAD = "pipeline.core.game_code:prepare_child"


def grace_s(step: float) -> float:
    """How long past the step time limit the sandbox waits before it kills a game that made no progress: the
    step limit itself, between 2 and GRACE_MAX_S seconds."""
    return min(GRACE_MAX_S, max(2.0, step))


def _step_limit() -> float | None:
    from engine.watchdog import step_time_limit

    return step_time_limit()


def game_limits() -> Limits:
    """The sandbox limits for game code, from the environment (see the module docstring)."""
    step = _step_limit()
    idle = None if step is None else step + grace_s(step)
    text = os.environ.get("ARCSTUDY_SANDBOX_IDLE_S")
    if text:
        try:
            idle = float(text) if float(text) > 0 else None
        except ValueError:
            pass
    overrides: dict[str, Any] = {"wall_s": DEFAULT_WALL_S, "cpu_s": DEFAULT_WALL_S,
                                 "output_bytes": DEFAULT_OUTPUT_BYTES, "idle_s": idle}
    for field, env in (("wall_s", "ARCSTUDY_SANDBOX_WALL_S"), ("cpu_s", "ARCSTUDY_SANDBOX_CPU_S"),
                       ("output_bytes", "ARCSTUDY_SANDBOX_OUTPUT_MB")):
        if os.environ.get(env):
            overrides.pop(field)  # the person's value (limits_from_env reads it)
    return limits_from_env(**overrides)


def game_child_env() -> dict[str, str]:
    """The child's environment over this process's: the engine's step time limit of this process
    (set_step_time_limit included), for the child's watchdog; and PYTHONHASHSEED=0, so that a game whose frames
    depend on string hashing replays the same way in every run, serially or on Dask workers (whose nanny sets
    its own PYTHONHASHSEED in the environment of the process that starts them)."""
    step = _step_limit()
    return {"ARCSTUDY_STEP_TIMEOUT_S": repr(step) if step is not None else "0", "PYTHONHASHSEED": "0"}


class GameCodeError(RuntimeError):
    """The game's code raised: `exc_type` is the name of what it raised (RuntimeError, SystemExit, ...), and the
    message says where, as `engine.loader.describe_game_error` does. Raised in this process in place of the
    exception, which stayed in the sandbox; its class name is that of the original, so messages read the same."""

    exc_type = "Exception"
    located = True  # the message names the game file's line already (engine.loader.describe_game_error)

    def __reduce__(self):  # a class made on the fly: rebuilt from its name, e.g. on the way back from Dask
        return (_game_error, (self.exc_type, str(self)))


MAX_MESSAGE_CHARS = 1000  # what a game's exception may say, on one line: it is printed and stored


def _game_error(exc_type: str, message: str) -> GameCodeError:
    """The error for what the game raised, its text as the game's code made it: one line (a line break in it
    started a forged line of arcstudy's output), its control characters shown, at most MAX_MESSAGE_CHARS (a
    20 MB message was printed and written to the manifest whole)."""
    name = exc_type if isinstance(exc_type, str) and exc_type.isidentifier() and len(exc_type) <= 100 else "Exception"
    text = message if isinstance(message, str) else repr(type(message))
    text = visible(" ".join(text[: MAX_MESSAGE_CHARS * 4].split()))
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 1] + "…"
    cls = type(name, (GameCodeError,), {"exc_type": name, "__module__": __name__})
    return cls(text)


def _call_game(arg: tuple) -> tuple[str, Any]:
    """In the sandbox: fn(arg), or what the game's code raised, described with its line in the game file."""
    fn, inner, source = arg
    try:
        return "ok", fn(inner)
    except BaseException as err:  # noqa: BLE001 - SystemExit and KeyboardInterrupt from game code too
        from types import SimpleNamespace

        from pipeline.core.sandbox_child import memory_limit_reached

        if isinstance(err, MemoryError) and memory_limit_reached(err):
            raise  # the sandbox's memory limit: reported as such, and the child is replaced (a MemoryError the
            #        game raised itself, with no failed allocation behind it, is its own exception, below)

        from engine.loader import describe_game_error

        text = describe_game_error(err, SimpleNamespace(source=source) if source else None)
        prefix = f"{type(err).__name__}: "
        return "raised", (type(err).__name__, text[len(prefix):] if text.startswith(prefix) else text)


def run_game_code(fn: Callable[[Any], Any], arg: Any, *, key: str | None = None, source: Path | str | None = None,
                  writable: Iterable[Path | str] = (), limits: Limits | None = None) -> Any:
    """`fn(arg)` in the confined child kept for `key` (a game id). Raises GameCodeError when fn raised
    (`source`: the game file, whose line is then named), SandboxFailure when the child ended abnormally.
    `writable`: folders the code may write in (an output folder), besides the sandbox's scratch folder;
    `limits`: other limits than `game_limits()`."""
    call = _game_call(key, writable, limits)
    answer = call((fn, arg, None if source is None else str(Path(source).absolute())))
    if not (isinstance(answer, tuple) and len(answer) == 2 and answer[0] in ("ok", "raised")):
        raise wrong_shape('("ok", result) or ("raised", error)', answer)
    status, value = answer
    if status == "raised":
        if not (isinstance(value, tuple) and len(value) == 2):
            raise wrong_shape("an error as (type name, message)", value)
        raise _game_error(*value)
    return value


def _game_call(key: str | None, writable: Iterable[Path | str] = (), limits: Limits | None = None
               ) -> Callable[[Any], Any]:
    """The confined callable a game's code runs through (one definition: `start_game_sandbox_early` starts a child
    of the configuration `run_game_code` asks for)."""
    return confined(_call_game, limits or game_limits(), preload=PRELOAD, key=key, env=game_child_env(),
                    writable=writable)


def hold_game_child(key: str | None) -> Callable[[], None]:
    """Keep the child `run_game_code` runs `key`'s code in alive until the returned function is called (see
    `sandbox.hold`): code that keeps a game's state there between calls holds it meanwhile."""
    return hold(_game_call(key))


SHIPPED_GAMES_KEY = "arcstudy-games"  # `game_key` of every shipped game: one child for arcstudy's own code


def start_game_sandbox_early() -> None:
    """Start, in the background, a sandbox child for the first game whose code runs (a shipped one, or a folder's):
    for a command that will replay games, whose child's start then overlaps the command's own imports and reading
    (pipeline/commands/early.py). Made as `run_game_code` makes its children, so it is taken as one of them."""
    start_spare(_game_call(None))


def game_key(info: Any) -> str:
    """Which cached sandbox runs a game: one per game for folders from outside (a game cannot change what another
    game's replay sees), one for all of arcstudy's own shipped games (its code: one child, imports paid once)."""
    from engine.loader import default_environments_dir

    try:
        if Path(info.directory).resolve().is_relative_to(default_environments_dir().resolve()):
            return SHIPPED_GAMES_KEY
    except (OSError, ValueError):
        pass
    return f"game:{info.game_id}:{Path(info.directory).absolute()}"


def portable_info(info: Any) -> Any:
    """A game's `engine.loader.GameInfo` with absolute paths: the sandbox's working folder is its scratch."""
    import dataclasses

    changes = {"directory": Path(info.directory).absolute()}
    if info.source is not None:
        changes["source"] = Path(info.source).absolute()
    if info.also_declared_in:
        changes["also_declared_in"] = tuple(Path(p).absolute() for p in info.also_declared_in)
    return dataclasses.replace(info, **changes)


def describe_failure(err: SandboxFailure, what: str) -> str:
    """One line naming `what` (e.g. "game ls20-1234 (games/ls20/1234/ls20.py)") and how its code ended."""
    return f"{what}: its code was stopped in the sandbox ({err.kind}): {err.detail}"


_stopped: list[str] = []


def record_stopped(what: str, err: SandboxFailure) -> str:
    """Note (for this run's exit code) that `what`'s code was stopped in the sandbox; the line that says it."""
    line = describe_failure(err, what)
    _stopped.append(line)
    return line


def stopped_in_run() -> list[str]:
    """What `record_stopped` noted in this process (commands that only note failures, e.g. `report`, exit 3)."""
    return list(_stopped)


def prepare_child() -> None:
    """Run once in each game sandbox after confinement: import the engine, and report progress to the parent
    (`Limits.idle_s`) so that only game code that stops making progress is killed:

    - as each game action, game file execution or game construction ends (the engine watchdog's enter/leave,
      wrapped here), and
    - every `HEARTBEAT_EVERY_S` while no game action, load or construction is under way (arcstudy's own work
      in the sandbox: reading, comparing, analysing a state graph), from a monitor thread.

    A game stuck inside an action (a loop that swallows StepTimeout, a regular expression that never returns)
    reports nothing, and is killed once `idle_s` has passed."""
    import threading
    import time
    from threading import get_ident

    import engine  # noqa: F401 - paid once per child
    import engine.base_game as base_game
    import engine.watchdog as watchdog
    from pipeline.core.sandbox_child import HEARTBEAT_EVERY_S, heartbeat

    in_game: dict[int, int] = {}  # thread ident -> nesting depth of game code under way
    enter, leave = watchdog.enter, watchdog.leave
    # the watchdog's thread starts now, not in the first call: a thread that is not there as a call starts and
    # still runs after it is the code's, and fails the call (sandbox_child._threads_left)
    leave(enter())

    def enter_tracked():
        ident = get_ident()
        in_game[ident] = in_game.get(ident, 0) + 1
        return enter()

    def leave_tracked(token):
        try:
            leave(token)
        finally:
            ident = get_ident()
            depth = in_game.get(ident, 1) - 1
            if depth > 0:
                in_game[ident] = depth
            else:
                in_game.pop(ident, None)
            heartbeat()

    watchdog.enter, watchdog.leave = enter_tracked, leave_tracked  # time_limited (loading, constructing)
    base_game._watch_enter, base_game._watch_leave = enter_tracked, leave_tracked  # every action

    def monitor() -> None:
        while True:
            time.sleep(HEARTBEAT_EVERY_S)
            if not in_game:
                heartbeat()

    threading.Thread(target=monitor, name="sandbox-progress", daemon=True).start()


_announced: set[tuple[str, ...]] = set()


def layers_text() -> str:
    """E.g. "sandboxed: Landlock ABI 7 (...), seccomp (...), ...", or what is missing."""
    try:
        layers, problems = describe_layers()
    except SandboxFailure as err:
        return f"the sandbox cannot start: {err.detail}"
    short = [layer.split(" (")[0] for layer in layers]
    text = "sandboxed: " + ", ".join(short)
    if problems:
        text += "; not available here: " + "; ".join(problems)
    return text


def announce(game_dirs: Iterable[Path | str], print_fn: Callable[[str], None] | None = None) -> str:
    """Say once per run (per set of folders) that the folders' code runs, and how it is confined."""
    dirs = tuple(str(d) for d in game_dirs)
    text = f"arcstudy runs the Python code in {', '.join(dirs) or 'the game folders'} ({layers_text()})"
    if dirs in _announced:
        return text
    _announced.add(dirs)
    if print_fn is None:
        from rich.markup import escape

        from pipeline.core.console import out

        out.err.print(escape(text), soft_wrap=True)
    else:
        print_fn(text)
    return text
