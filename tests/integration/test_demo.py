"""`arcstudy demo` end to end on the demo scale, as `make demo` runs it (CI runs this as part of make test)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path, Path]:
    root = tmp_path_factory.mktemp("demo")
    data, out = root / "data", root / "reports"
    res = subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", "demo", "--data", str(data), "--out",
                          str(out)], capture_output=True, text=True, timeout=1200)
    return res, data, out


def test_demo_runs_every_step_and_says_where_to_look(demo):
    res, data, out = demo
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    for command in ("simulate", "ingest", "build", "baselines", "score", "replay-harc", "harc-analyses", "report"):
        assert f"$ arcstudy {command} " in res.stdout
    assert f"Open {out / 'index.html'}" in res.stdout
    assert (data / "SIMULATION.json").exists()


def test_index_links_every_report_and_all_links_resolve(demo):
    _, _, out = demo
    index = (out / "index.html").read_text()
    hrefs = re.findall(r'href="([^"#:]+)"', index)
    for name in ("calibration.html", "scores.html", "harc.html", "static/calibration.html"):
        assert name in hrefs
    missing = [h for h in hrefs if not (out / h).exists()]
    assert not missing
    assert sum(h.endswith(".png") for h in hrefs) >= 10


def test_low_effort_detector_precision_and_recall(demo):
    _, _, out = demo
    truth = pl.read_csv(out / "calibration__low_effort_ground_truth.csv")
    tp = truth.filter(pl.col("outcome") == "true positive").height
    fp = truth.filter(pl.col("outcome") == "false positive").height
    fn = truth.filter(pl.col("outcome") == "false negative").height
    assert tp >= 2
    assert tp / (tp + fp) >= 0.9
    assert tp / (tp + fn) >= 0.9


def test_agents_are_replay_verified_and_ranked_sensibly(demo):
    _, _, out = demo
    checks = pl.read_csv(out / "scores__replay_checks.csv")
    assert set(checks["verification_status"]) == {"verified"}
    scores = {}
    for agent in ("random", "explorer", "near-optimal"):
        manifest = (out / "scores" / agent / "manifest.json").read_text()
        card = re.search(r'"card_id": "([^"]+)"', manifest) or re.search(r"(arcstudy-[0-9a-f]{16})", manifest)
        scores[agent] = card.group(1)
    totals = pl.read_csv(out / "scores__totals.csv").filter(pl.col("policy_id") == "arc-agi-3/2026-04")
    by_card = dict(zip(totals["card_id"], totals["total_score"], strict=True))
    near, explorer, rand = (by_card[scores[a]] for a in ("near-optimal", "explorer", "random"))
    # Within the harness budget (5x the human baseline per level) only a player who knows the winning lines
    # scores well; the random agent and the exploring agent pay for what they do not know.
    assert near > 80
    assert max(explorer, rand) < 50


def test_each_figure_has_one_home(demo):
    """The reports draw every figure (figures/<report>/, and static/figures/<report>/ for the static-task study's
    own report); the steps before them do not draw the same charts into demo.build/figures, harc/figures or
    scores/<agent>/figures."""
    import hashlib

    _, _, out = demo
    pngs = sorted(out.rglob("*.png"))
    homes = [p.relative_to(out).parts[:2] for p in pngs]
    assert pngs and all(h[0] == "figures" or h == ("static", "figures") for h in homes), pngs
    digests = [hashlib.sha256(p.read_bytes()).hexdigest() for p in pngs]
    assert len(set(digests)) == len(digests)
    assert not [p for p in out.rglob("*") if "arcstudy-" in p.name]  # named after the agents, not the hash


def test_each_step_records_the_command_it_ran(demo):
    import json
    import shlex

    _, data, out = demo
    for agent in ("random", "explorer", "near-optimal"):
        command = json.loads((out / "scores" / agent / "manifest.json").read_text())["command"]
        words = shlex.split(command)
        assert words[:3] == ["arcstudy", "score", str(data / "arc3" / "agents" / agent)], command
        assert words[words.index("--out") + 1] == str(out / "scores" / agent)
    harc = json.loads((out / "harc" / "manifest.json").read_text())["command"]
    assert shlex.split(harc)[:2] == ["arcstudy", "harc-analyses"]
    manifests = [json.loads(p.read_text()) for p in out.rglob("*.json") if p.name.endswith("manifest.json")]
    verbs = {shlex.split(m["command"])[1] for m in manifests}
    assert {"ingest", "build", "baselines", "score", "harc-analyses", "report"} <= verbs  # never the demo's own
    assert "demo" not in verbs


def test_index_is_grouped_by_audience(demo):
    _, _, out = demo
    text = (out / "index.html").read_text()
    sections = dict(re.findall(r'<section class="audience" id="([^"]+)">(.*?)</section>', text, re.S))
    assert list(sections)[:3] == ["analysts-human-calibration", "organizers-scores-and-baselines",
                                  "researchers-h-arc-and-traces"]
    organizers = sections["organizers-scores-and-baselines"]
    assert 'href="scores.html"' in organizers and 'href="baselines.csv"' in organizers
    assert all(f'href="scores/{a}/scorecard__arc-agi-3_2026-04.json"' in organizers
               for a in ("random", "explorer", "near-optimal"))
    assert "<dt>agents scored</dt><dd>4</dd>" in organizers


REGENERATE = ("regenerate them: make baselines (arcstudy demo --fresh, then arcstudy baselines --db "
              "reports/demo/demo.duckdb --write-metadata games; games/README.md)")


def test_shipped_baselines_are_the_demo_study_s(demo):
    """games/*/metadata.json baseline_actions are what the shipped demo study recomputes (the demo's `baselines
    --compare games` step): a change to the simulator or the baseline rule that moves them fails here, not in a
    user's first hour ("baseline moved +283%" alarms in the calibration report, two scores for one card)."""
    _, _, out = demo
    diff = pl.read_csv(out / "baselines.csv")
    assert diff.height >= 26  # every level of the four shipped games
    stale = diff.filter(pl.col("status") != "equal")
    assert stale.height == 0, f"shipped baselines drifted from the demo study ({REGENERATE}):\n{stale}"


def test_scoring_with_the_shipped_games_agrees_with_the_demo_report(demo, tmp_path):
    """One card id, one score: `score --games games` on a fresh database (baselines from the games' metadata) gives
    the demo report's total under every policy whose baseline rule is the one the metadata holds."""
    import json

    from games import GAMES_DIR
    from pipeline.core.config import load_config
    from pipeline.scoring.policies import POLICIES

    _, data, out = demo
    res = subprocess.run([sys.executable, "-m", "pipeline.cli", "--plain", "score", str(data / "arc3" / "agents" /
                          "explorer"), "--policy", "all", "--games", str(GAMES_DIR), "--db", str(tmp_path / "s.duckdb"),
                          "--out", str(tmp_path / "scores"), "--no-figures"], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    rule = load_config().baselines.rule  # the demo builds with the defaults, as games/README.md's command does
    totals = pl.read_csv(out / "scores__totals.csv")
    compared = 0
    for policy_id, policy in POLICIES.items():
        if policy.baseline_rule != rule:
            continue  # metadata.json holds one rule's values; other rules come from the database only
        card = json.loads((tmp_path / "scores" / f"scorecard__{policy_id.replace('/', '_')}.json").read_text())
        mine = totals.filter((pl.col("card_id") == card["card_id"]) & (pl.col("policy_id") == policy_id))
        assert mine.height == 1, (policy_id, card["card_id"])
        assert card["score"] == pytest.approx(mine["total_score"][0], abs=1e-9), (
            f"{policy_id}: score --games games gives {card['score']}, the demo report "
            f"{mine['total_score'][0]} ({REGENERATE})")
        compared += 1
    assert compared >= 1
