"""Reading the reports (issue 29, "the first hour"): wide tables keep their key columns in place and say they
scroll, key numbers come first; figures are embedded as drawn (titles and legends inside their frame, as in the
PNG); the level-score heatmap's legend spans the data. The browser half (columns really stay in place, images
fit) is in test_reports.py's Chromium test."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import polars as pl

from pipeline.core.figures import PNG_SCALE, alt, save_figure
from pipeline.report.html import Figure, Table, render_report


class Cells(HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.headers: list[dict[str, str]] = []
        self.first_row: list[dict[str, str]] = []
        self.imgs: list[dict[str, str]] = []
        self._rows = 0
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if tag == "th" and "data-column" in a:
            self.headers.append(a)
        elif tag == "tr":
            self._rows += 1
        elif tag == "td" and self._rows == 2:
            self.first_row.append(a)
        elif tag == "img":
            self.imgs.append(a)


def wide_frame() -> pl.DataFrame:
    """The shape of the scores report's per-game table: ids, a dozen details, the score and baseline far right."""
    n = 3
    df = pl.DataFrame({"scorecard": ["random", "explorer", "near-optimal"],
                       "card_id": [f"arcstudy-{i:016x}" for i in range(n)],
                       "game_id": ["bg41-a6ea70d5", "pv63-003f92f7", "rl36-089f24f7"]})
    for k in range(12):
        df = df.with_columns(pl.lit(f"detail text {k}").alias(f"detail_{k}"))
    return df.with_columns(pl.Series("p_value", [0.01, 0.2, 0.5]), pl.Series("score", [1.4, 100.0, 2.9]),
                           pl.Series("median_duration_min", [3.0, 4.0, 5.0]))


def test_a_wide_table_keeps_its_keys_in_place_shows_key_numbers_first_and_says_it_scrolls(tmp_path: Path):
    df = wide_frame()
    html = render_report("t", [Table("Per game", df, name="per_game")], None, tmp_path / "t.html").read_text()
    page = Cells(html)
    order = [h["data-column"] for h in page.headers]
    assert order[:3] == ["scorecard", "game_id", "card_id"]  # keys first, short before the long card hashes
    assert order[3:6] == ["p_value", "score", "median_duration_min"]  # then the key numbers
    assert order[6:] == [f"detail_{k}" for k in range(12)]
    sticky = [h for h in page.headers if "sticky" in h.get("class", "").split()]
    assert [h["data-column"] for h in sticky] == ["scorecard", "game_id"]
    assert re.fullmatch(r"left: 0(\.0)?rem", sticky[0]["style"])
    assert float(re.search(r"left: ([\d.]+)rem", sticky[1]["style"]).group(1)) > 0
    assert [c for c in page.first_row if "sticky" in c.get("class", "")] and \
        [c["style"] for c in page.first_row[:2]] == [h["style"] for h in sticky]  # cells stay with their headers
    assert "Wide table: scroll sideways for all 18 columns; the first 2 stay in place." in html
    assert ".sticky { position: sticky;" in html.replace("table.data ", "")
    # the exports keep the frame's own order
    assert pl.read_csv(tmp_path / "per_game.csv").columns == df.columns


def test_a_long_key_wraps_in_its_fixed_column(tmp_path: Path):
    """The H-ARC tests table: test ids longer than a line stay in place, wrapped in a bounded width."""
    df = pl.DataFrame({"test_id": ["thinking_time_per_attempt_s:training_vs_evaluation"],
                       **{f"detail_{k}": [f"a longer description of the test {k}"] for k in range(8)},
                       "statistic": [-2.17], "p_value": [0.03]})
    html = render_report("t", [Table("Tests", df, name="tests")], None, tmp_path / "t.html").read_text()
    page = Cells(html)
    assert [h["data-column"] for h in page.headers][:3] == ["test_id", "statistic", "p_value"]
    assert page.headers[0]["class"].split() == ["wrap", "key", "sticky", "last-sticky"]
    assert "; the first stays in place." in html


def test_a_narrow_table_has_no_scroll_cue(tmp_path: Path):
    df = wide_frame().select("scorecard", "game_id", "score")
    html = render_report("t", [Table("Small", df, name="small")], None, tmp_path / "t.html").read_text()
    assert "Wide table" not in html and 'class="scroll-cue"' not in html


def test_figures_are_embedded_as_drawn_at_the_size_they_were_laid_out_for(tmp_path: Path):
    """The SVG's text is drawn by the browser in its own sans-serif (wider than the fonts vl-convert measured), so
    a long legend label or title ran past the SVG's frame; the embedded image is now the PNG, byte for byte."""
    df = pl.DataFrame({"k": [1, 2, 3], "v": [0.5, 0.7, 0.2], "bound": ["optimistic", "pessimistic", "observed"]})
    chart = alt.Chart(df).mark_point().encode(x="k:O", y="v:Q", color=alt.Color("bound:N", title="bound")).properties(
        width=200, height=120, title="Accuracy with pessimistic / optimistic bounds (black tick: observed)")
    fig = save_figure(chart, tmp_path / "figures", "bounds")
    html = render_report("t", [Figure("Bounds", fig)], None, tmp_path / "t.html").read_text()
    (img,) = Cells(html).imgs
    assert img["data-format"] == "png"
    assert base64.b64decode(img["src"].split(",", 1)[1]) == fig["png"].read_bytes()
    svg_w, svg_h = (int(v) for v in re.search(r'<svg[^>]* width="(\d+)" height="(\d+)"', fig["svg"].read_text())
                    .groups())
    assert (int(img["width"]), int(img["height"])) == (svg_w, svg_h)
    png = fig["png"].read_bytes()
    assert int.from_bytes(png[16:20], "big") == round(svg_w * PNG_SCALE)


def _color_scale(spec: dict) -> tuple[list, list]:
    for layer in spec["layer"]:
        color = layer["encoding"].get("color", {})
        if "scale" in color:
            return color["scale"]["domain"], color["legend"]["values"]
    raise AssertionError("no colour scale")


def test_the_heatmap_legend_spans_the_data():
    from pipeline.scoring.figures import heatmap_chart

    def chart(scores: list[float]) -> dict:
        levels = pl.DataFrame({"policy_id": "p", "game_id": "g1", "play_id": "run", "level_index": range(1, len(scores) + 1),
                               "level_score": scores, "n_actions": 10, "level_baseline": 10,
                               "is_level_completed": True})
        games = pl.DataFrame({"policy_id": ["p"], "game_id": ["g1"], "best_play_id": ["run"]})
        return heatmap_chart(levels, games, "p").to_dict()

    domain, ticks = _color_scale(chart([115.0, 40.0, 0.0]))
    assert domain == [0.0, 115.0] and ticks[0] == 0.0 and ticks[-1] == 115.0
    assert all(b - a >= 0.15 * 115 for a, b in zip(ticks, ticks[1:], strict=False))  # no two labels crowd
    domain, ticks = _color_scale(chart([20.0, 40.0]))  # scores in 0-100: the scale is the score's
    assert domain == [0.0, 100.0] and ticks[-1] == 100.0
    domain, _ = _color_scale(chart([250.0]))
    assert domain[1] == 250.0


def test_no_two_sections_of_a_report_share_a_title(report_db, tmp_path: Path):
    """Every section heading of every report is distinct (a reader of the contents cannot tell two alike apart):
    all agents together, and one agent under one policy (single-card headings such as "Level scores")."""
    from pipeline.report.reports import write_reports

    written = write_reports(report_db.db, tmp_path / "all", explore_seconds=0)
    written_one = write_reports(report_db.db, tmp_path / "one", which=("scores",), policy="arc-agi-3/2025-preview")
    for path in [*written.values(), *written_one.values()]:
        titles = re.findall(r"<h2>([^<]*)</h2>", path.read_text())
        assert titles and len(titles) == len(set(titles)), (path.name, sorted(t for t in titles if titles.count(t) > 1))


def test_in_chromium_key_columns_stay_put_while_the_table_scrolls_and_figures_fit(tmp_path: Path):
    from tests.integration.browser import open_page

    df = pl.DataFrame({"level_index": [1, 2, 3], "level_score": [115.0, 40.0, 0.0]})
    chart = alt.Chart(df).mark_rect().encode(x="level_index:O", color=alt.Color("level_score:Q")).properties(
        title="Level scores of each game's best run (arc-agi-3/2026-04), a long title")
    fig = save_figure(chart, tmp_path / "figures", "wide_title")
    html = render_report("t", [Table("Per game", wide_frame(), name="per_game"), Figure("Levels", fig)], None,
                         tmp_path / "t.html")
    with open_page(html, wait_ms=100, width=900, height=700) as page:
        box = "document.querySelector('.table-wrap')"
        cell = "document.querySelector('tbody tr td[class~=\"{}\"]:nth-child({})')"
        first, game, later = cell.format("sticky", 1), cell.format("sticky", 2), cell.format("num", 4)
        before = page.evaluate(f"[{first}.getBoundingClientRect().left, {game}.getBoundingClientRect().left, "
                               f"{later}.getBoundingClientRect().left]")
        page.evaluate(f"{box}.scrollLeft = 400")
        after = page.evaluate(f"[{first}.getBoundingClientRect().left, {game}.getBoundingClientRect().left, "
                              f"{later}.getBoundingClientRect().left]")
        assert after[:2] == before[:2] and after[2] < before[2] - 300, (before, after)
        # the second fixed column starts where the first ends: nothing of the scrolled part shows between them
        assert page.evaluate(f"Math.abs({first}.getBoundingClientRect().right - {game}.getBoundingClientRect().left)"
                             ) < 1.5
        # the figure fits its frame (at most the size it was laid out for), undistorted, its pixels all drawn
        img = "document.querySelector('figure img')"
        natural_w, natural_h, w, h, frame_w, done = page.evaluate(
            f"[{img}.naturalWidth, {img}.naturalHeight, {img}.width, {img}.height, "
            f"{img}.parentElement.getBoundingClientRect().width, {img}.complete]")
        assert done and 0 < w <= frame_w and w <= natural_w / PNG_SCALE + 0.5
        assert abs(natural_w / w - natural_h / h) < 0.02
        assert page.errors == []
