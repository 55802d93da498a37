"""`arcstudy explore` and the explorer's exports, on the hand-built fixture games."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.explore import optimal_actions, optimal_provider

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explore"
runner = CliRunner()


def test_json_summary():
    result = runner.invoke(app, ["--plain", "explore", "lv02", "--environments", str(FIXTURES), "--json",
                                 "--budget", "2"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 1 and rows[0]["level"] == 1
    assert rows[0]["optimal_actions"] == 2 and abs(rows[0]["random_win_upper"] - 37 / 64) < 1e-12
    assert abs(rows[0]["random_win_within_lower"] - 1 / 4) < 1e-12  # two ACTION1 in a row
    assert rows[0]["optimal_path"] == [{"action": 1}, {"action": 1}]


def test_out_writes_graph_graphml_figure_and_manifest(tmp_path):
    result = runner.invoke(app, ["--plain", "explore", "cr01", "--level", "1", "--environments", str(FIXTURES),
                                 "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    game_dir = next(tmp_path.glob("cr01-*"))
    level = game_dir / "level_1"
    graph = json.loads((level / "graph.json").read_text())
    assert len(graph["nodes"]) == 7 and len(graph["edges"]) == 15
    assert graph["summary"]["optimal_actions"] == 4
    assert {n["kind"] for n in graph["nodes"]} == {"normal", "win", "lose"}
    root = ET.parse(level / "graph.graphml").getroot()
    ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    assert len(root.findall(".//g:node", ns)) == 7 and len(root.findall(".//g:edge", ns)) == 15
    for suffix in ("png", "svg", "vl.json"):
        assert (level / f"figure.{suffix}").stat().st_size > 0
    manifest = json.loads((game_dir / "manifest.json").read_text())
    assert str(level / "graph.json") in manifest["outputs"]
    summary = json.loads((game_dir / "summary.json").read_text())
    assert summary["levels"][0]["nodes"] == 7


def test_usage_errors_exit_2():
    for args in (["--clicks", "everything"], ["--identity", "hash"], ["--level", "9"], ["--max-nodes", "0"]):
        result = runner.invoke(app, ["--plain", "explore", "cr01", "--environments", str(FIXTURES), *args])
        assert result.exit_code == 2, (args, result.output)


def test_unknown_game_exits_1():
    result = runner.invoke(app, ["--plain", "explore", "zz99", "--environments", str(FIXTURES)])
    assert result.exit_code == 1


def test_optimal_actions_for_transforms():
    assert optimal_actions("cr01", 1, FIXTURES) == 4
    assert optimal_actions("cr01", 2, FIXTURES) == 5
    assert optimal_actions("cr01", 3, FIXTURES) is None  # no such level
    assert optimal_actions("zz99", 1, FIXTURES) is None
    # our games carry the explorer's optimum; exploring again gives the same number
    from games import list_games

    entry = min(list_games(), key=lambda g: g.level_facts[1]["nodes"])
    shipped = optimal_provider(entry.game_id, 2)
    assert shipped == entry.level_facts[1]["optimal_actions"]
    assert optimal_actions(entry.game_id, 2, use_shipped=False) == shipped


@pytest.mark.parametrize("args", [["--budget", "-5"], ["--max-seconds", "-1"], ["--max-seconds", "nan"],
                                  ["--max-nodes", "0"]])
def test_negative_or_nonsense_limits_are_usage_errors(args):
    """--budget -5 once ran and printed P(random wins) as if no budget was given."""
    result = CliRunner().invoke(app, ["--plain", "explore", "pv63", "--level", "1", *args])
    assert result.exit_code == 2, result.output
