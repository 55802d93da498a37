"""`arcstudy report all` on a small demo-like database (tests/integration/conftest.py): each report's numbers
are checked against the database (or the files) they come from, the run manifests against the inputs, and each
page is opened in headless Chromium (no console error, no network request, every embedded figure decodes).

Screenshots land in reports/screenshots/report_<name>.png. The README's pictures are taken from the real
demo instead (`make screenshots`, docs/screenshots.py).
"""

from __future__ import annotations

import html
import inspect
import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.core.manifest import sha256_file
from pipeline.core.workspace import Workspace
from pipeline.report.html import format_value
from pipeline.report.reports import write_reports
from pipeline.report.reports.calibration import evaluate_exclusions, read_ground_truth
from pipeline.report.reports.common import ReportInputError
from tests.integration.browser import browser
from tests.integration.conftest import built_once

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "reports" / "screenshots"
REPORTS = ("calibration", "scores", "harc")
POLICIES = ["arc-agi-3/2026-04", "arc-agi-3/2025-preview", "arc-agi-3/2026-03"]


class Page(HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.imgs: list[dict[str, str]] = []
        self.scripts = 0
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        if tag == "img":
            self.imgs.append(a)
        if tag == "script":
            self.scripts += 1


def read_db(db: Path, sql: str) -> pl.DataFrame:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.sql(sql).pl()
    finally:
        con.close()


@pytest.fixture(scope="session")
def reports(report_db, tmp_path_factory) -> Path:
    """`arcstudy report all` once per test run (shared by the xdist workers, like the database)."""
    def build(out: Path) -> dict[str, str]:
        result = CliRunner().invoke(app, [
            "--plain", "report", "all", "--db", str(report_db.db), "--out", str(out), "--ground-truth",
            str(report_db.ground_truth), "--games", str(report_db.games_dir), "--explore-nodes", "30",
            "--explore-seconds", "600"])
        assert result.exit_code == 0, result.output
        return {"out": str(out)}

    return Path(built_once(tmp_path_factory, "reports", build)["out"])


def test_three_self_contained_reports_with_their_manifests(reports: Path, report_db):
    db_sha = sha256_file(report_db.db)
    for name in REPORTS:
        html = reports / f"{name}.html"
        text = html.read_text()
        page = Page(text)
        assert page.scripts == 0 and not re.search(r"""(src|href)=["']https?:""", text)
        assert page.imgs and all(img["src"].startswith("data:image/png;base64,") for img in page.imgs)
        local = [h for h in page.hrefs if not h.startswith("#")]
        assert local and all((reports / h).is_file() for h in local), local  # every linked table/figure exists
        manifest = json.loads((reports / f"{name}.manifest.json").read_text())
        assert manifest["command"].startswith("arcstudy report all --db ")
        assert manifest["inputs"][str(report_db.db)] == db_sha
        assert manifest["outputs"][str(html)] == sha256_file(html)
        assert {"polars", "duckdb", "altair", "arcstudy"} <= set(manifest["packages"])
        assert manifest["exit_code"] == 0 and manifest["config"]["report"] == name
        for path, digest in manifest["outputs"].items():
            if path != str(html):
                assert sha256_file(Path(path)) == digest, path
        assert db_sha in text and "Run manifest" in text  # the manifest closes the page
    scores = json.loads((reports / "scores.manifest.json").read_text())
    assert scores["policy_ids"] == POLICIES
    calibration = json.loads((reports / "calibration.manifest.json").read_text())
    assert any(k.endswith("#out_arc3__game_solvability") for k in calibration["inputs"])
    assert calibration["inputs"][str(report_db.ground_truth)] == sha256_file(report_db.ground_truth)
    upstream = {r["command"] for r in calibration["notes"]["upstream_runs"]}
    assert upstream >= {"arcstudy build", "arcstudy harc-analyses"}


def test_calibration_numbers_come_from_the_study(reports: Path, report_db):
    games = pl.read_parquet(reports / "calibration__games.parquet")
    solv = read_db(report_db.db, "SELECT * FROM out_arc3__game_solvability ORDER BY game_id")
    assert games.select("game_id", "n_players", "n_full_solvers", "is_included", "drop_off_level").equals(
        solv.select("game_id", "n_players", "n_full_solvers", "is_included", "drop_off_level"))
    completion = pl.read_parquet(reports / "calibration__level_completion.parquet")
    assert completion.height == solv["n_levels"].sum()
    assert completion["completion_ci_low"].le(completion["completion_rate"]).all()

    # Recomputed baselines beside the published ones: the games' metadata.json, as shipped.
    comparison = pl.read_parquet(reports / "calibration__baseline_comparison.parquet")
    ours = read_db(report_db.db, "SELECT game_id, level_index, baseline_value FROM out_arc3__level_baselines "
                                 "WHERE baseline_rule = 'upper-median' ORDER BY ALL")
    assert comparison.select("game_id", "level_index", pl.col("recomputed").alias("baseline_value")).equals(ours)
    for game_id, sub in comparison.group_by("game_id"):
        code, version = game_id[0].split("-")
        meta = json.loads((report_db.games_dir / code / version / "metadata.json").read_text())
        assert sub.sort("level_index")["published"].to_list() == meta["baseline_actions"]
    assert set(comparison["published_source"]) == {"metadata (core_arc3__environments)"}
    delta = comparison["recomputed"] - comparison["published"]
    assert comparison["delta"].to_list() == delta.to_list()

    # Low effort against ground truth: the simulator's labels, compared per participant.
    truth = pl.read_csv(report_db.ground_truth).select("participant_id", "is_low_effort")
    excluded = read_db(report_db.db, "SELECT participant_id FROM out_study__session_features "
                                     "WHERE is_low_effort_excluded")["participant_id"].to_list()
    labelled = sorted(truth.filter(pl.col("is_low_effort"))["participant_id"].to_list())
    tp = len(set(excluded) & set(labelled))
    text = (reports / "calibration.html").read_text()
    precision, recall = tp / len(excluded), tp / len(labelled)
    assert f"<dt>precision</dt><dd>{format_value(precision)}</dd>" in text, (precision, excluded, labelled)
    assert f"<dt>recall</dt><dd>{format_value(recall)}</dd>" in text
    decisions = pl.read_parquet(reports / "calibration__low_effort_ground_truth.parquet")
    assert sorted(decisions.filter(pl.col("is_excluded"))["participant_id"].to_list()) == sorted(excluded)

    # The explorer: tf62's first levels have small complete graphs, so their random-win probability is exact.
    explored = pl.read_parquet(reports / "calibration__random_win_probability.parquet")
    tf62 = {r["level_index"]: r for r in explored.filter(pl.col("game_id") == "tf62-28e6852d").iter_rows(named=True)}
    assert tf62[1]["is_complete"] and tf62[1]["verdict"] == "tutorial: random wins allowed"
    assert tf62[2]["is_complete"] and tf62[2]["verdict"] == "random policy wins too often"
    assert math.isclose(tf62[2]["random_win_lower"], tf62[2]["random_win_upper"])
    assert tf62[2]["random_win_lower"] > 1e-4 and tf62[2]["optimal_actions"] >= 1
    assert "tf62-28e6852d level 2: a random policy wins it with probability at least" in text
    points = pl.read_parquet(reports / "calibration__level_reference_points.parquet")
    filled = points.filter((pl.col("game_id") == "tf62-28e6852d") & (pl.col("level_index") == 2)).row(0, named=True)
    assert filled["optimal_actions"] == tf62[2]["optimal_actions"]
    assert filled["optimal_source"].startswith("explorer")
    for figure in ("completion_by_level", "durations_by_outcome", "actions_by_level", "baselines_vs_published"):
        for suffix in (".png", ".svg", ".vl.json"):
            assert (reports / "figures" / "calibration" / f"{figure}{suffix}").stat().st_size > 0


def test_calibration_compares_the_study_with_the_paper(reports: Path, report_db):
    from pipeline.simulate.targets import PAPER_TARGETS

    table = pl.read_parquet(reports / "calibration__paper_comparison.parquet")
    assert table["metric"].to_list() == [t.metric for t in PAPER_TARGETS]
    assert table["paper"].to_list() == [float(t.paper) for t in PAPER_TARGETS]
    n_attempts = read_db(report_db.db, "SELECT count(*) AS n FROM out_arc3__attempts WHERE is_analysis_attempt")
    medians = dict(read_db(report_db.db, "SELECT outcome_group, median_duration_s FROM out_arc3__durations_summary "
                                         "WHERE scope_id = 'all'").iter_rows())
    ours = [float(n_attempts["n"][0]), *(None if medians[t.outcome_group] is None
                                         else round(medians[t.outcome_group] / 60, 2) for t in PAPER_TARGETS[1:])]
    assert table["this_study"].to_list() == ours
    assert table["is_within"].to_list() == [t.within(v) for t, v in zip(PAPER_TARGETS, ours, strict=True)]
    assert "<h2>This study vs the paper's study</h2>" in html.unescape((reports / "calibration.html").read_text())


def test_scores_numbers_come_from_the_score_tables(reports: Path, report_db):
    totals = pl.read_parquet(reports / "scores__totals.parquet")
    expected = read_db(report_db.db, "SELECT card_id, policy_id, avg(score) AS total FROM out_arc3__game_scores "
                                     "GROUP BY ALL")
    joined = totals.join(expected, on=["card_id", "policy_id"])
    assert joined.height == expected.height == 9  # three scorecards (one per agent), three policies
    assert (joined["total_score"] - joined["total"]).abs().max() < 1e-12
    assert set(totals["scorecard"]) == {"random", "near-optimal", "agents-repo"}  # named after what was scored
    games = pl.read_parquet(reports / "scores__game_scores.parquet")
    assert set(games["game_id"]) == {"tf62-28e6852d", "pl39-f40f4bef"}
    checks = pl.read_parquet(reports / "scores__replay_checks.parquet")
    n_checks = read_db(report_db.db, "SELECT count(*) AS n FROM out_arc3__replay_checks")["n"][0]
    assert checks.height == n_checks == 5 and set(checks["verification_status"]) == {"verified"}
    cost = pl.read_parquet(reports / "scores__score_vs_cost.parquet")
    tokens = read_db(report_db.db, "SELECT sum(n_tokens) AS n FROM core_arc3__usage")["n"][0]
    assert cost.height == 1 and cost["n_tokens"][0] == tokens > 0  # the agents-repository run carries usage
    assert cost["scorecard"].to_list() == ["agents-repo"]
    sensitivity = pl.read_parquet(reports / "scores__policy_sensitivity_summary.parquet")
    assert sensitivity.group_by("from_policy_id", "to_policy_id").agg(pl.col("n_runs").sum())["n_runs"].to_list() \
        == [5, 5, 5]
    figures = reports / "figures" / "scores"
    assert len(list(figures.glob("level_scores_heatmap__arc-agi-3_2026-04__*.svg"))) == 3
    assert len(list(figures.glob("policy_sensitivity__*.svg"))) == 3
    assert (figures / "score_vs_cost.svg").stat().st_size > 0


def test_harc_tables_are_the_papers_regenerated(reports: Path, report_db):
    acc = pl.read_parquet(reports / "harc__split_accuracy.parquet")
    db = read_db(report_db.db, "SELECT task_split, max_attempts, mean_task_accuracy FROM out_harc__split_accuracy")
    joined = acc.join(db, on=["task_split", "max_attempts"], suffix="_db")
    assert joined.height == 6 and joined["mean_task_accuracy"].equals(joined["mean_task_accuracy_db"])
    paper = dict(zip(zip(acc["task_split"], acc["max_attempts"], strict=True), acc["paper_mean_task_accuracy"],
                     strict=True))
    assert paper[("training", 1)] == 0.599 and paper[("evaluation", 3)] == 0.642
    table2 = pl.read_parquet(reports / "harc__split_descriptives.parquet")
    attempts = table2.filter(pl.col("column") == "n_task_attempts").row(0, named=True)
    assert attempts["training_paper"] == 7924 and attempts["evaluation_paper"] == 7820
    n_attempts = read_db(report_db.db, "SELECT n_task_attempts FROM out_harc__split_descriptives WHERE "
                                       "task_split = 'training'")["n_task_attempts"][0]
    assert attempts["training"] == n_attempts
    assert len(list((reports / "figures" / "harc").glob("*.svg"))) == 6
    text = (reports / "harc.html").read_text()
    assert "Tasks solved by at least N participants (Figure 5)" in text and "consistent" in text


def test_reports_render_in_chromium(reports: Path):
    with browser(width=1200, height=900) as chromium:
        for name in REPORTS:
            with chromium.page(reports / f"{name}.html", wait_ms=200) as page:
                assert page.evaluate("document.body.dataset.report") == "ready"
                assert page.evaluate("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
                page.screenshot(SCREENSHOTS / f"report_{name}.png")
                assert page.errors == [], (name, page.errors)
                assert [u for u in page.requests if not u.startswith("file:")] == []
    for name in REPORTS:
        assert (SCREENSHOTS / f"report_{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_reports_on_a_database_without_data(tmp_path: Path):
    bare = tmp_path / "bare.duckdb"
    duckdb.connect(str(bare)).close()  # no tables at all
    empty = tmp_path / "empty.duckdb"
    Workspace(empty).close()  # every table, no rows
    for db, label in ((bare, "bare"), (empty, "empty")):
        out = tmp_path / label
        written = write_reports(db, out, explore_seconds=0)
        assert sorted(written) == sorted(REPORTS)
        assert "No calibration data" in written["calibration"].read_text()
        assert "No scores" in written["scores"].read_text()
        assert "No H-ARC analyses" in written["harc"].read_text()
        assert json.loads((out / "scores.manifest.json").read_text())["policy_ids"] == ["arc-agi-3/2026-04"]


def test_one_report_and_another_policy(report_db, tmp_path: Path):
    written = write_reports(report_db.db, tmp_path, which=("scores",), policy="arc-agi-3/2025-preview")
    assert list(written) == ["scores"] and not (tmp_path / "calibration.html").exists()
    games = pl.read_parquet(tmp_path / "scores__game_scores.parquet")
    db = read_db(report_db.db, "SELECT card_id, game_id, score FROM out_arc3__game_scores WHERE policy_id = "
                               "'arc-agi-3/2025-preview' ORDER BY card_id, game_id")
    assert games.sort("card_id", "game_id").select("card_id", "game_id", "score").equals(db)
    manifest = json.loads((tmp_path / "scores.manifest.json").read_text())
    assert manifest["policy_ids"][0] == "arc-agi-3/2025-preview"


def test_usage_errors_and_missing_database(report_db, tmp_path: Path):
    def run(*args: str):
        return CliRunner().invoke(app, ["--plain", "report", *args])

    assert run("scores", "--db", str(report_db.db), "--out", str(tmp_path), "--policy", "no/such").exit_code == 2
    bad = tmp_path / "truth.csv"
    bad.write_text("participant_id,label\np0001,true\n")
    assert run("calibration", "--db", str(report_db.db), "--out", str(tmp_path), "--ground-truth", str(bad),
               "--explore-seconds", "0").exit_code == 2
    assert run("everything", "--db", str(report_db.db)).exit_code == 2
    assert run("harc", "--db", str(tmp_path / "missing.duckdb")).exit_code == 1
    with pytest.raises(ReportInputError):
        write_reports(report_db.db, tmp_path, which=("calibration", "summary"))


def test_exclusions_against_ground_truth_by_hand(tmp_path: Path):
    features = pl.DataFrame({
        "participant_id": ["a", "b", "c", "d", "e"], "session_id": ["sa", "sb", "sc", "sd", "se"],
        "is_low_effort_excluded": [True, True, False, False, False],
        "reason_codes": [["high_abandonment"], ["high_abandonment"], [], [], []]})
    truth_csv = tmp_path / "truth.csv"
    truth_csv.write_text("participant_id,session_id,is_low_effort\na,sa,true\nb,sb,false\nc,sc,TRUE\nd,sd,0\n")
    stats, rows = evaluate_exclusions(features, read_ground_truth(truth_csv))
    assert (stats["true positive"], stats["false positive"], stats["false negative"], stats["true negative"],
            stats["not in ground truth"]) == (1, 1, 1, 1, 1)
    assert stats["precision"] == 0.5 and stats["recall"] == 0.5
    assert rows.filter(pl.col("participant_id") == "e")["outcome"][0] == "not in ground truth"
    by_session = tmp_path / "sessions.csv"
    by_session.write_text("session_id,is_low_effort\nsa,yes\nsb,yes\nsc,no\n")
    stats, _ = evaluate_exclusions(features, read_ground_truth(by_session))
    assert stats["compared per"] == "session_id" and stats["precision"] == 1.0 and stats["recall"] == 1.0
    (tmp_path / "maybe.csv").write_text("participant_id,is_low_effort\na,maybe\n")
    with pytest.raises(ReportInputError, match="true/false"):
        read_ground_truth(tmp_path / "maybe.csv")


def test_cli_defaults_are_the_report_defaults():
    from pipeline.commands.report import report_command
    from pipeline.report.reports.calibration import EXPLORE_MAX_NODES, EXPLORE_SECONDS

    defaults = {p.name: p.default for p in inspect.signature(report_command).parameters.values()}
    assert (defaults["explore_seconds"], defaults["explore_nodes"]) == (EXPLORE_SECONDS, EXPLORE_MAX_NODES)


def test_published_baselines_fall_back_to_the_game_folders(tmp_path: Path, report_db):
    from pipeline.report.reports.calibration import published_baselines
    from pipeline.report.reports.common import ReportContext

    Workspace(tmp_path / "empty.duckdb").close()  # nothing ingested: no core_arc3__environments rows
    with Workspace(tmp_path / "empty.duckdb", read_only=True) as ws:
        ctx = ReportContext(ws)
        published = published_baselines(ctx, "upper-median", [report_db.games_dir])
    tf62 = published.filter(pl.col("game_id") == "tf62-28e6852d").row(0, named=True)
    metadata = report_db.games_dir / "tf62" / "28e6852d" / "metadata.json"
    assert tf62["published"] == json.loads(metadata.read_text())["baseline_actions"]
    assert tf62["published_source"] == f"metadata.json in {metadata.parent}"
    assert ctx.extra_inputs[str(metadata)] == sha256_file(metadata)  # the file read is an input of the report
    public = published.filter(pl.col("published_source").str.starts_with("reference CSV"))
    assert public.height >= 25  # the public games, from pipeline/scoring/reference/arc-agi-3-public-games.csv


def test_a_run_that_did_not_verify_is_called_out(tmp_path: Path):
    db = tmp_path / "divergent.duckdb"
    with Workspace(db) as ws:
        ws.insert_frame("out_arc3__replay_checks", pl.DataFrame([{
            "card_id": "arcstudy-0000000000000001", "play_id": "g-1/0", "file_id": "f" * 64,
            "game_id": "tf62-28e6852d", "guid": "g-1", "verification_status": "divergent", "replay_input": "steps",
            "is_only_reset_levels": False, "n_steps_replayed": 4, "divergence_step_index": 3,
            "divergence_line_number": 4, "divergence_field": "state", "divergence_expected": '"WIN"',
            "divergence_got": '"NOT_FINISHED"', "replay_detail": "step 3: state WIN recorded, NOT_FINISHED replayed",
            "game_source_sha256": None, "is_score_excluded": True, "exclusion_reason": "replay diverged"}]))
    html = write_reports(db, tmp_path / "out", which=("scores",))["scores"].read_text()
    assert '<aside class="callout error"' in html and "Runs that did not verify" in html
    assert "tf62-28e6852d play g-1/0: divergent, left out of the score (replay diverged): step 3: state WIN " \
           "recorded, NOT_FINISHED replayed" in html
    checks = pl.read_parquet(tmp_path / "out" / "scores__replay_checks.parquet")
    assert checks["verification_status"].to_list() == ["divergent"]


# --------------------------------------------------------------------------------------------------------
# Readable reports: the index by audience, figure names, headers, one participant count
# --------------------------------------------------------------------------------------------------------
def _index_sections(text: str) -> dict[str, str]:
    """The index page's audience sections: {section id: its HTML}."""
    return dict(re.findall(r'<section class="audience" id="([^"]+)">(.*?)</section>', text, re.S))


def _headline(section: str) -> dict[str, str]:
    return dict(re.findall(r"<dt>([^<]+)</dt><dd>([^<]*)</dd>", section))


def test_index_groups_the_reports_by_audience_with_headline_numbers(reports: Path, report_db):
    from pipeline.report.reports.index import QUESTIONS

    text = (reports / "index.html").read_text()
    sections = _index_sections(text)
    assert list(sections) == ["analysts-human-calibration", "organizers-scores-and-baselines",
                              "researchers-h-arc-and-traces"]
    for section_id, report in zip(sections, REPORTS, strict=True):
        section = sections[section_id]
        assert f'href="{report}.html"' in section and QUESTIONS[report].replace("'", "&#39;") in section
        # the report's own files are listed under it, and only there
        assert f'href="{report}__' in section
        assert all(f'href="{other}__' not in section for other in REPORTS if other != report)

    calibration = _headline(sections["analysts-human-calibration"])
    attempts = read_db(report_db.db, "SELECT count(DISTINCT participant_id) AS n FROM out_arc3__attempts")
    solv = read_db(report_db.db, "SELECT count(*) AS n, sum(n_levels) AS levels FROM out_arc3__game_solvability")
    baselines = read_db(report_db.db, "SELECT count(*) AS n FROM out_arc3__level_baselines WHERE "
                                      "baseline_rule = 'upper-median' AND baseline_value IS NOT NULL")
    assert calibration["participants"] == format_value(attempts["n"][0])
    assert calibration["games"] == format_value(solv["n"][0])
    assert calibration["levels with a baseline"] == f"{baselines['n'][0]} of {solv['levels'][0]}"

    scores = _headline(sections["organizers-scores-and-baselines"])
    totals = pl.read_parquet(reports / "scores__totals.parquet").filter(pl.col("policy_id") == POLICIES[0])
    best = totals["total_score"].max()
    leaders = totals.filter(pl.col("total_score") == best)["scorecard"].to_list()
    assert scores["agents scored"] == "3"
    assert scores["best score"] == f"{best:.1f} % ({', '.join(leaders)})"

    harc = _headline(sections["researchers-h-arc-and-traces"])
    desc = read_db(report_db.db, "SELECT task_split, n_participants, n_task_attempts FROM out_harc__split_descriptives")
    by_split = {r["task_split"]: r for r in desc.iter_rows(named=True)}
    assert harc["participants"] == ", ".join(f"{by_split[s]['n_participants']:,} {s}"
                                             for s in ("training", "evaluation") if s in by_split)
    assert harc["attempts"] == ", ".join(f"{by_split[s]['n_task_attempts']:,} {s}"
                                         for s in ("training", "evaluation") if s in by_split)
    hrefs = [h for h in Page(text).hrefs if not h.startswith("#")]
    assert all((reports / h).is_file() for h in hrefs)


def test_score_figures_are_named_after_the_agents(reports: Path):
    names = {p.name.split(".")[0] for p in (reports / "figures" / "scores").iterdir()}
    assert names == {f"{kind}__{agent}" for agent in ("random", "near-optimal", "agents-repo")
                     for kind in ("level_scores_heatmap__arc-agi-3_2026-04", "policy_sensitivity")} | {"score_vs_cost"}
    assert not [p for p in reports.rglob("*arcstudy-*") if p.is_file()]


def test_tables_have_labels_with_units_and_no_dtypes(reports: Path):
    from schemas import FIELDS

    text = (reports / "scores.html").read_text()
    assert 'class="dtype"' not in text and not re.search(r"<th[^>]*>[^<]*(String|Int64|Float64|Boolean)", text)
    header = re.search(r'<th class="num" scope="col" data-column="total_score" title="([^"]*)">([^<]*)</th>', text)
    assert header and header.group(2) == "total score (%)"
    game = re.search(r'<th[^>]* scope="col" data-column="game_id" title="([^"]*)">(?:<div[^>]*>)?([^<]*)<', text)
    assert game and game.group(2) == "game ID" and html.unescape(game.group(1)) == f"game_id: {FIELDS['game_id'].description}"
    calibration = (reports / "calibration.html").read_text()
    assert re.search(r'data-column="median_duration_min"[^>]*>median duration <span class="unit">\(min\)</span>',
                     calibration)
    # the exports keep the column names
    assert "total_score" in pl.read_parquet(reports / "scores__totals.parquet").columns


def test_harc_counts_the_same_participants_everywhere(reports: Path):
    """At a glance (Table 2) and the accuracy table count every participant of a split, including those who
    withdrew before finishing a task; the shares' denominator is shown as its own column."""
    acc = pl.read_parquet(reports / "harc__split_accuracy.parquet")
    desc = pl.read_parquet(reports / "harc__split_descriptives.parquet").filter(pl.col("column") == "n_participants")
    for split in ("training", "evaluation"):
        counts = set(acc.filter(pl.col("task_split") == split)["n_participants"].to_list())
        assert counts == {int(desc[split][0])}
        finished = acc.filter(pl.col("task_split") == split)["n_participants_finished"]
        assert (finished <= int(desc[split][0])).all()
    text = (reports / "harc.html").read_text()
    for split in ("training", "evaluation"):
        n = int(desc[split][0])
        assert re.search(rf"<dt>{split}: participants / tasks</dt><dd>{n:,} / ", text)


def test_how_sure_the_baselines_are(reports: Path, report_db):
    """Calibration: the levels whose baseline interval is wide, from out_arc3__baseline_intervals; scores: each
    agent's RHAE with every baseline at its interval's ends, which bound the score."""
    intervals = read_db(report_db.db, "SELECT * FROM out_arc3__baseline_intervals WHERE baseline_rule = "
                                      "'upper-median' ORDER BY game_id, level_index")
    assert intervals.height and (intervals["interval_lower"] <= intervals["baseline_value"]).all()
    assert (intervals["baseline_value"] <= intervals["interval_upper"]).all()
    wide = pl.read_parquet(reports / "calibration__testers_needed.parquet")
    expected = intervals.filter((pl.col("interval_relative_width") > 0.5) | ~pl.col("is_interval_at_level"))
    assert wide.select("game_id", "level_index").equals(expected.select("game_id", "level_index"))
    assert set(wide["completers_for_level"]) <= {6}  # the upper median needs 6 completers for 95 %
    assert "How many testers does this level need" in html.unescape((reports / "calibration.html").read_text())

    per_game = pl.read_parquet(reports / "scores__baseline_sensitivity.parquet")
    games = read_db(report_db.db, "SELECT card_id, game_id, score, baseline_source FROM out_arc3__game_scores "
                                  "WHERE policy_id = 'arc-agi-3/2026-04'")
    assert per_game.height == games.height
    assert (per_game["score_low"] <= per_game["score"] + 1e-9).all()
    assert (per_game["score"] <= per_game["score_high"] + 1e-9).all()
    own = per_game.filter(pl.col("baseline_source") == "db-level-baselines")
    others = per_game.filter(pl.col("baseline_source") != "db-level-baselines")
    assert (others["score_low"] == others["score"]).all() and (others["score_high"] == others["score"]).all()
    # the study's games are scored against its own baselines: their levels have intervals, and some run's
    # score moves within them
    assert own.height and (own["n_levels_with_interval"] > 0).all()
    assert (own["score_high"] - own["score_low"]).max() > 0
    totals = pl.read_parquet(reports / "scores__baseline_sensitivity_totals.parquet")
    assert set(totals["scorecard"]) == {"random", "near-optimal", "agents-repo"}
