"""Baselines from evidence other than recordings, through the CLI: a per-player counts CSV
(`arcstudy baselines --from-counts`, every rule, --compare, --write) and stand-alone human scorecard
summaries ingested beside a recording (`arcstudy build`, flagged as summary-sourced, never counted twice)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.workspace import Workspace
from pipeline.scoring.baseline_sources import read_published, reference_source

GAME = "cd82-fb555c5d"


def _invoke(*args: str):
    return CliRunner().invoke(app, ["--plain", *args])


def _level_costs(published: list[int]) -> list[list[int]]:
    """Completers' costs per level: levels 2.. have 4 completers, level 1 a fifth one. Every level's upper
    median is the published value except level 2, whose upper median is 4 above it and whose second best
    equals it."""
    costs = []
    for level, v in enumerate(published, start=1):
        if level == 2:
            costs.append([v - 5, v, v + 4, v + 6])
        else:
            costs.append([v - 3, v - 1, v, v + 2] + ([v + 10] if level == 1 else []))
    return costs


def _counts_csv(path: Path, costs: list[list[int]]) -> Path:
    lines = ["game_id,level_index,player_id,cumulative_actions,completed"]
    for p in range(5):
        total = 0
        for level, level_costs in enumerate(costs, start=1):
            if p < len(level_costs):
                total += level_costs[p]
                lines.append(f"{GAME},{level},player-{p},{total},true")
            else:
                lines.append(f"{GAME},{level},player-{p},,false")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_baselines_from_a_counts_file(tmp_path: Path):
    published = read_published(Path(reference_source().location), "upper-median").filter(
        pl.col("game_id") == GAME)["baseline_actions"].to_list()[0]
    costs = _level_costs(published)
    counts = _counts_csv(tmp_path / "counts.csv", costs)
    expected = {
        "upper-median": [sorted(c)[len(c) // 2] for c in costs],
        "second-best": [sorted(c)[1] for c in costs],
        "median": [statistics.median(c) for c in costs],
        "best": [min(c) for c in costs],
    }
    for rule, values in expected.items():
        out = tmp_path / f"{rule}.csv"
        res = _invoke("baselines", "--from-counts", str(counts), "--rule", rule, "--out", str(out))
        assert res.exit_code == 0, res.output
        df = pl.read_csv(out).sort("level_index")
        assert df["baseline_value"].to_list() == [float(v) for v in values], rule
        assert df["n_completers"].to_list() == [5] + [4] * (len(costs) - 1)
        assert df["n_players"].unique().to_list() == [5]
        # how sure: the counts file's levels get their intervals too. Level 1 has 5 completers; no interval
        # of order statistics reaches 95 % for the median then: the widest, [x_(1), x_(5)], covers with
        # P(1 <= B <= 4) = (5 + 10 + 10 + 5)/32, B ~ Binomial(5, 1/2)
        first = df.row(0, named=True)
        assert (first["interval_lower"], first["interval_upper"]) == (min(costs[0]), max(costs[0]))
        if rule in ("upper-median", "median"):
            assert first["interval_coverage"] == pytest.approx(30 / 32) and not first["is_interval_at_level"]
    assert expected["upper-median"][1] == published[1] + 4 and expected["second-best"][1] == published[1]

    # a games folder whose metadata.json has the published baseline and other fields
    meta = tmp_path / "games" / "cd82" / "fb555c5d" / "metadata.json"
    meta.parent.mkdir(parents=True)
    other = {"game_id": GAME, "title": "CD82", "tags": ["keyboard_click"], "default_fps": 30}
    meta.write_text(json.dumps({**other, "baseline_actions": published}))
    diff_csv = tmp_path / "diff.csv"
    res = _invoke("baselines", "--from-counts", str(counts), "--compare", str(tmp_path / "games"),
                  "--compare-published", "--write", "--out", str(diff_csv))
    assert res.exit_code == 0, res.output
    assert f"{len(published) - 1} of {len(published)} game-levels equal" in res.output
    assert "levels that disagree with published reference" in res.output
    # one disagreeing level per comparison: level 2, 4 above, and second-best gives the published value
    disagree = [ln.split("│")[1:-1] for ln in res.output.splitlines() if ln.startswith(f"│ {GAME} │ 2 ")]
    assert [[c.strip() for c in row] for row in disagree] == [
        [GAME, "2", str(published[1] + 4), str(published[1]), "+4", "second-best"]] * 2
    diff = pl.read_csv(diff_csv)
    assert set(diff["compared_with"].to_list()) == {str(tmp_path / "games"), "published reference"}
    for _, sub in diff.group_by("compared_with"):
        sub = sub.sort("level_index")
        assert sub["status"].to_list() == ["equal", "differs"] + ["equal"] * (len(published) - 2)
        assert sub["delta"].to_list()[1] == 4.0
        assert sub["reproduced_by"].to_list()[1] == "second-best"
        assert "upper-median" in sub["reproduced_by"].to_list()[0].split()
    doc = json.loads(meta.read_text())
    assert doc == {**other, "baseline_actions": expected["upper-median"]}

    # a bad row: reported with file and line, exit 3, the good rows still used
    bad = tmp_path / "bad.csv"
    bad.write_text(counts.read_text() + f"{GAME},1,player-9,lots,true\n")
    n_line = len(counts.read_text().splitlines()) + 1
    res = _invoke("baselines", "--from-counts", str(bad), "--rule", "best", "--out", str(tmp_path / "b.csv"))
    assert res.exit_code == 3, res.output
    assert f"{bad}:{n_line}" in res.output and "bad_count" in res.output
    df = pl.read_csv(tmp_path / "b.csv").sort("level_index")
    assert df["baseline_value"].to_list() == [float(v) for v in expected["best"]]
    assert df["n_players"].unique().to_list() == [6]  # the rejected row's player still played


def _summary(shared_dir: Path) -> dict:
    path = next((shared_dir / "samples" / "arc-agi-3" / "human" / "vc33").glob("*.recording.jsonl"))
    return json.loads(path.read_text().splitlines()[-1])["data"]


def _card_variant(summary: dict, guid: str, pairs: list[list[int]]) -> dict:
    doc = json.loads(json.dumps(summary))
    (card,) = doc["cards"].values()
    card.update(guids=[guid], actions_by_level=[pairs], actions=[pairs[-1][1] + 2], levels_completed=[len(pairs)],
                total_actions=pairs[-1][1] + 2)
    doc.update(total_actions=card["total_actions"], levels_completed=len(pairs))
    return doc


def test_build_counts_standalone_summaries_once(tmp_path: Path, db_path: Path, shared_dir: Path):
    sample = next((shared_dir / "samples" / "arc-agi-3" / "human" / "vc33").glob("*.recording.jsonl"))
    summary = _summary(shared_dir)
    (game_id,) = summary["cards"]
    inp = tmp_path / "in"
    (inp / "vc33").mkdir(parents=True)
    (inp / "vc33" / sample.name).write_text(sample.read_text())  # the recording: card costs 8, 8
    (inp / "own-card.json").write_text(json.dumps(summary))   # its own card again: counted once
    (inp / "s1.json").write_text(json.dumps(_card_variant(summary, "00000000-0000-4000-8000-000000000001",
                                                          [[1, 20], [2, 50]])))
    (inp / "s2.json").write_text(json.dumps(_card_variant(summary, "00000000-0000-4000-8000-000000000002",
                                                          [[1, 12]])))
    bare = _card_variant(summary, "00000000-0000-4000-8000-000000000003", [[1, 3], [2, 4]])["cards"][game_id]
    (inp / "s3.json").write_text(json.dumps(bare))  # a bare Card (spec/formats.md §C.1)
    res = _invoke("ingest", "--db", str(db_path), str(inp))
    assert res.exit_code == 0, res.output
    res = _invoke("build", "--db", str(db_path), "--no-figures")
    assert res.exit_code == 0, res.output
    assert "baselines: 3 players counted from human scorecard summaries" in res.output
    with Workspace(db_path, read_only=True) as ws:
        costs = ws.read("SELECT * FROM out_arc3__baseline_costs ORDER BY baseline_player_id, level_index")
        levels = ws.read("SELECT * FROM out_arc3__level_baselines WHERE baseline_rule = 'upper-median' "
                         "ORDER BY level_index")
    by_player = {p: sub.sort("level_index")["level_cost"].to_list()
                 for (p,), sub in costs.group_by("baseline_player_id")}
    assert by_player == {sample.name.split(".")[0]: [8, 8], "00000000-0000-4000-8000-000000000001": [20, 30],
                         "00000000-0000-4000-8000-000000000002": [12], "00000000-0000-4000-8000-000000000003": [3, 1]}
    summary_rows = costs.filter(pl.col("is_summary_sourced"))
    assert summary_rows["evidence"].unique().to_list() == ["card-summary"]
    assert summary_rows["baseline_player_id"].n_unique() == 3
    assert costs.filter(~pl.col("is_summary_sourced"))["evidence"].unique().to_list() == ["recording-card"]
    # level 1: 8, 20, 12, 3 -> 3, 8, 12, 20: upper median 12 (8 if the recording's card counted twice)
    # level 2: 8, 30, 1 -> 1, 8, 30: upper median 8
    assert levels["baseline_value"].to_list()[:2] == [12.0, 8.0]
    assert levels["n_completers"].to_list()[:2] == [4, 3]
    assert levels["n_summary_costs"].to_list()[:2] == [3, 2] and levels["n_card_costs"].to_list()[:2] == [1, 1]
    assert levels["n_players"].unique().to_list() == [4]


# ---- a baseline covers every level of the game, reached or not ----------------------------------------------
# bg41 (shipped, 7 levels). Evidence that reaches only its first levels (human cards on which nobody got further,
# or a counts file that lists only the completed levels) is not a shorter game: spec/scoring.md §C.5 gives the
# levels without completers no baseline, and the game is unscorable for that rule.
SHIPPED = "bg41-a6ea70d5"


def _card(guids: list[str], pairs: list[list[list[int]]]) -> dict:
    actions = [p[-1][1] + 3 if p else 0 for p in pairs]
    return {"game_id": SHIPPED, "total_plays": len(guids), "guids": guids,
            "levels_completed": [len(p) for p in pairs], "states": ["NOT_FINISHED"] * len(guids),
            "actions": actions, "actions_by_level": pairs, "resets": [0] * len(guids),
            "total_actions": sum(actions)}


def _built_upper_medians(humans: Path, card: dict, db_path: Path) -> list[tuple[int, float | None]]:
    """Ingest `card` (in a card wrapper under `humans`), build, and read (level, upper-median baseline)."""
    won = int("WIN" in card["states"])
    (humans / "cards.json").write_text(json.dumps({"won": won, "played": 1, "total_actions": card["total_actions"],
                                                    "levels_completed": 3, "cards": {card["game_id"]: card}}))
    assert _invoke("ingest", str(humans), "--db", str(db_path)).exit_code == 0
    assert _invoke("build", "--db", str(db_path)).exit_code == 0
    with Workspace(db_path, read_only=True) as ws:
        return ws.read("SELECT level_index, baseline_value FROM out_arc3__level_baselines "
                       "WHERE baseline_rule = 'upper-median' ORDER BY level_index").rows()


def test_card_evidence_short_of_the_last_levels_leaves_them_without_baseline(tmp_path: Path, db_path: Path):
    humans = tmp_path / "humans"
    humans.mkdir()
    guids = [f"aaaaaaaa-0000-0000-0000-00000000000{i}" for i in range(1, 4)]
    card = _card(guids, [[[1, 10], [2, 50]], [[1, 6], [2, 20], [3, 40]], [[1, 20]]])
    agent = tmp_path / "agent.card.json"  # completes 3 of the 7 levels at the humans' pace
    agent.write_text(json.dumps(_card(["bbbbbbbb-0000-0000-0000-000000000001"], [[[1, 10], [2, 50], [3, 70]]])))
    rows = _built_upper_medians(humans, card, db_path)
    assert rows == [(1, 10.0), (2, 40.0), (3, 20.0), (4, None), (5, None), (6, None), (7, None)]

    written = tmp_path / "meta"
    r = _invoke("baselines", "--db", str(db_path), "--write-metadata", str(written))
    assert "no baseline for level(s) [4, 5, 6, 7]" in r.output
    assert not (written / "bg41" / "a6ea70d5" / "metadata.json").exists()  # never a 3-level baseline

    r = _invoke("score", str(agent), "--db", str(db_path), "--out", str(tmp_path / "scored"), "--no-figures")
    card = json.loads((tmp_path / "scored" / "scorecard__arc-agi-3_2026-04.json").read_text())
    (run,) = [run for env in card["environments"] for run in env["runs"]]
    assert run["score"] == 0 and "not available" in run["message"]  # unscorable, never 100 on 3 of 7 levels


def test_counts_of_completed_levels_only_never_shorten_a_games_baseline(tmp_path: Path):
    games = tmp_path / "games"
    meta = games / "bg41" / "a6ea70d5" / "metadata.json"
    meta.parent.mkdir(parents=True)
    before = json.dumps({"game_id": SHIPPED, "baseline_actions": [10, 38, 39, 42, 39, 110, 83]})
    meta.write_text(before)
    counts = tmp_path / "counts.csv"  # only the completed levels are listed (README: incomplete rows may go)
    counts.write_text("game_id,level_index,player_id,actions,completed\n"
                      f"{SHIPPED},1,a,10,true\n{SHIPPED},2,a,30,true\n")
    r = _invoke("baselines", "--from-counts", str(counts), "--compare", str(games), "--write")
    assert "no baseline for level(s) [3, 4, 5, 6, 7]" in r.output, r.output
    assert meta.read_text() == before


def test_write_never_replaces_a_baseline_of_another_level_count(tmp_path: Path):
    """A game arcstudy does not know: its metadata.json in the folder says how many levels it has."""
    games = tmp_path / "games"
    meta = games / "zz99" / "0badc0de" / "metadata.json"
    meta.parent.mkdir(parents=True)
    before = json.dumps({"game_id": "zz99-0badc0de", "baseline_actions": [5, 6, 7]})
    meta.write_text(before)
    counts = tmp_path / "counts.csv"
    counts.write_text("game_id,level_index,player_id,actions,completed\n"
                      "zz99-0badc0de,1,a,10,true\nzz99-0badc0de,2,a,30,true\n")
    r = _invoke("baselines", "--from-counts", str(counts), "--compare", str(games), "--write")
    assert r.exit_code == 3, r.output
    assert "not written: zz99-0badc0de: its metadata.json lists 3 levels and the baseline covers 2" in r.output
    assert meta.read_text() == before


@pytest.mark.parametrize(("won", "levels"), [(False, 4), (True, 3)])
def test_cards_of_a_game_nobody_knows_say_whether_the_game_went_on(tmp_path: Path, db_path: Path, won, levels):
    """zz99 is no shipped or published game and no metadata was ingested: its level count comes from the cards. A
    won play completed every level (3 here); when nobody won, the game went on past the 3 levels the best
    completed, so level 4 has no baseline and the game is unscorable, never a 3-level game an agent wins at 100."""
    game = "zz99-0000aaaa"
    humans = tmp_path / "humans"
    humans.mkdir()
    pairs = [[[1, 10], [2, 30], [3, 60]], [[1, 12], [2, 40]], [[1, 9], [2, 35], [3, 80]]]
    card = _card([f"aaaaaaaa-0000-0000-0000-00000000000{i}" for i in range(1, 4)], pairs)
    card.update(game_id=game, states=["WIN" if won else "GAME_OVER", "GAME_OVER", "GAME_OVER"])
    rows = _built_upper_medians(humans, card, db_path)
    assert [level for level, _ in rows] == list(range(1, levels + 1))
    assert all(value is not None for _, value in rows[:3]) and (won or rows[3][1] is None)


def test_counts_beyond_a_known_games_levels_are_left_out_and_said(tmp_path: Path):
    counts = tmp_path / "over.csv"  # bg41 has 7 levels; the file goes to 9
    counts.write_text("game_id,level_index,player_id,actions,completed\n"
                      + "".join(f"{SHIPPED},{lv},a,{10 * lv},true\n" for lv in range(1, 10)))
    written = tmp_path / "meta"
    r = _invoke("baselines", "--from-counts", str(counts), "--write-metadata", str(written))
    assert r.exit_code == 3, r.output
    assert f"{SHIPPED} has 7 levels; its rows for level(s) 8-9 are not the game's" in " ".join(r.output.split())
    doc = json.loads((written / "bg41" / "a6ea70d5" / "metadata.json").read_text())
    assert doc["baseline_actions"] == [10 * lv for lv in range(1, 8)]
