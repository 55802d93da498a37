"""arcstudy's own games, laid out exactly like the official ``environment_files``.

    games/<id>/<version>/<id>.py          the game (``from arcengine import ...`` only)
    games/<id>/<version>/metadata.json    official fields (game_id, title, tags, baseline_actions, ...)
    games/<id>/<version>/solutions/       win.jsonl (a winning playthrough of every level, toolkit
                                          recording format), lose.jsonl (a playthrough that ends in
                                          GAME_OVER), levels.json (explorer facts per level)

``<version>`` is the first 8 hex digits of the sha256 of the game file, so any change to a game
gives it a new id. See games/README.md for the games themselves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["GAMES_DIR", "GameEntry", "list_games", "game_dir"]

GAMES_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class GameEntry:
    """One shipped game version."""

    game_id: str  # "<id>-<version>"
    short_id: str
    version: str
    directory: Path
    metadata: dict[str, Any]

    @property
    def source(self) -> Path:
        return self.directory / f"{self.short_id}.py"

    @property
    def solutions_dir(self) -> Path:
        return self.directory / "solutions"

    @property
    def level_facts(self) -> list[dict[str, Any]]:
        """Per-level explorer facts written when the game was published (``levels.json``)."""
        path = self.solutions_dir / "levels.json"
        return json.loads(path.read_text())["levels"] if path.is_file() else []


def list_games(root: Path | str | None = None) -> list[GameEntry]:
    """Every ``<id>/<version>/metadata.json`` under ``root`` (default: this package), sorted by id."""
    base = Path(root) if root is not None else GAMES_DIR
    out = []
    for meta in sorted(base.glob("*/*/metadata.json")):
        data = json.loads(meta.read_text())
        game_id = data["game_id"]
        short_id, _, version = game_id.partition("-")
        out.append(GameEntry(game_id, short_id, version, meta.parent, data))
    return out


def game_dir(game: str, root: Path | str | None = None) -> Path:
    """The folder of ``game`` (a short id such as ``pv63`` or a full ``pv63-<version>``)."""
    for entry in list_games(root):
        if game in (entry.game_id, entry.short_id):
            return entry.directory
    raise LookupError(f"no game {game!r} in {root or GAMES_DIR}")
