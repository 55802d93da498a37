"""Baseline resolution for `arcstudy score` (pipeline/scoring/baseline_sources.py): sources, order, rules, flags."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.manifest import sha256_file
from pipeline.core.workspace import Workspace
from pipeline.scoring import get_policy
from pipeline.scoring.baseline_sources import (
    REFERENCE_CSV,
    BaselineSourceError,
    read_published,
    reference_source,
    resolve_baselines,
    source_from_db,
    source_from_games_dirs,
    source_from_path,
)
from schemas.arc3 import MAX_BASELINE_ACTIONS
from schemas.validate import conform

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
P2604, P2603 = get_policy("arc-agi-3/2026-04"), get_policy("arc-agi-3/2026-03")
REF = pl.read_csv(SHARED / "reference" / "arc-agi-3-public-games.csv", infer_schema=False)


def ref_values(game_id: str, snapshot: str) -> tuple[int, ...]:
    row = REF.filter((pl.col("game_id") == game_id) & (pl.col("snapshot") == snapshot)).row(0, named=True)
    return tuple(json.loads(row["baseline_actions"]))


def metadata_dir(root: Path, games: dict[str, list[int] | None]) -> Path:
    for game_id, values in games.items():
        code, version = game_id.split("-")
        folder = root / code / version
        folder.mkdir(parents=True)
        doc = {"game_id": game_id, "title": code.upper()}
        if values is not None:
            doc["baseline_actions"] = values
        (folder / "metadata.json").write_text(json.dumps(doc))
    return root


def test_shipped_reference_is_the_shared_file():
    assert REFERENCE_CSV.read_bytes() == (SHARED / "reference" / "arc-agi-3-public-games.csv").read_bytes()
    assert (REFERENCE_CSV.parent / "README.md").is_file()


def test_reference_prefers_the_policy_rule_then_current():
    src = reference_source()
    now = resolve_baselines(["ls20-9607627b"], P2604, [src])["ls20-9607627b"]
    assert now.baseline_actions == ref_values("ls20-9607627b", "current") == (22, 123, 73, 84, 96, 192, 186)
    assert (now.source, now.rule, now.flags) == ("reference-csv", "upper-median", ())
    paper = resolve_baselines(["ls20-9607627b"], P2603, [src])["ls20-9607627b"]
    assert paper.baseline_actions == ref_values("ls20-9607627b", "pre-2026-04-14")
    assert paper.rule == "second-best" and paper.flags == ()
    # A version that only exists in the current snapshot: used, and the rule mismatch is reported.
    only_current = resolve_baselines(["ar25-0c556536"], P2603, [src])["ar25-0c556536"]
    assert only_current.baseline_actions == ref_values("ar25-0c556536", "current")
    assert only_current.flags == ("baseline_rule_differs_from_policy",)
    assert only_current.sha256 == sha256_file(REFERENCE_CSV)


def test_first_source_that_knows_the_game_wins(tmp_path):
    explicit = source_from_path(metadata_dir(tmp_path / "explicit", {"aa11-0000000a": [3, 4],
                                                                     "bb22-0000000b": None}))
    games = source_from_games_dirs([metadata_dir(tmp_path / "games", {"aa11-0000000a": [9, 9],
                                                                       "bb22-0000000b": [5],
                                                                       "cc33-0000000c": [7, 8, 9]})])
    got = resolve_baselines(["cc33-0000000c", "aa11-0000000a", "bb22-0000000b", "zz99-0000000f",
                             "ls20-9607627b"], P2604, [explicit, games, reference_source()],
                            n_levels={"cc33-0000000c": 4})
    assert list(got) == sorted(got)
    assert (got["aa11-0000000a"].baseline_actions, got["aa11-0000000a"].source) == ((3, 4), "baselines-dir")
    # Known to the explicit source without a baseline: unscorable there, not filled in from a later source.
    assert got["bb22-0000000b"].baseline_actions is None and got["bb22-0000000b"].has_metadata
    assert got["bb22-0000000b"].flags == ("baseline_missing",)
    assert got["cc33-0000000c"].source == "games-dir"
    assert got["cc33-0000000c"].flags == ("baseline_length_differs_from_levels",)
    assert got["ls20-9607627b"].source == "reference-csv"
    nothing = got["zz99-0000000f"]
    assert (nothing.has_metadata, nothing.source, nothing.baseline_actions) == (False, "none", None)


def test_baselines_in_a_linked_game_folder_are_read(tmp_path):
    # Path.rglob did not follow a symlinked folder: its metadata.json baselines were not found
    elsewhere = metadata_dir(tmp_path / "elsewhere", {"aa11-0000000a": [3, 4]})
    games = metadata_dir(tmp_path / "games", {"bb22-0000000b": [5]})
    (games / "linked").symlink_to(elsewhere, target_is_directory=True)
    for source in (source_from_path(games), source_from_games_dirs([games])):
        assert set(source.load("upper_median")) == {"aa11-0000000a", "bb22-0000000b"}


def test_a_fifo_metadata_json_in_a_baselines_folder_is_named_not_read(tmp_path, fifo_unblocked):
    # the folder's readers (the source's digest, baselines --compare DIR) blocked on it for good
    games = metadata_dir(tmp_path / "games", {"bb22-0000000b": [5]})
    fifo = games / "cc33" / "0000000c" / "metadata.json"
    fifo.parent.mkdir(parents=True)
    fifo_unblocked(fifo)
    assert set(source_from_path(games).load("upper_median")) == {"bb22-0000000b"}  # the others still count
    with pytest.raises(BaselineSourceError, match="not a regular file") as err:
        read_published(games, "upper_median")
    assert str(fifo) in str(err.value)
    (games / "bb22" / "0000000b" / "metadata.json").unlink()
    with pytest.raises(BaselineSourceError, match=r"no metadata.json with a game_id .*1 skipped: .*not a regular"):
        source_from_path(games)


def test_csv_shapes(tmp_path):
    wide = tmp_path / "wide.csv"
    pl.DataFrame({"game_id": ["aa11-0000000a"], "baseline_actions": ["[4, 8, 16]"]}).write_csv(wide)
    got = resolve_baselines(["aa11-0000000a"], P2604, [source_from_path(wide)])["aa11-0000000a"]
    assert (got.baseline_actions, got.source, got.rule) == ((4, 8, 16), "baselines-csv", None)

    # The long CSV `arcstudy baselines --out` writes (out_arc3__level_baselines rows of one rule).
    long = tmp_path / "long.csv"
    pl.DataFrame({"game_id": ["aa11-0000000a"] * 2 + ["bb22-0000000b"] * 2, "level_index": [2, 1, 1, 2],
                  "baseline_rule": ["second-best"] * 4, "baseline_value": [12.0, 7.0, 5.0, None],
                  "n_completers": [3, 3, 2, 1]}).write_csv(long)
    got = resolve_baselines(["aa11-0000000a", "bb22-0000000b"], P2603, [source_from_path(long)])
    assert got["aa11-0000000a"].baseline_actions == (7, 12) and got["aa11-0000000a"].rule == "second-best"
    assert got["bb22-0000000b"].baseline_actions is None
    assert got["bb22-0000000b"].flags == ("baseline_too_few_completers",)
    # A single-rule file scored under another policy: used, and flagged.
    other = resolve_baselines(["aa11-0000000a"], P2604, [source_from_path(long)])["aa11-0000000a"]
    assert other.flags == ("baseline_rule_differs_from_policy",)

    half = tmp_path / "half.csv"
    pl.DataFrame({"game_id": ["aa11-0000000a"], "level_index": [1], "baseline_value": [7.5]}).write_csv(half)
    with pytest.raises(BaselineSourceError, match="whole number"):
        resolve_baselines(["aa11-0000000a"], P2604, [source_from_path(half)])
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(BaselineSourceError, match="needs columns"):
        source_from_path(bad)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BaselineSourceError, match="no metadata.json"):
        source_from_path(empty)


@pytest.mark.parametrize(("values", "words"), [
    ("[99999999999999999999999, 1]", "99999999999999999999999 is above 1,000,000,000 actions"),
    ("[1e30, 1]", "1e+30 is above 1,000,000,000 actions"),
    ("[1.5, 2]", "1.5 is not a whole number of actions"),
    ("[-3, 2]", "-3 is not a number of actions"),
    ("[null]", "a baseline value is missing"),
    ("5", "baseline_actions must be a list of action counts, got 5"),
    # one value per level: a million once took minutes and gigabytes to compare (`baselines --compare`)
    (str([1] * 255), "baseline_actions has 255 values, one per level, and a game has at most 254 levels"),
])
def test_a_baseline_no_table_can_hold_as_written_names_its_file(tmp_path, values: str, words: str):
    """A wide CSV's baseline_actions once went through int(): 1.5 became 1 silently, 5 and 1e30 were
    tracebacks; a metadata.json's 10**23 was rounded through a float and, past 64 bits, made the set-based and
    the pure scorer disagree (RuntimeError). Each is now refused, naming the file or game."""
    wide = tmp_path / "wide.csv"
    pl.DataFrame({"game_id": ["aa11-0000000a"], "baseline_actions": [values]}).write_csv(wide)
    with pytest.raises(BaselineSourceError, match=re.escape(f"{wide}: row 2 (aa11-0000000a): ") + ".*" + re.escape(words)):
        resolve_baselines(["aa11-0000000a"], P2604, [source_from_path(wide)])
    meta = metadata_dir(tmp_path / "meta", {"aa11-0000000a": json.loads(values)})
    if isinstance(json.loads(values), list):
        with pytest.raises(BaselineSourceError, match="metadata.json: "):
            source_from_path(meta)


def test_the_largest_baseline_is_read_exactly(tmp_path):
    top = MAX_BASELINE_ACTIONS
    wide = tmp_path / "wide.csv"
    pl.DataFrame({"game_id": ["aa11-0000000a"], "baseline_actions": [f"[{top}, 3]"]}).write_csv(wide)
    long = tmp_path / "long.csv"
    pl.DataFrame({"game_id": ["aa11-0000000a"] * 2, "level_index": [1, 2],
                  "baseline_value": [str(top), "3"]}).write_csv(long)
    meta = metadata_dir(tmp_path / "meta", {"aa11-0000000a": [top, 3]})
    for source in (source_from_path(wide), source_from_path(long), source_from_path(meta)):
        assert resolve_baselines(["aa11-0000000a"], P2604, [source])["aa11-0000000a"].baseline_actions == (top, 3)


@pytest.mark.parametrize("value", [MAX_BASELINE_ACTIONS + 1, 2**62, 2**63 - 1])
def test_a_csv_baseline_beyond_the_metadata_bound_is_refused_naming_file_row_and_value(tmp_path, value: int):
    """A metadata.json baseline is bounded at ingest (2**62 once made the set-based and per-play scores disagree
    and `score` stopped); a --baselines CSV had no bound at all. Both CSV shapes now refuse it, saying where."""
    wide = tmp_path / "wide.csv"
    pl.DataFrame({"game_id": ["aa11-0000000a", "bb22-0000000b"],
                  "baseline_actions": ["[4, 5]", f"[3, {value}]"]}).write_csv(wide)
    with pytest.raises(BaselineSourceError, match=re.escape(
            f"{wide}: row 3 (bb22-0000000b): baseline value {value} is above 1,000,000,000 actions")):
        resolve_baselines(["bb22-0000000b"], P2604, [source_from_path(wide)])
    long = tmp_path / "long.csv"  # rows out of level order: the row named is the file's
    pl.DataFrame({"game_id": ["bb22-0000000b"] * 3, "level_index": [3, 1, 2],
                  "baseline_value": ["7", str(value), "5"]}).write_csv(long)
    with pytest.raises(BaselineSourceError, match=re.escape(
            f"{long}: row 3 (bb22-0000000b level 1): baseline value {value} is above 1,000,000,000 actions")):
        resolve_baselines(["bb22-0000000b"], P2604, [source_from_path(long)])


def _env_row(game_id: str, values: list[int] | None, day: int, file_char: str) -> dict:
    return {"game_id": game_id, "file_id": file_char * 64, "game_code": game_id[:4], "version": game_id[5:],
            "baseline_actions": values, "date_downloaded": datetime(2026, 1, day, tzinfo=UTC),
            "metadata_json": "{}", "flags": []}


def test_database_sources(tmp_path):
    with Workspace(tmp_path / "db.duckdb") as ws:
        assert source_from_db(ws) == []
        ws.insert_frame("core_arc3__environments", conform("core_arc3__environments", [
            _env_row("aa11-0000000a", [1, 2], 1, "a"), _env_row("aa11-0000000a", [5, 6], 3, "b"),
            _env_row("bb22-0000000b", [9], 2, "c")]))
        levels = [{"game_id": "bb22-0000000b", "level_index": 1, "baseline_rule": rule, "baseline_value": value,
                   "n_completers": 4, "min_completers": 1, "is_too_few_completers": False, "n_players": 5,
                   "n_card_costs": 0, "n_summary_costs": 0, "is_default_rule": rule == "upper-median"}
                  for rule, value in (("upper-median", 11.0), ("second-best", 8.0), ("median", 10.5),
                                      ("best", 6.0))]
        ws.insert_frame("out_arc3__level_baselines", conform("out_arc3__level_baselines", levels))
        sources = source_from_db(ws)
    assert [s.kind for s in sources] == ["db-level-baselines", "db-environments"]
    now = resolve_baselines(["aa11-0000000a", "bb22-0000000b"], P2604, sources)
    assert (now["bb22-0000000b"].baseline_actions, now["bb22-0000000b"].source) == ((11,), "db-level-baselines")
    assert now["bb22-0000000b"].rule == "upper-median"
    assert (now["aa11-0000000a"].baseline_actions, now["aa11-0000000a"].source) == ((5, 6), "db-environments")
    paper = resolve_baselines(["bb22-0000000b"], P2603, sources)["bb22-0000000b"]
    assert paper.baseline_actions == (8,) and paper.rule == "second-best"
